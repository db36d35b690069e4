// Workload tools for strait's tests, built on kafka-clients only (compiled by scripts/kafka.sh).
//
//   produce --bootstrap B --topic T --count N [--compression none|gzip|snappy|lz4|zstd]
//           [--idempotent] [--transactional-id ID --txn-size K --abort-every M]
//           [--value-size S] [--key-space K] [--null-key-every K] [--null-value-every K]
//           [--headers] [--batch-size BYTES] [--linger-ms MS] [--rate RECORDS_PER_SEC]
//           [--partition P] [--timestamp MS] [--first-value-size S0] [--first I]
//   dump --bootstrap B --topic T [--isolation read_committed|read_uncommitted] [--timeout-ms MS]
//   consume --bootstrap B --topic T --group G --max N [--isolation read_committed|read_uncommitted]
//           [--timeout-ms MS] [--idle-ms MS]
//   committed --bootstrap B --group G
//   train --bootstrap B   (exercise the commands above and Mm2Client once, for a CDS archive)
//
// Record i produced by `produce`, i from I (default 0) to I + N - 1 (so that successive runs on one
// topic write distinct records):
//   key     "key-" + (i % keySpace)                  (keySpace defaults to count)
//           null when nullKeyEvery > 0 and i % nullKeyEvery == nullKeyEvery - 1
//   value   "value-" + i + "-", padded to S bytes (S0 for the first record) with the letter ('a' + i % 26)
//           null when nullValueEvery > 0 and i % nullValueEvery == nullValueEvery - 1
//   headers (with --headers) h1="v<i>", h2=null, and when i % 5 == 0 a second h1="again-<i>"
//   timestamp MS when --timestamp is given (CreateTime), else the producer's clock
// Transactions hold K records each (the last may be shorter); transaction t (0-based) is aborted
// when abortEvery > 0 and t % abortEvery == abortEvery - 1, after flushing its records so the
// aborted data is in the log. Prints "produced N committed C aborted A".
//
// `dump` prints one line per record, ordered by partition then offset:
//   partition \t offset \t timestamp \t timestampType \t key \t value \t headers
// key/value are base64 or "-" for null; headers are "k=base64" or "k=-" joined by ",".
//
// `consume` is a consumer group member (subscribe, auto.offset.reset=earliest, no auto
// commit). It reads at most N records, stopping earlier once its position has reached the end
// offsets of every assigned partition and nothing more arrived for --idle-ms (default 1000).
// Then it commits, per partition it read from, the offset after the last record it counted
// (records a poll returned past N are neither printed nor committed), prints the records it
// read like `dump` and closes, leaving the group. Fails if nothing is assigned within the
// timeout or the timeout passes while it is still behind.
//
// `committed` prints the group's committed offsets: topic \t partition \t offset, sorted.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Workload {
    static final Set<String> FLAGS = Set.of("--idempotent", "--headers");

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) fail("usage: Workload produce|dump|consume|committed --bootstrap B ...");
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--")) fail("unexpected argument: " + k);
            if (FLAGS.contains(k)) a.put(k, "true");
            else if (i + 1 < argv.length) a.put(k, argv[++i]);
            else fail("missing value for " + k);
        }
        switch (argv[0]) {
            case "produce" -> produce(a);
            case "dump" -> dump(a);
            case "consume" -> consume(a);
            case "committed" -> committed(req(a, "--bootstrap"), req(a, "--group"));
            case "train" -> train(req(a, "--bootstrap"));
            default -> fail("unknown command: " + argv[0]);
        }
    }

    static void fail(String msg) {
        System.err.println("Workload: " + msg);
        System.exit(2);
    }

    static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) fail("missing " + k);
        return v;
    }

    static long num(Map<String, String> a, String k, long dflt) {
        String v = a.get(k);
        return v == null ? dflt : Long.parseLong(v);
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void produce(Map<String, String> a) throws Exception {
        String topic = req(a, "--topic");
        long count = num(a, "--count", 0);
        long first = num(a, "--first", 0);
        long keySpace = num(a, "--key-space", Math.max(count, 1));
        long valueSize = num(a, "--value-size", 0);
        long firstValueSize = num(a, "--first-value-size", valueSize);
        long nullKeyEvery = num(a, "--null-key-every", 0);
        long nullValueEvery = num(a, "--null-value-every", 0);
        boolean headers = a.containsKey("--headers");
        String txnId = a.get("--transactional-id");
        long txnSize = num(a, "--txn-size", 100);
        long abortEvery = num(a, "--abort-every", 0);
        long rate = num(a, "--rate", 0);
        Integer partition = a.containsKey("--partition") ? (int) num(a, "--partition", 0) : null;
        Long timestamp = a.containsKey("--timestamp") ? num(a, "--timestamp", 0) : null;

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, req(a, "--bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.getOrDefault("--compression", "none"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                String.valueOf(a.containsKey("--idempotent") || txnId != null));
        if (txnId != null) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        if (a.containsKey("--batch-size")) p.put(ProducerConfig.BATCH_SIZE_CONFIG, a.get("--batch-size"));
        if (a.containsKey("--linger-ms")) p.put(ProducerConfig.LINGER_MS_CONFIG, a.get("--linger-ms"));
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG,
                String.valueOf(Math.max(1 << 20, 2 * Math.max(valueSize, firstValueSize) + 4096)));

        AtomicReference<Exception> error = new AtomicReference<>();
        Callback cb = (md, e) -> { if (e != null) error.compareAndSet(null, e); };
        long committed = 0, aborted = 0, inTxn = 0, txnIndex = 0;
        long due = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (txnId != null) producer.initTransactions();
            for (long i = first; i < first + count; i++) {
                if (txnId != null && inTxn == 0) producer.beginTransaction();
                byte[] key = nullKeyEvery > 0 && i % nullKeyEvery == nullKeyEvery - 1
                        ? null : utf8("key-" + (i % keySpace));
                byte[] value = nullValueEvery > 0 && i % nullValueEvery == nullValueEvery - 1
                        ? null : value(i, i == first ? firstValueSize : valueSize);
                RecordHeaders hs = new RecordHeaders();
                if (headers) {
                    hs.add("h1", utf8("v" + i));
                    hs.add("h2", null);
                    if (i % 5 == 0) hs.add("h1", utf8("again-" + i));
                }
                producer.send(new ProducerRecord<>(topic, partition, timestamp, key, value, hs), cb);
                if (error.get() != null) throw error.get();
                if (txnId == null) {
                    committed++;
                } else if (++inTxn == txnSize || i == first + count - 1) {
                    producer.flush();
                    if (error.get() != null) throw error.get();
                    if (abortEvery > 0 && txnIndex % abortEvery == abortEvery - 1) {
                        producer.abortTransaction();
                        aborted += inTxn;
                    } else {
                        producer.commitTransaction();
                        committed += inTxn;
                    }
                    inTxn = 0;
                    txnIndex++;
                }
                if (rate > 0) {
                    // Paced, and after a stall (send() blocked while a broker was down) on at
                    // the same pace from now rather than catching up in a burst: a soak
                    // bounds duplicates by the rate, which a burst would exceed.
                    due += 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    else if (wait < -1_000_000_000L) due = System.nanoTime();
                }
            }
            producer.flush();
        }
        if (error.get() != null) throw error.get();
        System.out.println("produced " + count + " committed " + committed + " aborted " + aborted);
    }

    static byte[] value(long i, long size) {
        StringBuilder sb = new StringBuilder("value-").append(i).append('-');
        char pad = (char) ('a' + (int) (i % 26));
        while (sb.length() < size) sb.append(pad);
        return utf8(sb.toString());
    }

    /** Loads the classes that the tests' tool runs need: run with -XX:ArchiveClassesAtExit. */
    static void train(String bootstrap) throws Exception {
        String topic = "strait-cds-training";
        topicCommand("--bootstrap-server", bootstrap, "--create", "--topic", topic,
                "--partitions", "2", "--config", "cleanup.policy=delete");
        topicCommand("--bootstrap-server", bootstrap, "--describe", "--topic", topic);
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            produce(Map.of("--bootstrap", bootstrap, "--topic", topic, "--count", "50",
                    "--compression", codec, "--headers", "true", "--null-key-every", "7"));
        }
        produce(Map.of("--bootstrap", bootstrap, "--topic", topic, "--count", "50",
                "--transactional-id", "strait-cds-training", "--txn-size", "10", "--abort-every", "2"));
        dump(Map.of("--bootstrap", bootstrap, "--topic", topic, "--isolation", "read_uncommitted"));
        dump(Map.of("--bootstrap", bootstrap, "--topic", topic));
        consume(Map.of("--bootstrap", bootstrap, "--topic", topic, "--group", "strait-cds-training",
                "--max", "120", "--idle-ms", "0"));
        committed(bootstrap, "strait-cds-training");
        Mm2Client.main(new String[] {"upstream", "--bootstrap", bootstrap});
        Mm2Client.main(new String[] {"hops", "--bootstrap", bootstrap, "--alias", "none"});
    }

    /** Runs TopicCommand in this JVM (its Exit.exit calls are made to throw here). */
    static void topicCommand(String... args) throws Exception {
        int[] firstCode = {-1};
        org.apache.kafka.common.utils.Exit.setExitProcedure((code, msg) -> {
            if (firstCode[0] < 0) firstCode[0] = code;
            throw new IllegalStateException("exit " + code);
        });
        try {
            Class.forName("org.apache.kafka.tools.TopicCommand").getMethod("main", String[].class)
                    .invoke(null, (Object) args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (firstCode[0] != 0) throw e;
        } finally {
            org.apache.kafka.common.utils.Exit.resetExitProcedure();
        }
    }

    static void dump(Map<String, String> a) throws Exception {
        String topic = req(a, "--topic");
        long timeoutMs = num(a, "--timeout-ms", 30000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        Properties p = consumerProps(a);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            while (true) {
                List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofMillis(5000));
                if (infos != null && !infos.isEmpty()) {
                    for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
                    break;
                }
                if (System.currentTimeMillis() > deadline) fail("timeout: topic " + topic + " not found");
                Thread.sleep(200);
            }
            // One partition at a time, each printed as soon as it is read: a topic of a long
            // soak holds hundreds of MB, more than the tool's heap.
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(timeoutMs));
            tps.sort(Comparator.comparingInt(TopicPartition::partition));
            for (TopicPartition tp : tps) {
                List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                while (c.position(tp) < end.get(tp)) {
                    if (System.currentTimeMillis() > deadline)
                        fail("timeout after " + timeoutMs + " ms; behind: " + tp + " at " + c.position(tp) + "/" + end.get(tp));
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200)))
                        if (r.offset() < end.get(tp)) out.add(r);
                }
                print(out);
            }
        }
    }

    static Properties consumerProps(Map<String, String> a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, req(a, "--bootstrap"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, a.getOrDefault("--isolation", "read_committed"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(4 << 20));
        return p;
    }

    static void consume(Map<String, String> a) throws Exception {
        String topic = req(a, "--topic");
        String group = req(a, "--group");
        long max = num(a, "--max", Long.MAX_VALUE);
        long timeoutMs = num(a, "--timeout-ms", 30000);
        long idleMs = num(a, "--idle-ms", 1000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        Properties p = consumerProps(a);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "workload-consume");
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long idleSince = -1;
            while (out.size() < max) {
                long now = System.currentTimeMillis();
                if (now > deadline) {
                    Set<TopicPartition> asg = c.assignment();
                    if (asg.isEmpty()) fail("timeout after " + timeoutMs + " ms: nothing assigned for " + topic);
                    StringBuilder sb = new StringBuilder("timeout after " + timeoutMs + " ms; read "
                            + out.size() + "; positions:");
                    Map<TopicPartition, Long> end = c.endOffsets(asg, Duration.ofMillis(5000));
                    for (TopicPartition tp : asg)
                        sb.append(' ').append(tp).append(" at ").append(c.position(tp)).append('/').append(end.get(tp));
                    fail(sb.toString());
                }
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    if (out.size() >= max) break;
                    out.add(r);
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!rs.isEmpty()) {
                    idleSince = -1;
                    continue;
                }
                Set<TopicPartition> asg = c.assignment();
                if (asg.isEmpty()) continue; // still joining the group
                Map<TopicPartition, Long> end = c.endOffsets(asg, Duration.ofMillis(timeoutMs));
                boolean atEnd = true;
                for (TopicPartition tp : asg) atEnd &= c.position(tp) >= end.get(tp);
                if (!atEnd) {
                    idleSince = -1;
                } else if (idleSince < 0) {
                    idleSince = now;
                    if (idleMs <= 0) break;
                } else if (now - idleSince >= idleMs) {
                    break;
                }
            }
            if (!next.isEmpty()) c.commitSync(next, Duration.ofMillis(timeoutMs));
        }
        print(out);
    }

    static void committed(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        Map<TopicPartition, OffsetAndMetadata> offsets;
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(p)) {
            offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        List<TopicPartition> tps = new ArrayList<>(offsets.keySet());
        tps.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        StringBuilder sb = new StringBuilder();
        for (TopicPartition tp : tps) {
            OffsetAndMetadata om = offsets.get(tp);
            if (om == null) continue;
            sb.append(tp.topic()).append('\t').append(tp.partition()).append('\t').append(om.offset()).append('\n');
        }
        System.out.print(sb);
        System.out.flush();
    }

    /** Prints records like `dump`, ordered by partition then offset. */
    static void print(List<ConsumerRecord<byte[], byte[]>> out) {
        out.sort(Comparator.comparingInt((ConsumerRecord<byte[], byte[]> r) -> r.partition())
                .thenComparingLong(ConsumerRecord::offset));
        Base64.Encoder b64 = Base64.getEncoder();
        java.io.PrintWriter w = new java.io.PrintWriter(new java.io.BufferedWriter(
                new java.io.OutputStreamWriter(System.out, java.nio.charset.StandardCharsets.UTF_8), 1 << 16));
        for (ConsumerRecord<byte[], byte[]> r : out) {
            w.append(String.valueOf(r.partition())).append('\t').append(String.valueOf(r.offset())).append('\t')
                    .append(String.valueOf(r.timestamp())).append('\t').append(r.timestampType().name).append('\t')
                    .append(r.key() == null ? "-" : b64.encodeToString(r.key())).append('\t')
                    .append(r.value() == null ? "-" : b64.encodeToString(r.value())).append('\t');
            boolean first = true;
            for (Header h : r.headers()) {
                if (!first) w.append(',');
                first = false;
                w.append(h.key()).append('=').append(h.value() == null ? "-" : b64.encodeToString(h.value()));
            }
            w.append('\n');
        }
        w.flush();
    }
}
