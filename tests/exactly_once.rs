//! Exactly-once mode (`exactly.once = true`): records and progress go to the target in one
//! transaction, so a read_committed reader of the target sees every source record once,
//! whatever ends strait in between. Checked with the Java tools only: `Workload produce`
//! writes sequence-numbered records, `Workload dump` reads both sides (read_committed, and
//! read_uncommitted to see what the aborted transactions held), `sequence::compare` says
//! what was lost, reordered or repeated.

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::kafka::{self, clusters, Cluster};
use common::sequence::{self, produce, producing};
use common::strait::{Strait, TARGET_DOWN};

/// One test at a time: each runs JVMs and strait on two cores, and one restarts a broker.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const PARTITIONS: i32 = 4;

fn config((s, t): (&str, &str), source: &Cluster, target: &Cluster, topic: &str) -> String {
    format!(
        "clusters = {s}, {t}\n{s}.bootstrap.servers = {}\n{t}.bootstrap.servers = {}\n\
         {s}->{t}.enabled = true\n{s}->{t}.topics = {topic}\nreplication.factor = 1\n\
         internal.topic.replication.factor = 1\nemit.checkpoints.enabled = false\n\
         {s}.request.timeout.ms = 10000\n{t}.request.timeout.ms = 10000\n\
         {t}.exactly.once.source.support = enabled\nexactly.once.transaction.interval.ms = 200\n",
        source.bootstrap, target.bootstrap
    )
}

/// What the target partitions hold beyond what a read_committed reader sees: records of
/// aborted transactions (and the commit markers, which neither reader returns).
fn uncommitted(target: &Cluster, remote: &str) -> usize {
    let all = kafka::dump_with(target, remote, &["--isolation", "read_uncommitted"]).len();
    all.saturating_sub(kafka::dump(target, remote).len())
}

/// SIGKILLs in the middle of transactions under load: the records of each open transaction
/// are on the target already (read_uncommitted sees them), its progress records too, but
/// neither counts; the next start resumes from the last committed transaction. Nothing is
/// lost, reordered or repeated.
#[test]
fn sigkills_under_load_repeat_nothing() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("eos-kill");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("ea.{topic}");
    let config = config(("ea", "eb"), source, target, &topic);
    produce(source, &topic, 0, 5000, 0);
    let mut strait = Strait::start(&config, "properties");
    let timeout = Duration::from_secs(120);
    let first = sequence::check_caught_up(
        "before the kills",
        &mut strait,
        (source, &topic),
        (target, &remote),
        timeout,
    );
    assert_eq!(first.duplicates(), 0);
    // Kafka 4.x formats a new cluster with transactions v2 switched on.
    let log = strait.log_text();
    assert!(
        log.contains("transactional producer ready (exactly-once)")
            && log.contains(r#""transactions":"v2""#),
        "{log}"
    );

    producing(source, &topic, 5000, 24_000, 4000, || {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(1500));
            strait.kill9();
            strait.restart();
        }
    });
    let report = sequence::check_caught_up(
        "after three SIGKILLs",
        &mut strait,
        (source, &topic),
        (target, &remote),
        timeout,
    );
    // The kills hit open transactions: their records are on the target, not counted.
    let aborted = uncommitted(target, &remote);
    eprintln!("records of aborted transactions on the target: {aborted}");
    assert!(aborted > 0, "no kill hit an open transaction");
    assert_eq!(report.duplicates(), 0, "{report}");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// A second process started on the same exactly-once flow takes it over under load: its
/// InitProducerId aborts the first one's open transaction and fences it; the first ends
/// (exit 1) saying why, the second resumes from the last committed transaction. Nothing is
/// lost or repeated.
#[test]
fn a_second_process_fences_the_first_and_nothing_is_repeated() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("eos-twin");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("ee.{topic}");
    let config = config(("ee", "eg"), source, target, &topic);
    let fenced = "exactly-once: the open transaction cannot be completed";
    let mut first = Strait::start(&config, "properties").allow(&[fenced]);
    produce(source, &topic, 0, 2000, 0);
    let timeout = Duration::from_secs(120);
    sequence::check_caught_up(
        "one process",
        &mut first,
        (source, &topic),
        (target, &remote),
        timeout,
    );
    let mut second = producing(source, &topic, 2000, 12_000, 4000, || {
        std::thread::sleep(Duration::from_secs(1));
        let second = Strait::start(&config, "properties");
        let status = first.wait_exit(Duration::from_secs(60));
        assert_eq!(status.code(), Some(1), "{}", first.log_text());
        second
    });
    let log = first.log_text();
    assert!(
        log.contains("another process registered transactional id"),
        "{log}"
    );
    let report = sequence::check_caught_up(
        "after the take-over",
        &mut second,
        (source, &topic),
        (target, &remote),
        timeout,
    );
    assert_eq!(report.duplicates(), 0, "{report}");
    assert!(second.terminate().success(), "{}", second.log_text());
}

/// A target that has not switched transactions v2 on (`transaction.version` 1, as a cluster
/// upgraded from Kafka 3.x keeps until its operator finalizes it) gets transactions v1:
/// AddPartitionsToTxn before each partition's first write of a transaction, one epoch
/// throughout. A SIGKILL under load repeats and loses nothing there either.
#[test]
fn a_target_without_transactions_v2_gets_v1_and_repeats_nothing() {
    let _serial = serial();
    let [source, _] = clusters();
    let target = Cluster::start("eos-v1-target", &[]);
    let downgraded = kafka::tool(
        "org.apache.kafka.tools.FeatureCommand",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "downgrade",
            "--feature",
            "transaction.version=1",
        ],
    );
    eprintln!("{}", String::from_utf8_lossy(&downgraded.stdout));
    let topic = kafka::unique("eos-v1");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("eh.{topic}");
    let config = config(("eh", "ei"), source, &target, &topic);
    let mut strait = Strait::start(&config, "properties");
    let timeout = Duration::from_secs(120);
    producing(source, &topic, 0, 12_000, 4000, || {
        std::thread::sleep(Duration::from_millis(1500));
        strait.kill9();
        strait.restart();
    });
    let report = sequence::check_caught_up(
        "after a SIGKILL, transactions v1",
        &mut strait,
        (source, &topic),
        (&target, &remote),
        timeout,
    );
    assert_eq!(report.duplicates(), 0, "{report}");
    let log = strait.log_text();
    assert!(log.contains(r#""transactions":"v1""#), "{log}");
    assert!(!log.contains(r#""transactions":"v2""#), "{log}");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// The target broker (and with it the transaction coordinator) goes down in the middle of
/// a transaction and comes back: the open transaction's batches are sent again under their
/// sequences and it commits; nothing is lost or repeated, and strait keeps running.
#[test]
fn a_target_restart_loses_and_repeats_nothing() {
    let _serial = serial();
    let (source, target) = std::thread::scope(|s| {
        let source = s.spawn(|| Cluster::start("eos-source", &[]));
        let target = Cluster::start("eos-target", &[]);
        (source.join().unwrap(), target)
    });
    let topic = kafka::unique("eos-restart");
    kafka::create_topic(&source, &topic, PARTITIONS, &[]);
    let remote = format!("ec.{topic}");
    let config = config(("ec", "ed"), &source, &target, &topic);
    let mut strait = Strait::start(&config, "properties")
        .allow(TARGET_DOWN)
        .allow(&[
            "produce request failed; will resend",
            "cannot place partitions on source leaders yet",
        ]);
    let timeout = Duration::from_secs(120);
    producing(&source, &topic, 0, 16_000, 4000, || {
        std::thread::sleep(Duration::from_secs(2));
        target.stop();
        std::thread::sleep(Duration::from_secs(3));
        target.start_again();
    });
    let report = sequence::check_caught_up(
        "after a target restart",
        &mut strait,
        (&source, &topic),
        (&target, &remote),
        timeout,
    );
    assert_eq!(report.duplicates(), 0, "{report}");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// Failover in exactly-once mode: each transaction leaves a commit marker on every target
/// partition it wrote, so target offsets drift from source offsets by one per transaction.
/// A group that read part of the topic on the source is checkpointed; MM2's own
/// `RemoteClusterUtils` translates its offsets to the same target offsets strait syncs to the
/// group, and the group, reading on from there on the target, reads every record it had not
/// read, and none twice.
#[test]
fn a_failed_over_group_reads_on_exactly_where_it_stopped() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("eos-failover");
    let group = kafka::unique("eos-failover-group");
    // One partition: the group stops in its middle, behind many commit markers.
    kafka::create_topic(source, &topic, 1, &[]);
    let extra = [
        "exactly.once = true",
        "exactly.once.transaction.interval.ms = 100",
        "emit.checkpoints.interval.seconds = 1",
        "sync.group.offsets.enabled = true",
        "sync.group.offsets.interval.seconds = 1",
    ];
    let config = common::strait::mm2_properties("ef", "t", &topic, &extra);
    let mut strait = Strait::start(&config, "properties");
    // Written while strait runs, over many transactions.
    produce(source, &topic, 0, 3000, 1000);
    let read = kafka::consume(source, &topic, &group, 1000);
    assert_eq!(read.len(), 1000);
    assert_eq!(
        kafka::committed_offsets(source, &group),
        [(topic.clone(), 0, 1000)]
    );
    let remote = format!("ef.{topic}");
    let markers = strait.wait_until(
        "every record on the target",
        Duration::from_secs(90),
        || {
            let records = kafka::dump(target, &remote).len();
            let offsets: i64 = kafka::end_offsets(target, &remote)
                .iter()
                .map(|(_, o)| o)
                .sum();
            (records == 3000).then_some(offsets - 3000)
        },
    );
    eprintln!("commit markers on the target: {markers}");
    assert!(markers > 3, "the records went in several transactions");
    let synced = strait.wait_until("the group synced", Duration::from_secs(60), || {
        let synced: Vec<_> = kafka::committed_offsets(target, &group)
            .into_iter()
            .filter(|(t, _, _)| *t == remote)
            .collect();
        (!synced.is_empty()).then_some(synced)
    });
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let translated: Vec<_> = kafka::translate_offsets(target, "ef", &group)
        .into_iter()
        .filter(|(t, _, _)| *t == remote)
        .collect();
    assert_eq!(
        translated, synced,
        "RemoteClusterUtils and the synced group agree"
    );
    eprintln!("source offset 1000 is target offset {}", synced[0].2);
    assert!(
        synced[0].2 > 1000,
        "commit markers lie before the group's offset"
    );

    let on_target = kafka::consume(target, &remote, &group, 3000);
    let before: std::collections::HashSet<_> = read.iter().map(|r| r.value.clone()).collect();
    let reread = on_target
        .iter()
        .filter(|r| before.contains(&r.value))
        .count();
    let mut all = before.clone();
    all.extend(on_target.iter().map(|r| r.value.clone()));
    assert_eq!(reread, 0, "the group re-reads nothing");
    assert_eq!(all.len(), 3000, "the group skips nothing");
}
