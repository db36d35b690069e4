//! Scale-out: several strait processes on one flow share it through a group on the target
//! cluster (Kafka's own group coordinator decides who is in). Checked with the Java tools
//! only: `Workload produce` writes sequence-numbered records, `Workload dump` (read_committed)
//! reads both sides, `sequence::compare` says what was lost, reordered or repeated.

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::kafka::{self, clusters, Cluster};
use common::sequence::{self, produce, producing, Report};
use common::strait::{Strait, TARGET_DOWN};

/// The processes of these tests are many JVMs and strait processes on two cores: one test
/// at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Partitions of the replicated topic, and slots of the flow: each process gets several.
const PARTITIONS: i32 = 12;
const SLOTS: u32 = 12;
/// The brokers' smallest session timeout (`group.min.session.timeout.ms`).
const SESSION_MS: u64 = 6000;

/// WARN lines a member logs when the group takes slots from it without a hand-over, or
/// its coordinator stops answering: expected where a test makes that happen.
const LOST: &[&str] = &[
    "scale-out slots lost",
    "the slot's transaction was refused while this member was cut off",
];

/// How the flow writes: at least once, or exactly once (`exactly.once = true`: a transaction
/// per slot, under the slot's own transactional id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    AtLeastOnce,
    ExactlyOnce,
}

impl Mode {
    /// `config` in this mode.
    fn apply(self, config: String) -> String {
        match self {
            Mode::AtLeastOnce => config,
            Mode::ExactlyOnce => format!("{config}exactly.once = true\n"),
        }
    }

    /// Checks what a member logs of its writers: in exactly-once mode, a transactional
    /// producer per slot it got.
    fn check_writers(self, member: &Strait) {
        let log = member.log_text();
        let slot_producers = log
            .lines()
            .filter(|l| l.contains("transactional producer ready") && l.contains("-slot-"))
            .count();
        match self {
            Mode::AtLeastOnce => assert_eq!(slot_producers, 0, "{log}"),
            Mode::ExactlyOnce => assert!(slot_producers > 0, "{log}"),
        }
    }
}

/// The flow `(s, t)` of `topic`, shared by every process started with it.
fn config((s, t): (&str, &str), source: &Cluster, target: &Cluster, topic: &str) -> String {
    format!(
        "clusters = {s}, {t}\n{s}.bootstrap.servers = {}\n{t}.bootstrap.servers = {}\n\
         {s}->{t}.enabled = true\n{s}->{t}.topics = {topic}\nreplication.factor = 1\n\
         internal.topic.replication.factor = 1\nprogress.commit.interval.ms = 500\n\
         emit.checkpoints.enabled = false\n\
         scale.out.enabled = true\nscale.out.slots = {SLOTS}\n\
         scale.out.session.timeout.ms = {SESSION_MS}\n",
        source.bootstrap, target.bootstrap
    )
}

/// How many heartbeats of flow `source->target` the target's `heartbeats` topic holds.
fn heartbeats(target: &Cluster, (source, target_alias): (&str, &str)) -> usize {
    let key = strait::mm2::records::Heartbeat {
        source_cluster_alias: source.into(),
        target_cluster_alias: target_alias.into(),
        timestamp: 0,
    }
    .encode_key();
    kafka::dump(target, "heartbeats")
        .iter()
        .filter(|r| r.key.as_deref() == Some(&key[..]))
        .count()
}

/// The slots a process owns now, from the last `scale-out group joined` line of its log.
fn slots_of(strait: &Strait) -> usize {
    let log = strait.log_text();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("scale-out group joined"))
        .unwrap_or_default();
    let field = line.split("\"slots\":").nth(1).unwrap_or("0");
    field
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits until the live processes split all the slots, each getting some.
fn wait_split(members: &mut [&mut Strait]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let counts: Vec<usize> = members.iter().map(|m| slots_of(m)).collect();
        if counts.iter().sum::<usize>() == SLOTS as usize && counts.iter().all(|&n| n > 0) {
            eprintln!("slots per process: {counts:?}");
            return;
        }
        for m in members.iter_mut() {
            m.assert_running();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slots were not split among the processes: {counts:?}\n{}",
            members
                .iter()
                .map(|m| m.log_text())
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn check(
    what: &str,
    strait: &mut Strait,
    source: &Cluster,
    topic: &str,
    target: &Cluster,
    remote: &str,
) -> Report {
    let timeout = Duration::from_secs(120);
    sequence::check_caught_up(what, strait, (source, topic), (target, remote), timeout)
}

/// Three processes split a flow; one is SIGKILLed under load and its slots move to the
/// others within the session timeout; a fourth joins; two stop gracefully. Nothing is lost
/// or reordered; the kill repeats at most what its victim had not committed, the graceful
/// hand-offs (a join, two stops) repeat nothing.
#[test]
fn processes_share_a_flow_and_hand_it_over_on_kill_join_and_stop() {
    share_and_hand_over(("sa", "ta"), Mode::AtLeastOnce);
}

/// The same in exactly-once mode: each slot's records and positions go in transactions
/// of the slot's own transactional id, whose next owner fences the last one. Nothing is
/// lost, reordered or repeated, the kill included.
#[test]
fn exactly_once_processes_share_a_flow_and_repeat_nothing() {
    share_and_hand_over(("sh", "th"), Mode::ExactlyOnce);
}

fn share_and_hand_over((s, t): (&str, &str), mode: Mode) {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("shared");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("{s}.{topic}");
    let config = mode.apply(config((s, t), source, target, &topic));
    produce(source, &topic, 0, 6000, 0);
    let start = || Strait::start(&config, "properties");
    let (mut a, mut b, mut c) = (start(), start(), start());
    wait_split(&mut [&mut a, &mut b, &mut c]);
    check("three processes", &mut a, source, &topic, target, &remote);
    // The flow beats once a second, not once per process (emit.heartbeats.interval.seconds = 1).
    let beats = || heartbeats(target, (s, t));
    let before = beats();
    std::thread::sleep(Duration::from_secs(6));
    let during = beats() - before;
    eprintln!("heartbeats of the flow in 6 s with three processes: {during}");
    assert!((3..=8).contains(&during), "{during} heartbeats in 6 s");

    // A kill under load: its slots go to b and c once the session times out.
    producing(source, &topic, 6000, 12_000, 2000, || {
        std::thread::sleep(Duration::from_secs(2));
        a.kill9();
        wait_split(&mut [&mut b, &mut c]);
    });
    let killed = check("after a kill", &mut b, source, &topic, target, &remote);
    if mode == Mode::ExactlyOnce {
        assert_eq!(
            killed.duplicates(),
            0,
            "the kill repeated records:\n{killed}"
        );
    }

    // A graceful join and two graceful stops under load repeat nothing.
    let mut d = start();
    producing(source, &topic, 18_000, 12_000, 2000, || {
        wait_split(&mut [&mut b, &mut c, &mut d]);
        assert!(b.terminate().success(), "{}", b.log_text());
        wait_split(&mut [&mut c, &mut d]);
        assert!(c.terminate().success(), "{}", c.log_text());
        wait_split(&mut [&mut d]);
    });
    let after = check(
        "after a join and two stops",
        &mut d,
        source,
        &topic,
        target,
        &remote,
    );
    assert_eq!(
        after.duplicates(),
        killed.duplicates(),
        "graceful hand-offs repeated records:\n{after}"
    );
    for member in [&b, &c] {
        let log = member.log_text();
        assert!(log.contains("left the scale-out group"), "{log}");
        mode.check_writers(member);
    }
}

/// A member frozen (SIGSTOP) past the session timeout loses its slots to the others; woken,
/// it writes nothing for them (its lease ran out while it was frozen), logs that it lost
/// them and joins again, and the group splits the slots anew. Nothing lost or reordered.
#[test]
fn a_frozen_member_loses_its_slots_and_writes_nothing_when_it_wakes() {
    freeze_a_member(("sb", "tb"), Mode::AtLeastOnce);
}

/// The same in exactly-once mode: the frozen member's open transactions are aborted by the
/// slots' new owners (their InitProducerId fences its producers), and nothing is repeated.
#[test]
fn exactly_once_a_frozen_member_is_fenced_and_nothing_repeats() {
    freeze_a_member(("si", "ti"), Mode::ExactlyOnce);
}

fn freeze_a_member((s, t): (&str, &str), mode: Mode) {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("frozen");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("{s}.{topic}");
    let config = mode.apply(config((s, t), source, target, &topic));
    let start = || Strait::start(&config, "properties");
    let mut a = start().allow(LOST);
    let mut b = start();
    produce(source, &topic, 0, 4000, 0);
    wait_split(&mut [&mut a, &mut b]);
    check("two processes", &mut b, source, &topic, target, &remote);
    producing(source, &topic, 4000, 16_000, 2000, || {
        std::thread::sleep(Duration::from_secs(1));
        a.pause();
        // b takes every slot once a's session timed out.
        wait_split(&mut [&mut b]);
        a.resume();
        a.wait_for_log_line(Duration::from_secs(30), |l| {
            l.contains("scale-out slots lost")
        });
        wait_split(&mut [&mut a, &mut b]);
    });
    let report = check("after a freeze", &mut b, source, &topic, target, &remote);
    if mode == Mode::ExactlyOnce {
        assert_eq!(
            report.duplicates(),
            0,
            "the freeze repeated records:\n{report}"
        );
    }
    mode.check_writers(&a);
}

/// A process whose settings differ (another slot count) joins the group but gets no work,
/// and both sides say why; the others go on with every slot.
#[test]
fn a_member_with_other_settings_gets_no_work_and_is_told_why() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("mismatch");
    kafka::create_topic(source, &topic, 4, &[]);
    let config = config(("sc", "tc"), source, target, &topic);
    let mut a = Strait::start(&config, "properties").allow(&["a scale-out member gets no work"]);
    a.wait_for_log_line(Duration::from_secs(30), |l| {
        l.contains("scale-out group joined")
    });
    let other = config.replace(&format!("scale.out.slots = {SLOTS}"), "scale.out.slots = 8");
    let mut b = Strait::start(&other, "properties")
        .allow(&["this member gets no work from the scale-out group's leader"]);
    let line = b.wait_for_log_line(Duration::from_secs(30), |l| {
        l.contains("this member gets no work")
    });
    assert!(line.contains("slots: 8 vs 12"), "{line}");
    a.wait_for_log_line(Duration::from_secs(30), |l| {
        l.contains("a scale-out member gets no work")
    });
    produce(source, &topic, 0, 400, 0);
    let report = check(
        "with a refused member",
        &mut a,
        source,
        &topic,
        target,
        &format!("sc.{topic}"),
    );
    assert_eq!(report.duplicates(), 0);
    assert_eq!(slots_of(&a), SLOTS as usize);
    assert_eq!(slots_of(&b), 0);
}

/// Failover with the flow split between two processes: each writes the checkpoints of its
/// own partitions, and RemoteClusterUtils (MM2's client library) translates a source group's
/// offsets exactly, across the offset gaps of a transactional source with aborted
/// transactions: each translated offset is the target offset of the very record the group
/// reads next.
#[test]
fn a_split_flow_translates_group_offsets_exactly() {
    split_flow_failover(("sd", "td"), Mode::AtLeastOnce);
}

/// The same in exactly-once mode, where each transaction's commit marker is one more offset
/// gap on the target.
#[test]
fn exactly_once_a_split_flow_translates_group_offsets_exactly() {
    split_flow_failover(("sj", "tj"), Mode::ExactlyOnce);
}

fn split_flow_failover((s, t): (&str, &str), mode: Mode) {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("split-failover");
    kafka::create_topic(source, &topic, 6, &[]);
    let remote = format!("{s}.{topic}");
    let txn = kafka::unique("split-txn");
    kafka::produce(
        source,
        &[
            "--topic",
            &topic,
            "--count",
            "1200",
            "--transactional-id",
            &txn,
            "--txn-size",
            "10",
            "--abort-every",
            "3",
        ],
    );
    let group = kafka::unique("split-group");
    let read = kafka::consume(source, &topic, &group, 300);
    assert_eq!(read.len(), 300);
    let committed = kafka::committed_offsets(source, &group);
    let config = mode.apply(config((s, t), source, target, &topic).replace(
        "emit.checkpoints.enabled = false\n",
        "emit.checkpoints.interval.seconds = 1\n",
    ));
    let start = || Strait::start(&config, "properties");
    let (mut a, mut b) = (start(), start());
    wait_split(&mut [&mut a, &mut b]);
    check("split flow", &mut a, source, &topic, target, &remote);

    // The record each partition's group reads next, and where it is on the target.
    let source_records = kafka::dump(source, &topic);
    let target_records = kafka::dump(target, &remote);
    let target_ends: std::collections::HashMap<i32, i64> =
        kafka::end_offsets(target, &remote).into_iter().collect();
    // Where no record follows the group's offset yet, the target's end; in exactly-once
    // mode the last transaction's commit marker may lie between the last record and the end
    // (a caught-up group translates to the marker, which a consumer steps over: it reads
    // nothing twice and skips nothing), so anything past the last record is exact there.
    let expected: Vec<(String, i32, std::ops::RangeInclusive<i64>)> = committed
        .iter()
        .map(|(_, p, offset)| {
            let next = source_records
                .iter()
                .find(|r| r.partition == *p && r.offset >= *offset);
            let at = match next {
                Some(n) => {
                    let at = target_records
                        .iter()
                        .find(|r| r.partition == *p && r.value == n.value)
                        .expect("the record is on the target")
                        .offset;
                    at..=at
                }
                None if mode == Mode::ExactlyOnce => {
                    let last = target_records
                        .iter()
                        .filter(|r| r.partition == *p)
                        .map(|r| r.offset)
                        .max()
                        .unwrap_or(-1);
                    last + 1..=target_ends[p]
                }
                None => target_ends[p]..=target_ends[p],
            };
            (remote.clone(), *p, at)
        })
        .collect();
    a.wait_until("exact translations", Duration::from_secs(60), || {
        let found = kafka::translate_offsets(target, s, &group);
        let exact = found.len() == expected.len()
            && found
                .iter()
                .zip(&expected)
                .all(|((t, p, o), (et, ep, range))| (t, p) == (et, ep) && range.contains(o));
        exact.then_some(())
    });
    b.assert_running();
    mode.check_writers(&a);
}

/// Static membership: a process killed and restarted with the same `scale.out.instance.id`
/// within the session timeout takes its slots back, and the other process keeps its own
/// throughout (none of its slots revoked). Nothing lost or reordered.
#[test]
fn a_static_member_restarted_in_time_gets_its_slots_back() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("static");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("se.{topic}");
    let config = config(("se", "te"), source, target, &topic);
    let with_id = |id: &str| format!("{config}scale.out.instance.id = {id}\n");
    let a_addr = format!("127.0.0.1:{}", kafka::free_port());
    let listen = ["--metrics-listen", a_addr.as_str()];
    let mut a = Strait::start_with(&with_id("a-0"), "properties", &listen);
    let mut b = Strait::start(&with_id("b-0"), "properties");
    produce(source, &topic, 0, 2000, 0);
    wait_split(&mut [&mut a, &mut b]);
    check(
        "two static members",
        &mut b,
        source,
        &topic,
        target,
        &remote,
    );
    let b_slots = slots_of(&b);
    // Whichever process joined first handed half its slots over when the other came: only
    // what b logs from here on is about the restart.
    let released = |log: &str| log.matches("scale-out slots released").count();
    let settled = released(&b.log_text());
    producing(source, &topic, 2000, 6000, 2000, || {
        std::thread::sleep(Duration::from_secs(1));
        a.kill9();
        a.restart();
        a.wait_for_log_line(Duration::from_secs(30), |l| {
            l.contains("scale-out slots acquired")
        });
    });
    check(
        "after a static restart",
        &mut b,
        source,
        &topic,
        target,
        &remote,
    );
    wait_split(&mut [&mut a, &mut b]);
    assert_eq!(slots_of(&b), b_slots);
    let owned: Vec<f64> = common::scrape::metrics(&a_addr)
        .into_iter()
        .filter(|s| s.name == "strait_scale_out_slots" && s.label("source") == "se")
        .filter_map(|s| s.value)
        .collect();
    assert_eq!(owned, [(SLOTS as usize - b_slots) as f64]);
    let log = b.log_text();
    assert!(released(&log) == settled, "b gave slots away:\n{log}");
}

/// The target cluster (the group's coordinator, and where everything is written) restarts
/// under load, down longer than the members' leases: they pause writing on their own, and
/// go on once the coordinator is back and says the slots are still theirs (or drop them and
/// join again if not). Nothing lost or reordered.
#[test]
fn a_target_restart_under_a_split_flow_loses_nothing() {
    restart_the_target(("sf", "tf"), Mode::AtLeastOnce);
}

/// The same in exactly-once mode: the slots' transactions open when the target went away
/// are aborted or committed, never half-applied, and nothing is repeated.
#[test]
fn exactly_once_a_target_restart_under_a_split_flow_repeats_nothing() {
    restart_the_target(("sk", "tk"), Mode::ExactlyOnce);
}

fn restart_the_target((s, t): (&str, &str), mode: Mode) {
    let _serial = serial();
    let source = &clusters()[0];
    let target = Cluster::start(&format!("scale-target-{s}"), &[]);
    let topic = kafka::unique("restart");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("{s}.{topic}");
    let config = mode.apply(format!(
        "{}{s}.request.timeout.ms = 10000\n{t}.request.timeout.ms = 10000\n",
        config((s, t), source, &target, &topic)
    ));
    let start = || {
        Strait::start(&config, "properties")
            .allow(TARGET_DOWN)
            .allow(COORDINATOR_DOWN)
    };
    let (mut a, mut b) = (start(), start());
    produce(source, &topic, 0, 2000, 0);
    wait_split(&mut [&mut a, &mut b]);
    check(
        "before the restart",
        &mut a,
        source,
        &topic,
        &target,
        &remote,
    );
    producing(source, &topic, 2000, 12_000, 2000, || {
        std::thread::sleep(Duration::from_secs(1));
        target.stop();
        std::thread::sleep(Duration::from_millis(SESSION_MS));
        target.start_again();
    });
    let report = check(
        "after the restart",
        &mut a,
        source,
        &topic,
        &target,
        &remote,
    );
    if mode == Mode::ExactlyOnce {
        assert_eq!(
            report.duplicates(),
            0,
            "the restart repeated records:\n{report}"
        );
    }
    wait_split(&mut [&mut a, &mut b]);
    let logs = format!("{}{}", a.log_text(), b.log_text());
    assert!(
        logs.contains("writing paused"),
        "the leases did not run out:\n{logs}"
    );
}

/// WARNs of a member while the target is down besides those of any process
/// ([`TARGET_DOWN`]): its group coordinator is gone too.
const COORDINATOR_DOWN: &[&str] = &[
    "scale-out slots lost",
    "writing paused until it answers",
    "the scale-out group's coordinator did not answer",
    "cannot reach the scale-out group's coordinator",
];

/// Two processes started with the same `scale.out.instance.id` (a copied config): the
/// second takes the first's place in the group, the first is fenced by the coordinator
/// (FENCED_INSTANCE_ID), drops its slots without writing more and exits 1 naming the id;
/// the second replicates everything. Nothing lost or reordered.
#[test]
fn a_second_process_with_the_same_instance_id_fences_the_first() {
    let _serial = serial();
    let [source, target] = clusters();
    let topic = kafka::unique("same-id");
    kafka::create_topic(source, &topic, PARTITIONS, &[]);
    let remote = format!("sg.{topic}");
    let config = format!(
        "{}scale.out.instance.id = copied\n",
        config(("sg", "tg"), source, target, &topic)
    );
    let mut first = Strait::start(&config, "properties").allow(&[
        "scale-out slots lost",
        "another process runs with scale.out.instance.id copied",
        "flow failed",
    ]);
    produce(source, &topic, 0, 2000, 0);
    wait_split(&mut [&mut first]);
    check("one process", &mut first, source, &topic, target, &remote);
    let mut second = Strait::start(&config, "properties");
    let status = producing(source, &topic, 2000, 4000, 2000, || {
        first.wait_exit(Duration::from_secs(60))
    });
    let log = first.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("another process runs with scale.out.instance.id copied"),
        "{log}"
    );
    wait_split(&mut [&mut second]);
    check(
        "the second process",
        &mut second,
        source,
        &topic,
        target,
        &remote,
    );
}
