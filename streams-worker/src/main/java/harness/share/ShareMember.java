package harness.share;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import harness.common.ClientMetrics;
import harness.common.CommandLine;
import harness.common.CrashPlan;
import harness.common.CrashRecord;
import harness.common.Events;
import harness.common.JsonLines;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.function.Supplier;

/**
 * One worker as a member of the run's share group, in the Python worker's terms
 * (harness/experiments/queues/share_worker.py): acquire (poll), acknowledge and
 * commit, know when the queue is done, and leave the same evidence. Events:
 * {@code started}, {@code accepted} (each record whose acknowledgement the
 * broker confirmed, as [partition, offset, delivery count]), {@code commit_lost},
 * {@code queue_quiet}, {@code done}. A crash record lists, beside what every
 * worker's does ({@code unacked}, {@code acked_unapplied}), what this member
 * {@code held}: every record acquired and not settled, with its delivery count.
 * The queue is done when the events of all members and the crash log (records a
 * death left at the delivery-count limit are archived) account for the input.
 */
final class ShareMember implements AutoCloseable {
    private final ShareOptions opts;
    private final ObjectMapper json;
    private final KafkaShareConsumer<String, String> consumer;
    private final Map<List<Long>, ConsumerRecord<String, String>> held = new LinkedHashMap<>();
    private final Events events;
    private final long total;
    CrashPlan plan;
    long delivered;                    // records this process acquired
    private long lastRecordAt;
    private long doneCheckedAt;

    ShareMember(ShareOptions opts, ObjectMapper json, CrashPlan plan) {
        this.opts = opts;
        this.json = json;
        this.plan = plan;
        this.events = new Events(json, opts.events, opts.worker, opts.attempt, "share");
        this.total = opts.total;
        Properties p = CommandLine.kafkaClientSettings();     // the cluster's settings first, then ours
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opts.bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, opts.shareGroup);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.shareGroup + "-" + opts.worker);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opts.maxPollRecords);
        // The broker acquires at most max.poll.records a fetch (KIP-1206), not whole batches beyond it.
        p.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
        consumer = new KafkaShareConsumer<>(ClientMetrics.notExported(p), new StringDeserializer(),
                                            new StringDeserializer());
        consumer.subscribe(List.of(opts.input));
        lastRecordAt = System.nanoTime();     // the quiet clock starts now: a JVM's start under load is no quiet
        emit("started", e -> {
            e.putArray("partitions");
            e.put("assignment", "share");
            e.put("share_group", opts.shareGroup);
        });
    }

    /** The records this poll acquired; a planned payment among them rereads the crash log (another member may
     * have crashed on its first delivery since: it is no planned crash any more, whoever acquires it next). */
    List<ConsumerRecord<String, String>> poll() throws IOException {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        consumer.poll(Duration.ofMillis(opts.pollMs)).forEach(out::add);
        if (!out.isEmpty()) {
            lastRecordAt = System.nanoTime();
            if (out.stream().anyMatch(r -> plan.planned(r.key()))) {
                plan = plan.reread(json, opts.crashLog);
            }
        }
        for (ConsumerRecord<String, String> r : out) {
            delivered++;
            held.put(List.of((long) r.partition(), r.offset()), r);
        }
        return out;
    }

    static int deliveryCount(ConsumerRecord<String, String> r) {
        return r.deliveryCount().map(Short::intValue).orElse(1);
    }

    private ObjectNode heldNow() {
        ObjectNode out = json.createObjectNode();
        for (ConsumerRecord<String, String> r : held.values()) {
            out.putArray(r.key()).add(r.partition()).add(r.offset()).add(deliveryCount(r));
        }
        return out;
    }

    /** A gap between two steps: on the first delivery of a planned payment at its planned point, the crash. */
    void at(String point, ConsumerRecord<String, String> r, Supplier<List<String>> unacked,
            Supplier<List<String>> ackedUnapplied) {
        if (point != null && plan.crashesAt(r.key(), point)) {
            ObjectNode e = CrashRecord.of(json, point, r.key(), r.partition(), r.offset(), unacked.get());
            e.putPOJO("acked_unapplied", ackedUnapplied.get());
            e.putArray("produced");
            crash(e, point, r);
        }
    }

    /** A poison payment's death at any delivery: what it left unacknowledged, and what it held. */
    void poisoned(String point, ConsumerRecord<String, String> r, List<String> unacked) {
        crash(CrashRecord.of(json, point, r.key(), r.partition(), r.offset(), unacked), point, r);
    }

    private void crash(ObjectNode e, String point, ConsumerRecord<String, String> r) {
        e.set("held", heldNow());
        e.put("worker", opts.worker);
        e.put("attempt", opts.attempt);
        e.put("experiment", opts.experiment);
        e.put("delivered", delivered);
        e.put("time", Events.now());
        e.put("client", "java");
        CrashRecord.writeAndHalt(json, opts.crashLog, e, "share", "worker=" + opts.worker + " attempt="
                                 + opts.attempt + " message_id=" + r.key() + " point=" + point
                                 + " delivery_count=" + deliveryCount(r));
    }

    /** Acknowledge {@code records} with {@code verb} and commit; the records the broker took. Those it refused
     * come again (to any member): a {@code commit_lost} event names them. */
    List<ConsumerRecord<String, String>> acknowledge(List<ConsumerRecord<String, String>> records,
                                                     AcknowledgeType verb) {
        if (records.isEmpty()) {
            return List.of();
        }
        for (ConsumerRecord<String, String> r : records) {
            consumer.acknowledge(r, verb);
        }
        Set<Integer> refused = new HashSet<>();
        StringBuilder why = new StringBuilder();
        try {
            Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync(Duration.ofSeconds(30));
            result.forEach((tp, err) -> err.ifPresent(x -> {
                refused.add(tp.partition());
                why.append(why.length() > 0 ? "; " : "").append(x);
            }));
        } catch (KafkaException x) {
            records.forEach(r -> refused.add(r.partition()));
            why.append(x);
        }
        List<ConsumerRecord<String, String>> done = new ArrayList<>();
        List<String> lost = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) {
            held.remove(List.of((long) r.partition(), r.offset()));        // refused: another member's now
            if (refused.contains(r.partition())) {
                lost.add(r.key());
            } else {
                done.add(r);
            }
        }
        if (!lost.isEmpty()) {
            String reason = why.length() > 200 ? why.substring(0, 200) : why.toString();
            emit("commit_lost", e -> {
                e.putPOJO("unacked", lost);
                e.put("reason", reason);
                e.put("verb", verb.name());
            });
        }
        if (!done.isEmpty()) {
            String event = verb == AcknowledgeType.ACCEPT ? "accepted" : verb.name().toLowerCase(Locale.ROOT) + "ed";
            emit(event, e -> {
                var list = e.putArray("records");
                for (ConsumerRecord<String, String> r : done) {
                    list.addArray().add(r.partition()).add(r.offset()).add(deliveryCount(r));
                }
            });
        }
        return done;
    }

    /** Every record of the input settled, by the events of all members and the crash log (read at most once a
     * second); or nothing polled for --quiet-ms: this member stops waiting, and says so. */
    boolean done() throws IOException {
        long now = System.nanoTime();
        if (now - doneCheckedAt < 1_000_000_000L) {
            return false;
        }
        doneCheckedAt = now;
        Set<List<Long>> settled = new HashSet<>();
        for (JsonNode e : JsonLines.read(json, opts.events)) {
            String kind = e.path("event").asText();
            if ("accepted".equals(kind) || "rejected".equals(kind)) {
                e.path("records").forEach(r -> settled.add(List.of(r.path(0).asLong(), r.path(1).asLong())));
            }
        }
        for (JsonNode c : JsonLines.read(json, opts.crashLog)) {
            c.path("held").forEach(v -> {
                if (v.size() > 2 && v.path(2).asInt() >= opts.deliveryLimit) {
                    settled.add(List.of(v.path(0).asLong(), v.path(1).asLong()));
                }
            });
        }
        if (settled.size() >= total) {
            return true;
        }
        if ((now - lastRecordAt) / 1_000_000 > opts.quietMs) {
            int n = settled.size();
            emit("queue_quiet", e -> {
                e.put("settled", n);
                e.put("total", total);
                e.put("seconds", Math.round(opts.quietMs / 100.0) / 10.0);
            });
            System.err.println("share: worker " + opts.worker + ": no record for " + opts.quietMs / 1000 + " s with "
                               + n + " of " + total + " acknowledgements announced; leaving");
            return true;
        }
        return false;
    }

    /** One event line, in the Python workers' format (harness/runtime/evidence.py). */
    void emit(String event, java.util.function.Consumer<ObjectNode> fields) {
        events.emit(event, fields);
    }

    @Override
    public void close() {
        try {
            consumer.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            System.err.println("share: worker " + opts.worker + ": share consumer close: " + e);
        }
    }
}
