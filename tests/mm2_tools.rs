//! Proves the MirrorMaker 2 comparison tools against the real thing: a consumer group reads
//! part of a topic on the source, Apache Kafka's MirrorMaker 2 (dedicated mode) replicates the
//! topic and syncs the group's offsets to the target, the real `connect-mirror-client` reads
//! MM2's checkpoints and heartbeats, and the group carries on reading on the target. Prints how
//! many records the group reads twice because of MM2's offset translation.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use common::kafka::{self, Mm2};

const RECORDS: usize = 1000;
const READ_ON_SOURCE: usize = 400;

#[test]
fn mirror_maker_2_group_failover_and_client_queries() {
    let t0 = Instant::now();
    let lap = |what: &str| println!("[{:5.1} s] {what}", t0.elapsed().as_secs_f64());
    let [source, target] = kafka::clusters();
    lap("clusters up");

    let topic = kafka::unique("mm2tools");
    let group = kafka::unique("mm2tools-group");
    let remote = format!("s.{topic}");
    kafka::create_topic(source, &topic, 3, &[]);
    let produced = kafka::produce(source, &["--topic", &topic, "--count", "1000"]);
    assert_eq!(produced.committed, RECORDS as u64);

    // The group reads 400 records on the source and commits exactly what it read.
    let on_source = kafka::consume(source, &topic, &group, READ_ON_SOURCE);
    assert_eq!(on_source.len(), READ_ON_SOURCE);
    let mut read_upto = BTreeMap::new();
    for r in &on_source {
        let next = read_upto.entry(r.partition).or_insert(0);
        assert_eq!(
            r.offset, *next,
            "the group reads each partition from its start, in order"
        );
        *next = r.offset + 1;
    }
    let expected: Vec<(String, i32, i64)> = read_upto
        .iter()
        .map(|(&p, &o)| (topic.clone(), p, o))
        .collect();
    assert_eq!(kafka::committed_offsets(source, &group), expected);
    lap("topic produced, group committed on the source");

    let mut mm2 = Mm2::start(&kafka::mm2_file("s", source, target, &topic, &[]));
    mm2.wait_log("Kafka MirrorMaker started", Duration::from_secs(60));
    lap("MirrorMaker 2 started");

    // Wait for the whole topic on the target and for the group's offsets synced there, equal to
    // what RemoteClusterUtils translates from MM2's checkpoints, and for the source's
    // heartbeats replicated.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut replicated = false;
    let translated = loop {
        mm2.assert_running();
        assert!(
            Instant::now() < deadline,
            "MM2 did not replicate and sync the group in time:\n{}",
            mm2.log()
        );
        if !replicated {
            let end = kafka::end_offsets(target, &remote);
            replicated = end.iter().map(|&(_, o)| o).sum::<i64>() == RECORDS as i64;
            if replicated {
                lap("topic replicated");
            }
        }
        if replicated {
            let synced = kafka::committed_offsets(target, &group);
            if !synced.is_empty() {
                let translated = kafka::translate_offsets(target, "s", &group);
                // MirrorClient's checks below need the source's heartbeats replicated too.
                if translated == synced {
                    if kafka::heartbeat_topics(target).contains(&"s.heartbeats".to_string()) {
                        break translated;
                    }
                    println!("s.heartbeats not on the target yet, waiting");
                } else {
                    println!("synced {synced:?} != translated {translated:?}, waiting");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    lap("group offsets translated and synced to the target");
    // Stopping MM2 fixes the target group's offsets. Its group sync only moves forward, and it
    // may have moved on since the look above (a finer offset sync, a new checkpoint): the
    // group resumes from what is committed once MM2 is gone.
    // While MM2 runs the flow, strait on the same file refuses to take it: it would write
    // every record a second time.
    // MM2's Connect worker keys and group refresh interval have no meaning for strait: it
    // names them in warnings.
    let mut twin = common::strait::Strait::start(
        &kafka::mm2_file("s", source, target, &topic, &[]),
        "properties",
    )
    .allow(&kafka::MM2_WORKER_KEYS)
    .allow(&["MirrorMaker 2 runs this flow"]);
    let status = twin.wait_exit(Duration::from_secs(30));
    let log = twin.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("MirrorMaker 2 runs this flow: its Connect worker group s-mm2 on t has"),
        "{log}"
    );
    lap("strait refused to start beside MirrorMaker 2");
    mm2.stop();
    lap("MirrorMaker 2 stopped");
    let resumed = kafka::committed_offsets(target, &group);
    assert_eq!(
        resumed.len(),
        translated.len(),
        "{resumed:?} {translated:?}"
    );
    for ((t, p, o), (rt, rp, r)) in translated.iter().zip(&resumed) {
        assert_eq!((t, p), (rt, rp));
        assert!(r >= o, "MM2's group offset sync only moves forward");
    }

    // MM2 keeps the offsets (no transactions, a fresh target topic): a synced offset below
    // the committed one is a re-read.
    println!("partition  committed-on-source  synced-on-target  re-read");
    let mut expected_reread = 0;
    for (t, p, o) in &resumed {
        assert_eq!(t, &remote);
        let committed = read_upto
            .get(p)
            .copied()
            .expect("only partitions the group committed");
        assert!(
            *o <= committed,
            "MM2 never translates past the committed offset"
        );
        println!("{p:9}  {committed:19}  {o:16}  {:7}", committed - o);
        expected_reread += (committed - o) as usize;
    }

    // The group carries on on the target.
    let on_target = kafka::consume(target, &remote, &group, RECORDS);
    let read_before: HashSet<&Vec<u8>> = on_source
        .iter()
        .map(|r| r.value.as_ref().unwrap())
        .collect();
    let mut all = read_before.clone();
    let mut reread = 0;
    for r in &on_target {
        let v = r.value.as_ref().unwrap();
        if read_before.contains(v) {
            reread += 1;
        }
        all.insert(v);
    }
    assert_eq!(
        all.len(),
        RECORDS,
        "source and target reads together see every record"
    );
    assert_eq!(on_target.len(), RECORDS - READ_ON_SOURCE + reread);
    assert_eq!(reread, expected_reread);
    println!(
        "MM2 re-read count: {reread} of {READ_ON_SOURCE} records the group had read on the \
         source (read {} on the target)",
        on_target.len()
    );
    lap("group read the rest on the target");

    // MirrorClient's view of the target.
    let checks = std::thread::scope(|s| {
        let upstream = s.spawn(|| kafka::upstream_clusters(target));
        let hops = s.spawn(|| kafka::replication_hops(target, "s"));
        let heartbeats = s.spawn(|| kafka::heartbeat_topics(target));
        let checkpoints = kafka::checkpoint_topics(target);
        (
            upstream.join().unwrap(),
            hops.join().unwrap(),
            heartbeats.join().unwrap(),
            checkpoints,
        )
    });
    let (upstream, hops, heartbeats, checkpoints) = checks;
    assert_eq!(upstream, ["s"]);
    assert_eq!(hops, 1);
    assert!(
        heartbeats.contains(&"s.heartbeats".to_string()),
        "{heartbeats:?}"
    );
    assert_eq!(checkpoints, ["s.checkpoints.internal"]);
    lap("upstream clusters, hops, heartbeat and checkpoint topics checked");

    // The same scenario with strait, side by side: the same group, the same committed source
    // offsets, another remote topic (alias `st`).
    let extra = [
        "emit.checkpoints.interval.seconds = 1",
        "sync.group.offsets.enabled = true",
        "sync.group.offsets.interval.seconds = 1",
    ];
    let config = common::strait::mm2_properties("st", "t", &topic, &extra);
    let mut strait = common::strait::Strait::start(&config, "properties");
    let remote_st = format!("st.{topic}");
    common::strait::wait_for_records(
        &mut strait,
        target,
        &remote_st,
        3,
        RECORDS as i64,
        Duration::from_secs(90),
    );
    strait.wait_until("strait to sync the group", Duration::from_secs(60), || {
        let synced = kafka::committed_offsets(target, &group)
            .iter()
            .filter(|(t, _, _)| *t == remote_st)
            .count();
        (synced >= read_upto.len()).then_some(())
    });
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let on_target = kafka::consume(target, &remote_st, &group, RECORDS);
    let reread_st = on_target
        .iter()
        .filter(|r| read_before.contains(r.value.as_ref().unwrap()))
        .count();
    let mut all = read_before.clone();
    all.extend(on_target.iter().map(|r| r.value.as_ref().unwrap()));
    assert_eq!(all.len(), RECORDS, "strait: every record read once");
    println!("strait re-read count: {reread_st} (MirrorMaker 2: {reread}) of {READ_ON_SOURCE}");
    assert_eq!(reread_st, 0, "strait translates exactly");
    lap("strait: the group read exactly the rest on the target");
}
