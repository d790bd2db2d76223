package harness.common;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * The run's crash plan (harness/runtime/crashplan.py writes it): the payment
 * ids whose first delivery kills a worker, each with its kill point when the
 * plan names one, and the ids already in the crash log (they crashed in an
 * earlier attempt and never crash again).
 */
public final class CrashPlan {
    private final Set<String> planned;
    private final Map<String, String> points;
    private final Set<String> already;

    private CrashPlan(Set<String> planned, Map<String, String> points, Set<String> already) {
        this.planned = planned;
        this.points = points;
        this.already = already;
    }

    public static CrashPlan read(ObjectMapper json, Path planPath, Path crashLog) throws IOException {
        JsonNode plan = json.readTree(Files.readString(planPath, StandardCharsets.UTF_8));
        Set<String> ids = new HashSet<>();
        Map<String, String> points = new HashMap<>();
        JsonNode list = plan == null ? null : plan.get("crash_ids");
        if (list != null && !list.isNull()) {
            if (!list.isArray()) {
                throw new IOException("crash plan " + planPath + ": crash_ids is not a list");
            }
            for (JsonNode id : list) {
                if (id.isTextual()) {
                    ids.add(id.asText());
                }
            }
        }
        JsonNode pts = plan == null ? null : plan.get("points");
        if (pts != null && pts.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = pts.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if (e.getValue().isTextual()) {
                    points.put(e.getKey(), e.getValue().asText());
                }
            }
        }
        return new CrashPlan(Collections.unmodifiableSet(ids), Collections.unmodifiableMap(points),
                             crashedIds(json, crashLog));
    }

    private static Set<String> crashedIds(ObjectMapper json, Path crashLog) throws IOException {
        Set<String> crashed = new HashSet<>();
        for (JsonNode n : JsonLines.read(json, crashLog)) {
            JsonNode id = n.get("message_id");
            if (id != null && id.isTextual()) {
                crashed.add(id.asText());
            }
        }
        return Collections.unmodifiableSet(crashed);
    }

    /** The plan, or (unreadable: a bad run folder) a line on stderr after {@code who}'s name and a halt with 2. */
    public static CrashPlan readOrHalt(ObjectMapper json, Path planPath, Path crashLog, String who) {
        try {
            return read(json, planPath, crashLog);
        } catch (IOException | RuntimeException e) {
            System.err.println(who + ": cannot read the crash plan or crash log: " + e);
            Halt.now(2);
            return null;
        }
    }

    /** The same plan with the ids the crash log holds now (another process may have crashed on one since). */
    public CrashPlan reread(ObjectMapper json, Path crashLog) throws IOException {
        return new CrashPlan(planned, points, crashedIds(json, crashLog));
    }

    /** Is this id in the plan at all (whether or not it already crashed a worker)? */
    public boolean inPlan(String messageId) {
        return planned.contains(messageId);
    }

    /** Is this id planned to crash a worker still (in the plan, not yet in the crash log)? */
    public boolean planned(String messageId) {
        return planned.contains(messageId) && !already.contains(messageId);
    }

    public int plannedCount() {
        return planned.size();
    }

    public int alreadyCrashedCount() {
        return already.size();
    }

    /** Is this id's first delivery planned to crash the worker here (at {@code point}, or at any point)? */
    public boolean crashesAt(String messageId, String point) {
        if (!planned.contains(messageId) || already.contains(messageId)) {
            return false;
        }
        String at = points.get(messageId);
        return at == null || at.equals(point);
    }
}
