package harness.txn;

import harness.common.CommandLine;
import harness.common.CommandLine.UsageError;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The transactional worker's command line (the Python workers' names, where they have one). */
final class TxnOptions {
    static final String USAGE = String.join("\n",
        "usage: java -cp eos-streams.jar harness.txn.TxnWorker --experiment eos|eos-boundary|eos-dedupe|zombie",
        "         --bootstrap HOST:PORT --group ID --input-topic TOPIC --output-topic TOPIC",
        "         --transactional-id ID --partitions P,P,... --worker NAME --attempt N",
        "         --crash-plan FILE --crash-log FILE --events FILE",
        "         [--commit-every N | --commit-interval-ms MS] [--transaction-timeout-ms MS]",
        "         [--txn-stuck-after-ms MS] [--ledger TABLE [--dedupe TABLE] --jdbc-url URL [--jdbc-user USER]]",
        "         [--history FOLDER] [--group-protocol classic|consumer]",
        CommandLine.SECRETS_USAGE);

    private static final Set<String> EXPERIMENTS = Set.of("eos", "eos-boundary", "eos-dedupe", "zombie");
    private static final Set<String> REQUIRED = Set.of("experiment", "bootstrap", "group", "input-topic",
        "output-topic", "transactional-id", "partitions", "worker", "attempt", "crash-plan", "crash-log", "events");
    private static final Set<String> OPTIONAL = Set.of("commit-every", "commit-interval-ms", "transaction-timeout-ms",
        "txn-stuck-after-ms", "ledger", "dedupe", "jdbc-url", "jdbc-user", "history",
        "group-protocol");

    final String experiment;
    final String bootstrap;
    final String group;
    final String input;
    final String output;
    final String transactionalId;
    final List<Integer> partitions;
    final String worker;
    final int attempt;
    final Path crashPlan;
    final Path crashLog;
    final Path events;
    final int commitEvery;
    final long commitIntervalMs;        // 0: commit every commitEvery records instead
    final int transactionTimeoutMs;
    final long txnStuckAfterMs;
    final String ledger;                // null: no effect outside Kafka (eos, zombie)
    final String dedupe;                // null: the ledger row is not guarded (eos-boundary)
    final String jdbcUrl;
    final String jdbcUser;
    final Path history;                 // null: no history (the run's --no-history)
    final String groupProtocol;         // null: the client's default (classic); consumer: KIP-848's consumer

    private TxnOptions(Map<String, String> v) throws UsageError {
        experiment = v.get("experiment");
        if (!EXPERIMENTS.contains(experiment)) {
            throw new UsageError("--experiment must be one of eos, eos-boundary, eos-dedupe, zombie: " + experiment);
        }
        bootstrap = v.get("bootstrap");
        group = v.get("group");
        input = v.get("input-topic");
        output = v.get("output-topic");
        transactionalId = v.get("transactional-id");
        partitions = new ArrayList<>();
        for (String p : v.get("partitions").split(",")) {
            try {
                partitions.add(Integer.parseInt(p.trim()));
            } catch (NumberFormatException e) {
                throw new UsageError("--partitions must be integers separated by commas: " + v.get("partitions"));
            }
        }
        worker = v.get("worker");
        attempt = (int) CommandLine.number(v, "attempt", "1", 0, Integer.MAX_VALUE);
        crashPlan = Path.of(v.get("crash-plan"));
        crashLog = Path.of(v.get("crash-log"));
        events = Path.of(v.get("events"));
        commitEvery = (int) CommandLine.number(v, "commit-every", "1", 1, 1_000_000);
        commitIntervalMs = CommandLine.number(v, "commit-interval-ms", "0", 0, 3_600_000);
        transactionTimeoutMs = (int) CommandLine.number(v, "transaction-timeout-ms", "60000", 1, 900_000);
        txnStuckAfterMs = CommandLine.number(v, "txn-stuck-after-ms", "60000", 500, 86_400_000);
        ledger = CommandLine.table(v, "ledger");
        dedupe = CommandLine.table(v, "dedupe");
        jdbcUrl = v.get("jdbc-url");
        jdbcUser = v.get("jdbc-user");
        history = v.containsKey("history") ? Path.of(v.get("history")) : null;
        groupProtocol = v.get("group-protocol");
        if (groupProtocol != null && !Set.of("classic", "consumer").contains(groupProtocol)) {
            throw new UsageError("--group-protocol must be classic or consumer: " + groupProtocol);
        }
        if (dedupe != null && ledger == null) {
            throw new UsageError("--dedupe guards the --ledger table: give both");
        }
        if (ledger != null && (jdbcUrl == null || !jdbcUrl.startsWith("jdbc:postgresql:"))) {
            throw new UsageError("--ledger needs --jdbc-url jdbc:postgresql://HOST:PORT/DB");
        }
        if (input.equals(output)) {
            throw new UsageError("--input-topic and --output-topic must be different topics");
        }
    }

    static TxnOptions parse(String[] args) throws UsageError {
        return new TxnOptions(CommandLine.parse(args, REQUIRED, OPTIONAL));
    }
}
