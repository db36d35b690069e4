//! Real Apache Kafka brokers for integration tests, driven through `scripts/kafka.sh`.
//!
//! [`clusters`] starts two single-node KRaft clusters, `source` and `target`, once per test
//! binary (in parallel, on free loopback ports, data under a temporary directory); a test that
//! needs replicas adds broker-only nodes to a cluster of its own ([`Cluster::join`]). The
//! brokers watch the test process and stop when it exits. Records are written and read back
//! with the Java workload tool (`tests/java/Workload.java`, kafka-clients only) and Kafka's own
//! tools; each call is one JVM run of about two seconds, so tests should batch their work.
//!
//! For comparisons with Apache Kafka's MirrorMaker 2: [`consume`] is a real consumer-group
//! member, the `translate_offsets`/`replication_hops`/... wrappers ask the real
//! `connect-mirror-client` (`tests/java/Mm2Client.java`), and [`Mm2`] runs MirrorMaker 2 itself
//! (`scripts/mm2.sh`).

use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One running (or stopped) node: the combined broker+controller node 1 of a cluster, or a
/// broker-only node that joined one.
#[derive(Debug)]
pub struct Cluster {
    pub name: String,
    /// `127.0.0.1:PORT`; the KRaft controller of node 1 listens on PORT+1.
    pub bootstrap: String,
    pub data_dir: PathBuf,
    extra: Vec<String>,
    /// Of a broker-only node: its node id and the data directory of the node 1 it joined.
    joined: Option<(u32, PathBuf)>,
}

impl Cluster {
    /// Starts a new cluster on free ports; `extra` are broker `key=value` settings (they
    /// override the defaults, e.g. `advertised.listeners=PLAINTEXT://127.0.0.1:PROXY_PORT`).
    pub fn start(name: &str, extra: &[&str]) -> Cluster {
        Cluster::start_on(name, free_port_pair(), extra)
    }

    /// [`Cluster::start`] on `port` (and `port + 1` for the controller), for settings that name
    /// the port (`tests/common/proxy.rs` adds a listener behind a fault proxy).
    pub fn start_on(name: &str, port: u16, extra: &[&str]) -> Cluster {
        fetch();
        let c = Cluster {
            name: name.to_string(),
            bootstrap: format!("127.0.0.1:{port}"),
            data_dir: root().join(format!("{name}-{port}")),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            joined: None,
        };
        c.start_again();
        c
    }

    /// Starts a broker-only node `node_id` (2, 3, ...) in this node's cluster, on a free port
    /// (`scripts/kafka.sh join`): the same cluster id, this node's controller as its quorum.
    /// The cluster's `bootstrap` stays this node's; the returned one is the new broker alone.
    pub fn join(&self, node_id: u32, extra: &[&str]) -> Cluster {
        let port = free_port_pair();
        let name = format!("{}-{node_id}", self.name);
        let c = Cluster {
            bootstrap: format!("127.0.0.1:{port}"),
            data_dir: root().join(format!("{name}-{port}")),
            name,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            joined: Some((node_id, self.data_dir.clone())),
        };
        c.start_again();
        c
    }

    /// The PLAINTEXT port.
    pub fn port(&self) -> u16 {
        self.bootstrap.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Stops the broker (SIGTERM, SIGKILL after 20 s); the data stays.
    pub fn stop(&self) {
        script(&["stop", path_str(&self.data_dir)]);
    }

    /// SIGKILL: the broker dies at once, without a clean shutdown; the data stays (what it had
    /// written, not what it had acknowledged only from memory: the page cache survives).
    pub fn kill9(&self) {
        let pidfile = self.data_dir.join("broker.pid");
        let Ok(pid) = std::fs::read_to_string(&pidfile) else {
            return;
        };
        let pid = pid.trim();
        let _ = Command::new("kill").args(["-KILL", pid]).status();
        let stat = format!("/proc/{pid}/stat");
        let gone =
            || std::fs::read_to_string(&stat).map_or(true, |s| s.split(' ').nth(2) == Some("Z"));
        while !gone() {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(pidfile);
    }

    /// Starts the broker again on the same port and data directory (after [`Cluster::stop`]).
    pub fn start_again(&self) {
        let port = self.port().to_string();
        let command = if self.joined.is_some() {
            "join"
        } else {
            "start"
        };
        let mut args = vec![command, &self.name, &port, path_str(&self.data_dir)];
        let id;
        if let Some((node_id, node1)) = &self.joined {
            id = node_id.to_string();
            args.extend([path_str(node1), id.as_str()]);
        }
        args.extend(self.extra.iter().map(String::as_str));
        script(&args);
    }
}

/// The `source` and `target` clusters shared by all tests of this binary.
pub fn clusters() -> &'static [Cluster; 2] {
    static CLUSTERS: OnceLock<[Cluster; 2]> = OnceLock::new();
    CLUSTERS.get_or_init(|| {
        fetch();
        let source = std::thread::spawn(|| Cluster::start("source", &[]));
        let target = Cluster::start("target", &[]);
        [source.join().expect("starting the source cluster"), target]
    })
}

/// Runs a Java main class (Kafka tool or `Workload`) on the Kafka classpath; panics with its
/// stderr when it fails.
pub fn tool(class: &str, args: &[&str]) -> Output {
    let mut all = vec!["tool", class];
    all.extend_from_slice(args);
    script(&all)
}

/// Creates `topic` with `partitions` partitions, replication factor 1 and topic `configs`.
pub fn create_topic(c: &Cluster, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let partitions = partitions.to_string();
    let configs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec![
        "--bootstrap-server",
        &c.bootstrap,
        "--create",
        "--topic",
        topic,
    ];
    args.extend(["--partitions", &partitions, "--replication-factor", "1"]);
    for kv in &configs {
        args.extend(["--config", kv]);
    }
    tool("org.apache.kafka.tools.TopicCommand", &args);
}

/// Creates `topic` with one partition on the brokers `replicas` (the first is the preferred
/// leader) and topic `configs`.
pub fn create_replicated_topic(
    c: &Cluster,
    topic: &str,
    replicas: &[u32],
    configs: &[(&str, &str)],
) {
    let assignment: Vec<String> = replicas.iter().map(u32::to_string).collect();
    let assignment = assignment.join(":");
    let configs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec![
        "--bootstrap-server",
        &c.bootstrap,
        "--create",
        "--topic",
        topic,
    ];
    args.extend(["--replica-assignment", &assignment]);
    for kv in &configs {
        args.extend(["--config", kv]);
    }
    tool("org.apache.kafka.tools.TopicCommand", &args);
}

/// The leader of partition `partition` of `topic` as the controller has it
/// (`TopicCommand --describe`): `None` while it has none.
pub fn leader(c: &Cluster, topic: &str, partition: i32) -> Option<u32> {
    let out = tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &c.bootstrap,
            "--describe",
            "--topic",
            topic,
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(&format!("Partition: {partition}\t")))
        .unwrap_or_else(|| panic!("partition {partition} missing from:\n{text}"));
    let field = line.split('\t').find_map(|f| f.strip_prefix("Leader: "));
    field.and_then(|l| l.parse().ok())
}

/// A topic (or group, or transactional id) name unique to this test process and call.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// What `Workload produce` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub produced: u64,
    pub committed: u64,
    pub aborted: u64,
}

/// Runs `Workload produce --bootstrap <c>` with `args` (e.g. `["--topic", t, "--count", "100"]`;
/// see `tests/java/Workload.java` for the options and the exact records written).
pub fn produce(c: &Cluster, args: &[&str]) -> Produced {
    let mut all = vec!["produce", "--bootstrap", &c.bootstrap];
    all.extend_from_slice(args);
    let out = tool("Workload", &all);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let n: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    match n[..] {
        [produced, committed, aborted] => Produced {
            produced,
            committed,
            aborted,
        },
        _ => panic!("unexpected Workload produce output: {text}"),
    }
}

/// Record `i` of `Workload produce`: `key-<i % key_space>`.
pub fn workload_key(i: u64, key_space: u64) -> Vec<u8> {
    format!("key-{}", i % key_space).into_bytes()
}

/// Record `i` of `Workload produce`: `value-<i>-` padded to `size` bytes with `'a' + i % 26`.
pub fn workload_value(i: u64, size: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    if v.len() < size {
        v.resize(size, b'a' + (i % 26) as u8);
    }
    v
}

/// One record as read back by `Workload dump`.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpedRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    /// `CreateTime` or `LogAppendTime`.
    pub timestamp_type: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// All records of `topic` (read_committed, up to the end offsets at the time of the call),
/// ordered by partition then offset.
pub fn dump(c: &Cluster, topic: &str) -> Vec<DumpedRecord> {
    dump_with(c, topic, &[])
}

/// [`dump`] with extra `Workload dump` options, e.g. `["--isolation", "read_uncommitted"]`.
pub fn dump_with(c: &Cluster, topic: &str, extra: &[&str]) -> Vec<DumpedRecord> {
    let mut all = vec!["dump", "--bootstrap", &c.bootstrap, "--topic", topic];
    all.extend_from_slice(extra);
    let out = tool("Workload", &all);
    String::from_utf8(out.stdout)
        .expect("dump output is ASCII")
        .lines()
        .map(parse_dump_line)
        .collect()
}

/// The values of `topic`'s records ([`dump`]) by partition, in offset order.
pub fn values_by_partition(c: &Cluster, topic: &str) -> HashMap<i32, Vec<Vec<u8>>> {
    let mut out: HashMap<i32, Vec<Vec<u8>>> = HashMap::new();
    for r in dump(c, topic) {
        out.entry(r.partition).or_default().push(r.value.unwrap());
    }
    out
}

/// Waits until the log cleaner has compacted `topic` (a compacted topic whose segments roll
/// quickly) so far that `done` holds for its records ([`dump`]), which it returns. Every 2 s
/// one more record (a key of `key_space`) starts a new segment, so that the cleaner can take
/// the previous one.
pub fn wait_compacted(
    c: &Cluster,
    topic: &str,
    key_space: &str,
    timeout: Duration,
    done: impl Fn(&[DumpedRecord]) -> bool,
) -> Vec<DumpedRecord> {
    let deadline = Instant::now() + timeout;
    loop {
        let records = dump(c, topic);
        if done(&records) {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} was not compacted within {timeout:?}"
        );
        produce(
            c,
            &["--topic", topic, "--count", "1", "--key-space", key_space],
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The names of all topics on `c` (`TopicCommand --list`).
pub fn list_topics(c: &Cluster) -> HashSet<String> {
    let out = tool(
        "org.apache.kafka.tools.TopicCommand",
        &["--bootstrap-server", &c.bootstrap, "--list"],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `Workload consume`: joins consumer group `group` on `topic` (auto.offset.reset=earliest,
/// read_committed), reads at most `max` records (fewer if it reaches the end offsets and nothing
/// more arrives within a second), commits the offset after the last record it read in each
/// partition it read from, and leaves the group. Returns what it read, ordered by partition then
/// offset.
pub fn consume(c: &Cluster, topic: &str, group: &str, max: usize) -> Vec<DumpedRecord> {
    consume_with(c, topic, group, max, &[])
}

/// [`consume`] with extra `Workload consume` options (`--isolation`, `--timeout-ms`,
/// `--idle-ms`).
pub fn consume_with(
    c: &Cluster,
    topic: &str,
    group: &str,
    max: usize,
    extra: &[&str],
) -> Vec<DumpedRecord> {
    let max = max.to_string();
    let mut all = vec!["consume", "--bootstrap", &c.bootstrap, "--topic", topic];
    all.extend(["--group", group, "--max", &max]);
    all.extend_from_slice(extra);
    let out = tool("Workload", &all);
    String::from_utf8(out.stdout)
        .expect("consume output is ASCII")
        .lines()
        .map(parse_dump_line)
        .collect()
}

/// The committed offsets of consumer group `group`: `(topic, partition, offset)`, sorted
/// (empty when the group has none).
pub fn committed_offsets(c: &Cluster, group: &str) -> Vec<(String, i32, i64)> {
    let out = tool(
        "Workload",
        &["committed", "--bootstrap", &c.bootstrap, "--group", group],
    );
    parse_offset_lines(&out.stdout)
}

/// The end offsets of `topic`'s partitions, `(partition, offset)` sorted by partition; empty if
/// the topic does not exist (yet).
pub fn end_offsets(c: &Cluster, topic: &str) -> Vec<(i32, i64)> {
    let out = script_output(&[
        "tool",
        "org.apache.kafka.tools.GetOffsetShell",
        "--bootstrap-server",
        &c.bootstrap,
        "--topic",
        topic,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(
            stderr.contains("Could not match any topic-partitions"),
            "GetOffsetShell {topic} failed: {stderr}"
        );
        return Vec::new();
    }
    let mut v: Vec<(i32, i64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut f = l.rsplitn(3, ':');
            let (o, p) = (f.next().unwrap(), f.next().expect("topic:partition:offset"));
            (p.parse().unwrap(), o.parse().unwrap())
        })
        .collect();
    v.sort_unstable();
    v
}

fn parse_offset_lines(stdout: &[u8]) -> Vec<(String, i32, i64)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad offset line: {l:?}");
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// Runs `Mm2Client CMD --bootstrap <c> ARGS` (the real `connect-mirror-client`, see
/// `tests/java/Mm2Client.java`) and returns its output lines.
pub fn mm2_client(c: &Cluster, cmd: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec![cmd, "--bootstrap", &c.bootstrap];
    all.extend_from_slice(args);
    let out = tool("Mm2Client", &all);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `RemoteClusterUtils.translateOffsets` on `target` for `group` as checkpointed from
/// `source_alias` (30 s timeout): `(target topic, partition, offset)`, sorted.
pub fn translate_offsets(
    target: &Cluster,
    source_alias: &str,
    group: &str,
) -> Vec<(String, i32, i64)> {
    let mut all = vec!["translate", "--bootstrap", &target.bootstrap];
    all.extend(["--source-alias", source_alias, "--group", group]);
    parse_offset_lines(&tool("Mm2Client", &all).stdout)
}

/// `RemoteClusterUtils.replicationHops(alias)` on `c` (-1 when `alias` is not upstream).
pub fn replication_hops(c: &Cluster, alias: &str) -> i32 {
    let lines = mm2_client(c, "hops", &["--alias", alias]);
    lines
        .first()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("bad hops output {lines:?}"))
}

/// `RemoteClusterUtils.upstreamClusters` on `c`, sorted.
pub fn upstream_clusters(c: &Cluster) -> Vec<String> {
    mm2_client(c, "upstream", &[])
}

/// `RemoteClusterUtils.heartbeatTopics` on `c`, sorted.
pub fn heartbeat_topics(c: &Cluster) -> Vec<String> {
    mm2_client(c, "heartbeats", &[])
}

/// `RemoteClusterUtils.checkpointTopics` on `c`, sorted.
pub fn checkpoint_topics(c: &Cluster) -> Vec<String> {
    mm2_client(c, "checkpoints", &[])
}

/// `MirrorClient.remoteTopics` on `c`, sorted.
pub fn remote_topics(c: &Cluster) -> Vec<String> {
    mm2_client(c, "remote-topics", &[])
}

/// Apache Kafka's MirrorMaker 2 in dedicated mode (`scripts/mm2.sh run`), killed on drop.
///
/// Its log (INFO for `org.apache.kafka.connect.mirror`, WARN otherwise, plus the JVM's own
/// output) goes to a file in a temporary directory. Start-up takes about 8 s when the config
/// sets `plugin.discovery = service_load` at the top level and for every cluster alias
/// (`<alias>.plugin.discovery`), and 30 s or more without (Connect then scans the whole
/// classpath for plugins, once per herder). Each instance joins Connect's worker group
/// `<source alias>-mm2` and uses the topics `mm2-{configs,offsets,status}.<source alias>.internal`
/// on the target: instances that run at the same time against the same clusters need distinct
/// aliases, and a later instance with the same aliases starts from the earlier one's state.
pub struct Mm2 {
    child: Option<Child>,
    pub config: PathBuf,
    pub log_path: PathBuf,
    _dir: tempfile::TempDir,
}

/// An `mm2.properties` for MirrorMaker 2 (dedicated mode) and strait alike: flow `<alias>->t`
/// from `source` to `target` for the topics `topics` matches (MM2 instances that run at once
/// need distinct source aliases: each is a Connect group of its own), replication factors of 1, checkpoints,
/// group offset sync, heartbeats and topic refresh every second, Connect's fast plugin
/// discovery; then the `extra` lines.
pub fn mm2_file(
    alias: &str,
    source: &Cluster,
    target: &Cluster,
    topics: &str,
    extra: &[&str],
) -> String {
    let mut text = format!(
        "clusters = {alias}, t
{alias}.bootstrap.servers = {}
t.bootstrap.servers = {}
{alias}->t.enabled = true
{alias}->t.topics = {topics}
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
config.storage.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
emit.checkpoints.interval.seconds = 1
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 1
refresh.groups.interval.seconds = 1
emit.heartbeats.interval.seconds = 1
# The source's `heartbeats` topic may appear after MM2 first lists the source topics.
refresh.topics.interval.seconds = 1
# Start-up in seconds rather than half a minute: no classpath scan for Connect plugins.
plugin.discovery = service_load
{alias}.plugin.discovery = service_load
t.plugin.discovery = service_load
",
        source.bootstrap, target.bootstrap
    );
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The keys of [`mm2_file`] that only MM2's Connect worker reads: strait names each in a
/// warning.
pub const MM2_WORKER_KEYS: [&str; 3] = [
    "storage.replication.factor",
    "plugin.discovery",
    "refresh.groups.interval.seconds",
];

impl Mm2 {
    /// Writes `properties_text` to `mm2.properties` and starts MirrorMaker 2 on it (-Xmx512m).
    pub fn start(properties_text: &str) -> Mm2 {
        Mm2::start_with(properties_text, &[])
    }

    /// [`Mm2::start`] with JVM options (which replace the default `-Xmx512m`).
    pub fn start_with(properties_text: &str, jvm_opts: &[&str]) -> Mm2 {
        fetch();
        let dir = tempfile::Builder::new()
            .prefix("strait-mm2-")
            .tempdir()
            .expect("temp dir");
        let config = dir.path().join("mm2.properties");
        std::fs::write(&config, properties_text).unwrap();
        let log_path = dir.path().join("mm2.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mm2.sh");
        let child = Command::new("bash")
            .arg(&script)
            .arg("run")
            .arg(&config)
            .args(jvm_opts)
            .env("MM2_LOG", &log_path)
            .env("STRAIT_KAFKA_WATCH_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        Mm2 {
            child: Some(child),
            config,
            log_path,
            _dir: dir,
        }
    }

    /// The MirrorMaker JVM's pid (`mm2.sh` execs java).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Panics with the log if MirrorMaker has exited.
    pub fn assert_running(&mut self) {
        if let Some(c) = self.child.as_mut() {
            if let Some(status) = c.try_wait().unwrap() {
                panic!("MirrorMaker 2 exited ({status}):\n{}", self.log());
            }
        }
    }

    /// Waits until the log contains `needle`; panics with the log after `timeout` or if
    /// MirrorMaker exits.
    pub fn wait_log(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            self.assert_running();
            assert!(
                Instant::now() < deadline,
                "MirrorMaker 2 did not log {needle:?} within {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGKILL: no clean stop, no last commit of its source positions.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then SIGKILL if it has not stopped within 30 s.
    pub fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Mm2 {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn parse_dump_line(line: &str) -> DumpedRecord {
    let f: Vec<&str> = line.split('\t').collect();
    assert_eq!(f.len(), 7, "bad dump line: {line:?}");
    let headers = if f[6].is_empty() {
        Vec::new()
    } else {
        f[6].split(',')
            .map(|h| {
                let (k, v) = h
                    .split_once('=')
                    .unwrap_or_else(|| panic!("bad header in {line:?}"));
                (k.to_string(), opt_b64(v))
            })
            .collect()
    };
    DumpedRecord {
        partition: f[0].parse().unwrap(),
        offset: f[1].parse().unwrap(),
        timestamp: f[2].parse().unwrap(),
        timestamp_type: f[3].to_string(),
        key: opt_b64(f[4]),
        value: opt_b64(f[5]),
        headers,
    }
}

/// `-` is null, anything else standard base64.
fn opt_b64(s: &str) -> Option<Vec<u8>> {
    (s != "-").then(|| base64_decode(s))
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut out, mut acc, mut bits) = (Vec::with_capacity(s.len() * 3 / 4), 0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .unwrap_or_else(|| panic!("bad base64 {s:?}"));
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Downloads the Kafka jars and builds the Java tools (idempotent, fast when done).
pub fn fetch() {
    static FETCHED: OnceLock<()> = OnceLock::new();
    FETCHED.get_or_init(|| {
        script(&["fetch"]);
    });
}

/// Runs `scripts/kafka.sh ARGS`; panics with its output when it fails.
fn script(args: &[&str]) -> Output {
    let out = script_output(args);
    if !out.status.success() {
        panic!(
            "kafka.sh {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Runs `scripts/kafka.sh ARGS` and returns its output, whether it failed or not.
fn script_output(args: &[&str]) -> Output {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&path).args(args).stdin(Stdio::null());
    cmd.env("STRAIT_KAFKA_WATCH_PID", std::process::id().to_string());
    if std::env::var_os("STRAIT_KEEP_KAFKA").is_none() {
        cmd.env("STRAIT_KAFKA_WATCH_CLEAN", "1");
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()))
}

/// The directory that holds every cluster's data, kept for the life of the process (the
/// brokers' watchdogs remove it after the process exits, unless `STRAIT_KEEP_KAFKA` is set).
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("strait-kafka-")
            .tempdir()
            .expect("temp dir");
        let path = dir.path().to_path_buf();
        std::mem::forget(dir);
        path
    })
}

/// A port P such that P and P+1 are free on 127.0.0.1, below the usual ephemeral range so that
/// client sockets do not take them before the broker binds.
pub fn free_port_pair() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() % 1000) as u16 * 20;
    for _ in 0..1000 {
        let port = 12000 + (seed + NEXT.fetch_add(2, Ordering::Relaxed)) % 20000;
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 1) {
            return port;
        }
    }
    panic!("no free port pair found");
}

/// A free port on 127.0.0.1 (for proxies and the like), from the same range.
pub fn free_port() -> u16 {
    free_port_pair()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp dir path is UTF-8")
}
