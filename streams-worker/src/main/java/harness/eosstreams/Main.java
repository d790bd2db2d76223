package harness.eosstreams;

import harness.common.ClientMetrics;
import harness.common.Halt;
import harness.common.Ledger;
import harness.common.Logging;
import harness.common.SelfStat;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.state.StoreBuilder;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The Kafka Streams worker of the harness experiment {@code eos-streams}:
 * input -> processor -> output under processing.guarantee=exactly_once_v2.
 *
 * <p>Exit status: 0 after SIGTERM (Streams closed within 10 s), 137 on a
 * planned crash, 3 on a fatal Streams or ledger error (the harness restarts
 * it), 2 on a bad command line or an unreadable crash plan.
 *
 * <p>With {@code --standby} as the last argument the process is a warm spare:
 * see {@link Standby}.
 */
public final class Main {
    static final int EXIT_USAGE = 2;
    static final int EXIT_FATAL = 3;
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    /** The topology's state store: only there to keep the process id stable, see {@link ProcessIdAnchor}. */
    static final String ANCHOR_STORE = ProcessIdAnchor.NAME;

    private Main() {
    }

    /** Seconds since the epoch, as the harness's own timestamps. */
    static String now() {
        return String.format(java.util.Locale.ROOT, "%.6f", System.currentTimeMillis() / 1000.0);
    }

    public static void main(String[] args) {
        Logging.use(Logging.SIMPLE);
        startPlatformMBeanServer();
        // When the JVM reached our code: with the process's start time (the kernel's) the harness times a
        // start-up's phases (its bench: JVM start, Kafka Streams start, first record).
        String mainAt = now();
        // --standby (the last argument): a warm spare. It warms up, then takes its real
        // command line from stdin and starts as below; see Standby.
        boolean standby = args.length > 0 && Standby.FLAG.equals(args[args.length - 1]);
        Options opts = parseOrExit(standby ? Arrays.copyOf(args, args.length - 1) : args);
        Ledger ledger = null;
        ObjectMapper json = new ObjectMapper();
        if (standby) {
            Standby.Activation a = Standby.await(opts, json);   // exits 0 itself if it is not needed
            opts = a.options();
            ledger = a.ledger();
        }
        String jvmStart = SelfStat.startTime();
        System.err.println("eos-streams MAIN worker=" + opts.worker + " attempt=" + opts.attempt + " process-start="
                           + jvmStart + " main=" + (standby ? now() : mainAt));
        start(opts, ledger, json);
    }

    /**
     * Starts the JDK's platform MBean server on a thread of its own, while the main thread reads the crash
     * plan: every Kafka client registers its app-info MBean there, whatever its metric reporters, and the
     * server's start (the platform MXBeans) took about 65 ms of building Kafka Streams. JDK code only, no
     * Kafka class: nothing it initialises can wait for the main thread.
     */
    private static void startPlatformMBeanServer() {
        Thread t = new Thread(() -> {
            try {
                java.lang.management.ManagementFactory.getPlatformMBeanServer();
            } catch (RuntimeException | LinkageError e) {
                // The clients start it themselves then, as before.
            }
        }, "eos-streams-mbean-server");
        t.setDaemon(true);
        t.start();
    }

    /** The options, or usage on stderr and exit 2. */
    static Options parseOrExit(String[] args) {
        try {
            return Options.parse(args);
        } catch (harness.common.CommandLine.UsageError e) {
            System.err.println("eos-streams: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(EXIT_USAGE);
            return null;   // not reached
        }
    }

    /**
     * The normal start: crash plan and crash log, Kafka Streams, and the ledger connection beside them.
     * {@code spareLedger} is a connection a warm spare opened already (for these very --jdbc-url,
     * --jdbc-user and --ledger-table), else null.
     *
     * <p>Each step's end goes on one SETUP line (epoch seconds), and the ledger connection's start and end
     * on a LEDGER line: with MAIN, STARTING, RUNNING and FIRST-RECORD they say where a restart's time went
     * ({@code harness bench streams}).
     */
    static void start(Options opts, Ledger spareLedger, ObjectMapper json) {
        String who = "worker=" + opts.worker + " attempt=" + opts.attempt;
        CrashSwitch crash;
        try {
            crash = new CrashSwitch(json, opts.crashPlan, opts.crashLog);
        } catch (Exception e) {
            System.err.println("eos-streams: cannot read the crash plan or crash log: " + e);
            System.exit(EXIT_USAGE);
            return;
        }
        String crashPlan = now();
        // First the crash plan (a few ms): an unreadable one is exit 2 and no connection is opened for nothing.
        CompletableFuture<Ledger> ledger = opts.ledgerTable == null || spareLedger != null
            ? CompletableFuture.completedFuture(spareLedger) : connectLedger(opts, who);
        Logging.start();
        String logging = now();
        CapturingClientSupplier clients = new CapturingClientSupplier();
        PaymentProcessor.State state = new PaymentProcessor.State(opts, json, crash, ledger, clients);
        KafkaStreams streams = new KafkaStreams(topology(opts, state), config(opts), clients);
        System.err.println("eos-streams SETUP " + who + " crash-plan=" + crashPlan + " logging=" + logging
                           + " built=" + now());
        run(streams, opts, ledger, json);
    }

    /**
     * Opens the ledger connection on a thread of its own (the JDBC driver, the password exchange: a few
     * round trips to PostgreSQL), while the main thread sets Kafka Streams up and its stream thread joins the
     * group; the first record waits for it ({@link PaymentProcessor}). A connection that fails is the FATAL
     * line and exit 3, as when it was opened first.
     */
    static CompletableFuture<Ledger> connectLedger(Options opts, String who) {
        CompletableFuture<Ledger> out = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            String began = now();
            try {
                Ledger l = new Ledger(opts.jdbcUrl, opts.jdbcUser, System.getenv(Options.PASSWORD_ENV),
                                      opts.ledgerTable, "eos-streams");
                System.err.println("eos-streams LEDGER " + who + " start=" + began + " connected=" + now());
                out.complete(l);
            } catch (Throwable e) {
                // The driver's message never contains the password. Whatever ends this thread ends the worker:
                // the first record must not wait for a connection that will never come.
                if (!out.isDone()) {         // done: the worker is stopping, and its shutdown hook decides
                    fatal(who, "cannot connect to the ledger database: "
                               + (e.getMessage() != null ? e.getMessage() : describe(e)));
                }
            }
        }, "eos-streams-ledger");
        t.setDaemon(true);
        t.start();
        return out;
    }

    static Topology topology(Options opts, PaymentProcessor.State state) {
        return topology(opts, state, new ProcessIdAnchor.Builder());
    }

    /** The topology with the given anchor store (a warm spare's throw-away copy uses an in-memory one). */
    static Topology topology(Options opts, PaymentProcessor.State state, StoreBuilder<?> anchor) {
        Topology t = new Topology();
        t.addSource("payments", Serdes.String().deserializer(), Serdes.String().deserializer(), opts.input);
        t.addProcessor("process", () -> new PaymentProcessor(state), "payments");
        t.addStateStore(anchor, "process");
        t.addSink("out", opts.output, Serdes.String().serializer(), Serdes.String().serializer(), "process");
        return t;
    }

    static Properties config(Options opts) {
        // The cluster's client settings (security, credentials) first: what follows is the experiment's own.
        Properties p = Options.kafkaClientSettings();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.bootstrap);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, opts.applicationId + "-" + opts.worker);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.stateDir.toAbsolutePath().toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opts.commitIntervalMs);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        if (opts.streamsProtocol) {
            // KIP-1071: a streams group, its tasks assigned by the broker. Session and heartbeat are the
            // broker's (group.streams.session.timeout.ms, group.streams.heartbeat.interval.ms), and this
            // client refuses static membership with it (only 4.4 clients on 4.4 brokers take
            // group.instance.id): a halted member keeps its tasks until the broker's session ends.
            p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        } else {
            // Static membership: a restart under the same --worker takes over the halted
            // member's place (Streams appends "-<thread index>") instead of waiting for its
            // session to expire and a rebalance. Only the main consumer is a group member.
            p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), opts.worker);
            p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
            p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        }
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Restart latency. A restart's InitProducerId makes the coordinator abort the halted
        // instance's transaction and answers CONCURRENT_TRANSACTIONS until that is done (a few ms
        // here); with the default 100 ms backoff (doubling) the retries cost ~0.2 s per restart,
        // and the same answer right after each commit delays the next transaction's first send.
        // Same values as the harness's own EOS workers (harness/runtime/eos.py).
        p.put(StreamsConfig.producerPrefix(ProducerConfig.RETRY_BACKOFF_MS_CONFIG), 5);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG), 50);
        // The stream thread blocks in poll() up to poll.ms, also while its new task waits to be
        // initialised (partitions paused): 100 ms by default, i.e. ~50 ms more per restart.
        p.put(StreamsConfig.POLL_MS_CONFIG, 10);
        return ClientMetrics.notExported(p);
    }

    private static void run(KafkaStreams streams, Options opts, CompletableFuture<Ledger> ledger, ObjectMapper json) {
        String who = "worker=" + opts.worker + " attempt=" + opts.attempt;
        AtomicBoolean closing = new AtomicBoolean(false);
        AtomicBoolean announced = new AtomicBoolean(false);

        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && announced.compareAndSet(false, true)) {
                // The process id: the same on every attempt of a worker (see ProcessIdAnchor).
                System.err.println("eos-streams RUNNING " + who + " time=" + now() + " process-id="
                                   + ProcessIdAnchor.processId(opts.stateDir, opts.applicationId, json));
            } else if (now == KafkaStreams.State.ERROR && !closing.get()) {
                fatal(who, "Kafka Streams went to ERROR (from " + before + ")");
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            if (!closing.get()) {            // while closing (SIGTERM), the shutdown hook decides the exit
                fatal(who, describe(e));
            }
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            closing.set(true);
            // A stream thread still waiting for the ledger stops waiting; a connection opened after this is
            // not handed over (and dies with the JVM).
            ledger.completeExceptionally(new IllegalStateException("the worker is stopping"));
            boolean closed = streams.close(CLOSE_TIMEOUT);
            Ledger open = ledger.isCompletedExceptionally() ? null : ledger.getNow(null);
            if (open != null) {
                open.close();
            }
            System.err.println("eos-streams STOPPED " + who + (closed ? "" : " (close timed out)"));
            System.err.flush();
            // Exit 0 rather than the JVM's 143 for SIGTERM; halt skips the remaining hooks.
            Runtime.getRuntime().halt(0);
        }, "eos-streams-shutdown"));

        System.err.println("eos-streams STARTING " + who + " time=" + now());
        try {
            streams.start();
        } catch (RuntimeException e) {
            fatal(who, "cannot start Kafka Streams: " + describe(e));
        }
        // The stream thread keeps the JVM alive until SIGTERM, a crash or a fatal error.
    }

    /** One line on stderr, then exit 3 at once (no clean close: the restart fences this instance anyway). */
    static void fatal(String who, String why) {
        System.err.println("eos-streams FATAL " + who + ": " + why.replace('\n', ' '));
        System.err.flush();
        Halt.now(EXIT_FATAL);
    }

    private static String describe(Throwable e) {
        StringBuilder b = new StringBuilder(e.toString());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            b.append(" <- ").append(c);
        }
        return b.toString();
    }
}
