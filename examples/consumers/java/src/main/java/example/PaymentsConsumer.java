package example;

import java.io.StringReader;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * An exactly-once payments consumer for `harness run custom`, with the plain Kafka client and JDBC.
 *
 * <p>Each payment is applied in one Postgres transaction that locks its id and inserts the ledger
 * row only when the id has none yet (the row is its own idempotency key); the Kafka offset is
 * committed after that transaction. A SIGKILL between the two redelivers the payment and the key
 * absorbs it. Everything comes from the HARNESS_* environment; the password never leaves it.
 */
public final class PaymentsConsumer {
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"");
    private static final Pattern AMOUNT = Pattern.compile("\"amount\"\\s*:\\s*(-?\\d+)");
    private static volatile boolean stopping = false;

    public static void main(String[] args) throws Exception {
        Map<String, String> env = System.getenv();
        String table = env.get("HARNESS_LEDGER_TABLE");          // schema.table, a plain SQL name
        String topic = env.get("HARNESS_INPUT_TOPIC");
        List<TopicPartition> mine = new ArrayList<>();
        for (String p : env.get("HARNESS_PARTITIONS").split(",")) {
            if (!p.isBlank()) {
                mine.add(new TopicPartition(topic, Integer.parseInt(p.trim())));
            }
        }
        Properties props = new Properties();
        // The cluster's login (security.protocol, sasl.jaas.config, ...), if it needs one.
        props.load(new StringReader(env.getOrDefault("HARNESS_KAFKA_JAVA_CONFIG", "")));
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, env.get("HARNESS_BOOTSTRAP_SERVERS"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, env.get("HARNESS_GROUP_ID"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {    // SIGTERM at the end of the run
            stopping = true;
            try {
                main.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));

        String sql = "insert into " + table + " (message_id, amount) select ?, ? "
                + "where not exists (select 1 from " + table + " where message_id = ?)";
        try (Connection db = connect(env.get("HARNESS_POSTGRES_DSN"));
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
             // One lock per (ledger, payment id): runs sharing a database never wait for each other's locks.
             PreparedStatement lock = db.prepareStatement("select pg_advisory_xact_lock(hashtext(?), hashtext(?))");
             PreparedStatement insert = db.prepareStatement(sql)) {
            db.setAutoCommit(false);
            consumer.assign(mine);
            while (!stopping) {
                for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(500))) {
                    String id = find(ID, rec.value());
                    long amount = Long.parseLong(find(AMOUNT, rec.value()));
                    lock.setString(1, table);
                    lock.setString(2, id);
                    lock.execute();
                    insert.setString(1, id);
                    insert.setLong(2, amount);
                    insert.setString(3, id);
                    insert.executeUpdate();
                    db.commit();                                    // the effect and its key, together
                    consumer.commitSync(Map.of(new TopicPartition(rec.topic(), rec.partition()),
                            new OffsetAndMetadata(rec.offset() + 1)));
                }
            }
        }
    }

    private static String find(Pattern p, String json) {
        Matcher m = p.matcher(json);
        if (!m.find()) {
            throw new IllegalArgumentException("not a payment: " + json);
        }
        return m.group(1);
    }

    /** HARNESS_POSTGRES_DSN is a libpq URI, postgresql://user:password@host:port/dbname?require_auth=...;
     *  its query is libpq's alone (pgjdbc has no such setting) and is left out of the JDBC URL. */
    private static Connection connect(String dsn) throws Exception {
        URI uri = URI.create(dsn);
        String[] auth = uri.getRawUserInfo().split(":", 2);
        Properties p = new Properties();
        p.setProperty("user", URLDecoder.decode(auth[0], StandardCharsets.UTF_8));
        if (auth.length > 1) {
            p.setProperty("password", URLDecoder.decode(auth[1], StandardCharsets.UTF_8));
        }
        String url = "jdbc:postgresql://" + uri.getHost() + ":" + uri.getPort() + uri.getRawPath();
        return DriverManager.getConnection(url, p);
    }
}
