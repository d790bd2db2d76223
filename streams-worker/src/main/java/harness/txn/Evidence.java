package harness.txn;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import harness.common.CrashPlan;
import harness.common.CrashRecord;
import harness.common.Events;

import java.util.List;
import java.util.function.Consumer;

/**
 * What this worker leaves for the supervisor and the checker, in the Python
 * workers' formats (harness/runtime/evidence.py): its events (started,
 * first_message, txn_initialized, txn_aborted, fenced, txn_stuck, done), and at
 * a planned kill point its crash record, forced to disk before the JVM halts
 * with status 137, so the same predictors judge it.
 */
final class Evidence {

    private final ObjectMapper json;
    private final TxnOptions opts;
    private final CrashPlan plan;
    private final Events events;
    long delivered;                      // records this process began to handle
    Runnable beforeCrash = () -> { };    // flush the producer: the aborted copies are then really in the log

    Evidence(ObjectMapper json, TxnOptions opts, CrashPlan plan) {
        this.json = json;
        this.opts = opts;
        this.plan = plan;
        this.events = new Events(json, opts.events, opts.worker, opts.attempt, "eos-txn");
    }

    static double now() {
        return Events.now();
    }

    /** One event line; {@code fields} adds the event's own fields. A failed write is said, never fatal. */
    void emit(String event, Consumer<ObjectNode> fields) {
        events.emit(event, fields);
    }

    /**
     * A gap between two steps: on the first delivery of a planned id at its planned point, the crash record
     * (what a death here leaves applied but unacknowledged, and what the open transaction held), then halt.
     */
    void at(String point, String messageId, int partition, long offset, List<String> unacked, List<String> produced) {
        if (!plan.crashesAt(messageId, point)) {
            return;
        }
        beforeCrash.run();
        ObjectNode e = CrashRecord.of(json, point, messageId, partition, offset, unacked);
        e.putPOJO("acked_unapplied", List.of());
        e.putPOJO("produced", produced);
        e.put("worker", opts.worker);
        e.put("attempt", opts.attempt);
        e.put("experiment", opts.experiment);
        e.put("delivered", delivered);
        e.put("time", now());
        e.put("client", "java");
        CrashRecord.writeAndHalt(json, opts.crashLog, e, "eos-txn", "worker=" + opts.worker + " attempt="
                                 + opts.attempt + " message_id=" + messageId + " point=" + point + " produced="
                                 + produced.size());
    }
}
