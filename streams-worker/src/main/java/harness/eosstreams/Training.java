package harness.eosstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.streams.KafkaStreams;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/**
 * The training run of the worker's class-data archive (CDS): run as
 * {@code java -XX:ArchiveClassesAtExit=ARCHIVE -cp eos-streams.jar harness.eosstreams.Training},
 * it loads what a worker loads, and at its exit the JVM writes those classes,
 * parsed and verified, into ARCHIVE. Workers started with
 * {@code -XX:SharedArchiveFile=ARCHIVE} map them instead of loading them from
 * the jar: about half of a start's CPU time.
 *
 * <p>Needs no broker and touches nothing outside a temporary directory: it
 * reads a crash plan and crash log as a worker does, uses Jackson the way the
 * processor and the crash line do, builds the worker's Kafka Streams client
 * twice on one state directory (the second build reads the process id back,
 * as a restart does) and closes it without starting it (its bootstrap is a
 * closed local port), then loads, without initialising, the classes of
 * {@link #CLASS_LIST}: the ones only a started client needs.
 *
 * <p>Exit status 0 when done (the JVM then writes the archive), 1 on failure.
 */
final class Training {
    /** Class names, one a line: what a worker loads from its start to its first records. See README. */
    static final String CLASS_LIST = "worker-classes.txt";

    private Training() {
    }

    public static void main(String[] args) {
        harness.common.Logging.use(harness.common.Logging.SIMPLE);   // as the worker: its provider's classes
        int status = 0;
        Path dir = null;
        try {
            dir = Files.createTempDirectory("eos-streams-training-");
            train(dir);
        } catch (Exception | LinkageError e) {
            System.err.println("eos-streams training: " + e);
            status = 1;
        } finally {
            if (dir != null) {
                deleteTree(dir);
            }
        }
        System.exit(status);
    }

    private static void train(Path dir) throws Exception {
        Path plan = Files.writeString(dir.resolve("crash-plan.json"), "{\"crash_ids\": [\"pay-000001\"]}");
        Path crashLog = Files.writeString(dir.resolve("crash-log.jsonl"),
                                          "{\"message_id\": \"pay-000000\", \"worker\": \"w0\", \"attempt\": 1}\n");
        Options opts = Options.parse(new String[] {
            "--bootstrap", "127.0.0.1:" + closedPort(), "--input", "training-in", "--output", "training-out",
            "--application-id", "eos-streams-training", "--state-dir", dir.resolve("state").toString(),
            "--crash-plan", plan.toString(), "--crash-log", crashLog.toString(), "--worker", "w0", "--attempt", "2"});
        ObjectMapper json = new ObjectMapper();
        CrashSwitch crash = new CrashSwitch(json, opts.crashPlan, opts.crashLog);
        crash.shouldCrash("pay-000001");
        for (int i = 0; i < 50; i++) {
            ObjectNode v = (ObjectNode) json.readTree("{\"id\":\"pay-0001\",\"amount\":" + i + ",\"seq\":" + i + "}");
            v.put("worker", opts.worker);
            v.put("attempt", opts.attempt);
            json.writeValueAsString(v);
        }
        ObjectNode line = json.createObjectNode();
        line.putPOJO("unacked", List.of("pay-000001"));
        line.put("time", PaymentProcessor.unixTime());
        line.putNull("committed_offset");
        json.writeValueAsString(line);

        // Twice on one state directory: the first start writes the process id, a restart reads it.
        for (int i = 0; i < 2; i++) {
            CapturingClientSupplier clients = new CapturingClientSupplier();
            PaymentProcessor.State state = new PaymentProcessor.State(opts, json, crash,
                                                                         CompletableFuture.completedFuture(null), clients);
            KafkaStreams streams = new KafkaStreams(Main.topology(opts, state), Main.config(opts), clients);
            streams.close(Duration.ofSeconds(5));
        }
        int[] counts = loadListedClasses(() -> false);
        System.err.println("eos-streams training: " + counts[0] + " listed classes loaded, " + counts[1] + " missing");
    }

    /**
     * Loads, without initialising, the classes of {@link #CLASS_LIST} until {@code stop} says so
     * (asked every 64 names); a name this jar lacks (a list from other versions) is skipped.
     * Returns {loaded, missing}.
     */
    static int[] loadListedClasses(BooleanSupplier stop) throws IOException {
        int loaded = 0;
        int missing = 0;
        InputStream in = Training.class.getResourceAsStream(CLASS_LIST);
        if (in == null) {
            return new int[] {0, 0};
        }
        ClassLoader loader = Training.class.getClassLoader();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String name;
            while ((name = r.readLine()) != null) {
                if (((loaded + missing) & 63) == 0 && stop.getAsBoolean()) {
                    break;
                }
                name = name.strip();
                if (name.isEmpty() || name.startsWith("#")) {
                    continue;
                }
                try {
                    Class.forName(name, false, loader);
                    loaded++;
                } catch (ClassNotFoundException | LinkageError e) {
                    missing++;
                }
            }
        }
        return new int[] {loaded, missing};
    }

    /** A local port nothing listens on (bound, then released): the clients' connections are refused. */
    static int closedPort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static void deleteTree(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : (Iterable<Path>) files.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(f);
            }
        } catch (IOException e) {
            System.err.println("eos-streams training: cannot remove " + dir + ": " + e);
        }
    }
}
