package harness.common;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.file.Path;
import java.util.function.Consumer;

/**
 * A worker's events file, in the Python workers' format (harness/runtime/evidence.py): one JSON line per
 * event, naming the worker, its attempt, its pid and the time, then the event's own fields. A failed
 * write is said on stderr, never fatal: the events are evidence, not the work.
 */
public final class Events {
    private final ObjectMapper json;
    private final Path path;
    private final String worker;
    private final int attempt;
    private final String who;
    private final long pid = ProcessHandle.current().pid();

    public Events(ObjectMapper json, Path path, String worker, int attempt, String who) {
        this.json = json;
        this.path = path;
        this.worker = worker;
        this.attempt = attempt;
        this.who = who;
    }

    public static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    /** One event line; {@code fields} adds the event's own fields. */
    public void emit(String event, Consumer<ObjectNode> fields) {
        ObjectNode e = json.createObjectNode();
        e.put("event", event);
        e.put("worker", worker);
        e.put("attempt", attempt);
        e.put("pid", pid);
        e.put("t", now());
        fields.accept(e);
        try {
            JsonLines.append(json, path, e, false);
        } catch (IOException | RuntimeException ex) {
            System.err.println(who + ": could not write the events file " + path + ": " + ex);
        }
    }
}
