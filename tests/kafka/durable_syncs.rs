//! Offset syncs are durable before the progress that depends on them: while the syncs topic
//! cannot be written (here: deleted), strait retries the appends and commits no position past
//! them, so that a restarted strait (whose offset maps are rebuilt from the syncs and the
//! committed progress) translates every group offset exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::kafka;
use crate::common::strait::{
    block_on, client, mm2_properties, wait_for_records, wait_for_topic, Strait,
};
use strait::kafka::TopicPartition;
use strait::mm2::offset_sync;
use strait::offset_map::{OffsetMap, Position};
use strait::progress;

/// The warning of a syncs writer that keeps retrying.
const SYNCS_RETRYING: &str = "offset syncs not written";

/// The committed progress of `tp`, read back as a restarted strait reads it.
fn committed(
    target: &kafka::Cluster,
    progress_topic: &str,
    tp: &TopicPartition,
) -> Option<Position> {
    block_on(progress::load(&client(target), progress_topic))
        .unwrap_or_default()
        .get(tp)
        .map(|(pos, _)| *pos)
}

fn delete_topic(cluster: &kafka::Cluster, topic: &str) {
    kafka::tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &cluster.bootstrap,
            "--delete",
            "--topic",
            topic,
        ],
    );
}

#[test]
fn progress_waits_for_durable_offset_syncs() {
    let [source, target] = kafka::clusters();
    let (source_alias, target_alias) = (kafka::unique("dsrc"), kafka::unique("dtgt"));
    let topic = kafka::unique("gaps");
    let tp = TopicPartition::new(topic.as_str(), 0);
    let remote = format!("{source_alias}.{topic}");
    let syncs_topic = format!("mm2-offset-syncs.{target_alias}.internal");
    let progress_topic = progress::topic_name(&source_alias);
    kafka::create_topic(source, &topic, 1, &[]);
    // Visible to metadata before strait's first discovery looks (a busy controller lags).
    wait_for_topic(source, &topic);
    let config = mm2_properties(
        &source_alias,
        &target_alias,
        &topic,
        &["progress.commit.interval.ms = 200"],
    );
    let mut strait = Strait::start(&config, "properties").allow(&[SYNCS_RETRYING]);
    // strait creates the syncs topic at start; deleted, it cannot be written (UNKNOWN_TOPIC_OR_
    // PARTITION, retriable: the source does not create topics on Produce).
    wait_for_topic(source, &syncs_topic);
    delete_topic(source, &syncs_topic);
    // Transactions of 10 records, every third aborted: a gap (and two syncs) at each.
    let produced = kafka::produce(
        source,
        &[
            "--topic",
            &topic,
            "--count",
            "300",
            "--transactional-id",
            &kafka::unique("gaps-txn"),
            "--txn-size",
            "10",
            "--abort-every",
            "3",
        ],
    );
    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        produced.committed as i64,
        Duration::from_secs(60),
    );
    // Many commit intervals pass; none may commit a position whose syncs are not written.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        committed(target, &progress_topic, &tp),
        None,
        "progress committed while its offset syncs could not be written: {:?}",
        block_on(offset_sync::load(&client(source), &syncs_topic))
            .unwrap()
            .get(&tp)
    );

    // The topic is back: the writer's retries get through and the progress follows.
    kafka::create_topic(source, &syncs_topic, 1, &[("cleanup.policy", "compact")]);
    let source_end = kafka::end_offsets(source, &topic)[0].1;
    strait.wait_until(
        "progress at the source end",
        Duration::from_secs(60),
        || committed(target, &progress_topic, &tp).filter(|p| p.source_next >= source_end),
    );
    // A restart resumes from there, with the offset maps rebuilt as below.
    strait.kill9();
    strait.restart();
    std::thread::sleep(Duration::from_secs(2));
    assert!(strait.terminate().success(), "{}", strait.log_text());

    // The offset map a restart rebuilds translates every source offset to the target offset
    // of that very record (or of the first one after it): compare with what both logs hold.
    let syncs = block_on(offset_sync::load(&client(source), &syncs_topic)).unwrap();
    let map = OffsetMap::from_syncs(
        syncs.get(&tp).cloned().unwrap_or_default(),
        committed(target, &progress_topic, &tp),
    );
    let on_source: Vec<(i64, Vec<u8>)> = kafka::dump(source, &topic)
        .into_iter()
        .map(|r| (r.offset, r.value.unwrap()))
        .collect();
    let on_target: BTreeMap<i64, Vec<u8>> = kafka::dump(target, &remote)
        .into_iter()
        .map(|r| (r.offset, r.value.unwrap()))
        .collect();
    let target_end = on_target.keys().last().unwrap() + 1;
    for c in on_source[0].0..=source_end {
        let want = on_source.iter().find(|(o, _)| *o >= c).map(|(_, v)| v);
        let got = map.translate(c);
        let Some(t) = got else {
            panic!(
                "source offset {c} does not translate; syncs {:?}",
                syncs.get(&tp)
            );
        };
        match want {
            Some(v) => assert_eq!(
                on_target.get(&t),
                Some(v),
                "source offset {c} translates to target offset {t}, which does not hold its record"
            ),
            None => assert_eq!(t, target_end, "source offset {c} is past the last record"),
        }
    }
}
