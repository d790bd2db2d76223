package harness.common;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * A planned death's crash record, as every worker of this jar writes it: the fields every record starts with
 * (where it died, on which delivery, what it had applied and not acknowledged), each worker's own fields
 * after them, then one forced append to the crash log and a halt with status 137, so nothing after it
 * commits. A record that cannot be written is said on stderr, and the worker still dies.
 */
public final class CrashRecord {
    public static final int EXIT_CRASH = 137;

    private CrashRecord() {
    }

    /** The record's first fields; the caller adds its own. */
    public static ObjectNode of(ObjectMapper json, String point, String messageId, int partition, long offset,
                                List<String> unacked) {
        ObjectNode e = json.createObjectNode();
        e.put("point", point);
        e.put("message_id", messageId);
        e.put("partition", partition);
        e.put("offset", offset);
        e.putPOJO("unacked", unacked);
        return e;
    }

    /** Appends `record` forced to disk, prints `said` (after `who`'s name) on stderr and halts; never returns. */
    public static void writeAndHalt(ObjectMapper json, Path log, ObjectNode record, String who, String said) {
        try {
            JsonLines.append(json, log, record, true);
        } catch (IOException | RuntimeException ex) {
            // Without its crash line the run cannot be checked: say so, and still crash.
            System.err.println(who + ": could not write the crash log " + log + ": " + ex);
        }
        // cpu=: the CPU-seconds this process used from its start to its death (the Streams worker's are read
        // by `harness bench streams`; nothing parses the transactional worker's line).
        System.err.println(who + " CRASH " + said + " cpu=" + SelfStat.cpuSeconds());
        System.err.flush();
        Halt.now(EXIT_CRASH);
    }
}
