package harness.share;

import harness.common.CommandLine;
import harness.common.CommandLine.UsageError;

import java.nio.file.Path;
import java.util.Map;
import java.util.Set;

/** The share-group worker's command line (the Python workers' names, where they have one). */
final class ShareOptions {
    static final String USAGE = String.join("\n",
        "usage: java -cp share-worker.jar harness.share.ShareWorker",
        "         --experiment share-ack-after|share-ack-before|share-dedupe|share-poison",
        "         --bootstrap HOST:PORT --share-group ID --input-topic TOPIC --worker NAME --attempt N",
        "         --crash-plan FILE --crash-log FILE --events FILE --ledger TABLE [--dedupe TABLE]",
        "         --jdbc-url URL [--jdbc-user USER] [--commit-every N] [--max-poll-records N]",
        "         [--poll-ms MS] [--delivery-limit N] [--quiet-ms MS] --total N",
        CommandLine.SECRETS_USAGE);

    static final Set<String> EXPERIMENTS = Set.of("share-ack-after", "share-ack-before", "share-dedupe",
                                                  "share-poison");
    private static final Set<String> REQUIRED = Set.of("experiment", "bootstrap", "share-group", "input-topic",
        "worker", "attempt", "crash-plan", "crash-log", "events", "ledger", "jdbc-url", "total");
    private static final Set<String> OPTIONAL = Set.of("dedupe", "jdbc-user", "commit-every", "max-poll-records",
        "poll-ms", "delivery-limit", "quiet-ms");

    final String experiment;
    final String bootstrap;
    final String shareGroup;
    final String input;
    final String worker;
    final int attempt;
    final Path crashPlan;
    final Path crashLog;
    final Path events;
    final String ledger;
    final String dedupe;                // null: share-dedupe only
    final String jdbcUrl;
    final String jdbcUser;
    final int commitEvery;
    final int maxPollRecords;
    final long pollMs;
    final int deliveryLimit;            // the group's share.delivery.count.limit: a death at it archives
    final long quietMs;                 // no record for this long with the input not yet settled: leave
    final long total;                   // the input's records (the supervisor counted them once)

    private ShareOptions(Map<String, String> v) throws UsageError {
        experiment = v.get("experiment");
        if (!EXPERIMENTS.contains(experiment)) {
            throw new UsageError("--experiment must be one of " + String.join(", ", EXPERIMENTS.stream().sorted()
                                 .toList()) + ": " + experiment);
        }
        bootstrap = v.get("bootstrap");
        shareGroup = v.get("share-group");
        input = v.get("input-topic");
        worker = v.get("worker");
        attempt = (int) CommandLine.number(v, "attempt", "1", 0, Integer.MAX_VALUE);
        crashPlan = Path.of(v.get("crash-plan"));
        crashLog = Path.of(v.get("crash-log"));
        events = Path.of(v.get("events"));
        ledger = CommandLine.table(v, "ledger");
        dedupe = CommandLine.table(v, "dedupe");
        jdbcUrl = v.get("jdbc-url");
        jdbcUser = v.get("jdbc-user");
        commitEvery = (int) CommandLine.number(v, "commit-every", "1", 1, 1_000_000);
        maxPollRecords = (int) CommandLine.number(v, "max-poll-records", "10", 1, 10_000);
        pollMs = CommandLine.number(v, "poll-ms", "200", 1, 60_000);
        deliveryLimit = (int) CommandLine.number(v, "delivery-limit", "5", 2, 10);
        quietMs = CommandLine.number(v, "quiet-ms", "36000", 1, 86_400_000);
        total = CommandLine.number(v, "total", "0", 0, Long.MAX_VALUE);
        if ("share-dedupe".equals(experiment) != (dedupe != null)) {
            throw new UsageError("--dedupe goes with share-dedupe, and share-dedupe needs it");
        }
        if (!jdbcUrl.startsWith("jdbc:postgresql:")) {
            throw new UsageError("--jdbc-url must be jdbc:postgresql://HOST:PORT/DB");
        }
    }

    static ShareOptions parse(String[] args) throws UsageError {
        return new ShareOptions(CommandLine.parse(args, REQUIRED, OPTIONAL));
    }
}
