package harness.common;

import org.apache.kafka.clients.CommonClientConfigs;

import java.util.Properties;

/**
 * The metrics settings of every Kafka client of a worker JVM. A worker lives until its planned crash (every
 * crash is a new JVM), and its clients' metrics are read by nobody, so they are recorded but not exported:
 * no JMX reporter registering an MBean per metric group, and no KIP-714 metrics push (its reporter follows
 * every metric, and each client asks the broker for a subscription at start). Side by side with
 * {@code harness bench streams} on 2 cores (3 pairs of 30 restarts), without the push each Kafka Streams
 * JVM used 0.53-0.56 CPU-s per crashed attempt against 0.57-0.59, and restarted in 0.36-0.37 s against
 * 0.38-0.39 s.
 */
public final class ClientMetrics {
    private ClientMetrics() {
    }

    /** {@code p} with its clients' metrics recorded but not exported (a user's settings never carry these). */
    public static Properties notExported(Properties p) {
        p.put(CommonClientConfigs.METRIC_REPORTER_CLASSES_CONFIG, "");
        p.put(CommonClientConfigs.ENABLE_METRICS_PUSH_CONFIG, "false");
        return p;
    }
}
