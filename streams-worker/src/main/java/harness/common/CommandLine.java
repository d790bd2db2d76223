package harness.common;

import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/**
 * What every worker of this jar reads at start, the same way: its command line
 * (parsed by hand, each option {@code --name VALUE} or {@code --name=VALUE},
 * one value each, given once) and the two secrets it takes only from its
 * environment, never from argv (which {@code ps} shows): the JDBC password and
 * the Kafka client settings (security, credentials).
 */
public final class CommandLine {
    public static final String PASSWORD_ENV = "HARNESS_PG_PASSWORD";
    /** Kafka client settings (security, credentials) in java.util.Properties text; they may hold secrets. */
    public static final String KAFKA_PROPERTIES_ENV = "HARNESS_KAFKA_JAVA_PROPERTIES";

    /** The last lines of every worker's usage: where its secrets come from. */
    public static final String SECRETS_USAGE = String.join("\n",
        "  The JDBC password is taken from $" + PASSWORD_ENV + " only; Kafka client settings",
        "  (security, credentials) from $" + KAFKA_PROPERTIES_ENV + " (properties text).");

    private CommandLine() {
    }

    public static final class UsageError extends Exception {
        public UsageError(String message) {
            super(message);
        }
    }

    /** The options as name -> value; unknown, repeated, empty or missing required ones are a UsageError. */
    public static Map<String, String> parse(String[] args, Set<String> required, Set<String> optional)
            throws UsageError {
        Map<String, String> v = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || a.length() == 2) {
                throw new UsageError("unexpected argument: " + a);
            }
            String name;
            String value;
            int eq = a.indexOf('=');
            if (eq > 0) {
                name = a.substring(2, eq);
                value = a.substring(eq + 1);
            } else {
                name = a.substring(2);
                if (i + 1 >= args.length) {
                    throw new UsageError("--" + name + " needs a value");
                }
                value = args[++i];
            }
            if (!required.contains(name) && !optional.contains(name)) {
                throw new UsageError("unknown option --" + name);
            }
            if (value.isEmpty()) {
                throw new UsageError("--" + name + " needs a non-empty value");
            }
            if (v.put(name, value) != null) {
                throw new UsageError("--" + name + " given twice");
            }
        }
        for (String r : required) {
            if (!v.containsKey(r)) {
                throw new UsageError("missing --" + r);
            }
        }
        return v;
    }

    /** An integer option within [min, max], {@code dflt} when not given. */
    public static long number(Map<String, String> v, String name, String dflt, long min, long max) throws UsageError {
        String s = v.getOrDefault(name, dflt);
        try {
            long n = Long.parseLong(s);
            if (n < min || n > max) {
                throw new UsageError("--" + name + " must be in [" + min + ", " + max + "]: " + s);
            }
            return n;
        } catch (NumberFormatException e) {
            throw new UsageError("--" + name + " must be an integer: " + s);
        }
    }

    /** A table name for the SQL text: TABLE or SCHEMA.TABLE of plain identifiers, else a UsageError. */
    public static String table(Map<String, String> v, String name) throws UsageError {
        String t = v.get(name);
        if (t != null && !Ledger.TABLE.matcher(t).matches()) {
            throw new UsageError("--" + name + " must be TABLE or SCHEMA.TABLE (letters, digits, _): " + t);
        }
        return t;
    }

    /** The Kafka client settings of $HARNESS_KAFKA_JAVA_PROPERTIES (empty when unset). */
    public static Properties kafkaClientSettings() {
        Properties p = new Properties();
        String text = System.getenv(KAFKA_PROPERTIES_ENV);
        if (text != null && !text.isEmpty()) {
            try {
                p.load(new StringReader(text));
            } catch (IOException e) {
                throw new UncheckedIOException(e);   // not reached: a StringReader does not fail
            }
        }
        return p;
    }
}
