//! The built `strait` binary as tests run it: a config file in a temporary directory, the
//! process with its log captured, SIGTERM and SIGKILL, and waiting on what it wrote, read
//! through strait's own raw reader (`kafka::log_reader::read_partition`), which needs no JVM.
//!
//! strait logs JSON (`--log-format json`) and a [`Strait`] checks its log when dropped: every
//! WARN or ERROR line (and any line that is not a JSON event, e.g. a panic) fails the test
//! unless it contains one of the patterns given to [`Strait::allow`]. The check is skipped
//! when the test is already panicking, so the first failure is the one reported.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use strait::batch::RawBatch;
use strait::kafka::TopicPartition;

use super::kafka::Cluster;

/// WARNs of a strait that loses its target for longer than the request timeout: it cannot
/// dial the broker, requests in flight time out, metadata cannot be refreshed, heartbeats
/// (written to the target) fail.
pub const TARGET_DOWN: &[&str] = &[
    "cannot reach target broker",
    "produce request failed; will resend",
    "its fetching paused",
    "target metadata refresh failed",
    "heartbeat not written",
];

/// A running `strait run <config>`.
pub struct Strait {
    child: Option<Child>,
    pub config: PathBuf,
    pub log: PathBuf,
    allowed: Vec<String>,
    /// Flags of `strait run` besides the config file (`--metrics-listen ADDR`).
    run_args: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Strait {
    /// Writes `config` to `strait.<ext>` and starts `strait run` on it.
    pub fn start(config: &str, ext: &str) -> Strait {
        Strait::start_with(config, ext, &[])
    }

    /// [`Strait::start`] with flags of `strait run` (`--metrics-listen ADDR`).
    pub fn start_with(config: &str, ext: &str, run_args: &[&str]) -> Strait {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("strait.{ext}"));
        std::fs::write(&path, config).unwrap();
        let log = dir.path().join("strait.log");
        let mut s = Strait {
            child: None,
            config: path,
            log,
            allowed: Vec::new(),
            run_args: run_args.iter().map(|a| a.to_string()).collect(),
            _dir: dir,
        };
        s.restart();
        s
    }

    /// Starts the process again on the same config (after a kill or a stop); the log grows.
    /// It logs at `info,strait=debug` (`STRAIT_LOG`) unless the config sets its own
    /// `log.level`.
    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let text = std::fs::read_to_string(&self.config).unwrap();
        let own_level = text.contains("log.level") || text.contains("log_level");
        let mut command = Command::new(env!("CARGO_BIN_EXE_strait"));
        if !own_level {
            command.env("STRAIT_LOG", "info,strait=debug");
        }
        let child = command
            .args(["--log-format", "json", "run", self.config.to_str().unwrap()])
            .args(&self.run_args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting strait");
        self.child = Some(child);
    }

    /// SIGSTOP: the process freezes where it is (timers, sockets and all).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`Strait::pause`].
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// Sends `signal` (`TERM`, `INT`, `STOP`, ...) without waiting for anything.
    pub fn signal(&self, signal: &str) {
        let c = self.child.as_ref().expect("strait is not running");
        let status = Command::new("kill")
            .args([format!("-{signal}"), c.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// SIGKILL: no drain, no commit.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the drain (60 s at most).
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("strait is not running");
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!(
                    "strait did not stop within 60 s of SIGTERM\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the process to exit on its own and returns its status; panics with the log
    /// after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let c = self.child.as_mut().expect("strait is not running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "strait still runs after {timeout:?}\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Lets WARN/ERROR (or non-JSON) log lines that contain any of `patterns` pass the check
    /// on drop; each test names exactly what it expects, with the reason.
    pub fn allow(mut self, patterns: &[&str]) -> Strait {
        self.allowed.extend(patterns.iter().map(|p| p.to_string()));
        self
    }

    /// The log lines at WARN or ERROR (or not JSON events at all) that no allowed pattern
    /// covers.
    pub fn unexpected_log_lines(&self) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| !matches!(log_level(l), Some("TRACE" | "DEBUG" | "INFO")))
            .filter(|l| !self.allowed.iter().any(|p| l.contains(p.as_str())))
            .map(str::to_string)
            .collect()
    }

    /// Waits until `f` returns `Some`, checking that strait keeps running; panics with the
    /// log after `timeout`.
    pub fn wait_until<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            self.assert_running();
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until a log line satisfies `pred` and returns it; panics with the log after
    /// `timeout` or if strait exits.
    pub fn wait_for_log_line(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let log = self.log.clone();
        self.wait_until("a log line", timeout, || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.lines().find(|l| pred(l)).map(str::to_string)
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics with the log if the process has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
            panic!("strait exited early with {status}\n{}", self.log_text());
        }
    }
}

impl Drop for Strait {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            return;
        }
        let unexpected = self.unexpected_log_lines();
        assert!(
            unexpected.is_empty(),
            "strait logged {} unexpected WARN/ERROR line(s) (allowed: {:?}):\n{}",
            unexpected.len(),
            self.allowed,
            unexpected.join("\n")
        );
    }
}

/// The level of a JSON log event from tracing-subscriber (`{"timestamp":..,"level":"WARN",..}`);
/// `None` for anything else. The first `"level":"` is the event's own: inside JSON strings
/// quotes are escaped, and the event's fields come after its level.
pub fn log_level(line: &str) -> Option<&str> {
    let line = line.trim();
    if !(line.starts_with('{') && line.ends_with('}')) {
        return None;
    }
    let rest = &line[line.find("\"level\":\"")? + "\"level\":\"".len()..];
    Some(&rest[..rest.find('"')?])
}

/// Runs `strait ARGS` to completion: its exit code (-1 if killed) and stdout + stderr.
pub fn run_cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(args)
        .output()
        .expect("running strait");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Writes `text` to `name` in a new temporary directory (removed when the guard drops).
pub fn config_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A path as a `&str` argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("temp dir path is UTF-8")
}

/// A strait client for a test cluster (30 s request timeout).
pub fn client(cluster: &Cluster) -> strait::kafka::Cluster {
    strait::kafka::Cluster::new(
        cluster.name.as_str(),
        vec![cluster.bootstrap.clone()],
        "strait-test",
        Duration::from_secs(30),
    )
}

/// An `mm2.properties` text for one flow `source_alias->target_alias` over the two test
/// clusters, replicating the topics matching `topics`, plus `extra` lines (replication factors
/// of 1: the test clusters have one broker each). The source's
/// first bootstrap address is dead (nothing listens on loopback port 9): bootstrapping
/// must go on to the next one.
pub fn mm2_properties(
    source_alias: &str,
    target_alias: &str,
    topics: &str,
    extra: &[&str],
) -> String {
    let [source, target] = super::kafka::clusters();
    let mut text = format!(
        "clusters = {source_alias}, {target_alias}\n\
         {source_alias}.bootstrap.servers = 127.0.0.1:9, {}\n\
         {target_alias}.bootstrap.servers = {}\n\
         {source_alias}->{target_alias}.enabled = true\n\
         {source_alias}->{target_alias}.topics = {topics}\n\
         replication.factor = 1\n\
         internal.topic.replication.factor = 1\n",
        source.bootstrap, target.bootstrap
    );
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Runs a future to completion on a fresh runtime (tests are synchronous).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Every batch of `tp` a read_committed consumer would see (control and aborted dropped);
/// an error while the topic is still being created, say.
pub fn try_raw_batches(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Vec<RawBatch>, strait::kafka::KafkaError> {
    Ok(block_on(strait::kafka::log_reader::read_partition(
        &client(cluster),
        tp,
    ))?
    .unwrap_or_default())
}

/// [`try_raw_batches`] that panics on errors.
pub fn raw_batches(cluster: &Cluster, tp: &TopicPartition) -> Vec<RawBatch> {
    try_raw_batches(cluster, tp).unwrap_or_else(|e| panic!("reading {tp}: {e}"))
}

/// Records (not batches) in the committed batches of `tp`; 0 while it cannot be read yet.
pub fn record_count(cluster: &Cluster, tp: &TopicPartition) -> i64 {
    try_raw_batches(cluster, tp)
        .map(|v| v.iter().map(|b| b.record_count() as i64).sum())
        .unwrap_or(0)
}

/// Waits until every partition of `topic` on `cluster` holds `expected` records in total.
pub fn wait_for_records(
    strait: &mut Strait,
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    expected: i64,
    timeout: Duration,
) {
    let what = format!("{expected} records in {topic}");
    strait.wait_until(&what, timeout, || {
        let have: i64 = (0..partitions)
            .map(|p| record_count(cluster, &TopicPartition::new(topic, p)))
            .sum();
        (have >= expected).then_some(())
    });
}

/// Waits (30 s at most) until `topic` shows in `cluster`'s metadata: a topic just created
/// can be missing from it for a moment while the controller is busy.
pub fn wait_for_topic(cluster: &Cluster, topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let names = [topic.to_string()];
    loop {
        let found = block_on(client(cluster).metadata(Some(&names)))
            .is_ok_and(|t| t.iter().any(|t| t.name == topic && t.error_code == 0));
        if found {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} missing from the metadata of {}",
            cluster.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
