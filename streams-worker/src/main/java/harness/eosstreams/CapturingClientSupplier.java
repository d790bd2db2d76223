package harness.eosstreams;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;

import java.util.Map;

/**
 * Creates the same clients as Streams' default supplier, and keeps the newest
 * producer and the admin client so that the processor can, just before a
 * planned crash, flush the open transaction's records to the broker (so the
 * aborted copies really exist) and ask for the group's committed offsets.
 */
final class CapturingClientSupplier implements KafkaClientSupplier {
    private volatile Producer<byte[], byte[]> producer;
    private volatile Admin admin;

    Producer<byte[], byte[]> producer() {
        return producer;
    }

    Admin admin() {
        return admin;
    }

    @Override
    public Admin getAdmin(Map<String, Object> config) {
        Admin a = Admin.create(config);
        admin = a;
        return a;
    }

    @Override
    public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
        Producer<byte[], byte[]> p = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        producer = p;
        return p;
    }

    @Override
    public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
}
