// Measuring tools for scripts/bench.sh, built on kafka-clients only (the driver compiles this
// file with javac against `scripts/kafka.sh classpath`; the tests/java tools are not touched).
//
// Every command taking --topic T also takes --topics K: then it works on the K topics T-0000,
// T-0001, ... instead of T alone.
//
//   create  --bootstrap B --topic T --partitions P
//   delete  --bootstrap B --regex R          delete every topic whose whole name matches R
//   count   --bootstrap B --topic T          print the sum of the topic's end offsets
//   fill    --bootstrap B --topic T --records R --size S
//       Writes R records of S bytes to every partition, each record its own batch (as a partition
//       with little traffic gets them): one record per partition per round, a flush per round.
//   watch   --bootstrap B --topic T --expect N --pid-file F [--broker-pids P1,P2]
//           [--isolation read_committed]
//           [--timeout-ms MS] [--tag k=v ...]
//       Prints "ready" once connected, then waits for F to hold "PID LAUNCH_EPOCH_MS" (written by
//       the driver right after it started the replicator). Polls the end offsets of T (which the
//       replicator creates) every few milliseconds (every 250 ms over many topics) until their sum
//       reaches N, and prints one JSON
//       line: first_ms / done_ms (since launch), CPU ticks of PID, of each broker pid and of the
//       whole machine at the first record and at the end, and PID's VmHWM. Exits 3 on timeout
//       (the JSON then has "timeout": true and the last count).
//   latency --bootstrap B --topic T --warmup-ms W --duration-ms D [--timeout-ms MS] [--tag k=v ...]
//       Waits for T, assigns all its partitions at their end, prints "ready", then for every record
//       takes now - CreateTime; records created during the first W ms are ignored, and it stops D ms
//       after the warm-up. Prints one JSON line with count, p50, p99, p999 and max in ms.
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Latency {
    static final Map<String, String> TAGS = new LinkedHashMap<>();

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) fail("usage: Latency create|delete|count|fill|watch|latency --bootstrap B ...");
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--") || i + 1 >= argv.length) fail("bad argument: " + k);
            String v = argv[++i];
            if (k.equals("--tag")) {
                int eq = v.indexOf('=');
                if (eq < 1) fail("--tag wants k=v: " + v);
                TAGS.put(v.substring(0, eq), v.substring(eq + 1));
            } else {
                a.put(k, v);
            }
        }
        switch (argv[0]) {
            case "create" -> create(a);
            case "delete" -> delete(a);
            case "count" -> System.out.println(count(a));
            case "fill" -> fill(a);
            case "watch" -> System.exit(watch(a));
            case "latency" -> latency(a);
            default -> fail("unknown command: " + argv[0]);
        }
    }

    static void fail(String msg) {
        System.err.println("Latency: " + msg);
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

    static Admin admin(Map<String, String> a) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, req(a, "--bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "bench-tool");
        return Admin.create(p);
    }

    /** The topics --topic / --topics name. */
    static List<String> names(Map<String, String> a) {
        String topic = req(a, "--topic");
        if (!a.containsKey("--topics")) return List.of(topic);
        List<String> names = new ArrayList<>();
        for (long i = 0; i < num(a, "--topics", 1); i++) names.add(String.format("%s-%04d", topic, i));
        return names;
    }

    static void create(Map<String, String> a) throws Exception {
        int partitions = (int) num(a, "--partitions", 1);
        List<String> names = names(a);
        try (Admin admin = admin(a)) {
            // A KRaft controller takes at most 10,000 records per operation.
            for (int i = 0; i < names.size(); i += 100) {
                List<NewTopic> ts = new ArrayList<>();
                for (String n : names.subList(i, Math.min(names.size(), i + 100))) {
                    ts.add(new NewTopic(n, partitions, (short) 1));
                }
                admin.createTopics(ts).all().get();
            }
        }
    }

    static void fill(Map<String, String> a) throws Exception {
        long rounds = num(a, "--records", 1);
        byte[] value = new byte[(int) num(a, "--size", 200)];
        // Topics just created take a moment to show in the metadata.
        List<TopicPartition> tps = awaitPartitions(a, names(a), 60_000);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, req(a, "--bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, "134217728");
        Random random = new Random(7);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long r = 0; r < rounds; r++) {
                for (TopicPartition tp : tps) {
                    for (int i = 0; i < value.length; i++) value[i] = (byte) ('a' + random.nextInt(26));
                    producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, value.clone()));
                }
                producer.flush();
            }
        }
    }

    static void delete(Map<String, String> a) throws Exception {
        Pattern re = Pattern.compile(req(a, "--regex"));
        try (Admin admin = admin(a)) {
            List<String> names = new ArrayList<>();
            for (String n : admin.listTopics(new ListTopicsOptions().listInternal(false)).names().get()) {
                if (re.matcher(n).matches() && !n.startsWith("__")) names.add(n);
            }
            if (!names.isEmpty()) admin.deleteTopics(names).all().get();
            System.out.println("deleted " + names.size());
        }
    }

    /** Partitions of the topics, or null while one of them does not exist. */
    static List<TopicPartition> partitions(Admin admin, List<String> topics) throws Exception {
        if (!admin.listTopics().names().get().containsAll(topics)) return null;
        List<TopicPartition> tps = new ArrayList<>();
        for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
            for (TopicPartitionInfo pi : d.partitions()) tps.add(new TopicPartition(d.name(), pi.partition()));
        }
        return tps;
    }

    /** Partitions of the topics once they all exist; fails after timeoutMs. */
    static List<TopicPartition> awaitPartitions(Map<String, String> a, List<String> topics, long timeoutMs)
            throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (Admin admin = admin(a)) {
            List<TopicPartition> tps;
            while ((tps = partitions(admin, topics)) == null) {
                if (System.currentTimeMillis() > deadline) fail("topic " + topics.get(0) + "... never appeared");
                Thread.sleep(20);
            }
            return tps;
        }
    }

    /** Partitions of those of the topics that exist. */
    static List<TopicPartition> existing(Admin admin, List<String> topics) throws Exception {
        Set<String> have = admin.listTopics().names().get();
        List<String> some = topics.stream().filter(have::contains).toList();
        return some.isEmpty() ? List.of() : partitions(admin, some);
    }

    static long endSum(Admin admin, List<TopicPartition> tps) throws Exception {
        return endSum(admin, tps, false);
    }

    /** The sum of the end offsets; with `committed`, of the last stable offsets (what a
     *  read_committed reader reaches: records of open transactions not yet, their commit
     *  markers once committed). */
    static long endSum(Admin admin, List<TopicPartition> tps, boolean committed) throws Exception {
        if (tps.isEmpty()) return 0;
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) req.put(tp, OffsetSpec.latest());
        var options = new ListOffsetsOptions(committed
                ? org.apache.kafka.common.IsolationLevel.READ_COMMITTED
                : org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED);
        long sum = 0;
        for (var e : admin.listOffsets(req, options).all().get().values()) sum += e.offset();
        return sum;
    }

    static long count(Map<String, String> a) throws Exception {
        try (Admin admin = admin(a)) {
            return endSum(admin, existing(admin, names(a)));
        }
    }

    /** utime + stime of a process in clock ticks, or -1 if it is gone. */
    static long cpuTicks(long pid) {
        try {
            String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        } catch (Exception e) {
            return -1;
        }
    }

    /** [busy, total] clock ticks of the whole machine. */
    static long[] machineTicks() {
        try {
            String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
            long total = 0;
            for (int i = 1; i < f.length && i <= 8; i++) total += Long.parseLong(f[i]);
            long idle = Long.parseLong(f[4]) + Long.parseLong(f[5]);
            return new long[] {total - idle, total};
        } catch (Exception e) {
            return new long[] {-1, -1};
        }
    }

    static long vmHwmKib(long pid) {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (l.startsWith("VmHWM:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        } catch (Exception e) {
            // gone
        }
        return -1;
    }

    static final class Sample {
        long replicator;
        long[] brokers;
        long[] machine;

        Sample(long pid, long[] brokerPids) {
            replicator = cpuTicks(pid);
            brokers = new long[brokerPids.length];
            for (int i = 0; i < brokerPids.length; i++) brokers[i] = cpuTicks(brokerPids[i]);
            machine = machineTicks();
        }
    }

    static int watch(Map<String, String> a) throws Exception {
        List<String> topics = names(a);
        long expect = num(a, "--expect", 0);
        long timeoutMs = num(a, "--timeout-ms", 900_000);
        // read_committed: done once the records are committed (a transactional replicator).
        boolean committed = a.getOrDefault("--isolation", "read_uncommitted").equals("read_committed");
        Path pidFile = Path.of(req(a, "--pid-file"));
        String bp = a.getOrDefault("--broker-pids", "");
        long[] brokerPids = bp.isEmpty() ? new long[0]
                : Arrays.stream(bp.split(",")).mapToLong(Long::parseLong).toArray();
        try (Admin admin = admin(a)) {
            admin.listTopics().names().get(); // connected, metadata loaded
            System.out.println("ready");
            System.out.flush();
            String[] launch;
            while (true) {
                if (Files.exists(pidFile)) {
                    launch = Files.readString(pidFile).trim().split("\\s+");
                    if (launch.length == 2) break;
                }
                Thread.sleep(2);
            }
            long pid = Long.parseLong(launch[0]);
            long launchMs = Long.parseLong(launch[1]);
            Sample start = new Sample(pid, brokerPids);
            long deadline = launchMs + timeoutMs;
            List<TopicPartition> tps = List.of();
            long firstMs = -1, have = 0, listedMs = 0;
            Sample first = null;
            boolean timedOut = false;
            while (true) {
                long now = System.currentTimeMillis();
                if (now > deadline) {
                    timedOut = true;
                    break;
                }
                // The replicator creates the topics: list them until all are there.
                long listed = tps.stream().map(TopicPartition::topic).distinct().count();
                try {
                    if (listed < topics.size() && (topics.size() == 1 || now - listedMs >= 500)) {
                        tps = existing(admin, topics);
                        listedMs = now;
                    }
                    have = endSum(admin, tps, committed);
                } catch (java.util.concurrent.ExecutionException e) {
                    // A broker busy with thousands of new topics may time a call out: ask again.
                    System.err.println("watch: " + e.getCause());
                    Thread.sleep(250);
                    continue;
                }
                if (have > 0 && firstMs < 0) {
                    firstMs = System.currentTimeMillis() - launchMs;
                    first = new Sample(pid, brokerPids);
                }
                if (have >= expect) break;
                if (cpuTicks(pid) < 0) break; // the replicator died: report what we have
                Thread.sleep(topics.size() > 1 ? 250 : firstMs < 0 ? 5 : 20);
            }
            long doneMs = System.currentTimeMillis() - launchMs;
            Sample end = new Sample(pid, brokerPids);
            if (first == null) first = end;
            StringBuilder j = jsonStart();
            j.append(",\"first_ms\":").append(firstMs).append(",\"done_ms\":").append(doneMs);
            j.append(",\"have\":").append(have).append(",\"expect\":").append(expect);
            j.append(",\"complete\":").append(have >= expect).append(",\"timeout\":").append(timedOut);
            j.append(",\"cpu_ticks_total\":").append(end.replicator);
            j.append(",\"cpu_ticks_startup\":").append(first.replicator - start.replicator);
            j.append(",\"cpu_ticks_window\":").append(end.replicator - first.replicator);
            j.append(",\"broker_ticks_window\":[");
            for (int i = 0; i < brokerPids.length; i++) {
                if (i > 0) j.append(',');
                j.append(end.brokers[i] - first.brokers[i]);
            }
            j.append("],\"machine_busy_ticks_window\":").append(end.machine[0] - first.machine[0]);
            j.append(",\"machine_total_ticks_window\":").append(end.machine[1] - first.machine[1]);
            j.append(",\"vm_hwm_kib\":").append(vmHwmKib(pid)).append('}');
            System.out.println(j);
            return have >= expect ? 0 : 3;
        }
    }

    static StringBuilder jsonStart() {
        StringBuilder j = new StringBuilder("{");
        boolean firstTag = true;
        for (var e : TAGS.entrySet()) {
            if (!firstTag) j.append(',');
            firstTag = false;
            j.append('"').append(e.getKey()).append("\":");
            String v = e.getValue();
            if (v.matches("-?[0-9]+(\\.[0-9]+)?")) j.append(v);
            else j.append('"').append(v.replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
        }
        if (firstTag) j.append("\"tool\":\"Latency\"");
        return j;
    }

    static void latency(Map<String, String> a) throws Exception {
        long warmupMs = num(a, "--warmup-ms", 5000);
        long durationMs = num(a, "--duration-ms", 20000);
        List<TopicPartition> tps = awaitPartitions(a, List.of(req(a, "--topic")), num(a, "--timeout-ms", 120_000));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, req(a, "--bootstrap"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        long[] lat = new long[1 << 20];
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            c.seekToEnd(tps);
            for (TopicPartition tp : tps) c.position(tp);
            long t0 = System.currentTimeMillis();
            long from = t0 + warmupMs, until = from + durationMs;
            System.out.println("ready");
            System.out.flush();
            while (System.currentTimeMillis() < until) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    long now = System.currentTimeMillis();
                    if (r.timestamp() < from || r.timestamp() >= until) continue;
                    if (n == lat.length) lat = Arrays.copyOf(lat, n * 2);
                    lat[n++] = now - r.timestamp();
                }
            }
            // Records created before `until` may still be in flight: wait for them a little.
            long grace = System.currentTimeMillis() + 5000;
            while (System.currentTimeMillis() < grace) {
                var rs = c.poll(Duration.ofMillis(200));
                boolean late = false;
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    long now = System.currentTimeMillis();
                    if (r.timestamp() < from || r.timestamp() >= until) continue;
                    late = true;
                    if (n == lat.length) lat = Arrays.copyOf(lat, n * 2);
                    lat[n++] = now - r.timestamp();
                }
                if (!late && rs.isEmpty()) break;
            }
        }
        long[] s = Arrays.copyOf(lat, n);
        Arrays.sort(s);
        StringBuilder j = jsonStart();
        j.append(",\"count\":").append(n);
        j.append(",\"p50_ms\":").append(pct(s, 0.50)).append(",\"p99_ms\":").append(pct(s, 0.99));
        j.append(",\"p999_ms\":").append(pct(s, 0.999));
        j.append(",\"max_ms\":").append(n == 0 ? -1 : s[n - 1]).append('}');
        System.out.println(j);
    }

    static long pct(long[] sorted, double q) {
        if (sorted.length == 0) return -1;
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
