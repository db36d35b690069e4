//! The built `strait` binary as tests run it: a config file in a temporary directory, the
//! process with its log captured, SIGTERM and SIGKILL, and waiting on what it wrote, read
//! through strait's own raw reader (`kafka::log_reader::read_partition`), which needs no JVM.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use strait::batch::RawBatch;
use strait::kafka::TopicPartition;

use super::kafka::Cluster;

/// A running `strait run <config>`.
pub struct Strait {
    child: Option<Child>,
    pub config: PathBuf,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Strait {
    /// Writes `config` to `strait.<ext>` and starts `strait run` on it.
    pub fn start(config: &str, ext: &str) -> Strait {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("strait.{ext}"));
        std::fs::write(&path, config).unwrap();
        let log = dir.path().join("strait.log");
        let mut s = Strait {
            child: None,
            config: path,
            log,
            _dir: dir,
        };
        s.restart();
        s
    }

    /// Starts the process again on the same config (after a kill or a stop); the log grows.
    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["run", self.config.to_str().unwrap()])
            .env("STRAIT_LOG", "info,strait=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting strait");
        self.child = Some(child);
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
    }
}

/// An `mm2.properties` text for one flow `source_alias->target_alias` over the two test
/// clusters, replicating the topics matching `topics`, plus `extra` lines. The source's
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
         replication.factor = 1\n",
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
    let c = strait::kafka::Cluster::new(
        cluster.name.as_str(),
        vec![cluster.bootstrap.clone()],
        "strait-test",
        Duration::from_secs(30),
    );
    Ok(block_on(strait::kafka::log_reader::read_partition(&c, tp))?.unwrap_or_default())
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
    let deadline = Instant::now() + timeout;
    let mut have = 0;
    while Instant::now() < deadline {
        strait.assert_running();
        have = (0..partitions)
            .map(|p| record_count(cluster, &TopicPartition::new(topic, p)))
            .sum();
        if have >= expected {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{topic}: {have} of {expected} records after {timeout:?}\n{}",
        strait.log_text()
    );
}
