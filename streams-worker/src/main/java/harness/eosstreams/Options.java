package harness.eosstreams;

import harness.common.CommandLine;
import harness.common.CommandLine.UsageError;

import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/**
 * The command line, parsed by hand. Every option takes one value, given as
 * {@code --name VALUE} or {@code --name=VALUE}. The JDBC password is never an
 * option: it is read from the environment variable {@code HARNESS_PG_PASSWORD}.
 */
final class Options {
    static final String PASSWORD_ENV = CommandLine.PASSWORD_ENV;
    static final String KAFKA_PROPERTIES_ENV = CommandLine.KAFKA_PROPERTIES_ENV;

    static final String USAGE = String.join("\n",
        "usage: java -jar eos-streams.jar --bootstrap HOST:PORT --input TOPIC --output TOPIC",
        "         --application-id ID --state-dir DIR --crash-plan FILE --crash-log FILE",
        "         --worker NAME --attempt N [--commit-interval-ms MS] [--group-protocol classic|streams]",
        "         [--ledger-table SCHEMA.TABLE --jdbc-url URL [--jdbc-user USER]] [--standby]",
        "  The JDBC password is taken from $" + PASSWORD_ENV + " only; Kafka client settings (security,",
        "  credentials) from $" + KAFKA_PROPERTIES_ENV + " (properties text), given to every Kafka client.",
        "  --standby (last argument): a warm spare; it warms up, then reads the real command line",
        "  (one JSON array of strings, java ... -jar JAR OPTIONS) from stdin; EOF or an empty line: exit 0.");

    private static final Set<String> REQUIRED = Set.of("bootstrap", "input", "output", "application-id",
        "state-dir", "crash-plan", "crash-log", "worker", "attempt");
    private static final Set<String> OPTIONAL = Set.of("commit-interval-ms", "ledger-table", "jdbc-url", "jdbc-user",
        "group-protocol");

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
    final boolean streamsProtocol;   // group.protocol=streams (KIP-1071) instead of the classic consumer group

    private Options(Map<String, String> v) throws UsageError {
        bootstrap = v.get("bootstrap");
        input = v.get("input");
        output = v.get("output");
        applicationId = v.get("application-id");
        stateDir = Path.of(v.get("state-dir"));
        crashPlan = Path.of(v.get("crash-plan"));
        crashLog = Path.of(v.get("crash-log"));
        worker = v.get("worker");
        attempt = (int) CommandLine.number(v, "attempt", "0", 0, Integer.MAX_VALUE);
        commitIntervalMs = CommandLine.number(v, "commit-interval-ms", "100", 1, 3_600_000);
        ledgerTable = CommandLine.table(v, "ledger-table");
        jdbcUrl = v.get("jdbc-url");
        jdbcUser = v.get("jdbc-user");
        String protocol = v.getOrDefault("group-protocol", "classic");
        if (!Set.of("classic", "streams").contains(protocol)) {
            throw new UsageError("--group-protocol must be classic or streams: " + protocol);
        }
        streamsProtocol = protocol.equals("streams");
        if (ledgerTable != null) {
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
        return CommandLine.kafkaClientSettings();
    }

    static Options parse(String[] args) throws UsageError {
        return new Options(CommandLine.parse(args, REQUIRED, OPTIONAL));
    }
}
