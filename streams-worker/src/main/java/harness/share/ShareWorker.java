package harness.share;

import com.fasterxml.jackson.databind.ObjectMapper;

import harness.common.CommandLine;
import harness.common.CrashPlan;
import harness.common.Halt;
import harness.common.Ledger;
import harness.common.Logging;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;

import java.io.IOException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/**
 * The queues family's worker on Kafka's own Java client (KafkaShareConsumer, GA
 * since kafka-clients 4.2), beside the Python one (harness/experiments/queues/share_loops.py):
 * the same loops, kill points, crash records and events, so the same predictors
 * judge both. Explicit acknowledgement: every record of a poll is acknowledged
 * before the next poll, the acknowledgements committed every --commit-every
 * records and at the end of each batch.
 *
 * <ul>
 * <li>share-ack-after: acquire, effect, ACCEPT (share-dedupe: the effect is the
 *     dedupe key and the ledger row in one Postgres transaction);</li>
 * <li>share-ack-before: acquire up to --commit-every records, ACCEPT them, then
 *     each effect;</li>
 * <li>share-poison: acquire, effect, ACCEPT, where the crash plan's payments kill
 *     the worker at every delivery, until the broker archives them.</li>
 * </ul>
 *
 * Exit 0 when the queue is done, 137 at a planned death (the crash record first),
 * 1 for an unplanned one (its stack trace), 2 for a bad command line or crash plan.
 */
public final class ShareWorker {
    static final int EXIT_FAILED = 1;
    static final int EXIT_USAGE = 2;

    static final String AA_POLL = "after-acquire-before-effect";
    static final String AA_EFFECT = "after-effect-before-accept";
    static final String AA_ACCEPT = "after-accept";
    static final String SD_INSIDE = "inside-effect-txn";
    static final String AB_POLL = "after-acquire-before-accept";
    static final String AB_ACCEPT = "after-accept-before-effect";
    static final String AB_EFFECT = "after-effect";
    static final String POISON = "poison-acquired";

    private final ShareOptions opts;
    private final ObjectMapper json;
    private final ShareMember share;
    private final Ledger ledger;

    private ShareWorker(ShareOptions opts, ObjectMapper json, ShareMember share, Ledger ledger) {
        this.opts = opts;
        this.json = json;
        this.share = share;
        this.ledger = ledger;
    }

    public static void main(String[] args) {
        Logging.use(Logging.SIMPLE);
        ShareOptions opts;
        try {
            opts = ShareOptions.parse(args);
        } catch (CommandLine.UsageError e) {
            System.err.println("share: " + e.getMessage());
            System.err.println(ShareOptions.USAGE);
            Halt.now(EXIT_USAGE);
            return;
        }
        ObjectMapper json = new ObjectMapper();
        CrashPlan plan = CrashPlan.readOrHalt(json, opts.crashPlan, opts.crashLog, "share");
        Ledger ledger;
        try {
            ledger = new Ledger(opts.jdbcUrl, opts.jdbcUser, System.getenv(CommandLine.PASSWORD_ENV), opts.ledger,
                                opts.dedupe, "share");
        } catch (SQLException e) {
            // The driver's message never contains the password.
            System.err.println("share: cannot connect to the ledger database: " + e.getMessage());
            Halt.now(EXIT_FAILED);
            return;
        }
        int status = EXIT_FAILED;
        try (ShareMember share = new ShareMember(opts, json, plan)) {
            new ShareWorker(opts, json, share, ledger).run();
            share.emit("done", e -> e.put("delivered", share.delivered));
            status = 0;
        } catch (IOException | SQLException | RuntimeException e) {
            e.printStackTrace();
        }
        System.err.flush();
        Halt.now(status);
    }

    /** Poll until the events account for every input record, handling each batch as the experiment does. */
    private void run() throws IOException, SQLException {
        while (!share.done()) {
            List<ConsumerRecord<String, String>> batch = share.poll();
            if (batch.isEmpty()) {
                continue;
            }
            switch (opts.experiment) {
                case "share-ack-before" -> ackBefore(batch);
                case "share-poison" -> poison(batch);
                default -> ackAfter(batch);
            }
        }
    }

    private static List<String> ids(List<ConsumerRecord<String, String>> records) {
        List<String> out = new ArrayList<>(records.size());
        records.forEach(r -> out.add(r.key()));
        return out;
    }

    /** acquire, effect, ACCEPT: at least once; with the dedupe table (and its inner point), exact. */
    private void ackAfter(List<ConsumerRecord<String, String>> batch) throws SQLException {
        boolean dedupe = opts.dedupe != null;
        List<ConsumerRecord<String, String>> pending = new ArrayList<>();
        for (ConsumerRecord<String, String> r : batch) {
            share.at(AA_POLL, r, () -> ids(pending), List::of);
            if (dedupe) {
                ledger.insertDeduped(r.key(), amount(r.value()), opts.worker, opts.attempt,
                                     () -> share.at(SD_INSIDE, r, () -> ids(pending), List::of));
            } else {
                ledger.insert(r.key(), amount(r.value()), opts.worker, opts.attempt);
            }
            pending.add(r);
            share.at(AA_EFFECT, r, () -> ids(pending), List::of);
            if (pending.size() >= opts.commitEvery) {
                share.acknowledge(pending, AcknowledgeType.ACCEPT);
                pending.clear();
            }
            share.at(AA_ACCEPT, r, () -> ids(pending), List::of);
        }
        share.acknowledge(pending, AcknowledgeType.ACCEPT);
    }

    /** acquire up to --commit-every records, ACCEPT them, then apply each effect: at most once. */
    private void ackBefore(List<ConsumerRecord<String, String>> batch) throws SQLException {
        for (int start = 0; start < batch.size(); start += opts.commitEvery) {
            List<ConsumerRecord<String, String>> chunk = batch.subList(start, Math.min(batch.size(),
                                                                                         start + opts.commitEvery));
            for (ConsumerRecord<String, String> r : chunk) {
                share.at(AB_POLL, r, List::of, List::of);
            }
            List<ConsumerRecord<String, String>> accepted = share.acknowledge(chunk, AcknowledgeType.ACCEPT);
            for (int i = 0; i < accepted.size(); i++) {
                ConsumerRecord<String, String> r = accepted.get(i);
                int at = i;
                share.at(AB_ACCEPT, r, List::of, () -> ids(accepted.subList(at, accepted.size())));
                ledger.insert(r.key(), amount(r.value()), opts.worker, opts.attempt);
                share.at(AB_EFFECT, r, List::of, () -> ids(accepted.subList(at + 1, accepted.size())));
            }
        }
    }

    /** acquire, effect, ACCEPT, where a planned payment is poison: it kills the worker at every delivery. */
    private void poison(List<ConsumerRecord<String, String>> batch) throws SQLException {
        List<ConsumerRecord<String, String>> pending = new ArrayList<>();
        for (ConsumerRecord<String, String> r : batch) {
            if (share.plan.inPlan(r.key())) {
                share.poisoned(POISON, r, ids(pending));
            }
            ledger.insert(r.key(), amount(r.value()), opts.worker, opts.attempt);
            pending.add(r);
            if (pending.size() >= opts.commitEvery) {
                share.acknowledge(pending, AcknowledgeType.ACCEPT);
                pending.clear();
            }
        }
        share.acknowledge(pending, AcknowledgeType.ACCEPT);
    }

    private long amount(String value) {
        return Ledger.amount(json, value);
    }
}
