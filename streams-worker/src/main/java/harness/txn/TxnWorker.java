package harness.txn;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import harness.common.ClientMetrics;
import harness.common.CommandLine;
import harness.common.CrashPlan;
import harness.common.Halt;
import harness.common.Ledger;
import harness.common.Logging;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.InvalidPidMappingException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * The eos family's worker on Kafka's own Java client (kafka-clients), beside
 * the Python one (harness/experiments/eos/eos_loops.py): the same steps, kill points,
 * crash records and events, so the same predictors judge both. Per record:
 * [ledger row, or dedupe key + row in one Postgres transaction], produce in
 * the open transaction; every --commit-every records (or --commit-interval-ms):
 * sendOffsetsToTransaction, commitTransaction. Partitions are assigned, never
 * subscribed (no rebalance: only the planned crashes redeliver).
 *
 * <p>Why a Java worker: Kafka's Java client speaks transaction version 2
 * (KIP-890: the producer epoch rises with every transaction, so a late EndTxn
 * of an old transaction is fenced) where the broker offers it; librdkafka does
 * not yet. Each transaction's end is printed ({@code eos-txn TXN-END}) after
 * the client's own {@code ProducerId set to P with epoch E} lines (log4j2.xml
 * lets them through), so the harness reads from the worker's log which epoch
 * each transaction began and ended with.
 *
 * <p>Errors, as the client itself sorts them (TransactionManager's
 * maybeTransitionToErrorState, as the Python workers leave it to librdkafka):
 * a producer error the client makes fatal (fenced, unsupported version,
 * authorization of the transactional id or cluster, an unknown producer id
 * mapping), or an abort the client refuses, ends the worker with status 3 and
 * a {@code fenced} event (a restart follows); any other producer error aborts
 * the transaction and rewinds to the committed offsets (a zombie's produce
 * with an old epoch is abortable: the abort then meets the fencing); a
 * transactional call blocked past --txn-stuck-after-ms (in slices of
 * max.block.ms) ends it with status 4 and a {@code txn_stuck} event, its
 * transaction's outcome unknown. Anything else (the consumer, the ledger,
 * offsets that cannot be fetched) is an unplanned death: status 1 with its
 * stack trace. Exit 2: a bad command line, crash plan or crash log.
 */
public final class TxnWorker {
    static final int EXIT_FAILED = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_FENCED = 3;
    static final int EXIT_STUCK = 4;
    static final int POLL_MS = 100;
    static final long PID = ProcessHandle.current().pid();
    /** max.block.ms: how long one try of a blocking call may wait (see {@link #blocking}). */
    static final long BLOCK_SLICE_MS = 1000;
    static final long FLUSH_BEFORE_CRASH_MS = 30_000;

    static final String POLL = "after-poll-before-effect";
    static final String INSIDE = "inside-effect-txn";
    static final String EFFECT = "after-effect-before-produce";
    static final String POLL_PRODUCE = "after-poll-before-produce";
    static final String PRODUCE = "after-produce-before-txn-commit";
    static final String SEND_OFFSETS = "after-send-offsets-before-txn-commit";
    static final String TXN_COMMIT = "after-txn-commit";

    private final TxnOptions opts;
    private final ObjectMapper json;
    private final Evidence ev;
    private final History history;
    private final Ledger ledger;
    private final KafkaProducer<String, String> producer;
    private KafkaConsumer<String, String> consumer;
    private final Map<Integer, Long> high = new HashMap<>();
    private final Map<Integer, Long> committed = new HashMap<>();
    private final Map<Integer, Long> positions = new HashMap<>();
    private final List<ConsumerRecord<String, String>> inTxn = new ArrayList<>();
    private long txnStarted;

    private TxnWorker(TxnOptions opts, ObjectMapper json, Evidence ev, History history, Ledger ledger) {
        this.opts = opts;
        this.json = json;
        this.ev = ev;
        this.history = history;
        this.ledger = ledger;
        this.producer = new KafkaProducer<>(producerConfig(opts), new StringSerializer(), new StringSerializer());
    }

    public static void main(String[] args) {
        Logging.use(Logging.LOG4J);
        TxnOptions opts;
        try {
            opts = TxnOptions.parse(args);
        } catch (CommandLine.UsageError e) {
            System.err.println("eos-txn: " + e.getMessage());
            System.err.println(TxnOptions.USAGE);
            System.exit(EXIT_USAGE);
            return;
        }
        ObjectMapper json = new ObjectMapper();
        CrashPlan plan = CrashPlan.readOrHalt(json, opts.crashPlan, opts.crashLog, "eos-txn");
        Evidence ev = new Evidence(json, opts, plan);
        History history;
        try {
            history = new History(json, opts.history, opts);
        } catch (IOException | RuntimeException e) {
            System.err.println("eos-txn: cannot open the history in " + opts.history + ": " + e);
            System.exit(EXIT_USAGE);
            return;
        }
        Ledger ledger = null;
        if (opts.ledger != null) {
            try {
                ledger = new Ledger(opts.jdbcUrl, opts.jdbcUser, System.getenv(CommandLine.PASSWORD_ENV), opts.ledger,
                                    opts.dedupe, "eos-txn");
            } catch (Exception e) {
                // The driver's message never contains the password. Not a fencing: an unplanned death.
                System.err.println("eos-txn: cannot connect to the ledger database: " + e.getMessage());
                System.exit(EXIT_FAILED);
                return;
            }
        }
        // Where this process's lines begin in its slot's log (checker/producer_epochs.py reads them per process).
        System.err.println("eos-txn START pid=" + ProcessHandle.current().pid() + " worker=" + opts.worker + " attempt="
                           + opts.attempt + " transactional_id=" + opts.transactionalId);
        TxnWorker w = new TxnWorker(opts, json, ev, history, ledger);
        int status = w.run();
        System.err.flush();
        Halt.now(status);
    }

    static Properties producerConfig(TxnOptions opts) {
        Properties p = CommandLine.kafkaClientSettings();   // the cluster's settings first, then ours
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, opts.bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, opts.group + "-" + opts.worker + "-producer");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, opts.transactionalId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, opts.transactionTimeoutMs);
        // Right after a commit the coordinator answers CONCURRENT_TRANSACTIONS while it writes the markers:
        // ask again soon (as the Python workers do), not after the default 100 ms.
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 5);
        p.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, 50);
        // One slice of a blocking call (see blocking()); --txn-stuck-after-ms bounds their sum.
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Math.min(BLOCK_SLICE_MS, opts.txnStuckAfterMs));
        return ClientMetrics.notExported(p);
    }

    static Properties consumerConfig(TxnOptions opts) {
        Properties p = CommandLine.kafkaClientSettings();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opts.bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.group + "-" + opts.worker);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, opts.group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 20);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 500);
        if (opts.groupProtocol != null) {    // consumer: the KIP-848 consumer (its partitions stay assigned)
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, opts.groupProtocol);
        }
        return ClientMetrics.notExported(p);
    }

    /** The worker's whole life; its exit status. */
    int run() {
        try {
            long t0 = System.nanoTime();
            // first: fences the dead predecessor and aborts its transaction
            blocking("init_transactions", null, producer::initTransactions);
            double seconds = (System.nanoTime() - t0) / 1e9;
            ev.emit("txn_initialized", e -> {
                e.put("seconds", Math.round(seconds * 1000) / 1000.0);
                e.put("calls", 1);
                e.put("transactional_id", opts.transactionalId);
            });
            ev.beforeCrash = this::flushBeforeCrash;
            // The output's metadata now, under the call bound: with max.block.ms at one slice, a send() that
            // had to wait for it would fail its transaction instead.
            blocking("output metadata", null, () -> producer.partitionsFor(opts.output));
            assign();                        // then: the committed offsets are stable and can be fetched
            loop();
            ev.emit("done", e -> e.put("delivered", ev.delivered));
            producer.close(Duration.ofSeconds(5));
            consumer.close(Duration.ofSeconds(5));
            return 0;
        } catch (Stuck s) {
            return stuck(s.call, s.outcome);
        } catch (KafkaException e) {
            if (producerFatal(e)) {
                return fenced(e);
            }
            throw e;
        }
    }

    /**
     * Before a planned death: the open transaction's records to the broker, so its aborted copies are really in
     * the log, for at most FLUSH_BEFORE_CRASH_MS (as the Python workers' flush) whatever the broker does.
     */
    private void flushBeforeCrash() {
        Thread t = new Thread(producer::flush, "flush-before-crash");
        t.setDaemon(true);
        t.start();
        try {
            t.join(FLUSH_BEFORE_CRASH_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void assign() {
        consumer = new KafkaConsumer<>(consumerConfig(opts), new StringDeserializer(), new StringDeserializer());
        List<TopicPartition> tps = new ArrayList<>();
        for (int p : opts.partitions) {
            tps.add(new TopicPartition(opts.input, p));
        }
        // Within --txn-stuck-after-ms in all; past it, an unplanned death (no transaction is open: nothing is stuck).
        long deadline = System.nanoTime() + opts.txnStuckAfterMs * 1_000_000;
        Map<TopicPartition, OffsetAndMetadata> got;
        Map<TopicPartition, Long> begin;
        Map<TopicPartition, Long> end;
        try {
            got = consumer.committed(new java.util.HashSet<>(tps), left(deadline));
            begin = consumer.beginningOffsets(tps, left(deadline));
            end = consumer.endOffsets(tps, left(deadline));
        } catch (TimeoutException e) {
            throw new IllegalStateException("the input's committed offsets or ends could not be fetched within "
                                            + opts.txnStuckAfterMs + " ms", e);
        }
        consumer.assign(tps);
        for (TopicPartition tp : tps) {
            OffsetAndMetadata c = got.get(tp);
            long from = c != null ? c.offset() : begin.get(tp);
            consumer.seek(tp, from);
            committed.put(tp.partition(), from);
            positions.put(tp.partition(), from);
            high.put(tp.partition(), end.get(tp));
        }
        history.positions("assign", opts.input, committed);
        ev.emit("started", e -> {
            e.putPOJO("partitions", opts.partitions);
            ObjectNode offsets = e.putObject("offsets");
            committed.forEach((p, o) -> offsets.put(String.valueOf(p), o));
        });
    }

    private static Duration left(long deadline) {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    private void loop() {
        boolean first = false;
        while (true) {
            ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(POLL_MS));
            for (ConsumerRecord<String, String> r : batch) {
                positions.put(r.partition(), r.offset() + 1);
            }
            history.poll(opts.input, batch);
            if (!first && !batch.isEmpty()) {
                first = true;
                String id = batch.iterator().next().key();
                ev.emit("first_message", e -> e.put("message_id", id));
            }
            try {
                for (ConsumerRecord<String, String> r : batch) {
                    handle(r);
                }
                if (!inTxn.isEmpty() && (atEnd() || commitDue())) {
                    commitTxn();
                }
            } catch (KafkaException e) {
                if (producerFatal(e)) {
                    throw e;
                }
                abortTxn(String.valueOf(e));       // abortable: abort (a fenced producer's abort fails), rewind, go on
                continue;
            }
            if (inTxn.isEmpty() && caughtUp()) {
                return;
            }
        }
    }

    private void handle(ConsumerRecord<String, String> r) {
        String id = r.key();
        ev.delivered++;
        if (inTxn.isEmpty()) {
            producer.beginTransaction();
            history.txn("begin");
            txnStarted = System.nanoTime();
        }
        if (ledger != null) {
            ev.at(POLL, id, r.partition(), r.offset(), ids(), ids());
            try {
                if (opts.dedupe != null) {
                    ledger.insertDeduped(id, amount(r.value()), opts.worker, opts.attempt,
                        () -> ev.at(INSIDE, id, r.partition(), r.offset(), ids(), ids()));
                } else {
                    ledger.insert(id, amount(r.value()), opts.worker, opts.attempt);
                }
            } catch (java.sql.SQLException e) {
                throw new IllegalStateException("ledger insert failed: " + e.getMessage(), e);
            }
            List<String> written = ids();
            written.add(id);
            ev.at(EFFECT, id, r.partition(), r.offset(), written, ids());
        } else {
            ev.at(POLL_PRODUCE, id, r.partition(), r.offset(), List.of(), ids());
        }
        // Same partition as the input: a dead transaction blocks exactly the crashed worker's partitions.
        producer.send(new ProducerRecord<>(opts.output, r.partition(), id, tagged(r)), history.onDelivery(opts.output, id));
        inTxn.add(r);
        ev.at(PRODUCE, id, r.partition(), r.offset(), unacked(), ids());
        if (commitDue()) {
            commitTxn();
        }
        ev.at(TXN_COMMIT, id, r.partition(), r.offset(), unacked(), ids());
    }

    private void commitTxn() {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : inTxn) {
            TopicPartition tp = new TopicPartition(opts.input, r.partition());
            long next = r.offset() + 1;
            OffsetAndMetadata had = offsets.get(tp);
            if (had == null || had.offset() < next) {
                offsets.put(tp, new OffsetAndMetadata(next));
            }
        }
        blocking("send_offsets_to_transaction", null,
                 () -> producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata()));
        for (ConsumerRecord<String, String> r : new ArrayList<>(inTxn)) {
            ev.at(SEND_OFFSETS, r.key(), r.partition(), r.offset(), unacked(), ids());
        }
        history.txn("committing");
        blocking("commit_transaction", null, producer::commitTransaction);
        history.txn("commit");
        System.err.println("eos-txn TXN-END pid=" + PID + " worker=" + opts.worker + " attempt=" + opts.attempt + " txn=" + history.txnNo()
                           + " result=commit records=" + inTxn.size());
        offsets.forEach((tp, o) -> committed.merge(tp.partition(), o.offset(), Math::max));
        inTxn.clear();
    }

    /** Abort the open transaction (an abortable error) and rewind to the committed offsets. */
    private void abortTxn(String reason) {
        List<String> produced = ids();
        List<String> rows = unacked();
        ev.emit("txn_aborted", e -> {
            e.put("reason", reason.length() > 300 ? reason.substring(0, 300) : reason);
            e.put("planned", false);
            e.putPOJO("produced", produced);
            e.putPOJO("unacked", rows);
        });
        inTxn.clear();
        blocking("abort_transaction", "aborted", producer::abortTransaction);   // a stuck abort can only end aborted
        history.txn("abort");
        System.err.println("eos-txn TXN-END pid=" + PID + " worker=" + opts.worker + " attempt=" + opts.attempt + " txn=" + history.txnNo()
                           + " result=abort records=" + produced.size());
        history.positions("seek", opts.input, committed);
        committed.forEach((p, off) -> {
            consumer.seek(new TopicPartition(opts.input, p), off);
            positions.put(p, off);
        });
    }

    /**
     * A blocking transactional call, retried after each max.block.ms slice that ends in a TimeoutException
     * (the KafkaProducer documentation allows it: init, commit and abort resume their pending request) until
     * --txn-stuck-after-ms is spent: then the worker is stuck. Why slices: the client does not fail a call
     * already waiting when its producer is fenced meanwhile (seen on 3.9: a zombie resumed inside
     * sendOffsetsToTransaction waited out all of max.block.ms); the retry's first check of the producer's
     * state throws the fencing at once. A slice that spans a SIGSTOP counts once, as in the Python workers.
     * sendOffsetsToTransaction is not one of the documented resumable calls: its retry sends the same offsets
     * again (AddOffsetsToTxn and TxnOffsetCommit of identical offsets, which the coordinator takes as often as
     * asked); the bound is a floor, as in the Python workers (whole slices, rounded up).
     */
    private void blocking(String call, String outcome, Runnable body) {
        long slices = Math.max(1, (opts.txnStuckAfterMs + BLOCK_SLICE_MS - 1) / BLOCK_SLICE_MS);
        for (long i = 1; ; i++) {
            try {
                body.run();
                return;
            } catch (TimeoutException e) {
                if (i >= slices) {
                    throw new Stuck(call, outcome);
                }
            }
        }
    }

    private int stuck(String call, String outcome) {
        List<String> produced = ids();
        List<String> rows = unacked();
        double seconds = opts.txnStuckAfterMs / 1000.0;
        ev.emit("txn_stuck", e -> {
            e.put("call", call);
            e.put("seconds", seconds);
            e.put("since", Math.round((Evidence.now() - seconds) * 1000) / 1000.0);
            e.put("delivered", ev.delivered);
            e.putPOJO("produced", "aborted".equals(outcome) ? List.of() : produced);
            e.putPOJO("unacked", "aborted".equals(outcome) ? List.of() : rows);
            if (outcome != null) {
                e.put("outcome", outcome);
            }
        });
        System.err.println("eos-txn: worker " + opts.worker + ": " + call + " still blocked after " + seconds
                           + " s; exiting for a restart (its transaction's outcome is unknown)");
        return EXIT_STUCK;
    }

    private int fenced(KafkaException e) {
        List<String> produced = ids();
        List<String> rows = unacked();
        ev.emit("fenced", f -> {
            f.put("reason", String.valueOf(e));
            f.put("delivered", ev.delivered);
            f.putPOJO("produced", produced);
            f.putPOJO("unacked", rows);
        });
        System.err.println("eos-txn: worker " + opts.worker + ": fatal producer error, exiting for a restart: " + e);
        return EXIT_FENCED;
    }

    /**
     * Fatal for this producer, as the client decides (TransactionManager.maybeTransitionToErrorState in
     * kafka-clients 4.1), anywhere in the cause chain: every other producer error leaves the transaction
     * abortable. A call on a producer already in its fatal state throws a KafkaException caused by the error.
     */
    static boolean producerFatal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof UnsupportedVersionException
                || t instanceof TransactionalIdAuthorizationException || t instanceof ClusterAuthorizationException
                || t instanceof InvalidPidMappingException) {
                return true;
            }
        }
        return false;
    }

    private boolean commitDue() {
        if (opts.commitIntervalMs > 0) {
            return (System.nanoTime() - txnStarted) / 1_000_000 >= opts.commitIntervalMs;
        }
        return inTxn.size() >= opts.commitEvery;
    }

    private boolean atEnd() {
        return high.entrySet().stream().allMatch(h -> positions.getOrDefault(h.getKey(), 0L) >= h.getValue());
    }

    private boolean caughtUp() {
        return high.entrySet().stream().allMatch(h -> committed.get(h.getKey()) >= h.getValue());
    }

    /** The ids in the open transaction (a new list). */
    private List<String> ids() {
        List<String> out = new ArrayList<>(inTxn.size() + 1);
        for (ConsumerRecord<String, String> r : inTxn) {
            out.add(r.key());
        }
        return out;
    }

    /** The ledger rows written since the last commit: one per record in the transaction (none without a ledger). */
    private List<String> unacked() {
        return ledger == null ? new ArrayList<>() : ids();
    }

    /** The output value: who wrote it, in which of its transactions, then the payment's own fields. */
    private String tagged(ConsumerRecord<String, String> r) {
        ObjectNode out = json.createObjectNode();
        out.put("worker", opts.worker);
        out.put("attempt", opts.attempt);
        out.put("txn", history.txnNo());
        JsonNode value = null;
        try {
            value = r.value() == null ? null : json.readTree(r.value());
        } catch (IOException notJson) {
            // not a payment of ours: keep its id only
        }
        if (value != null && value.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                if (!out.has(f.getKey())) {
                    out.set(f.getKey(), f.getValue());
                }
            }
        } else {
            out.put("id", r.key());
        }
        return out.toString();
    }

    private long amount(String value) {
        return Ledger.amount(json, value);
    }

    /** A transactional call that blocked past max.block.ms. */
    private static final class Stuck extends RuntimeException {
        final String call;
        final String outcome;

        Stuck(String call, String outcome) {
            super(call, null, false, false);
            this.call = call;
            this.outcome = outcome;
        }
    }
}
