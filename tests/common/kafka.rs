//! Real Apache Kafka brokers for integration tests, driven through `scripts/kafka.sh`.
//!
//! [`clusters`] starts two single-node KRaft clusters, `source` and `target`, once per test
//! binary (in parallel, on free loopback ports, data under a temporary directory). The brokers
//! watch the test process and stop when it exits. Records are written and read back with the
//! Java workload tool (`tests/java/Workload.java`, kafka-clients only) and Kafka's own tools;
//! each call is one JVM run of about two seconds, so tests should batch their work.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// One running (or stopped) single-node cluster.
#[derive(Debug)]
pub struct Cluster {
    pub name: String,
    /// `127.0.0.1:PORT`; the KRaft controller listens on PORT+1.
    pub bootstrap: String,
    pub data_dir: PathBuf,
    extra: Vec<String>,
}

impl Cluster {
    /// Starts a new cluster on free ports; `extra` are broker `key=value` settings (they
    /// override the defaults, e.g. `advertised.listeners=PLAINTEXT://127.0.0.1:PROXY_PORT`).
    pub fn start(name: &str, extra: &[&str]) -> Cluster {
        fetch();
        let port = free_port_pair();
        let c = Cluster {
            name: name.to_string(),
            bootstrap: format!("127.0.0.1:{port}"),
            data_dir: root().join(format!("{name}-{port}")),
            extra: extra.iter().map(|s| s.to_string()).collect(),
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

    /// Starts the broker again on the same port and data directory (after [`Cluster::stop`]).
    pub fn start_again(&self) {
        let port = self.port().to_string();
        let mut args = vec!["start", &self.name, &port, path_str(&self.data_dir)];
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&path).args(args).stdin(Stdio::null());
    cmd.env("STRAIT_KAFKA_WATCH_PID", std::process::id().to_string());
    if std::env::var_os("STRAIT_KEEP_KAFKA").is_none() {
        cmd.env("STRAIT_KAFKA_WATCH_CLEAN", "1");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
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
