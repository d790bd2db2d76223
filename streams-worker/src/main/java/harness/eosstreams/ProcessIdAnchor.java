package harness.eosstreams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.streams.processor.StateStore;
import org.apache.kafka.streams.processor.StateStoreContext;
import org.apache.kafka.streams.state.StoreBuilder;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * The topology's one state store: it holds nothing and writes nothing, but it
 * says it is persistent, and that alone makes Kafka Streams keep its process id
 * in the state directory ({@code kafka-streams-process-metadata}, read back by
 * the next start on the same directory). The process id is part of the EOS
 * transactional.id ({@code <application.id>-<process id>-<thread>}), so a
 * restart on the same --state-dir gets the same transactional.id and its first
 * InitProducerId fences the halted instance and aborts its open transaction at
 * once. Without a persistent store every start draws a random process id and a
 * halted transaction stays open (blocking read_committed readers of the
 * output) until its transaction.timeout.ms runs out.
 *
 * <p>A RocksDB store did the same job before, at the price of loading a 15 MB
 * native library, starting RocksDB's threads and opening a database on every
 * start. This one has no changelog (nothing to restore, nothing to wipe) and no
 * files of its own; Streams still creates and locks the task's directory for
 * it, as it did for RocksDB. The processor never reads or writes it.
 */
final class ProcessIdAnchor implements StateStore {
    static final String NAME = "process-id-anchor";

    /** Where Streams keeps the process id, under {@code <state.dir>/<application.id>/}. */
    static final String PROCESS_FILE = "kafka-streams-process-metadata";

    private volatile boolean open;

    /** The process id Streams keeps in the state directory (for the RUNNING line), or "unknown". */
    static String processId(Path stateDir, String applicationId, ObjectMapper json) {
        try {
            JsonNode id = json.readTree(stateDir.resolve(applicationId).resolve(PROCESS_FILE).toFile()).get("processId");
            return id != null && id.isTextual() ? id.asText() : "unknown";
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public void init(StateStoreContext context, StateStore root) {
        context.register(root, (key, value) -> {
            throw new IllegalStateException(NAME + " has no changelog: nothing can be restored into it");
        });
        open = true;
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        open = false;
    }

    @Override
    public boolean persistent() {
        return true;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    /** Builds the anchor; it cannot be logged or cached (there is nothing in it). */
    static final class Builder implements StoreBuilder<ProcessIdAnchor> {
        @Override
        public Builder withCachingEnabled() {
            throw new UnsupportedOperationException(NAME + " holds nothing to cache");
        }

        @Override
        public Builder withCachingDisabled() {
            return this;
        }

        @Override
        public Builder withLoggingEnabled(Map<String, String> config) {
            throw new UnsupportedOperationException(NAME + " holds nothing to log");
        }

        @Override
        public Builder withLoggingDisabled() {
            return this;
        }

        @Override
        public ProcessIdAnchor build() {
            return new ProcessIdAnchor();
        }

        @Override
        public Map<String, String> logConfig() {
            return Map.of();
        }

        @Override
        public boolean loggingEnabled() {
            return false;
        }

        @Override
        public String name() {
            return NAME;
        }
    }
}
