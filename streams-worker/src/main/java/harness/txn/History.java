package harness.txn;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.Callback;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * This process's history in the Python workers' format (harness/runtime/history.py, which documents the
 * lines): open, assign, poll, seek, txn begin/committing/commit/abort, send and send-error, one JSON array
 * per line, time first, so that the harness's anomaly checker (Jepsen's classes) reads a Java worker's
 * operations as it reads a Python one's. Every line is written at once, in one append (delivery reports
 * come from the producer's I/O thread, hence the lock): nothing waits in memory for a halt to lose.
 * Without a folder (--history not given) it writes nothing.
 */
final class History {
    private final ObjectMapper json;
    private final FileChannel out;      // null: no history
    private int txnNo;

    History(ObjectMapper json, Path folder, TxnOptions opts) throws IOException {
        this.json = json;
        if (folder == null) {
            out = null;
            return;
        }
        out = FileChannel.open(folder.resolve(opts.worker + "-" + opts.attempt + ".jsonl"), StandardOpenOption.CREATE,
                               StandardOpenOption.WRITE, StandardOpenOption.APPEND, LinkOption.NOFOLLOW_LINKS);
        ObjectNode header = json.createObjectNode();
        header.put("worker", opts.worker);
        header.put("attempt", opts.attempt);
        header.put("transactional_id", opts.transactionalId);
        header.put("pid", ProcessHandle.current().pid());
        ArrayNode l = line("open");
        l.add(header);
        write(l);
    }

    /** A new line: [t, op]; the caller adds its fields, then {@link #write}s it. */
    private ArrayNode line(String op) {
        ArrayNode l = json.createArrayNode();
        l.add(System.currentTimeMillis() / 1000.0);
        l.add(op);
        return l;
    }

    private synchronized void write(ArrayNode fields) {
        if (out == null) {
            return;
        }
        try {
            ByteBuffer buf = ByteBuffer.wrap((json.writeValueAsString(fields) + "\n").getBytes(StandardCharsets.UTF_8));
            while (buf.hasRemaining()) {
                out.write(buf);
            }
        } catch (IOException | RuntimeException e) {
            System.err.println("eos-txn: could not write the history: " + e);
        }
    }

    /** "assign" or "seek": the next offset of each partition. */
    void positions(String op, String topic, Map<Integer, Long> offsets) {
        if (out == null) {
            return;
        }
        ObjectNode o = json.createObjectNode();
        offsets.forEach((p, off) -> o.put(String.valueOf(p), off));
        synchronized (this) {
            ArrayNode l = line(op);
            l.add(topic);
            l.add(o);
            write(l);
        }
    }

    /** A poll's records as ranges of consecutive offsets per partition, in the order given. */
    void poll(String topic, ConsumerRecords<String, String> batch) {
        if (out == null || batch.isEmpty()) {
            return;
        }
        Map<Integer, ArrayNode> per = new LinkedHashMap<>();
        Map<Integer, long[]> open = new LinkedHashMap<>();
        for (ConsumerRecord<String, String> r : batch) {
            long[] range = open.get(r.partition());
            if (range != null && r.offset() == range[1] + 1) {
                range[1] = r.offset();
                continue;
            }
            if (range != null) {
                per.get(r.partition()).add(json.createArrayNode().add(range[0]).add(range[1]));
            }
            per.computeIfAbsent(r.partition(), p -> json.createArrayNode());
            open.put(r.partition(), new long[] {r.offset(), r.offset()});
        }
        open.forEach((p, range) -> per.get(p).add(json.createArrayNode().add(range[0]).add(range[1])));
        ObjectNode o = json.createObjectNode();
        per.forEach((p, ranges) -> o.set(String.valueOf(p), ranges));
        synchronized (this) {
            ArrayNode l = line("poll");
            l.add(topic);
            l.add(o);
            write(l);
        }
    }

    /** A transaction boundary: begin (the next number), committing, commit or abort. */
    synchronized void txn(String step) {
        if ("begin".equals(step)) {
            txnNo++;
        }
        if (out != null) {
            ArrayNode l = line("txn");
            l.add(step);
            l.add(txnNo);
            write(l);
        }
    }

    int txnNo() {
        return txnNo;
    }

    /** The delivery report of one record produced now, in the open transaction: its place in the log or its error. */
    Callback onDelivery(String topic, String key) {
        int n = txnNo;
        return (meta, error) -> {
            if (out == null) {
                return;
            }
            synchronized (this) {
                ArrayNode l;
                if (error != null) {
                    l = line("send-error");
                    l.add(topic);
                    l.add(key);
                    String e = String.valueOf(error);
                    l.add(e.length() > 200 ? e.substring(0, 200) : e);
                } else {
                    l = line("send");
                    l.add(topic);
                    l.add(meta.partition());
                    l.add(meta.hasOffset() ? meta.offset() : -1);
                    l.add(key);
                }
                l.add(n);
                write(l);
            }
        };
    }
}
