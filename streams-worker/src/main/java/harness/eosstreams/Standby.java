package harness.eosstreams;

import harness.common.Ledger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * {@code --standby}: a warm spare for the next attempt of a worker slot.
 *
 * <p>The harness starts the spare with the worker's usual command line plus
 * {@code --standby} (its {@code --attempt} is provisional) while the current
 * worker runs. The spare warms up on a background thread, doing only start-up
 * work that depends neither on the attempt nor on anything the running worker
 * owns, and only what the real start does not repeat: it warms Jackson, builds
 * and closes a throw-away Kafka Streams client (its own application id, a closed
 * local port as bootstrap: no group, no producer id, no broker), opens the
 * ledger connection, and loads (without initialising) the classes a worker
 * needs (the list in {@link Training#CLASS_LIST}; mapped from the class-data
 * archive when the harness gives one). It reads nothing from the broker.
 *
 * <p>Meanwhile the main thread waits for one line on stdin: a JSON array of
 * strings, the full command line of the real attempt ({@code java ... -jar JAR
 * OPTIONS}), which the harness writes only once the slot's previous JVM has
 * exited (it must be fenced by this one). EOF or an empty line: not needed,
 * exit 0 quietly. Otherwise the warm-up's later steps are skipped (its current
 * one ends beside the real start), the options after the jar are parsed as
 * usual, and the process goes on exactly as a normal start with them: it reads
 * the crash plan and crash log, creates and starts Kafka Streams, and
 * everything that names the attempt uses the real one. The ledger connection is
 * reused only if the real command line names the same database, user and table,
 * it was open before the line came, and it still answers.
 *
 * <p>Stderr: {@code eos-streams STANDBY ready ...} once warm (with the time per
 * step), {@code eos-streams STANDBY activated worker=W attempt=N ...} when the
 * line came; then the usual lines.
 */
final class Standby {
    static final String FLAG = "--standby";
    /** How long an unneeded spare waits for the warm-up thread to finish its current step before it exits. */
    private static final long JOIN_MS = 1_000;

    record Activation(Options options, Ledger ledger) {
    }

    private interface Step {
        /** Does the step; returns a short detail for the ready line, or null. */
        String run() throws Exception;
    }

    private final Options provisional;
    private final ObjectMapper json;
    private final AtomicBoolean stop = new AtomicBoolean();
    private final List<String> report = Collections.synchronizedList(new ArrayList<>());
    private final Object handover = new Object();
    private Ledger ledger;              // guarded by handover
    private boolean claimed;           // guarded by handover
    private volatile boolean complete;
    private volatile List<String> ownJvmOptions;
    private volatile Path ownJar;

    private Standby(Options provisional, ObjectMapper json) {
        this.provisional = provisional;
        this.json = json;
    }

    /**
     * Warms up, waits for the real command line and returns its options (and
     * the ledger connection if it can be reused). Exits 0 if the spare is not
     * needed, 2 if the line is not a valid command line.
     */
    static Activation await(Options provisional, ObjectMapper json) {
        Standby s = new Standby(provisional, json);
        Thread warm = new Thread(s::warmUp, "eos-streams-standby-warmup");
        warm.setDaemon(true);
        warm.start();

        String line;
        try {
            line = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        } catch (IOException e) {
            line = null;
        }
        s.stop.set(true);
        if (line == null || line.isBlank()) {
            join(warm);
            s.closeLedger();
            System.exit(0);
        }
        List<String> cmd = s.commandLine(line);
        int jar = cmd.indexOf("-jar");
        Options real = Main.parseOrExit(cmd.subList(jar + 2, cmd.size()).toArray(new String[0]));
        // No waiting for the warm-up's current step: it ends beside the real start (whose own class
        // initialisation it has half done, or shares), and its later steps are skipped. Waiting for it cost
        // up to one step (0.2-0.5 s on a loaded machine) on most restarts, whose spare was still busy.
        boolean finished = !warm.isAlive();
        Ledger l = s.claimLedger(real);
        System.err.println("eos-streams STANDBY activated worker=" + real.worker + " attempt=" + real.attempt
                           + " warm-up=" + (s.complete ? "complete" : "partial") + (finished ? "" : " (still busy)")
                           + (l != null ? " ledger=reused" : ""));
        s.warnIfDifferent(cmd, jar);
        return new Activation(real, l);
    }

    // -- the real command line ----------------------------------------------------------------

    /** The JSON array of strings, with a {@code -jar JAR} in it; usage error (exit 2) otherwise. */
    private List<String> commandLine(String line) {
        JsonNode n;
        try {
            n = json.readTree(line);
        } catch (IOException e) {
            n = null;
        }
        List<String> cmd = new ArrayList<>();
        if (n != null && n.isArray()) {
            for (JsonNode a : n) {
                if (!a.isTextual()) {
                    cmd = null;
                    break;
                }
                cmd.add(a.asText());
            }
        } else {
            cmd = null;
        }
        if (cmd == null) {
            usage("the line on stdin is not a JSON array of strings");
        }
        int jar = cmd.indexOf("-jar");
        if (jar < 0 || jar + 1 >= cmd.size()) {
            usage("the command line on stdin has no \"-jar\", JAR");
        }
        return cmd;
    }

    private static void usage(String why) {
        System.err.println("eos-streams: " + FLAG + ": " + why);
        System.exit(Main.EXIT_USAGE);
    }

    /** This JVM cannot change its options or code: say so if the real command line wants others. */
    private void warnIfDifferent(List<String> cmd, int jar) {
        try {
            compare(cmd, jar);
        } catch (RuntimeException e) {
            // only a warning: nothing to compare with
        }
    }

    private void compare(List<String> cmd, int jar) {
        List<String> own = ownJvmOptions;
        if (own != null) {
            List<String> missing = new ArrayList<>(cmd.subList(javaAt(cmd, jar) + 1, jar));
            missing.removeAll(own);
            if (!missing.isEmpty()) {
                System.err.println("eos-streams: " + FLAG + ": this JVM was started without " + missing
                                   + " (from the real command line); going on without");
            }
        }
        Path mine = ownJar;
        if (mine != null && !mine.equals(Path.of(cmd.get(jar + 1)).toAbsolutePath().normalize())) {
            System.err.println("eos-streams: " + FLAG + ": the real command line names the jar " + cmd.get(jar + 1)
                               + ", this JVM runs " + mine + "; going on with this one");
        }
    }

    /**
     * Where the java executable stands in the command line: the last word before {@code -jar} that is not an
     * option (a wrapper such as the harness's {@code setpriv ... sh -c ...} comes before it, with its own
     * arguments, which are no JVM options).
     */
    static int javaAt(List<String> cmd, int jar) {
        for (int k = jar - 1; k >= 0; k--) {
            if (!cmd.get(k).startsWith("-")) {
                return k;
            }
        }
        return 0;
    }

    private static boolean join(Thread t) {
        try {
            t.join(JOIN_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !t.isAlive();
    }

    // -- the ledger connection ----------------------------------------------------------------

    /** The warm-up's connection if the real options name the same database, user and table and it answers. */
    private Ledger claimLedger(Options real) {
        Ledger l;
        synchronized (handover) {
            claimed = true;
            l = ledger;
            ledger = null;
        }
        if (l == null) {
            return null;
        }
        if (real.ledgerTable != null && Objects.equals(real.ledgerTable, provisional.ledgerTable)
            && Objects.equals(real.jdbcUrl, provisional.jdbcUrl) && Objects.equals(real.jdbcUser, provisional.jdbcUser)
            && l.usable(2)) {
            return l;
        }
        l.close();
        return null;
    }

    private void closeLedger() {
        Ledger l;
        synchronized (handover) {
            claimed = true;
            l = ledger;
            ledger = null;
        }
        if (l != null) {
            l.close();
        }
    }

    // -- the warm-up --------------------------------------------------------------------------

    private void warmUp() {
        long t0 = System.nanoTime();
        step("self", this::readSelf);
        step("json", this::warmJson);
        step("streams", this::warmStreams);
        step("ledger", this::warmLedger);
        step("classes", this::warmClasses);
        if (!stop.get()) {
            complete = true;
            System.err.println("eos-streams STANDBY ready worker=" + provisional.worker + " warm-up="
                               + seconds(t0) + "s (" + String.join(" ", report) + ")");
        }
    }

    private void step(String name, Step step) {
        if (stop.get()) {
            return;
        }
        long t = System.nanoTime();
        String detail;
        try {
            detail = step.run();
        } catch (Exception | LinkageError e) {
            detail = "failed:" + e.getClass().getSimpleName();
        }
        report.add(name + "=" + seconds(t) + (detail == null ? "" : "[" + detail + "]"));
    }

    /** Jackson's tree model as the processor and the crash line use it (often enough for the JIT to notice). */
    private String warmJson() throws IOException {
        for (int i = 0; i < 300; i++) {
            ObjectNode v = (ObjectNode) json.readTree("{\"id\":\"pay-0001\",\"amount\":" + i + ",\"seq\":" + i + "}");
            v.put("worker", provisional.worker);
            v.put("attempt", i);
            json.writeValueAsString(v);
        }
        ObjectNode e = json.createObjectNode();
        e.put("point", CrashSwitch.POINT);
        e.putPOJO("unacked", List.of("pay-0001", "pay-0002"));
        e.put("time", 1.5);
        e.putNull("committed_offset");
        json.writeValueAsString(e);
        PaymentProcessor.unixTime();
        return null;
    }

    /** Opens the connection the real start will use (kept only if the real options name the same database). */
    private String warmLedger() throws Exception {
        if (provisional.ledgerTable == null) {
            return "none";
        }
        Ledger l = new Ledger(provisional.jdbcUrl, provisional.jdbcUser, System.getenv(Options.PASSWORD_ENV),
                              provisional.ledgerTable, "eos-streams");
        l.usable(2);   // one round trip
        synchronized (handover) {
            if (!claimed) {
                ledger = l;
                return null;
            }
        }
        l.close();
        return "late";
    }

    /**
     * Builds a throw-away Kafka Streams client like the worker's and closes it unstarted: building the real one
     * is then warm (0.02-0.05 s instead of 0.25 s cold). It shares nothing with the running worker or the next
     * attempt: its own application and client id, a temporary state directory beside the worker's (removed,
     * its process id with it), and a closed local port as bootstrap, so it joins no group, inits no producer
     * and reaches no broker (at most a refused connection, logged at WARN).
     */
    private String warmStreams() throws Exception {
        // Beside the worker's own state directory, in the run's folder: a spare SIGKILLed mid-build (the run's
        // end kills unneeded spares) leaves it where the run removes its Streams state, not in the OS's /tmp.
        Path parent = provisional.stateDir.toAbsolutePath().getParent();
        java.nio.file.Files.createDirectories(parent);
        Path dir = java.nio.file.Files.createTempDirectory(parent, "spare-warmup-");
        try {
            Options throwAway = Options.parse(new String[] {
                "--bootstrap", "127.0.0.1:" + Training.closedPort(), "--input", provisional.input,
                "--output", provisional.output, "--application-id", "eos-streams-spare-warmup",
                "--state-dir", dir.toString(), "--crash-plan", provisional.crashPlan.toString(),
                "--crash-log", provisional.crashLog.toString(), "--worker", "spare", "--attempt", "1"});
            CapturingClientSupplier clients = new CapturingClientSupplier();
            PaymentProcessor.State state = new PaymentProcessor.State(throwAway, json, null,
                java.util.concurrent.CompletableFuture.completedFuture(null), clients);
            org.apache.kafka.streams.KafkaStreams streams = new org.apache.kafka.streams.KafkaStreams(
                Main.topology(throwAway, state), Main.config(throwAway),
                clients);
            streams.close(java.time.Duration.ofSeconds(5));
        } finally {
            Training.deleteTree(dir);
        }
        return null;
    }

    /** Loads, without initialising, the classes of the list: the ones only a started client needs. */
    private String warmClasses() throws IOException {
        int[] n = Training.loadListedClasses(stop::get);
        return n[0] + (n[1] > 0 ? "+" + n[1] + " missing" : "");
    }

    /** This JVM's options and jar, to compare with the real command line (loads java.management, as Kafka's JMX use does). */
    private String readSelf() throws Exception {
        ownJvmOptions = List.copyOf(ManagementFactory.getRuntimeMXBean().getInputArguments());
        ownJar = Path.of(Standby.class.getProtectionDomain().getCodeSource().getLocation().toURI())
            .toAbsolutePath().normalize();
        return null;
    }

    private static String seconds(long sinceNanos) {
        return String.format(Locale.ROOT, "%.2f", (System.nanoTime() - sinceNanos) / 1e9);
    }
}
