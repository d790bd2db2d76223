package harness.eosstreams;

import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The command line, parsed by hand. Every option takes one value, given as
 * {@code --name VALUE} or {@code --name=VALUE}. The JDBC password is never an
 * option: it is read from the environment variable {@code HARNESS_PG_PASSWORD}.
 */
final class Options {
    static final String PASSWORD_ENV = "HARNESS_PG_PASSWORD";
    /** Kafka client settings (security, credentials) in java.util.Properties text; they may hold secrets. */
    static final String KAFKA_PROPERTIES_ENV = "HARNESS_KAFKA_JAVA_PROPERTIES";

    static final String USAGE = String.join("\n",
        "usage: java -jar eos-streams.jar --bootstrap HOST:PORT --input TOPIC --output TOPIC",
        "         --application-id ID --state-dir DIR --crash-plan FILE --crash-log FILE",
        "         --worker NAME --attempt N [--commit-interval-ms MS]",
        "         [--ledger-table SCHEMA.TABLE --jdbc-url URL [--jdbc-user USER]] [--standby]",
        "  The JDBC password is taken from $" + PASSWORD_ENV + " only; Kafka client settings (security,",
        "  credentials) from $" + KAFKA_PROPERTIES_ENV + " (properties text), given to every Kafka client.",
        "  --standby (last argument): a warm spare; it warms up, then reads the real command line",
        "  (one JSON array of strings, java ... -jar JAR OPTIONS) from stdin; EOF or an empty line: exit 0.");

    private static final Set<String> REQUIRED = Set.of("bootstrap", "input", "output", "application-id",
        "state-dir", "crash-plan", "crash-log", "worker", "attempt");
    private static final Set<String> OPTIONAL = Set.of("commit-interval-ms", "ledger-table", "jdbc-url", "jdbc-user");
    // schema.table or table, plain SQL identifiers only: the name is put into the INSERT text.
    private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?");

    final String bootstrap;
    final String input;
    final String output;
    final String applicationId;
    final Path stateDir;
    final Path crashPlan;
    final Path crashLog;
    final String worker;
    final int attempt;
    final long commitIntervalMs;
    final String ledgerTable;   // null: no external effect
    final String jdbcUrl;
    final String jdbcUser;

    static final class UsageError extends Exception {
        UsageError(String message) {
            super(message);
        }
    }

    private Options(Map<String, String> v) throws UsageError {
        bootstrap = v.get("bootstrap");
        input = v.get("input");
        output = v.get("output");
        applicationId = v.get("application-id");
        stateDir = Path.of(v.get("state-dir"));
        crashPlan = Path.of(v.get("crash-plan"));
        crashLog = Path.of(v.get("crash-log"));
        worker = v.get("worker");
        attempt = (int) number(v, "attempt", "0", 0, Integer.MAX_VALUE);
        commitIntervalMs = number(v, "commit-interval-ms", "100", 1, 3_600_000);
        ledgerTable = v.get("ledger-table");
        jdbcUrl = v.get("jdbc-url");
        jdbcUser = v.get("jdbc-user");
        if (ledgerTable != null) {
            if (!TABLE.matcher(ledgerTable).matches()) {
                throw new UsageError("--ledger-table must be TABLE or SCHEMA.TABLE (letters, digits, _): " + ledgerTable);
            }
            if (jdbcUrl == null || !jdbcUrl.startsWith("jdbc:postgresql:")) {
                throw new UsageError("--ledger-table needs --jdbc-url jdbc:postgresql://HOST:PORT/DB");
            }
        } else if (jdbcUrl != null || jdbcUser != null) {
            throw new UsageError("--jdbc-url/--jdbc-user are only used with --ledger-table");
        }
        if (input.equals(output)) {
            throw new UsageError("--input and --output must be different topics");
        }
    }

    /** The Kafka client settings of $HARNESS_KAFKA_JAVA_PROPERTIES (empty when unset). */
    static Properties kafkaClientSettings() {
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

    static Options parse(String[] args) throws UsageError {
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
            if (!REQUIRED.contains(name) && !OPTIONAL.contains(name)) {
                throw new UsageError("unknown option --" + name);
            }
            if (value.isEmpty()) {
                throw new UsageError("--" + name + " needs a non-empty value");
            }
            if (v.put(name, value) != null) {
                throw new UsageError("--" + name + " given twice");
            }
        }
        for (String r : REQUIRED) {
            if (!v.containsKey(r)) {
                throw new UsageError("missing --" + r);
            }
        }
        return new Options(v);
    }

    private static long number(Map<String, String> v, String name, String dflt, long min, long max) throws UsageError {
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
}
