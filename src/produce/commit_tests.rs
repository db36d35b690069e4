//! Tests of `Engine::commit` against a scripted broker: progress waits for durable offset
//! syncs, and a target that takes nothing (an outage) holds one commit, not one per tick.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, DescribeConfigsResponse, RequestKind, ResponseKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Engine, ProduceConfig, Route};
use crate::config::OffsetReset;
use crate::fetch::{FetchConfig, Fetcher};
use crate::kafka::fake_broker::{FakeBroker, Reply};
use crate::kafka::{Cluster, TopicPartition};
use crate::mm2::offset_sync;
use crate::offset_map::{Lineage, Position};

const SYNCS_TOPIC: &str = "mm2-offset-syncs.b.internal";

fn pos(source_next: i64, target_next: i64) -> Position {
    Position {
        source_next,
        target_next,
    }
}

#[tokio::test]
async fn commit_waits_for_durable_syncs_and_keeps_one_commit_queued() {
    let broker = FakeBroker::start(1, &[(SYNCS_TOPIC, 1)], |r| match &r.body {
        // No `max.message.bytes` on the progress topic: the default batch size.
        RequestKind::DescribeConfigs(_) => Reply::Answer(ResponseKind::DescribeConfigs(
            DescribeConfigsResponse::default(),
        )),
        _ => Reply::Default,
    })
    .await;
    let cluster = Arc::new(Cluster::new(
        "b",
        vec![broker.addr.clone()],
        "t",
        Duration::from_secs(5),
    ));
    let shutdown = CancellationToken::new();
    let (events, _events) = mpsc::channel(1);
    let fetch = FetchConfig {
        max_wait_ms: 100,
        max_bytes: 1 << 20,
        partition_max_bytes: 1 << 20,
        offset_reset: OffsetReset::Earliest,
        buffer_bytes: 1 << 20,
    };
    let (fetcher, _fetch_task) = Fetcher::spawn(&cluster, fetch, events, shutdown.clone());
    let (syncs, syncs_rx) = offset_sync::queue();
    let config = ProduceConfig {
        max_in_flight: Some(5),
        max_request_bytes: 1 << 20,
        commit_interval: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(1),
        coalesce_bytes: 0,
        connections: 1,
        delivery_timeout: Duration::from_secs(120),
        transactional_id: None,
        exactly_once: false,
    };
    let mut engine = Engine::new(
        cluster.clone(),
        config,
        "strait-progress.a.internal",
        Default::default(),
        syncs,
        fetcher,
    )
    .await
    .unwrap();
    let tp = TopicPartition::new("t", 0);
    engine.route(Route {
        source: tp.clone(),
        target: TopicPartition::new("a.t", 0),
        resume: None,
        slot: 0,
        lineage: Lineage::UNKNOWN,
        new_log: false,
        origin: None,
    });
    let i = engine.by_source[&tp];
    let progress = engine.progress_part;

    // The example of issue 12: 0..9 → 0..9, a gap, 20..24 → 10..14, acknowledged; its
    // syncs are not written yet.
    engine.parts[i].acked = pos(25, 15);
    engine
        .syncs
        .add(&tp, vec![(0, 0), (9, 9), (20, 10)], pos(25, 15), Vec::new);
    engine.commit();
    assert!(
        engine.parts[progress].queue.is_empty(),
        "progress queued before its offset syncs were durable"
    );

    // The writer appends them; then the position commits.
    let writer = tokio::spawn(offset_sync::run(
        cluster.clone(),
        SYNCS_TOPIC.to_string(),
        1,
        syncs_rx,
        shutdown.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(10), async {
        while !engine.syncs.settled() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the syncs are written");
    assert!(!broker.received_of(ApiKey::Produce).is_empty());
    engine.commit();
    let queued: Vec<_> = engine.parts[progress]
        .queue
        .iter()
        .map(|e| e.commits.clone())
        .collect();
    assert_eq!(queued, [vec![(i, pos(25, 15))]]);

    // The target takes nothing (nothing is sent here): ticks go on with newer positions,
    // and one commit, the newest, waits.
    for k in 1..=10 {
        let p = pos(25 + k, 15 + k);
        engine.parts[i].acked = p;
        engine.syncs.add(&tp, Vec::new(), p, Vec::new);
        engine.commit();
    }
    let queued: Vec<_> = engine.parts[progress]
        .queue
        .iter()
        .map(|e| e.commits.clone())
        .collect();
    assert_eq!(
        queued,
        [vec![(i, pos(35, 25))]],
        "one commit per tick queued"
    );

    drop(engine);
    writer.await.unwrap().unwrap();
    shutdown.cancel();
}
