//! The sequence check of fault tests and the soak: a replicated partition against its source,
//! both read with the Java consumer ([`kafka::values_by_partition`]), never with strait's code.
//!
//! Every record value is unique in a topic (`Workload produce` writes `value-<i>-…`), so each
//! target record is a source index. Reading the target in offset order, an index one past the
//! highest seen so far is progress, a lower one a duplicate (strait resends what it had not
//! committed when it restarts or re-initialises its producer), a higher one a skip: records
//! lost or reordered. Duplicates come in runs, one per resend; their lengths are what a kill
//! costs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use super::kafka::{self, Cluster};
use super::strait::Strait;

/// Records `first..first + count` of `Workload produce` (100 bytes) into `topic`, at `rate`
/// records a second (0: at once).
pub fn produce(source: &Cluster, topic: &str, first: u64, count: u64, rate: u64) {
    let (first, count, rate) = (first.to_string(), count.to_string(), rate.to_string());
    kafka::produce(
        source,
        &[
            "--topic",
            topic,
            "--first",
            &first,
            "--count",
            &count,
            "--value-size",
            "100",
            "--rate",
            &rate,
        ],
    );
}

/// Produces in the background while `during` runs.
pub fn producing<T>(
    source: &Cluster,
    topic: &str,
    first: u64,
    count: u64,
    rate: u64,
    during: impl FnOnce() -> T,
) -> T {
    std::thread::scope(|scope| {
        let load = scope.spawn(|| produce(source, topic, first, count, rate));
        let out = during();
        load.join().unwrap();
        out
    })
}

/// What one target partition holds compared with its source partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionReport {
    /// Records in the source partition.
    pub source: usize,
    /// Records in the target partition (duplicates included).
    pub target: usize,
    /// Source records not in the target at all.
    pub lost: usize,
    /// Places where the target jumps ahead of the next source record (then goes back, or not:
    /// either is an order violation).
    pub skips: usize,
    /// Target records that are in no source record.
    pub foreign: usize,
    /// The runs of duplicates, in target order.
    pub duplicate_runs: Vec<DuplicateRun>,
}

/// Records the target holds twice in a row: one resend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateRun {
    /// How many records.
    pub len: usize,
    /// The lowest source index among them: where the resend started.
    pub first: usize,
    /// The highest source index among them (its position in the source partition): the last
    /// record the target had before the fault that caused the resend.
    pub last: usize,
}

impl PartitionReport {
    pub fn duplicates(&self) -> usize {
        self.duplicate_runs.iter().map(|r| r.len).sum()
    }

    /// Nothing lost, nothing foreign, order kept (duplicates allowed).
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.skips == 0 && self.foreign == 0
    }
}

/// [`PartitionReport`]s by partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report(pub BTreeMap<i32, PartitionReport>);

impl Report {
    pub fn ok(&self) -> bool {
        self.0.values().all(PartitionReport::ok)
    }

    pub fn duplicates(&self) -> usize {
        self.0.values().map(PartitionReport::duplicates).sum()
    }

    /// The longest run of duplicates in any partition (0 without any).
    pub fn longest_duplicate_run(&self) -> usize {
        let runs = self.0.values().flat_map(|p| p.duplicate_runs.iter());
        runs.map(|r| r.len).max().unwrap_or(0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (p, r) in &self.0 {
            writeln!(
                f,
                "partition {p}: source {} target {} lost {} skips {} foreign {} duplicates {} in runs {:?}",
                r.source, r.target, r.lost, r.skips, r.foreign, r.duplicates(),
                r.duplicate_runs.iter().map(|r| r.len).collect::<Vec<_>>()
            )?;
        }
        Ok(())
    }
}

/// Compares each target partition with the source partition of the same number.
pub fn compare(source: &HashMap<i32, Vec<Vec<u8>>>, target: &HashMap<i32, Vec<Vec<u8>>>) -> Report {
    let partitions: HashSet<i32> = source.keys().chain(target.keys()).copied().collect();
    let empty = Vec::new();
    let report = partitions.into_iter().map(|p| {
        let (s, t) = (
            source.get(&p).unwrap_or(&empty),
            target.get(&p).unwrap_or(&empty),
        );
        (p, compare_partition(s, t))
    });
    Report(report.collect())
}

fn compare_partition(source: &[Vec<u8>], target: &[Vec<u8>]) -> PartitionReport {
    let index: HashMap<&[u8], usize> = source
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_slice(), i))
        .collect();
    let mut r = PartitionReport {
        source: source.len(),
        target: target.len(),
        ..PartitionReport::default()
    };
    let mut seen = vec![false; source.len()];
    let (mut next, mut run) = (0, None::<DuplicateRun>);
    for v in target {
        let Some(&i) = index.get(v.as_slice()) else {
            r.foreign += 1;
            continue;
        };
        seen[i] = true;
        if i < next {
            let run = run.get_or_insert(DuplicateRun {
                len: 0,
                first: i,
                last: i,
            });
            run.len += 1;
            run.first = run.first.min(i);
            run.last = run.last.max(i);
            continue;
        }
        r.duplicate_runs.extend(run.take());
        if i > next {
            r.skips += 1;
        }
        next = i + 1;
    }
    r.duplicate_runs.extend(run);
    r.lost = seen.iter().filter(|s| !**s).count();
    r
}

/// Reads `topic` on `source` and `remote` on `target` until the target holds every source
/// record (strait must keep running meanwhile) and returns the comparison; panics with the
/// last one and strait's log after `timeout`.
pub fn wait_caught_up(
    strait: &mut Strait,
    source: &Cluster,
    topic: &str,
    target: &Cluster,
    remote: &str,
    timeout: Duration,
) -> Report {
    let want = kafka::values_by_partition(source, topic);
    let deadline = Instant::now() + timeout;
    loop {
        strait.assert_running();
        let report = compare(&want, &kafka::values_by_partition(target, remote));
        if report.0.values().all(|p| p.lost == 0) {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "{remote} did not catch up with {topic} within {timeout:?}:\n{report}\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// [`wait_caught_up`], then prints the duplicates and asserts that nothing is lost or out of
/// order (`what` names the step in both).
pub fn check_caught_up(
    what: &str,
    strait: &mut Strait,
    (source, topic): (&Cluster, &str),
    (target, remote): (&Cluster, &str),
    timeout: Duration,
) -> Report {
    let report = wait_caught_up(strait, source, topic, target, remote, timeout);
    eprintln!(
        "{what}: {} duplicate(s), longest run {}\n{report}",
        report.duplicates(),
        report.longest_duplicate_run()
    );
    assert!(report.ok(), "{what}: lost or out of order:\n{report}");
    report
}
