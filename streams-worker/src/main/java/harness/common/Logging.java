package harness.common;

/**
 * Which SLF4J provider a worker JVM logs through, chosen before its first logger.
 *
 * <p>The jar holds two. The Kafka Streams worker uses slf4j-simple
 * ({@code simplelogger.properties}: WARN and above, to stderr): log4j2's
 * start-up (its plugins, its configuration) cost about 0.15 CPU-s and 0.1-0.3 s
 * of every Streams restart, measured with the worker's class-data archive, and
 * every planned crash is a new JVM. The transactional worker keeps log4j2: its
 * configuration lets exactly two of the transaction manager's DEBUG lines
 * through, with the process id (log4j2.xml), the evidence of which producer
 * epoch each transaction ended with; slf4j-simple can filter by logger and
 * level only.
 *
 * <p>With the provider named ({@code slf4j.provider}), SLF4J neither searches
 * the class path nor warns that it holds two; its own notes below WARN are off.
 */
public final class Logging {
    public static final String SIMPLE = "org.slf4j.simple.SimpleServiceProvider";
    public static final String LOG4J = "org.apache.logging.slf4j.SLF4JServiceProvider";

    private Logging() {
    }

    /** Call first thing in main(), before anything logs. */
    public static void use(String provider) {
        System.setProperty("slf4j.internal.verbosity", "WARN");
        System.setProperty("slf4j.provider", provider);
    }

    /** Starts the provider now (SLF4J would on the first logger): a start-up step the worker can time. */
    public static void start() {
        org.slf4j.LoggerFactory.getILoggerFactory();
    }
}
