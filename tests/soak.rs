//! The chaos soak (`scripts/soak.sh DURATION` runs it; ignored by plain `cargo test`): strait
//! replicates a topic that a producer keeps writing (sequence-numbered values, acks=all,
//! idempotent) while faults hit at random moments: strait SIGKILLed and restarted, the source
//! and the target broker SIGKILLed and restarted, proxy cuts and half-open blackholes on either
//! side. Then the faults stop, strait catches up, and the target is checked against the source
//! with the Java consumer: per partition nothing lost, order kept, and each run of duplicates
//! (one per resend) within what strait may have forwarded without committing: a commit
//! interval's worth of records, plus the backlog a fault in the run's span piled up (caught up
//! in a burst once the fault ends), plus what can be in flight.
//!
//! `STRAIT_SOAK_SECS` is the duration of the faults (default 180), `STRAIT_SOAK_SEED` the seed
//! of the fault schedule (default: the clock; printed either way).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::kafka::{self, Cluster};
use common::proxy::{Pair, Proxy, Stream, Toxic};
use common::sequence;
use common::strait::Strait;

const PARTITIONS: u64 = 4;
/// Records a second the producer writes, over all partitions.
const RATE: u64 = 200;
const COMMIT_INTERVAL_MS: u64 = 1000;
const REQUEST_TIMEOUT_MS: u64 = 5000;
/// The producer's batch size, which bounds the records of a source batch (100-byte values).
const BATCH_BYTES: u64 = 4096;
/// Produce requests strait keeps in flight per partition (`produce.max.in.flight`).
const MAX_IN_FLIGHT: u64 = 5;

/// The faults, WARNs they make strait log, in the words it uses.
const FAULT_WARNINGS: &[&str] = &[
    "cannot reach target broker",
    "produce request failed; will resend",
    "its fetching paused",
    "target metadata refresh failed",
    "heartbeat not written",
    "target lost strait's producer state",
    "out-of-order sequence at the head of the partition",
    "\"fetch failed\"",
    "cannot place partitions on source leaders yet",
    "offset syncs not written",
    "offset syncs topic unavailable",
    "checkpoints not written",
    "cannot read source consumer groups",
    "group offset sync failed",
    "topic discovery failed",
    "topic config sync failed",
    "topic ACL sync failed",
];

#[test]
#[ignore = "minutes long: run by scripts/soak.sh"]
fn chaos_soak() {
    let secs: u64 = env_or("STRAIT_SOAK_SECS", 180);
    let seed: u64 = env_or(
        "STRAIT_SOAK_SEED",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    eprintln!("soak: {secs} s of faults, seed {seed}");
    let mut rng = Rng(seed | 1);

    let pair = Pair::start("soak");
    let topic = kafka::unique("soak");
    kafka::create_topic(&pair.source, &topic, PARTITIONS as i32, &[]);
    let extra = [format!(
        "progress.commit.interval.ms = {COMMIT_INTERVAL_MS}"
    )];
    let config = pair.mm2_properties(&topic, REQUEST_TIMEOUT_MS, &[extra[0].as_str()]);
    let mut strait = Strait::start(&config, "properties").allow(FAULT_WARNINGS);
    let mut producer = Producer::start(&pair.source, &topic);

    let mut events = Faults::new();
    let mut cycle = 0u64;
    while events.start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(rng.between(1000, 6000)));
        producer.keep_running(&pair.source, &topic);
        // Every other fault is a strait kill, so that a run of N faults kills it N/2 times.
        let fault = if cycle.is_multiple_of(2) {
            0
        } else {
            rng.between(0, 7)
        };
        cycle += 1;
        match fault {
            0 => {
                let i = events.begin("kill strait");
                strait.kill9();
                strait.restart();
                events.end(i);
            }
            1 => {
                let i = events.begin("kill source broker");
                restart_broker(&pair.source, &mut rng);
                events.end(i);
            }
            2 => {
                let i = events.begin("kill target broker");
                restart_broker(&pair.target, &mut rng);
                events.end(i);
            }
            3 | 4 => {
                let (p, what) = side(&pair, fault == 3, "cut source", "cut target");
                let i = events.begin(what);
                p.set_enabled(false);
                maybe_kill_strait_meanwhile(&mut strait, &mut rng, &mut events);
                p.set_enabled(true);
                events.end(i);
            }
            _ => {
                let (p, what) = side(&pair, fault == 5, "blackhole source", "blackhole target");
                let i = events.begin(what);
                let blackhole = Toxic::Timeout { close_after_ms: 0 };
                p.add("blackhole", Stream::Downstream, blackhole);
                maybe_kill_strait_meanwhile(&mut strait, &mut rng, &mut events);
                p.remove("blackhole");
                events.end(i);
            }
        }
    }
    producer.stop();
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for f in &events.list {
        *counts.entry(f.what).or_default() += 1;
    }
    let secs = events.start.elapsed().as_secs_f64();
    eprintln!("soak: faults over after {secs:.0} s: {counts:?}");

    let remote = format!("a.{topic}");
    let timeout = Duration::from_secs(600);
    let report = sequence::wait_caught_up(
        &mut strait,
        &pair.source,
        &topic,
        &pair.target,
        &remote,
        timeout,
    );
    let over = check_duplicates_per_fault(&pair.source, &topic, &events, &report);
    let records: usize = report.0.values().map(|p| p.source).sum();
    let runs: usize = report.0.values().map(|p| p.duplicate_runs.len()).sum();
    eprintln!(
        "soak: {records} records, {} duplicates in {runs} runs (longest {}, {} over their \
         bound), faults {counts:?}\n{report}",
        report.duplicates(),
        report.longest_duplicate_run(),
        over.len()
    );
    assert!(report.ok(), "records lost or out of order:\n{report}");
    assert!(
        over.is_empty(),
        "runs of duplicates over their bound:\n{}",
        over.join("\n")
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// The faults of a soak, timed from its start.
struct Faults {
    start: Instant,
    start_ms: i64,
    list: Vec<Fault>,
}

struct Fault {
    what: &'static str,
    /// Seconds from the start of the soak.
    from: f64,
    until: f64,
}

impl Faults {
    fn new() -> Faults {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        Faults {
            start: Instant::now(),
            start_ms: now.unwrap().as_millis() as i64,
            list: Vec::new(),
        }
    }

    fn begin(&mut self, what: &'static str) -> usize {
        let from = self.start.elapsed().as_secs_f64();
        eprintln!("soak: {from:>6.1} s {what}");
        self.list.push(Fault {
            what,
            from,
            until: from,
        });
        self.list.len() - 1
    }

    fn end(&mut self, i: usize) {
        self.list[i].until = self.start.elapsed().as_secs_f64();
    }

    /// Seconds of faults (other than strait kills: it restarts at once) in `from..until`.
    fn overlap(&self, from: f64, until: f64) -> f64 {
        let faults = self
            .list
            .iter()
            .filter(|f| !f.what.starts_with("kill strait"));
        faults
            .map(|f| (f.until.min(until) - f.from.max(from)).max(0.0))
            .sum()
    }
}

/// Prints, for each fault, the duplicates per partition it caused, and returns the runs of
/// duplicates over their bound. A run is put down to the first fault after the source record
/// time of its last record, the last record the target had before the resend (a fault's own
/// kill of strait included). Its bound is what strait may have forwarded without committing:
/// one commit interval of records, plus what piled up on the source while a fault in the
/// run's time span kept strait from forwarding (strait catches that up in a burst), plus
/// what is in flight.
fn check_duplicates_per_fault(
    source: &Cluster,
    topic: &str,
    faults: &Faults,
    report: &sequence::Report,
) -> Vec<String> {
    let mut times: BTreeMap<i32, Vec<f64>> = BTreeMap::new();
    for r in kafka::dump(source, topic) {
        let at = (r.timestamp - faults.start_ms) as f64 / 1000.0;
        times.entry(r.partition).or_default().push(at);
    }
    let per_partition_rate = RATE as f64 / PARTITIONS as f64;
    let in_flight = (MAX_IN_FLIGHT * (BATCH_BYTES / 100)) as f64;
    let commit_s = COMMIT_INTERVAL_MS as f64 / 1000.0;
    let n = faults.list.len();
    let (mut per_fault, mut over) = (vec![vec![0; PARTITIONS as usize]; n + 1], Vec::new());
    for (p, r) in &report.0 {
        for run in &r.duplicate_runs {
            let (from, until) = (times[p][run.first], times[p][run.last]);
            let fault = faults
                .list
                .iter()
                .position(|f| f.from >= until)
                .unwrap_or(n);
            per_fault[fault][*p as usize] += run.len;
            let backlog_s = faults.overlap(from, until);
            let bound = per_partition_rate * (commit_s + backlog_s) + in_flight;
            if run.len as f64 > bound {
                over.push(format!(
                    "partition {p}: {} duplicates of records written {from:.1}-{until:.1} s, \
                     {backlog_s:.1} s of it under faults: bound {bound:.0}",
                    run.len
                ));
            }
        }
    }
    for (f, dups) in faults.list.iter().zip(&per_fault) {
        let (at, what) = (f.from, f.what);
        eprintln!("soak: {at:>6.1} s {what:<30} duplicates per partition {dups:?}");
    }
    eprintln!("soak: after the last fault: {:?}", per_fault[n]);
    over
}

/// The proxy of the source (`source`) or the target, and the event's name.
fn side<'a>(
    pair: &'a Pair,
    source: bool,
    s: &'static str,
    t: &'static str,
) -> (&'a Proxy, &'static str) {
    if source {
        (&pair.source_proxy, s)
    } else {
        (&pair.target_proxy, t)
    }
}

/// A fault lasting 2 to 10 s; half the time strait is SIGKILLed and restarted in the middle.
fn maybe_kill_strait_meanwhile(strait: &mut Strait, rng: &mut Rng, faults: &mut Faults) {
    let ms = rng.between(2000, 10000);
    if rng.between(0, 2) == 0 {
        std::thread::sleep(Duration::from_millis(ms / 2));
        let i = faults.begin("kill strait during the fault");
        strait.kill9();
        strait.restart();
        faults.end(i);
        std::thread::sleep(Duration::from_millis(ms / 2));
    } else {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// SIGKILL, down for 0 to 5 s, start again.
fn restart_broker(c: &Cluster, rng: &mut Rng) {
    c.kill9();
    std::thread::sleep(Duration::from_millis(rng.between(0, 5000)));
    c.start_again();
}

/// `Workload produce` running in the background (idempotent, acks=all, `RATE` records a
/// second, directly to the source broker): record `i` has the value `value-<i>-…`.
struct Producer {
    child: Child,
    /// The first record index of the current run: a producer that died (its broker was down
    /// past its delivery timeout) starts again at a fresh range.
    first: u64,
}

impl Producer {
    fn start(source: &Cluster, topic: &str) -> Producer {
        Producer {
            child: Producer::spawn(source, topic, 0),
            first: 0,
        }
    }

    fn spawn(source: &Cluster, topic: &str, first: u64) -> Child {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh");
        let (rate, batch, first) = (RATE.to_string(), BATCH_BYTES.to_string(), first.to_string());
        Command::new("bash")
            .arg(script)
            .args([
                "tool",
                "Workload",
                "produce",
                "--bootstrap",
                &source.bootstrap,
            ])
            .args(["--topic", topic, "--idempotent", "--count", "1000000000"])
            .args(["--first", &first, "--rate", &rate, "--batch-size", &batch])
            .args(["--value-size", "100"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting Workload produce")
    }

    fn keep_running(&mut self, source: &Cluster, topic: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            self.first += 1_000_000_000;
            eprintln!(
                "soak: producer exited ({status}); restarting at {}",
                self.first
            );
            self.child = Producer::spawn(source, topic, self.first);
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// xorshift64: a reproducible fault schedule from the printed seed.
struct Rng(u64);

impl Rng {
    /// Uniform enough in `lo..hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo)
    }
}

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
