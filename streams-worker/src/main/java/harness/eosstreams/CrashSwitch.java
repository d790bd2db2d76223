package harness.eosstreams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The planned crashes: each id of the crash plan crashes the process on its
 * first delivery only. Ids already in the crash log (field {@code message_id})
 * crashed in an earlier attempt and never crash again.
 *
 * <p>The crash line is written with one append, then forced to disk, before the
 * JVM halts with status 137: nothing after the halt commits, so the open Kafka
 * transaction is left for the broker to abort. ({@link Halt} wakes the Kafka
 * I/O threads first, so the process is gone in milliseconds, not ~0.3 s.)
 */
final class CrashSwitch {
    static final String POINT = "after-process-before-commit";
    static final String MODE = "eos-streams";
    static final int EXIT_CRASH = 137;

    private final ObjectMapper json;
    private final Path logPath;
    private final Set<String> planned;
    private final Set<String> already;

    CrashSwitch(ObjectMapper json, Path planPath, Path logPath) throws IOException {
        this.json = json;
        this.logPath = logPath;
        this.planned = readPlan(json, planPath);
        this.already = readCrashedIds(json, logPath);
    }

    int plannedCount() {
        return planned.size();
    }

    int alreadyCrashedCount() {
        return already.size();
    }

    boolean shouldCrash(String messageId) {
        return planned.contains(messageId) && !already.contains(messageId);
    }

    /** Appends the crash line, forces it to disk and halts the JVM; never returns. */
    void crash(String messageId, int partition, long offset, List<String> unacked, String worker, int attempt,
               long delivered, Long committedOffset) {
        ObjectNode e = json.createObjectNode();
        e.put("point", POINT);
        e.put("message_id", messageId);
        e.put("partition", partition);
        e.put("offset", offset);
        e.putPOJO("unacked", unacked);
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
        try {
            byte[] line = (json.writeValueAsString(e) + "\n").getBytes(StandardCharsets.UTF_8);
            try (FileChannel ch = FileChannel.open(logPath, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                                                   StandardOpenOption.APPEND)) {
                ByteBuffer buf = ByteBuffer.wrap(line);
                while (buf.hasRemaining()) {
                    ch.write(buf);
                }
                ch.force(true);
            }
        } catch (IOException | RuntimeException ex) {
            // Without its crash line the run cannot be checked: say so, and still crash.
            System.err.println("eos-streams: could not write the crash log " + logPath + ": " + ex);
        }
        System.err.println("eos-streams CRASH message_id=" + messageId + " partition=" + partition + " offset="
                           + offset + " unacked=" + unacked.size());
        System.err.flush();
        Halt.now(EXIT_CRASH);
    }

    private static Set<String> readPlan(ObjectMapper json, Path planPath) throws IOException {
        JsonNode plan = json.readTree(Files.readString(planPath, StandardCharsets.UTF_8));
        JsonNode ids = plan == null ? null : plan.get("crash_ids");
        if (ids == null || ids.isNull()) {
            return Collections.emptySet();
        }
        if (!ids.isArray()) {
            throw new IOException("crash plan " + planPath + ": crash_ids is not a list");
        }
        Set<String> out = new HashSet<>();
        for (JsonNode id : ids) {
            if (id.isTextual()) {
                out.add(id.asText());
            }
        }
        return out;
    }

    /** Ids in the crash log; torn or foreign lines are skipped, a missing log is empty. */
    private static Set<String> readCrashedIds(ObjectMapper json, Path logPath) throws IOException {
        List<String> lines;
        try {
            lines = Files.readAllLines(logPath, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            return Collections.emptySet();
        }
        Set<String> out = new HashSet<>();
        for (String line : lines) {
            if (line.isBlank()) {
                continue;
            }
            try {
                JsonNode n = json.readTree(line);
                JsonNode id = n == null ? null : n.get("message_id");
                if (id != null && id.isTextual()) {
                    out.add(id.asText());
                }
            } catch (IOException torn) {
                // a line cut by a crash, or not ours
            }
        }
        return out;
    }
}
