package harness.eosstreams;

import harness.common.Ledger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

import java.io.IOException;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * For each payment: (a) the ledger row (outside the transaction), (b) the
 * output record (inside it), (c) a planned crash if this id is due one.
 *
 * <p>One instance per task; all instances run on the single stream thread and
 * share one {@link State}.
 */
final class PaymentProcessor implements Processor<String, String, String, String> {
    /** Admin requests and the pre-crash flush to a local broker take milliseconds. */
    private static final long CRASH_STEP_TIMEOUT_MS = 5_000;
    /**
     * Processed records remembered per partition for `unacked`. Only the ones
     * after the last commit matter (at most a commit interval's worth), so
     * dropping the oldest beyond this bound loses nothing in practice.
     */
    private static final int MAX_REMEMBERED = 1_000_000;

    /** What outlives a task: the process's clients, its crash switch and its memory of processed records. */
    static final class State {
        final Options opts;
        final ObjectMapper json;
        final CrashSwitch crash;
        /** Completes with the ledger, or null without --ledger-table; it may still be connecting (see Main). */
        final CompletableFuture<Ledger> ledger;
        final CapturingClientSupplier clients;
        final Map<Integer, ArrayDeque<Processed>> processed = new HashMap<>();
        long delivered;
        boolean firstSeen;

        State(Options opts, ObjectMapper json, CrashSwitch crash, CompletableFuture<Ledger> ledger,
              CapturingClientSupplier clients) {
            this.opts = opts;
            this.json = json;
            this.crash = crash;
            this.ledger = ledger;
            this.clients = clients;
        }

        /** The ledger (null without --ledger-table), once its connection is open. */
        Ledger ledger() {
            try {
                return ledger.get(LEDGER_WAIT_S, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the ledger connection", e);
            } catch (java.util.concurrent.ExecutionException e) {
                // Only the shutdown hook fails it: the worker is stopping.
                throw new IllegalStateException("no ledger connection: " + e.getCause().getMessage(), e);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new IllegalStateException("no ledger connection after " + LEDGER_WAIT_S + " s", e);
            }
        }
    }

    /** The ledger connection's own timeouts (connect 10 s, socket 30 s) end its attempt well before this. */
    static final long LEDGER_WAIT_S = 60;

    record Processed(long offset, String id) {
    }

    private final State s;
    private ProcessorContext<String, String> context;

    PaymentProcessor(State state) {
        this.s = state;
    }

    @Override
    public void init(ProcessorContext<String, String> context) {
        this.context = context;
    }

    @Override
    public void process(Record<String, String> record) {
        RecordMetadata meta = context.recordMetadata()
            .orElseThrow(() -> new IllegalStateException("a source record without metadata"));
        ObjectNode value = parse(record.value());
        String id = record.key() != null ? record.key() : text(value, "id");
        if (id == null) {
            throw new IllegalArgumentException("record at " + meta.topic() + "-" + meta.partition() + "@"
                                               + meta.offset() + " has neither a key nor an \"id\"");
        }
        JsonNode amountNode = value.get("amount");
        if (amountNode == null || !amountNode.isIntegralNumber() || !amountNode.canConvertToLong()) {
            throw new IllegalArgumentException("payment " + id + " has no integral \"amount\": " + record.value());
        }
        long amount = amountNode.asLong();

        // The first record waits for the ledger connection, so its line says the worker was ready to apply it.
        Ledger ledger = s.ledger();
        s.delivered++;
        if (!s.firstSeen) {
            s.firstSeen = true;
            System.err.println("eos-streams FIRST-RECORD worker=" + s.opts.worker + " attempt=" + s.opts.attempt
                               + " message_id=" + id + " partition=" + meta.partition() + " offset=" + meta.offset()
                               + " time=" + unixTime() + " cpu=" + harness.common.SelfStat.cpuSeconds());
        }
        remember(meta.partition(), meta.offset(), id);

        // (a) the external effect, committed on its own
        if (ledger != null) {
            try {
                ledger.insert(id, amount, s.opts.worker, s.opts.attempt);
            } catch (SQLException e) {
                throw new IllegalStateException("ledger insert for " + id + " failed: " + e.getMessage(), e);
            }
        }

        // (b) the output, inside the task's open transaction
        if (!value.has("id")) {
            value.put("id", id);
        }
        value.put("worker", s.opts.worker);
        value.put("attempt", s.opts.attempt);
        context.forward(record.withValue(write(value)));

        // (c) the planned crash, before Streams gets to commit
        if (s.crash.shouldCrash(id)) {
            crash(id, meta);
        }
    }

    /**
     * Everything this process processed after the group's last committed offset,
     * on every input partition it has handled: EOS v2 puts all tasks of the
     * stream thread into one transaction, so the abort takes all of them back
     * and every one of those records will be processed again (ledger row again).
     */
    private void crash(String id, RecordMetadata meta) {
        flushProducer();
        Map<TopicPartition, OffsetAndMetadata> committed = committedOffsets();
        List<String> unacked = new ArrayList<>();
        List<Integer> partitions = new ArrayList<>(s.processed.keySet());
        Collections.sort(partitions);
        for (int partition : partitions) {
            Long from = committed == null ? null : offset(committed.get(new TopicPartition(meta.topic(), partition)));
            for (Processed p : s.processed.get(partition)) {
                if (from == null || p.offset() >= from) {
                    unacked.add(p.id());
                }
            }
        }
        if (!unacked.contains(id)) {   // cannot happen: the crashing record itself is after the commit
            unacked.add(id);
        }
        Long here = committed == null ? null : offset(committed.get(new TopicPartition(meta.topic(), meta.partition())));
        s.crash.crash(id, meta.partition(), meta.offset(), unacked, s.opts.worker, s.opts.attempt, s.delivered, here);
    }

    private static Long offset(OffsetAndMetadata om) {
        return om == null ? null : om.offset();
    }

    /** Sends the open transaction's records to the broker, so that its abort leaves visible aborted copies. */
    private void flushProducer() {
        Producer<byte[], byte[]> p = s.clients.producer();
        if (p == null) {
            return;
        }
        try {
            CompletableFuture.runAsync(p::flush).get(CRASH_STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            System.err.println("eos-streams: producer flush before the crash did not finish: " + e);
        }
    }

    /**
     * The group's committed offsets (for each partition, the next offset after
     * the last committed transaction), or null if they cannot be had; a partition
     * missing from the map has none. The stream thread is here, not committing,
     * so they cannot move meanwhile; requireStable waits out the markers of a
     * commit that has just finished.
     */
    private Map<TopicPartition, OffsetAndMetadata> committedOffsets() {
        Admin admin = s.clients.admin();
        if (admin == null) {
            return null;
        }
        try {
            return admin
                .listConsumerGroupOffsets(s.opts.applicationId, new ListConsumerGroupOffsetsOptions().requireStable(true))
                .partitionsToOffsetAndMetadata()
                .get(CRASH_STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            System.err.println("eos-streams: committed offsets unknown before the crash (unacked = all processed): " + e);
            return null;
        }
    }

    private void remember(int partition, long offset, String id) {
        ArrayDeque<Processed> q = s.processed.computeIfAbsent(partition, k -> new ArrayDeque<>());
        q.addLast(new Processed(offset, id));
        if (q.size() > MAX_REMEMBERED) {
            q.removeFirst();
        }
    }

    private ObjectNode parse(String v) {
        try {
            JsonNode n = v == null ? null : s.json.readTree(v);
            if (n instanceof ObjectNode o) {
                return o;
            }
        } catch (IOException e) {
            // reported below
        }
        throw new IllegalArgumentException("input value is not a JSON object: " + v);
    }

    private String write(ObjectNode n) {
        try {
            return s.json.writeValueAsString(n);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String text(ObjectNode n, String field) {
        JsonNode f = n.get(field);
        return f != null && f.isTextual() ? f.asText() : null;
    }

    static String unixTime() {
        Instant now = Instant.now();
        return String.format("%d.%06d", now.getEpochSecond(), now.getNano() / 1000);
    }
}
