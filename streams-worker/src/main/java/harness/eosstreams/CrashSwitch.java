package harness.eosstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import harness.common.CrashPlan;
import harness.common.CrashRecord;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;

/**
 * The planned crashes: each id of the crash plan crashes the process on its
 * first delivery only. Ids already in the crash log (field {@code message_id})
 * crashed in an earlier attempt and never crash again.
 *
 * <p>The crash line is written with one append, then forced to disk, before the
 * JVM halts with status 137: nothing after the halt commits, so the open Kafka
 * transaction is left for the broker to abort. ({@link harness.common.Halt} wakes the Kafka
 * I/O threads first, so the process is gone in milliseconds, not ~0.3 s.)
 */
final class CrashSwitch {
    static final String POINT = "after-process-before-commit";
    static final String MODE = "eos-streams";

    private final ObjectMapper json;
    private final Path logPath;
    private final CrashPlan plan;

    CrashSwitch(ObjectMapper json, Path planPath, Path logPath) throws IOException {
        this.json = json;
        this.logPath = logPath;
        this.plan = CrashPlan.read(json, planPath, logPath);
    }

    int plannedCount() {
        return plan.plannedCount();
    }

    int alreadyCrashedCount() {
        return plan.alreadyCrashedCount();
    }

    boolean shouldCrash(String messageId) {
        return plan.crashesAt(messageId, POINT);
    }

    /** Appends the crash line, forces it to disk and halts the JVM; never returns. */
    void crash(String messageId, int partition, long offset, List<String> unacked, String worker, int attempt,
               long delivered, Long committedOffset) {
        ObjectNode e = CrashRecord.of(json, POINT, messageId, partition, offset, unacked);
        e.put("worker", worker);
        e.put("attempt", attempt);
        Instant now = Instant.now();
        e.put("time", now.getEpochSecond() + now.getNano() / 1e9);
        e.put("mode", MODE);
        e.put("delivered", delivered);
        if (committedOffset == null) {
            e.putNull("committed_offset");
        } else {
            e.put("committed_offset", committedOffset);
        }
        CrashRecord.writeAndHalt(json, logPath, e, "eos-streams", "message_id=" + messageId + " partition="
                                 + partition + " offset=" + offset + " unacked=" + unacked.size());
    }
}
