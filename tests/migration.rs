//! Switching from Apache Kafka's MirrorMaker 2 (connect-mirror 4.1.1, dedicated mode) to
//! strait and back, on one `mm2.properties`, while a producer writes numbered records: strait
//! resumes after the last source offset MM2 committed to Connect's offsets topic (no re-copy,
//! nothing missing), a consumer group that read part of the topic on the source fails over to
//! the target without missing a record, and `strait handback` lets MM2 resume where strait
//! stopped. The comparison reads both clusters with the Java consumer.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use common::kafka::{self, Cluster, Mm2};
use common::sequence;
use common::strait::{arg, config_file, run_cli, Strait};

/// Records produced before MirrorMaker 2 starts.
const BEFORE: u64 = 3000;
/// Records produced while it runs (and is stopped), then while strait runs.
const DURING: u64 = 4000;
/// Records produced once strait runs (so that it copies some, however far MM2 got).
const AFTER: u64 = 1000;
/// What a consumer group reads on the source before the switch.
const READ_ON_SOURCE: usize = 1000;

/// Total records on `topic`.
fn total(c: &Cluster, topic: &str) -> i64 {
    kafka::end_offsets(c, topic).iter().map(|&(_, o)| o).sum()
}

/// Starts `Workload produce` of records `first..first + count` at `rate` per second in the
/// background.
fn produce_in_background(
    source: &'static Cluster,
    topic: &str,
    first: u64,
    count: u64,
    rate: u64,
) -> std::thread::JoinHandle<kafka::Produced> {
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let (first, count, rate) = (first.to_string(), count.to_string(), rate.to_string());
        kafka::produce(
            source,
            &[
                "--topic", &topic, "--first", &first, "--count", &count, "--rate", &rate,
            ],
        )
    })
}

/// Waits until MM2 has copied at least `records` of `remote` to the target.
fn wait_mm2_copied(mm2: &mut Mm2, target: &Cluster, remote: &str, records: i64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while total(target, remote) < records {
        mm2.assert_running();
        assert!(
            Instant::now() < deadline,
            "MM2 did not copy {records} records of {remote}:\n{}",
            mm2.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits for `producer` to have written its `count` records, then until strait has copied
/// every record of `topic` to `remote`: the comparison, with nothing lost and order kept.
fn caught_up(
    strait: &mut Strait,
    producer: std::thread::JoinHandle<kafka::Produced>,
    count: u64,
    topic: &str,
    remote: &str,
) -> sequence::Report {
    let [source, target] = kafka::clusters();
    assert_eq!(producer.join().unwrap().committed, count);
    let timeout = Duration::from_secs(120);
    let report = sequence::wait_caught_up(strait, source, topic, target, remote, timeout);
    println!("{report}");
    assert!(report.ok(), "{report}");
    report
}

/// `strait status --json` on `path`: the partitions of its one flow.
fn status(path: &std::path::Path) -> Vec<serde_json::Value> {
    let (code, out) = run_cli(&["status", arg(path), "--json"]);
    assert_eq!(code, 0, "{out}");
    // The JSON document, then the config file's warnings.
    let mut values = serde_json::Deserializer::from_str(&out).into_iter::<serde_json::Value>();
    let flows = values
        .next()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    flows[0]["partitions"].as_array().unwrap().clone()
}

/// The `repeated_at_most` strait logged when it took the flow over.
fn repeated_at_most(strait: &mut Strait) -> i64 {
    let line = strait.wait_for_log_line(Duration::from_secs(60), |l| {
        l.contains("took over from MirrorMaker 2")
    });
    let field = "\"repeated_at_most\":";
    let rest = &line[line.find(field).unwrap_or_else(|| panic!("{line}")) + field.len()..];
    rest[..rest.find([',', '}']).unwrap()].parse().unwrap()
}

/// MM2 replicates part of a topic while a producer runs and a group has read part of it on
/// the source; MM2 stops (SIGTERM: it commits its positions). strait on MM2's own file
/// resumes each partition right after MM2's last committed offset: the target ends up with
/// every source record exactly once. The group's offsets, synced by strait through MM2's own
/// offset syncs below the take-over point, make it read the rest on the target with nothing
/// missing. Then strait stops, `strait handback` writes its positions into MM2's offsets
/// topic, and MM2 on the same file resumes there: again every record exactly once.
#[test]
fn strait_takes_over_from_a_stopped_mirror_maker_2_and_hands_back() {
    let t0 = Instant::now();
    let lap = |what: &str| println!("[{:5.1} s] {what}", t0.elapsed().as_secs_f64());
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("switch");
    let group = kafka::unique("switch-group");
    let remote = format!("s.{topic}");
    kafka::create_topic(source, &topic, 3, &[]);
    let count = BEFORE.to_string();
    kafka::produce(source, &["--topic", &topic, "--count", &count]);
    lap("records produced");

    let file = kafka::mm2_file("s", source, target, &topic, &[]);
    let (_dir, path) = config_file("mm2.properties", &file);
    let mut mm2 = Mm2::start(&file);
    let producer = produce_in_background(source, &topic, BEFORE, DURING, 200);
    wait_mm2_copied(&mut mm2, target, &remote, BEFORE as i64 + 500);
    mm2.stop();
    let copied_by_mm2 = kafka::end_offsets(target, &remote);
    lap(&format!("MM2 copied {copied_by_mm2:?} and stopped"));
    // A group reads part of what MM2 copied, on the source, after MM2 stopped: only strait
    // can translate its offsets, through MM2's offset syncs.
    let on_source = kafka::consume(source, &topic, &group, READ_ON_SOURCE);
    assert_eq!(on_source.len(), READ_ON_SOURCE);
    let read_upto: BTreeMap<i32, i64> = on_source.iter().fold(BTreeMap::new(), |mut m, r| {
        let next = m.entry(r.partition).or_insert(0);
        *next = (*next).max(r.offset + 1);
        m
    });

    // `strait status` shows MM2's positions: after a clean stop, each is the end of what MM2
    // copied (the source has no gaps), and MM2's is the origin.
    let parts = status(&path);
    for (p, end) in &copied_by_mm2 {
        let row = parts
            .iter()
            .find(|r| r["topic"] == *topic && r["partition"] == *p)
            .unwrap_or_else(|| panic!("partition {p} in {parts:?}"));
        assert_eq!(row["origin"], "mirrormaker2", "{row}");
        assert_eq!(row["committed"], *end, "{row}");
    }

    let mut strait = Strait::start(&file, "properties").allow(&kafka::MM2_WORKER_KEYS);
    let repeated = repeated_at_most(&mut strait);
    lap(&format!(
        "strait took over (repeats at most {repeated} records)"
    ));
    let first = (BEFORE + DURING).to_string();
    let count = AFTER.to_string();
    kafka::produce(
        source,
        &["--topic", &topic, "--first", &first, "--count", &count],
    );
    let report = caught_up(&mut strait, producer, DURING, &topic, &remote);
    assert_eq!(
        report.duplicates(),
        0,
        "MM2 committed its positions when it stopped: nothing is copied twice\n{report}"
    );
    assert_eq!(
        kafka::end_offsets(target, &remote),
        kafka::end_offsets(source, &topic)
    );
    lap("strait copied the rest: every record once");

    // The group fails over: strait syncs its offsets (translated through MM2's syncs, MM2's
    // way) to the target, where it reads the rest, missing nothing.
    strait.wait_until("strait to sync the group", Duration::from_secs(60), || {
        let synced = kafka::committed_offsets(target, &group);
        (synced.len() == read_upto.len()).then_some(synced)
    });
    for row in status(&path).iter().filter(|r| r["topic"] == *topic) {
        assert_eq!(row["origin"], "strait", "{row}");
        assert!(row["taken_over_at"].as_i64().is_some(), "{row}");
    }
    // No hand-back while strait runs: it would commit past what MM2 resumes from.
    let (code, out) = run_cli(&["handback", arg(&path)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the flow still runs: its heartbeats on t keep coming"),
        "{out}"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let synced = kafka::committed_offsets(target, &group);
    for (t, p, o) in &synced {
        assert_eq!(t, &remote);
        assert!(*o <= read_upto[p], "{synced:?} past {read_upto:?}");
        println!(
            "partition {p}: committed on the source {}, synced {o} (MM2's rule re-reads {})",
            read_upto[p],
            read_upto[p] - o
        );
    }
    let on_target = kafka::consume(target, &remote, &group, (BEFORE + DURING + AFTER) as usize);
    let mut all: HashSet<&Vec<u8>> = on_source
        .iter()
        .map(|r| r.value.as_ref().unwrap())
        .collect();
    all.extend(on_target.iter().map(|r| r.value.as_ref().unwrap()));
    assert_eq!(
        all.len() as u64,
        BEFORE + DURING + AFTER,
        "the group reads every record, on the source or on the target"
    );
    lap("the group read the rest on the target");

    // Hand-back: MM2 resumes where strait stopped.
    let (code, out) = run_cli(&["handback", arg(&path)]);
    assert_eq!(code, 0, "{out}");
    // The topic's 3 partitions (and the source's heartbeats, once strait copied some).
    assert!(
        out.contains(" positions written to mm2-offsets.s.internal on t"),
        "{out}"
    );
    let first = (BEFORE + DURING + AFTER).to_string();
    kafka::produce(
        source,
        &["--topic", &topic, "--first", &first, "--count", "1000"],
    );
    let mut mm2 = Mm2::start(&file);
    let all_records = (BEFORE + DURING + AFTER + 1000) as i64;
    wait_mm2_copied(&mut mm2, target, &remote, all_records);
    // Anything MM2 copied twice would show as more records, given a moment.
    std::thread::sleep(Duration::from_secs(3));
    mm2.stop();
    let report = sequence::compare(
        &kafka::values_by_partition(source, &topic),
        &kafka::values_by_partition(target, &remote),
    );
    assert!(report.ok(), "{report}");
    assert_eq!(report.duplicates(), 0, "{report}");
    lap("MM2 resumed after the hand-back: every record once");
}

/// MM2 is killed (no last commit: it commits its positions every `offset.flush.interval.ms`)
/// while a producer runs; its Connect group keeps the dead member until its session times out.
/// strait started with `--takeover` waits for that, takes over, and says how many records at
/// most it copies again: nothing is missing, and the duplicates stay within that bound. With
/// `takeover.handback.continuous` strait keeps MM2's offsets current, so MM2 started again
/// after strait stops resumes there without a `strait handback`.
#[test]
fn after_a_killed_mirror_maker_2_strait_waits_and_repeats_only_its_uncommitted_window() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("killed");
    // Another source alias than the other test's: its own Connect group and offsets topic.
    let remote = format!("k.{topic}");
    kafka::create_topic(source, &topic, 2, &[]);
    let file = kafka::mm2_file(
        "k",
        source,
        target,
        &topic,
        // MM2 hands its target's settings to the Connect worker: it commits every 2 s.
        &[
            "t.offset.flush.interval.ms = 2000",
            // strait keeps MM2's offsets current: MM2 can take the flow back at any time.
            "takeover.handback.continuous = true",
        ],
    );
    let (_dir, path) = config_file("mm2.properties", &file);
    // MM2's offsets topic with fewer partitions than Connect's default 25 (as
    // offset.storage.partitions may set it): the hand-back writes into it as it is.
    let offsets = "mm2-offsets.k.internal";
    kafka::create_topic(target, offsets, 5, &[("cleanup.policy", "compact")]);
    let mut mm2 = Mm2::start(&file);
    let producer = produce_in_background(source, &topic, 0, 4000, 400);
    wait_mm2_copied(&mut mm2, target, &remote, 1500);
    // Killed once it has committed positions for both partitions (and goes on copying).
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&path)
        .iter()
        .filter(|r| r["origin"] == "mirrormaker2")
        .count()
        < 2
    {
        mm2.assert_running();
        assert!(
            Instant::now() < deadline,
            "MM2 committed no positions:\n{}",
            mm2.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_millis(1000));
    mm2.kill9();

    let mut strait =
        Strait::start_with(&file, "properties", &["--takeover"]).allow(&kafka::MM2_WORKER_KEYS);
    strait.wait_for_log_line(Duration::from_secs(30), |l| {
        l.contains("MirrorMaker 2 runs this flow; waiting until it stops")
    });
    let repeated = repeated_at_most(&mut strait);
    let report = caught_up(&mut strait, producer, 4000, &topic, &remote);
    println!(
        "duplicates {}, bound logged {repeated}",
        report.duplicates()
    );
    assert!(
        report.duplicates() as i64 <= repeated,
        "more duplicates than the bound strait logged ({repeated}):\n{report}"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());

    // No `strait handback`: MM2 resumes where strait stopped, adding no duplicate.
    kafka::produce(
        source,
        &["--topic", &topic, "--first", "4000", "--count", "500"],
    );
    let mut mm2 = Mm2::start(&file);
    wait_mm2_copied(&mut mm2, target, &remote, 4500 + report.duplicates() as i64);
    std::thread::sleep(Duration::from_secs(3));
    mm2.stop();
    let after = sequence::compare(
        &kafka::values_by_partition(source, &topic),
        &kafka::values_by_partition(target, &remote),
    );
    println!("after MM2 took the flow back:\n{after}");
    assert!(after.ok(), "{after}");
    assert_eq!(after.duplicates(), report.duplicates(), "{after}");
    assert_eq!(
        kafka::end_offsets(target, offsets).len(),
        5,
        "{offsets} kept its partitions"
    );
}
