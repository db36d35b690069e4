// MirrorMaker 2 client queries for strait's tests, through the real connect-mirror-client jar
// (RemoteClusterUtils / MirrorClient), the way MM2 users read a target cluster. Compiled with
// Workload by scripts/kafka.sh.
//
//   translate --bootstrap TARGET --source-alias A --group G [--timeout-ms MS]
//             RemoteClusterUtils.translateOffsets: "topic \t partition \t offset" lines
//   hops --bootstrap B --alias A     RemoteClusterUtils.replicationHops: one number (-1: none)
//   upstream --bootstrap B           RemoteClusterUtils.upstreamClusters, one per line
//   heartbeats --bootstrap B         RemoteClusterUtils.heartbeatTopics, one per line
//   checkpoints --bootstrap B        RemoteClusterUtils.checkpointTopics, one per line
//   remote-topics --bootstrap B [--source-alias A]
//                                    MirrorClient.remoteTopics (of alias A), one per line
//
// Every command takes any number of `--property key=value` client settings (for example
// replication.policy.class or replication.policy.separator). Lines are sorted.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Mm2Client {
    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            fail("usage: Mm2Client translate|hops|upstream|heartbeats|checkpoints|remote-topics"
                    + " --bootstrap B ...");
        }
        Map<String, String> a = new HashMap<>();
        Map<String, Object> props = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--")) fail("unexpected argument: " + k);
            if (i + 1 >= argv.length) fail("missing value for " + k);
            String v = argv[++i];
            if (k.equals("--property")) {
                int eq = v.indexOf('=');
                if (eq <= 0) fail("--property must be key=value: " + v);
                props.put(v.substring(0, eq), v.substring(eq + 1));
            } else {
                a.put(k, v);
            }
        }
        props.put("bootstrap.servers", req(a, "--bootstrap"));
        switch (argv[0]) {
            case "translate" -> {
                long timeoutMs = Long.parseLong(a.getOrDefault("--timeout-ms", "30000"));
                Map<TopicPartition, OffsetAndMetadata> offsets = RemoteClusterUtils.translateOffsets(
                        props, req(a, "--source-alias"), req(a, "--group"), Duration.ofMillis(timeoutMs));
                List<String> lines = new ArrayList<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    lines.add(e.getKey().topic() + "\t" + e.getKey().partition() + "\t" + e.getValue().offset());
                }
                lines.sort(Comparator.comparing((String l) -> l.substring(0, l.indexOf('\t')))
                        .thenComparingInt(l -> Integer.parseInt(l.split("\t")[1])));
                print(lines);
            }
            case "hops" -> print(List.of(String.valueOf(
                    RemoteClusterUtils.replicationHops(props, req(a, "--alias")))));
            case "upstream" -> print(RemoteClusterUtils.upstreamClusters(props));
            case "heartbeats" -> print(RemoteClusterUtils.heartbeatTopics(props));
            case "checkpoints" -> print(RemoteClusterUtils.checkpointTopics(props));
            case "remote-topics" -> {
                try (MirrorClient client = new MirrorClient(props)) {
                    String alias = a.get("--source-alias");
                    print(alias == null ? client.remoteTopics() : client.remoteTopics(alias));
                }
            }
            default -> fail("unknown command: " + argv[0]);
        }
    }

    static void print(Collection<String> lines) {
        StringBuilder sb = new StringBuilder();
        for (String l : lines instanceof List ? lines : new TreeSet<>(lines)) sb.append(l).append('\n');
        System.out.print(sb);
        System.out.flush();
    }

    static void fail(String msg) {
        System.err.println("Mm2Client: " + msg);
        System.exit(2);
    }

    static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) fail("missing " + k);
        return v;
    }
}
