// Writes the expected bytes of MirrorMaker 2's internal records (Heartbeat, Checkpoint,
// OffsetSync) as made by the real Kafka jars, one hex file per key and value, plus a
// vectors.txt index of the inputs. See README.md in this directory for the command.
//
// recordKey()/recordValue() are package-private in Kafka 4.1.1, so they are called through
// reflection; every vector is then decoded again with the public deserializeRecord() to
// check the round trip inside the jar itself.

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.OffsetSync;

public class GenerateVectors {
    private final Path dir;
    private final List<String> index = new ArrayList<>();

    private GenerateVectors(Path dir) {
        this.dir = dir;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GenerateVectors OUTPUT_DIR");
            System.exit(2);
        }
        GenerateVectors g = new GenerateVectors(Files.createDirectories(Path.of(args[0])));
        g.index.add("# MirrorMaker 2 record vectors made by the Kafka " + kafkaVersion() + " jars.");
        g.index.add("# name: inputs -> NAME.key.hex, NAME.value.hex (lowercase hex, one line).");
        g.index.add("# Strings are UTF-8; Java long/int values are written in decimal.");

        Heartbeat[] heartbeats = {
            new Heartbeat("source", "target", 1700000000123L),
            new Heartbeat("us-east-1", "eu-west-1", 0L),
            new Heartbeat("z\u00fcrich", "\u6771\u4eac", Long.MAX_VALUE),
            new Heartbeat("", "", -1L),
        };
        for (int i = 0; i < heartbeats.length; i++) {
            g.heartbeat("heartbeat-" + (i + 1), heartbeats[i]);
        }

        Checkpoint[] checkpoints = {
            new Checkpoint("group-1", new TopicPartition("source.orders", 0), 0L, 0L, ""),
            new Checkpoint("payments-consumer", new TopicPartition("source.payments", 7),
                123456789012L, 123456789000L, "commit-meta"),
            new Checkpoint("gr\u00fcppe-\u00e9", new TopicPartition("source.t\u00f3pico-\u00f1", Integer.MAX_VALUE),
                -1L, -1L, "m\u00e9tadonn\u00e9es \u2713 \ud83d\ude80"),
            new Checkpoint("big", new TopicPartition("a.b.orders", 2), Long.MAX_VALUE,
                Long.MAX_VALUE - 1, ""),
        };
        for (int i = 0; i < checkpoints.length; i++) {
            g.checkpoint("checkpoint-" + (i + 1), checkpoints[i]);
        }

        OffsetSync[] syncs = {
            new OffsetSync(new TopicPartition("orders", 0), 0L, 0L),
            new OffsetSync(new TopicPartition("payments", 3), 1000L, 998L),
            new OffsetSync(new TopicPartition("t\u00f3pico-\u00f1", 12), -1L, -1L),
            new OffsetSync(new TopicPartition("orders", Integer.MAX_VALUE), Long.MAX_VALUE,
                Long.MAX_VALUE - 1),
        };
        for (int i = 0; i < syncs.length; i++) {
            g.offsetSync("offset-sync-" + (i + 1), syncs[i]);
        }

        // The batch MM2's producer would write for heartbeat-1 and heartbeat-2 with the
        // record timestamp of heartbeat-1: uncompressed, magic 2, base offset 0, no producer id.
        long ts = heartbeats[0].timestamp();
        MemoryRecords batch = MemoryRecords.withRecords(Compression.NONE,
            new SimpleRecord(ts, recordKey(heartbeats[0]), recordValue(heartbeats[0])),
            new SimpleRecord(ts, recordKey(heartbeats[1]), recordValue(heartbeats[1])));
        ByteBuffer buf = batch.buffer();
        byte[] batchBytes = new byte[buf.remaining()];
        buf.get(batchBytes);
        g.write("heartbeat-batch.hex", batchBytes);
        g.index.add("heartbeat-batch: records heartbeat-1, heartbeat-2; timestamp=" + ts
            + " -> heartbeat-batch.hex (MemoryRecords.withRecords, Compression.NONE)");

        Files.write(g.dir.resolve("vectors.txt"), g.index, StandardCharsets.UTF_8);
        System.out.println("wrote " + (g.index.size() - 3) + " vectors to " + g.dir);
    }

    private void heartbeat(String name, Heartbeat h) throws Exception {
        byte[] key = recordKey(h);
        byte[] value = recordValue(h);
        Heartbeat back = Heartbeat.deserializeRecord(consumerRecord(key, value));
        check(name, h.sourceClusterAlias().equals(back.sourceClusterAlias())
            && h.targetClusterAlias().equals(back.targetClusterAlias())
            && h.timestamp() == back.timestamp());
        writePair(name, key, value);
        index.add(name + ": sourceClusterAlias=" + quote(h.sourceClusterAlias())
            + " targetClusterAlias=" + quote(h.targetClusterAlias())
            + " timestamp=" + h.timestamp());
    }

    private void checkpoint(String name, Checkpoint c) throws Exception {
        byte[] key = recordKey(c);
        byte[] value = recordValue(c);
        Checkpoint back = Checkpoint.deserializeRecord(consumerRecord(key, value));
        check(name, c.equals(back));
        writePair(name, key, value);
        index.add(name + ": consumerGroupId=" + quote(c.consumerGroupId())
            + " topic=" + quote(c.topicPartition().topic())
            + " partition=" + c.topicPartition().partition()
            + " upstreamOffset=" + c.upstreamOffset()
            + " downstreamOffset=" + c.downstreamOffset()
            + " metadata=" + quote(c.metadata()));
    }

    private void offsetSync(String name, OffsetSync s) throws Exception {
        byte[] key = recordKey(s);
        byte[] value = recordValue(s);
        OffsetSync back = OffsetSync.deserializeRecord(consumerRecord(key, value));
        check(name, s.topicPartition().equals(back.topicPartition())
            && s.upstreamOffset() == back.upstreamOffset()
            && s.downstreamOffset() == back.downstreamOffset());
        writePair(name, key, value);
        index.add(name + ": topic=" + quote(s.topicPartition().topic())
            + " partition=" + s.topicPartition().partition()
            + " upstreamOffset=" + s.upstreamOffset()
            + " downstreamOffset=" + s.downstreamOffset());
    }

    // Package-private in 4.1.1 (Heartbeat, Checkpoint, OffsetSync alike).
    private static byte[] recordKey(Object o) throws Exception {
        return invoke(o, "recordKey");
    }

    private static byte[] recordValue(Object o) throws Exception {
        return invoke(o, "recordValue");
    }

    private static byte[] invoke(Object o, String method) throws Exception {
        Method m = o.getClass().getDeclaredMethod(method);
        m.setAccessible(true);
        return (byte[]) m.invoke(o);
    }

    private static ConsumerRecord<byte[], byte[]> consumerRecord(byte[] key, byte[] value) {
        return new ConsumerRecord<>("vectors", 0, 0L, key, value);
    }

    private static void check(String name, boolean ok) {
        if (!ok) {
            throw new IllegalStateException(name + ": the jar's own round trip differs");
        }
    }

    private void writePair(String name, byte[] key, byte[] value) throws IOException {
        write(name + ".key.hex", key);
        write(name + ".value.hex", value);
    }

    private void write(String file, byte[] bytes) throws IOException {
        StringBuilder sb = new StringBuilder(bytes.length * 2 + 1);
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xff));
        }
        sb.append('\n');
        Files.writeString(dir.resolve(file), sb.toString(), StandardCharsets.UTF_8);
    }

    private static String quote(String s) {
        return "\"" + Objects.requireNonNull(s) + "\"";
    }

    private static String kafkaVersion() {
        return org.apache.kafka.common.utils.AppInfoParser.getVersion();
    }
}
