package harness.eosstreams;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.state.Stores;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The Kafka Streams worker of the harness experiment {@code eos-streams}:
 * input -> processor -> output under processing.guarantee=exactly_once_v2.
 *
 * <p>Exit status: 0 after SIGTERM (Streams closed within 10 s), 137 on a
 * planned crash, 3 on a fatal Streams or ledger error (the harness restarts
 * it), 2 on a bad command line or an unreadable crash plan.
 */
public final class Main {
    static final int EXIT_USAGE = 2;
    static final int EXIT_FATAL = 3;
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    /**
     * A persistent (on-disk) store, unused by the processor and without a
     * changelog. It is here for one reason: only a topology with a persistent
     * store makes Streams keep its process id in the state directory. The
     * process id is part of the EOS transactional.id (application.id-processId-thread),
     * so with it a restart on the same --state-dir gets the same transactional.id,
     * and its first InitProducerId fences the halted instance and aborts its
     * open transaction at once. Without it each start has a random process id
     * and the dead transaction stays open (blocking read_committed readers of
     * the output) until its transaction.timeout.ms runs out.
     */
    static final String ANCHOR_STORE = "process-id-anchor";

    private Main() {
    }

    public static void main(String[] args) {
        Options opts;
        try {
            opts = Options.parse(args);
        } catch (Options.UsageError e) {
            System.err.println("eos-streams: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(EXIT_USAGE);
            return;
        }

        ObjectMapper json = new ObjectMapper();
        CrashSwitch crash;
        try {
            crash = new CrashSwitch(json, opts.crashPlan, opts.crashLog);
        } catch (Exception e) {
            System.err.println("eos-streams: cannot read the crash plan or crash log: " + e);
            System.exit(EXIT_USAGE);
            return;
        }

        Ledger ledger = null;
        if (opts.ledgerTable != null) {
            try {
                ledger = new Ledger(opts.jdbcUrl, opts.jdbcUser, System.getenv(Options.PASSWORD_ENV), opts.ledgerTable);
            } catch (Exception e) {
                // The driver's message never contains the password.
                System.err.println("eos-streams FATAL worker=" + opts.worker + " attempt=" + opts.attempt
                                   + ": cannot connect to the ledger database: " + e.getMessage());
                System.exit(EXIT_FATAL);
                return;
            }
        }

        RocksDbNative.load(opts.stateDir);
        CapturingClientSupplier clients = new CapturingClientSupplier();
        PaymentProcessor.State state = new PaymentProcessor.State(opts, json, crash, ledger, clients);
        KafkaStreams streams = new KafkaStreams(topology(opts, state), config(opts), clients);
        run(streams, opts, ledger);
    }

    static Topology topology(Options opts, PaymentProcessor.State state) {
        Topology t = new Topology();
        t.addSource("payments", Serdes.String().deserializer(), Serdes.String().deserializer(), opts.input);
        t.addProcessor("process", () -> new PaymentProcessor(state), "payments");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(ANCHOR_STORE),
                                                    Serdes.String(), Serdes.String()).withLoggingDisabled(),
                        "process");
        t.addSink("out", opts.output, Serdes.String().serializer(), Serdes.String().serializer(), "process");
        return t;
    }

    static Properties config(Options opts) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.bootstrap);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, opts.applicationId + "-" + opts.worker);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.stateDir.toAbsolutePath().toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opts.commitIntervalMs);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // Static membership: a restart under the same --worker takes over the halted
        // member's place (Streams appends "-<thread index>") instead of waiting for its
        // session to expire and a rebalance. Only the main consumer is a group member.
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), opts.worker);
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return p;
    }

    private static void run(KafkaStreams streams, Options opts, Ledger ledger) {
        String who = "worker=" + opts.worker + " attempt=" + opts.attempt;
        AtomicBoolean closing = new AtomicBoolean(false);
        AtomicBoolean announced = new AtomicBoolean(false);

        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && announced.compareAndSet(false, true)) {
                System.err.println("eos-streams RUNNING " + who);
            } else if (now == KafkaStreams.State.ERROR && !closing.get()) {
                fatal(who, "Kafka Streams went to ERROR (from " + before + ")");
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            fatal(who, describe(e));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;   // not reached: fatal halts
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            closing.set(true);
            boolean closed = streams.close(CLOSE_TIMEOUT);
            if (ledger != null) {
                ledger.close();
            }
            System.err.println("eos-streams STOPPED " + who + (closed ? "" : " (close timed out)"));
            System.err.flush();
            // Exit 0 rather than the JVM's 143 for SIGTERM; halt skips the remaining hooks.
            Runtime.getRuntime().halt(0);
        }, "eos-streams-shutdown"));

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
        Runtime.getRuntime().halt(EXIT_FATAL);
    }

    private static String describe(Throwable e) {
        StringBuilder b = new StringBuilder(e.toString());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            b.append(" <- ").append(c);
        }
        return b.toString();
    }
}
