//! Engine tests against the scripted fake broker (`kafka::fake_broker`): the answer
//! sequences a real broker gives only by accident (a batch refused and the next one accepted,
//! a broker that never answers), with the engine's real loop, requests and connections.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, MetadataResponse, ProduceResponse, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use super::*;
use crate::batch::{decode_uncompressed, encode_batch, OwnRecord};
use crate::fetch::Fetched;
use crate::kafka::fake_broker::{FakeBroker, Received, Reply, HOLD_LIMIT};
use crate::mm2::offset_sync;

const PROGRESS: &str = "progress";

/// A source batch of `records` records starting at source offset `base`.
fn batch(base: i64, records: usize) -> RawBatch {
    let records: Vec<OwnRecord> = (0..records)
        .map(|i| OwnRecord {
            key: None,
            value: Some(b"v"),
            timestamp: i as i64,
        })
        .collect();
    let mut bytes = BytesMut::from(&encode_batch(&records, &ProducerStamp::NONE)[..]);
    bytes[..8].copy_from_slice(&base.to_be_bytes());
    RawBatch::new(bytes.freeze()).unwrap()
}

/// A topic as a Produce request names it: by name up to v12, by id from v13 (KIP-516).
#[derive(Clone)]
struct Topic {
    name: &'static str,
    id: uuid::Uuid,
}

impl Topic {
    async fn of(target: &Cluster, name: &'static str) -> Topic {
        let meta = target.metadata(Some(&[name.to_string()])).await.unwrap();
        Topic {
            name,
            id: meta[0].id,
        }
    }

    fn is(&self, t: &kafka_protocol::messages::produce_request::TopicProduceData) -> bool {
        t.name.0.as_str() == self.name || (t.name.0.is_empty() && t.topic_id == self.id)
    }
}

/// The record count of every batch a Produce request carries for `topic`.
fn produced(request: &Received, topic: &Topic) -> Vec<i32> {
    let RequestKind::Produce(produce) = &request.body else {
        return Vec::new();
    };
    produce
        .topic_data
        .iter()
        .filter(|t| topic.is(t))
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref())
        .map(|records: &Bytes| RawBatch::new(records.clone()).unwrap().record_count())
        .collect()
}

/// An answer to `request` with `code` for `topic`'s partitions and success for the others.
fn answer(request: &Received, topic: &Topic, code: i16, throttle_ms: i32) -> Reply {
    respond(request, topic, Some(code), throttle_ms)
}

/// An answer to `request` that lacks `topic`'s partitions (`code` `None`) or gives them
/// `code`, and success for the others.
fn respond(request: &Received, topic: &Topic, code: Option<i16>, throttle_ms: i32) -> Reply {
    let RequestKind::Produce(produce) = &request.body else {
        return Reply::Default;
    };
    let responses = produce
        .topic_data
        .iter()
        .filter(|t| code.is_some() || !topic.is(t))
        .map(|t| {
            let code = code.unwrap_or(0);
            let refused = topic.is(t);
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(if refused { code } else { 0 })
                                .with_base_offset(if refused { -1 } else { 0 })
                        })
                        .collect(),
                )
        })
        .collect();
    Reply::Answer(ResponseKind::Produce(
        ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(throttle_ms),
    ))
}

/// A Metadata answer naming `brokers` (id, `host:port`) and `topics` (name, the leader of
/// their one partition), whatever was asked.
fn metadata(brokers: &[(i32, String)], topics: &[(&str, i32)]) -> Reply {
    let brokers = brokers
        .iter()
        .map(|(id, addr)| {
            let (host, port) = addr.rsplit_once(':').unwrap();
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(*id))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().unwrap())
        })
        .collect();
    let topics = topics
        .iter()
        .map(|(name, leader)| {
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
                .with_topic_id(uuid::Uuid::from_u128(
                    name.bytes().fold(1, |id, b| id * 257 + u128::from(b)),
                ))
                .with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_leader_id(BrokerId(*leader))
                    .with_replica_nodes(vec![BrokerId(*leader)])
                    .with_isr_nodes(vec![BrokerId(*leader)])])
        })
        .collect();
    Reply::Answer(ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_controller_id(BrokerId(1))
            .with_topics(topics),
    ))
}

/// Broker 1, a fake broker leading `a` and the progress topic, whose metadata says broker 2
/// at `other` leads `b`.
async fn broker_beside(other: String) -> FakeBroker {
    let own: Arc<Mutex<Option<String>>> = Arc::default();
    let addr = own.clone();
    let broker = FakeBroker::start(1, &[("a", 1), (PROGRESS, 1)], move |r| match r.body {
        RequestKind::Metadata(_) => {
            let own = addr.lock().unwrap().clone().unwrap();
            metadata(
                &[(1, own), (2, other.clone())],
                &[("a", 1), ("b", 2), (PROGRESS, 1)],
            )
        }
        _ => Reply::Default,
    })
    .await;
    *own.lock().unwrap() = Some(broker.addr.clone());
    broker
}

/// Partition `partition` of `source` into `target`, with nothing committed.
fn fresh_route(source: &str, target: &str, partition: i32) -> Route {
    Route {
        source: TopicPartition::new(source, partition),
        target: TopicPartition::new(target, partition),
        resume: None,
        slot: 0,
        lineage: Lineage::UNKNOWN,
        new_log: false,
        origin: None,
    }
}

fn config() -> ProduceConfig {
    ProduceConfig {
        max_in_flight: Some(5),
        max_request_bytes: 1 << 20,
        commit_interval: Duration::from_millis(20),
        drain_timeout: Duration::from_secs(2),
        coalesce_bytes: 0,
        connections: 1,
        delivery_timeout: Duration::from_secs(120),
        transactional_id: None,
        exactly_once: false,
    }
}

/// A running engine writing to `target`.
struct Running {
    events: mpsc::Sender<FetchEvent>,
    stats: watch::Receiver<Stats>,
    translations: Translations,
    shutdown: CancellationToken,
    task: JoinHandle<Result<Stats, KafkaError>>,
    buffer: Arc<Semaphore>,
    /// The source side's broker, holding the offset syncs topic the engine's syncs go to
    /// (progress is committed only once they are written).
    syncs_broker: FakeBroker,
    /// The remote topics the engine reported missing on the target.
    missing: mpsc::UnboundedReceiver<String>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Running {
    async fn start(target: Cluster, config: ProduceConfig, routes: &[(&str, &str)]) -> Running {
        Running::start_with(target, config, routes, Fetcher::detached()).await
    }

    /// `start`, the engine's orders to the source side going to `fetcher`.
    async fn start_with(
        target: Cluster,
        config: ProduceConfig,
        routes: &[(&str, &str)],
        fetcher: Fetcher,
    ) -> Running {
        let routes = routes
            .iter()
            .map(|(source, target)| fresh_route(source, target, 0))
            .collect();
        Running::start_routes(
            target,
            config,
            routes,
            fetcher,
            Translations::default(),
            None,
        )
        .await
    }

    /// `start_with` on `routes` as they are, with the offset maps `translations` holds.
    async fn start_routes(
        target: Cluster,
        config: ProduceConfig,
        routes: Vec<Route>,
        fetcher: Fetcher,
        translations: Translations,
        lease: Option<Arc<crate::group::Lease>>,
    ) -> Running {
        const SYNCS: &str = "mm2-offset-syncs.target.internal";
        let syncs_broker = FakeBroker::start(1, &[(SYNCS, 1)], |_| Reply::Default).await;
        let source = Cluster::new(
            "source",
            vec![syncs_broker.addr.clone()],
            "strait",
            target.timeout(),
        );
        let (syncs, syncs_rx) = offset_sync::queue();
        tokio::spawn(offset_sync::run(
            Arc::new(source),
            SYNCS.into(),
            1,
            syncs_rx,
            CancellationToken::new(),
        ));
        let mut engine = Engine::new(
            Arc::new(target),
            config,
            PROGRESS,
            translations.clone(),
            syncs,
            fetcher,
        )
        .await
        .unwrap();
        let (missing_tx, missing) = mpsc::unbounded_channel();
        engine.report_missing_topics(missing_tx);
        if let Some(lease) = lease {
            engine.hold_by(lease);
        }
        for route in routes {
            engine.route(route);
        }
        let (events, events_rx) = mpsc::channel(16);
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (stats_tx, stats) = watch::channel(Stats::default());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(engine.run(events_rx, commands_rx, stats_tx, shutdown.clone()));
        Running {
            events,
            stats,
            translations,
            shutdown,
            task,
            buffer: Arc::new(Semaphore::new(1000)),
            syncs_broker,
            missing,
            commands,
        }
    }

    /// Hands the engine `batches` of source partition `source`-0, the end of what can be
    /// read of the source being `source_end`.
    async fn fetched(&self, source: &str, batches: Vec<RawBatch>, source_end: i64) {
        let permit = Arc::new(self.buffer.clone().acquire_owned().await.unwrap());
        let from = batches.first().map_or(0, RawBatch::base_offset);
        let next_offset = batches.last().map_or(0, RawBatch::next_offset);
        let batches = batches
            .into_iter()
            .map(|batch| Fetched {
                source_next: batch.next_offset(),
                batch,
                offset_deltas: None,
            })
            .collect();
        self.events
            .send(FetchEvent::Chunk(Chunk {
                tp: TopicPartition::new(source, 0),
                batches,
                from,
                next_offset,
                source_end,
                generation: 0,
                permit,
            }))
            .await
            .unwrap();
    }

    fn translate(&self, source: &str, offset: i64) -> Option<i64> {
        let maps = self.translations.lock().unwrap();
        maps.get(&TopicPartition::new(source, 0))?.translate(offset)
    }

    /// The source position the target acknowledged for `source`-0 (-1: none yet).
    fn position(&self, source: &str) -> i64 {
        let maps = self.translations.lock().unwrap();
        maps.get(&TopicPartition::new(source, 0))
            .map_or(-1, |m| m.position().source_next)
    }

    /// Stops the engine; how long it took.
    async fn stop(self) -> Duration {
        let started = Instant::now();
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the engine stops")
            .unwrap()
            .unwrap();
        started.elapsed()
    }
}

/// The target cluster of the fake `broker`, with request timeout `timeout`.
fn target(broker: &FakeBroker, timeout: Duration) -> Cluster {
    Cluster::new("target", vec![broker.addr.clone()], "strait", timeout)
}

/// Waits up to 10 s for `done`.
async fn until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// E1 refused, E2 behind it accepted (the target lost strait's producer state): E1 is not
/// counted as delivered, it is written again (E2 with it, keeping their order), and the
/// position does not pass E1 before the target acknowledged it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_behind_a_refused_batch_does_not_count_it() {
    let batches: Arc<Mutex<Vec<i32>>> = Arc::default();
    let seen = batches.clone();
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(1, &[("t", 1), (PROGRESS, 1)], move |r| {
        let Some(t) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        let counts = produced(r, &t);
        if counts.is_empty() {
            return Reply::Default;
        }
        let mut seen = seen.lock().unwrap();
        seen.extend(&counts);
        if seen.len() == 2 {
            // Hold E1's answer until the engine has sent E2 (3 records) behind it.
            let Reply::Answer(refused) = answer(r, &t, ResponseError::NotEnoughReplicas.code(), 0)
            else {
                unreachable!("a Produce request is answered");
            };
            let t = t.clone();
            return Reply::AnswerAfter(refused, Box::new(move |r| produced(r, &t) == [3]));
        }
        Reply::Default
    })
    .await;
    let target = target(&broker, Duration::from_secs(5));
    *t.lock().unwrap() = Some(Topic::of(&target, "t").await);
    let mut running = Running::start(target, config(), &[("s", "t")]).await;
    // E0 (offset 0) first: until the target confirmed one batch only one is in flight.
    running.fetched("s", vec![batch(0, 1)], 6).await;
    until(|| running.stats.borrow().lag == 5).await;
    running
        .fetched("s", vec![batch(1, 2), batch(3, 3)], 6)
        .await;
    // The position must not pass E1 (offsets 1..2) before the target took E1 again.
    let mut lags = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let lag = running.stats.borrow_and_update().lag;
        let sent = batches.lock().unwrap().len();
        lags.push((lag, sent));
        if lag == 0 {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), running.stats.changed()).await;
    }
    let sent = batches.lock().unwrap().clone();
    assert_eq!(
        sent,
        vec![1, 2, 3, 2, 3],
        "E1 and E2 are written again, in order"
    );
    assert!(
        lags.iter().all(|&(lag, sent)| lag >= 5 || sent >= 4),
        "the position passed E1 before it was written again: (lag, batches sent) {lags:?}"
    );
    assert_eq!(lags.last().map(|l| l.0), Some(0), "{lags:?}");
    // The target holds E0, E2's orphan copy, then E1 and E2 again, in order: the map points
    // at the copies written in order. (The fake broker numbers one log for every topic it
    // is sent by id, progress batches included: offsets only grow.)
    let (e1, e2) = (
        running.translate("s", 1).unwrap(),
        running.translate("s", 3).unwrap(),
    );
    assert!(
        e1 >= 4,
        "E1 is written after E0 and E2's orphan copy, at {e1}"
    );
    assert!(e2 >= e1 + 2, "E2 ({e2}) follows E1 ({e1})");
    running.stop().await;
}

/// The last source position of `source` in the progress records `broker` was sent.
fn committed(broker: &FakeBroker, source: &TopicPartition) -> Option<i64> {
    let mut last = None;
    for request in broker.received_of(ApiKey::Produce) {
        let RequestKind::Produce(produce) = &request.body else {
            continue;
        };
        let records = produce.topic_data.iter().flat_map(|t| &t.partition_data);
        for bytes in records.filter_map(|p| p.records.clone()) {
            let Ok(batch) = RawBatch::new(bytes) else {
                continue;
            };
            for r in decode_uncompressed(&batch).unwrap_or_default() {
                let (Some(k), Some(v)) = (r.key, r.value) else {
                    continue;
                };
                if let Some((_, pos, _)) =
                    progress::decode(&k, &v).filter(|(tp, _, _)| tp == source)
                {
                    last = Some(pos.source_next);
                }
            }
        }
    }
    last
}

/// Waits up to `limit` for `done`; how long it took (`limit` when it never came).
async fn within(limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

/// A broker that accepts TCP and never answers (not even ApiVersions) holds up neither the
/// batches to the other broker nor the shutdown: it is dialled in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_holds_up_neither_the_others_nor_shutdown() {
    let silent = FakeBroker::silent().await;
    let broker = broker_beside(silent.addr.clone()).await;
    // Far above what the checks below allow, so that a noisy machine cannot blur the
    // difference between a dial in the background and one the loop waits for.
    let timeout = Duration::from_secs(15);
    let target = target(&broker, timeout);
    // Progress is committed by the drain only.
    let config = ProduceConfig {
        drain_timeout: Duration::from_secs(30),
        commit_interval: Duration::from_secs(3600),
        ..config()
    };
    let running = Running::start(target, config, &[("sa", "a"), ("sb", "b")]).await;
    running.fetched("sb", vec![batch(0, 1)], 1).await;
    running.fetched("sa", vec![batch(0, 1)], 2).await;
    let took = within(timeout, || running.position("sa") == 1).await;
    assert!(
        took < Duration::from_secs(5),
        "the first batch to broker 1 took {took:?}"
    );
    running.fetched("sa", vec![batch(1, 1)], 2).await;
    let took = within(timeout, || running.position("sa") == 2).await;
    assert!(
        took < Duration::from_secs(5),
        "the second batch to broker 1 took {took:?}"
    );
    // The drain does not wait for the batch it cannot send to broker 2 (nor for the 30 s
    // of its timeout): it commits what broker 1 acknowledged and stops.
    let took = running.stop().await;
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert_eq!(
        committed(&broker, &TopicPartition::new("sa", 0)),
        Some(2),
        "the drain committed progress"
    );
}

/// A drain waits for a connection being dialled to a broker it already writes to: with two
/// connections, a partition whose first batch comes after the broker went slow has it queued
/// behind the second connection's handshake. The drain took that for a broker it cannot
/// reach and stopped at once, leaving the batch for the next start; it now waits for the
/// handshake (within `shutdown.drain.timeout.ms`) and commits the batch's position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_a_connection_being_dialled_to_a_broker_it_reaches() {
    let slow = Arc::new(AtomicBool::new(false));
    let handshakes = slow.clone();
    let broker = FakeBroker::start(1, &[("t0", 1), ("t1", 1), (PROGRESS, 1)], move |r| {
        if handshakes.load(Ordering::SeqCst) && r.api_key() == Some(ApiKey::ApiVersions) {
            Reply::DefaultAfter(Duration::from_secs(2))
        } else {
            Reply::Default
        }
    })
    .await;
    let target = target(&broker, Duration::from_secs(10));
    let config = ProduceConfig {
        connections: 2,
        drain_timeout: Duration::from_secs(20),
        commit_interval: Duration::from_secs(3600),
        ..config()
    };
    // Engine partition 0 is the progress topic's, so "s0" goes over connection 1 and "s1"
    // over connection 0.
    let running = Running::start(target, config, &[("s0", "t0"), ("s1", "t1")]).await;
    running.fetched("s1", vec![batch(0, 1)], 1).await;
    until(|| running.position("s1") == 1).await;
    assert_eq!(running.position("s1"), 1, "connection 0 wrote");
    slow.store(true, Ordering::SeqCst);
    running.fetched("s0", vec![batch(0, 1)], 1).await;
    // The engine has taken the batch in and is dialling connection 1.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let took = running.stop().await;
    assert_eq!(
        committed(&broker, &TopicPartition::new("s0", 0)),
        Some(1),
        "the drain waited for the handshake and committed (stopped after {took:?})"
    );
    assert_eq!(committed(&broker, &TopicPartition::new("s1", 0)), Some(1));
}

/// A broker that refuses every connection is dialled again with a growing backoff, not on
/// every turn of the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_refusing_connections_is_redialled_with_backoff() {
    let refusing = FakeBroker::start(2, &[], |_| Reply::Close).await;
    let broker = broker_beside(refusing.addr.clone()).await;
    let target = target(&broker, Duration::from_secs(3));
    let running = Running::start(target, config(), &[("sb", "b")]).await;
    running.fetched("sb", vec![batch(0, 1)], 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // 50 ms doubling (half-jittered) to 5 s: at most 7 dials in 1.5 s.
    let dials = refusing.received().len();
    assert!((1..=8).contains(&dials), "{dials} dials in 1.5 s");
    running.stop().await;
}

/// The lag is the backlog before anything is acknowledged: a partition whose first batches
/// the target keeps refusing counts from where it was first fetched, and one that has only
/// reported its source end (nothing fetched yet) counts from its fetch position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_counts_partitions_nothing_was_acknowledged_of() {
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(
        1,
        &[("a", 1), ("b", 1), (PROGRESS, 1)],
        move |r| match topic.lock().unwrap().as_ref() {
            Some(a) if !produced(r, a).is_empty() => {
                answer(r, a, ResponseError::NotEnoughReplicas.code(), 0)
            }
            _ => Reply::Default,
        },
    )
    .await;
    let target = target(&broker, Duration::from_secs(5));
    *t.lock().unwrap() = Some(Topic::of(&target, "a").await);
    let mut running = Running::start(target, config(), &[("sa", "a"), ("sb", "b")]).await;
    // sa: records 4..7 fetched from 4, of 10 on the source; none is ever acknowledged.
    running.fetched("sa", vec![batch(4, 3)], 10).await;
    // sb: nothing to fetch at 3 yet, of 8 on the source.
    let permit = Arc::new(running.buffer.clone().acquire_owned().await.unwrap());
    running
        .events
        .send(FetchEvent::Chunk(Chunk {
            tp: TopicPartition::new("sb", 0),
            batches: Vec::new(),
            from: 3,
            next_offset: 3,
            source_end: 8,
            generation: 0,
            permit,
        }))
        .await
        .unwrap();
    let mut lag = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while lag != 6 + 5 && Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(100), running.stats.changed()).await;
        lag = running.stats.borrow_and_update().lag;
    }
    assert_eq!(lag, 6 + 5, "sa: 10 - 4, sb: 8 - 3");
    running.stop().await;
}

/// A broker's throttle time holds its requests back for at most the request timeout, and
/// does not hold up the shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_throttle_time_is_capped_at_the_request_timeout() {
    let mut produced = 0;
    let broker = FakeBroker::start(1, &[("a", 1), (PROGRESS, 1)], move |r| match r.body {
        RequestKind::Produce(_) => {
            produced += 1;
            if produced == 1 {
                answer(
                    r,
                    &Topic {
                        name: "-",
                        id: uuid::Uuid::nil(),
                    },
                    0,
                    i32::MAX,
                )
            } else {
                Reply::Default
            }
        }
        _ => Reply::Default,
    })
    .await;
    let timeout = Duration::from_secs(1);
    let target = target(&broker, timeout);
    let mut running = Running::start(target, config(), &[("sa", "a")]).await;
    running.fetched("sa", vec![batch(0, 1)], 2).await;
    until(|| running.stats.borrow_and_update().lag == 1).await;
    let started = Instant::now();
    running.fetched("sa", vec![batch(1, 1)], 2).await;
    let took = within(Duration::from_secs(20), || {
        running.stats.borrow_and_update().lag == 0
    })
    .await;
    assert!(
        took < timeout + Duration::from_secs(5),
        "throttled for {took:?}, more than the request timeout"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the throttle was ignored"
    );
    let took = running.stop().await;
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
}

/// CORRUPT_MESSAGE for a batch whose CRC strait recomputed is resent a few times, then its
/// partition stops, its position still before the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_message_stops_the_partition_after_a_few_resends() {
    let sends = Arc::new(Mutex::new(0));
    let counted = sends.clone();
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(1, &[("t", 1), (PROGRESS, 1)], move |r| {
        let Some(t) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        if produced(r, &t).is_empty() {
            return Reply::Default;
        }
        *counted.lock().unwrap() += 1;
        answer(r, &t, ResponseError::CorruptMessage.code(), 0)
    })
    .await;
    let target = target(&broker, Duration::from_secs(2));
    *t.lock().unwrap() = Some(Topic::of(&target, "t").await);
    let mut running = Running::start(target, config(), &[("s", "t")]).await;
    running.fetched("s", vec![batch(0, 2)], 2).await;
    until(|| running.stats.borrow_and_update().stopped == 1).await;
    assert_eq!(
        running.stats.borrow().stopped,
        1,
        "the partition is stopped"
    );
    assert_eq!(
        *sends.lock().unwrap(),
        1 + partition::CORRUPT_RESENDS as usize
    );
    assert_eq!(running.translate("s", 0), None, "nothing counts as written");
    running.stop().await;
}

/// A Produce response that keeps lacking a partition (a broker bug, or a response of
/// another request) is resent like a refusal worth retrying, within
/// `produce.delivery.timeout.ms`: then the partition stops, its position still before the
/// batch, instead of resending forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_missing_from_every_answer_stops_after_the_delivery_timeout() {
    let sends = Arc::new(Mutex::new(0));
    let counted = sends.clone();
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(1, &[("t", 1), (PROGRESS, 1)], move |r| {
        let Some(t) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        if produced(r, &t).is_empty() {
            return Reply::Default;
        }
        *counted.lock().unwrap() += 1;
        respond(r, &t, None, 0)
    })
    .await;
    let target = target(&broker, Duration::from_secs(2));
    *t.lock().unwrap() = Some(Topic::of(&target, "t").await);
    let config = ProduceConfig {
        delivery_timeout: Duration::from_secs(1),
        ..config()
    };
    let mut running = Running::start(target, config, &[("s", "t")]).await;
    running.fetched("s", vec![batch(0, 2)], 2).await;
    until(|| running.stats.borrow_and_update().stopped == 1).await;
    assert_eq!(
        running.stats.borrow().stopped,
        1,
        "the partition is stopped once the delivery timeout passed"
    );
    assert!(
        *sends.lock().unwrap() >= 2,
        "the batch was resent meanwhile"
    );
    assert_eq!(running.translate("s", 0), None, "nothing counts as written");
    running.stop().await;
}

/// A source batch of `records` records from source offset `base`, each record's timestamp
/// its source offset: what the target wrote tells where it came from.
fn timed_batch(base: i64, records: usize) -> RawBatch {
    let records: Vec<OwnRecord> = (0..records)
        .map(|i| OwnRecord {
            key: None,
            value: Some(b"v"),
            timestamp: base + i as i64,
        })
        .collect();
    let mut bytes = BytesMut::from(&encode_batch(&records, &ProducerStamp::NONE)[..]);
    bytes[..8].copy_from_slice(&base.to_be_bytes());
    RawBatch::new(bytes.freeze()).unwrap()
}

/// Plays the source side for the engine: `logs` holds each source partition's batches (by
/// name, partition 0), read from offset 0 under generation 0 as the flow assigns them. Every
/// chunk is one batch holding its bytes of `buffer`, as a Fetch response does. A forgotten
/// partition is no longer read; a resumed one is read from the offset asked for, but first
/// a chunk fetched before its pause arrives (its log's last batch, stale generation), as
/// one still on its way would.
async fn play_source(
    mut orders: mpsc::UnboundedReceiver<crate::fetch::Order>,
    events: mpsc::Sender<FetchEvent>,
    logs: Vec<(&'static str, Vec<RawBatch>)>,
    buffer: Arc<Semaphore>,
) {
    use crate::fetch::Order;
    // (name, log, next offset or None when not read, generation)
    let mut parts: Vec<(&str, Vec<RawBatch>, Option<i64>, u32)> = logs
        .into_iter()
        .map(|(name, log)| (name, log, Some(0), 0))
        .collect();
    let chunk = |name: &str, batch: &RawBatch, generation: u32, permit| {
        FetchEvent::Chunk(Chunk {
            tp: TopicPartition::new(name, 0),
            batches: vec![Fetched {
                source_next: batch.next_offset(),
                batch: batch.clone(),
                offset_deltas: None,
            }],
            from: batch.base_offset(),
            next_offset: batch.next_offset(),
            source_end: 1 << 20,
            generation,
            permit: Arc::new(permit),
        })
    };
    let spare = Arc::new(Semaphore::new(1 << 20));
    loop {
        let mut sent = false;
        while let Ok(order) = orders.try_recv() {
            let (tp, at) = match order {
                Order::Forget(tp) => (tp, None),
                Order::Assign(a) => (a.tp, Some((a.offset.unwrap(), a.generation))),
            };
            let Some(p) = parts.iter_mut().find(|p| *p.0 == *tp.topic) else {
                continue;
            };
            p.2 = at.map(|(offset, _)| offset);
            if let Some((_, generation)) = at {
                let stale = p.1.last().unwrap();
                let permit = spare.clone().acquire_owned().await.unwrap();
                if events.send(chunk(p.0, stale, p.3, permit)).await.is_err() {
                    return;
                }
                p.3 = generation;
            }
        }
        for (name, log, next, generation) in &mut parts {
            let Some(batch) = next.and_then(|n| log.iter().find(|b| b.base_offset() == n)) else {
                continue;
            };
            let Ok(permit) = buffer.clone().try_acquire_many_owned(batch.len() as u32) else {
                continue;
            };
            *next = Some(batch.next_offset());
            if events
                .send(chunk(name, batch, *generation, permit))
                .await
                .is_err()
            {
                return;
            }
            sent = true;
        }
        if !sent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// One target partition answers NOT_ENOUGH_REPLICAS for a while, another works: the working
/// one keeps flowing though the refused one has more than the whole fetch buffer waiting
/// (its unsent batches are let go and its fetching paused), and once the refused partition
/// is written again it resumes where it stopped: every record arrives once, in order (a
/// chunk fetched before the pause and arriving after the resume is not written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_partition_is_paused_alone_and_resumes_in_order() {
    let refusing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let refuse = refusing.clone();
    // The source offsets of the batches of `b` the target wrote (the target numbers them
    // itself: each record's timestamp is its source offset), in order, and record counts.
    let written: Arc<Mutex<Vec<(i64, i32)>>> = Arc::default();
    let write = written.clone();
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(1, &[("a", 1), ("b", 1), (PROGRESS, 1)], move |r| {
        let Some(b) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        if refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return answer(r, &b, ResponseError::NotEnoughReplicas.code(), 0);
        }
        if let RequestKind::Produce(produce) = &r.body {
            let records = produce
                .topic_data
                .iter()
                .filter(|t| b.is(t))
                .flat_map(|t| &t.partition_data)
                .filter_map(|p| p.records.clone());
            for bytes in records {
                let batch = RawBatch::new(bytes).unwrap();
                write
                    .lock()
                    .unwrap()
                    .push((batch.base_timestamp(), batch.record_count()));
            }
        }
        Reply::Default
    })
    .await;
    let target = target(&broker, Duration::from_secs(5));
    *t.lock().unwrap() = Some(Topic::of(&target, "b").await);
    let (fetcher, orders) = Fetcher::scripted();
    let running = Running::start_with(target, config(), &[("sa", "a"), ("sb", "b")], fetcher).await;
    let log = |n: i64| (0..n).map(|i| timed_batch(i * 10, 10)).collect::<Vec<_>>();
    let buffer_bytes = 20 * log(1)[0].len();
    let source = tokio::spawn(play_source(
        orders,
        running.events.clone(),
        vec![("sb", log(100)), ("sa", log(100))],
        Arc::new(Semaphore::new(buffer_bytes)),
    ));
    let took = within(Duration::from_secs(20), || running.position("sa") == 1000).await;
    assert_eq!(
        running.position("sa"),
        1000,
        "the working partition stalled behind the refused one (after {took:?})"
    );
    assert!(running.position("sb") < 0, "b was refused throughout");
    refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    within(Duration::from_secs(20), || running.position("sb") == 1000).await;
    assert_eq!(running.position("sb"), 1000, "b is written once accepted");
    let written = written.lock().unwrap().clone();
    let expected: Vec<(i64, i32)> = (0..100).map(|i| (i * 10, 10)).collect();
    assert_eq!(written, expected, "b's records arrive once each, in order");
    source.abort();
    running.stop().await;
}

/// The offset syncs `(upstream, downstream)` of source partition `source`-0 the engine's
/// syncs writer appended to `broker`, in order.
fn syncs_written(broker: &FakeBroker, source: &str) -> Vec<(i64, i64)> {
    let tp = TopicPartition::new(source, 0);
    let mut out = Vec::new();
    for request in broker.received_of(ApiKey::Produce) {
        let RequestKind::Produce(produce) = &request.body else {
            continue;
        };
        let records = produce.topic_data.iter().flat_map(|t| &t.partition_data);
        for bytes in records.filter_map(|p| p.records.clone()) {
            let batch = RawBatch::new(bytes).unwrap();
            for r in decode_uncompressed(&batch).unwrap() {
                let sync =
                    crate::mm2::records::OffsetSync::decode(&r.key.unwrap(), &r.value.unwrap())
                        .unwrap();
                if sync.topic_partition == tp {
                    out.push((sync.upstream_offset, sync.downstream_offset));
                }
            }
        }
    }
    out
}

/// A Metadata answer from broker 1 at `addr` (leader of everything) for `topics`: name, topic
/// id, error code (UNKNOWN_TOPIC_OR_PARTITION: no partitions).
fn metadata_of(addr: &str, topics: &[(&str, uuid::Uuid, i16)]) -> Reply {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let topics = topics
        .iter()
        .map(|(name, id, code)| {
            let partitions = if *code == 0 {
                vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_leader_id(BrokerId(1))
                    .with_replica_nodes(vec![BrokerId(1)])
                    .with_isr_nodes(vec![BrokerId(1)])]
            } else {
                Vec::new()
            };
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
                .with_topic_id(if *code == 0 { *id } else { uuid::Uuid::nil() })
                .with_error_code(*code)
                .with_partitions(partitions)
        })
        .collect();
    Reply::Answer(ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().unwrap())])
            .with_controller_id(BrokerId(1))
            .with_topics(topics),
    ))
}

/// The remote topic is deleted on the target while strait writes to it, then created again
/// (a new topic id, offsets from 0): the engine reports it missing (for topic sync to create
/// it again), and once the topic is back its partition starts over on the new log: the
/// batch the deleted topic refused is written there, the offset map forgets the old log
/// (no source offset translates to an offset the new log does not hold), a fresh offset sync
/// is written, and the position committed carries the new log's offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_topic_created_again_starts_its_partitions_over() {
    // 0: the old topic; 1: deleted; 2: created again, its leader not writing yet
    // (NOT_ENOUGH_REPLICAS); 3: writing.
    let phase = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let now = phase.clone();
    let addr: Arc<Mutex<String>> = Arc::default();
    let own = addr.clone();
    let old_id: Arc<Mutex<uuid::Uuid>> = Arc::default();
    let old = old_id.clone();
    let new_id = uuid::Uuid::from_u128(0xbbbb);
    // Batches of the new log, by record count, in order.
    let written: Arc<Mutex<Vec<i32>>> = Arc::default();
    let write = written.clone();
    let broker = FakeBroker::start(1, &[("b", 1), (PROGRESS, 1)], move |r| {
        let phase = now.load(std::sync::atomic::Ordering::SeqCst);
        let old = *old.lock().unwrap();
        match &r.body {
            RequestKind::Metadata(m) if phase > 0 => {
                let asked = |name: &str| {
                    m.topics.as_ref().is_none_or(|ts| {
                        ts.iter()
                            .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
                    })
                };
                let mut topics = vec![(PROGRESS, uuid::Uuid::from_u128(7), 0)];
                if asked("b") {
                    topics.push(match phase {
                        1 => ("b", old, ResponseError::UnknownTopicOrPartition.code()),
                        _ => ("b", new_id, 0),
                    });
                }
                metadata_of(&own.lock().unwrap(), &topics)
            }
            RequestKind::Produce(produce) if phase > 0 => {
                let b = Topic { name: "b", id: old };
                if phase == 1 {
                    return answer(r, &b, ResponseError::UnknownTopicId.code(), 0);
                }
                // The old id names no topic any more.
                let new = Topic {
                    name: "b",
                    id: new_id,
                };
                if produce
                    .topic_data
                    .iter()
                    .any(|t| b.is(t) && t.topic_id == old)
                {
                    return answer(r, &b, ResponseError::UnknownTopicId.code(), 0);
                }
                if phase == 2 {
                    return answer(r, &new, ResponseError::NotEnoughReplicas.code(), 0);
                }
                let counts = produce
                    .topic_data
                    .iter()
                    .filter(|t| new.is(t))
                    .flat_map(|t| &t.partition_data)
                    .filter_map(|p| p.records.clone())
                    .map(|bytes| RawBatch::new(bytes).unwrap().record_count());
                write.lock().unwrap().extend(counts);
                // The built-in broker appends under the new id from offset 0.
                Reply::Default
            }
            _ => Reply::Default,
        }
    })
    .await;
    *addr.lock().unwrap() = broker.addr.clone();
    let target = target(&broker, Duration::from_secs(5));
    *old_id.lock().unwrap() = Topic::of(&target, "b").await.id;
    let mut running = Running::start(target, config(), &[("sb", "b")]).await;
    running
        .fetched("sb", vec![batch(0, 5), batch(5, 5)], 100)
        .await;
    until(|| running.position("sb") == 10).await;
    assert_eq!(running.translate("sb", 7), Some(7));

    phase.store(1, std::sync::atomic::Ordering::SeqCst);
    running.fetched("sb", vec![batch(10, 4)], 100).await;
    let reported = tokio::time::timeout(Duration::from_secs(10), running.missing.recv()).await;
    assert_eq!(
        reported,
        Ok(Some("b".to_string())),
        "the deleted topic is reported"
    );

    // Back, and empty: nothing of the old log may translate to an offset of the new one
    // (7 would be past its end).
    phase.store(2, std::sync::atomic::Ordering::SeqCst);
    until(|| running.translate("sb", 7).is_none()).await;
    assert_eq!(
        running.translate("sb", 7),
        None,
        "translated into the new log"
    );
    phase.store(3, std::sync::atomic::Ordering::SeqCst);
    until(|| running.position("sb") == 14).await;
    assert_eq!(
        running.position("sb"),
        14,
        "the batch is written to the new log"
    );
    assert_eq!(*written.lock().unwrap(), vec![4]);
    for offset in [0, 7, 9] {
        assert_eq!(
            running.translate("sb", offset),
            None,
            "source offset {offset} was on the old log only"
        );
    }
    assert_eq!(running.translate("sb", 10), Some(0));
    assert_eq!(running.translate("sb", 12), Some(2));
    let maps = running.translations.lock().unwrap().clone();
    assert_eq!(maps[&TopicPartition::new("sb", 0)].points(), &[(10, 0)]);
    // The fresh sync reaches the syncs topic: replayed after the old log's, it drops them.
    let within_10s = Instant::now() + Duration::from_secs(10);
    while !syncs_written(&running.syncs_broker, "sb").contains(&(10, 0))
        && Instant::now() < within_10s
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let syncs = syncs_written(&running.syncs_broker, "sb");
    assert_eq!(syncs.last(), Some(&(10, 0)), "{syncs:?}");
    let rebuilt = crate::offset_map::OffsetMap::from_syncs(
        syncs,
        Some(Position {
            source_next: 14,
            target_next: 4,
        }),
    );
    assert_eq!(rebuilt.translate(7), Some(0), "at or before, never past");
    assert_eq!(rebuilt.translate(12), Some(2));
    running.stop().await;
}

/// A remote topic deleted while strait was stopped is created again by the start's
/// discovery, and its partitions are routed as new logs: the offset map rebuilt from the
/// old log's syncs is forgotten before anything is written (source offset 7 translated to
/// 47, an offset the new topic does not hold), and the partition goes on from its committed
/// position in the new log, from target offset 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_routed_to_a_new_log_starts_over_from_its_position() {
    let broker = FakeBroker::start(1, &[("b", 1), (PROGRESS, 1)], |_| Reply::Default).await;
    let target = target(&broker, Duration::from_secs(5));
    let source = TopicPartition::new("sb", 0);
    let resume = Position {
        source_next: 10,
        target_next: 50,
    };
    let translations = Translations::default();
    let rebuilt = crate::offset_map::OffsetMap::from_syncs([(0, 40)], Some(resume));
    assert_eq!(rebuilt.translate(7), Some(47));
    translations.lock().unwrap().insert(source.clone(), rebuilt);
    let route = Route {
        source: source.clone(),
        target: TopicPartition::new("b", 0),
        resume: Some(resume),
        slot: 0,
        lineage: Lineage::UNKNOWN,
        new_log: true,
        origin: None,
    };
    let running = Running::start_routes(
        target,
        config(),
        vec![route],
        Fetcher::detached(),
        translations,
        None,
    )
    .await;
    until(|| running.translate("sb", 7).is_none()).await;
    assert_eq!(
        running.translate("sb", 7),
        None,
        "translated into the new log"
    );
    running.fetched("sb", vec![batch(10, 4)], 100).await;
    until(|| running.position("sb") == 14).await;
    assert_eq!(running.translate("sb", 10), Some(0));
    assert_eq!(running.translate("sb", 13), Some(3));
    running.stop().await;
}

/// Log lines of the engine (run on this thread) as text, for a test that must tell an
/// answer's handling by what the engine says.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Metadata naming brokers 1 and 2 (`addrs`): topic `b` (id `b_id`) with partition 0 led by
/// broker 2 and partition 1 by broker 1, and the progress topic led by broker 2.
fn split_metadata(addrs: &[String; 2], b_id: uuid::Uuid) -> Reply {
    let brokers = addrs
        .iter()
        .zip([1, 2])
        .map(|(addr, id)| {
            let (host, port) = addr.rsplit_once(':').unwrap();
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().unwrap())
        })
        .collect();
    let partition = |index: i32, leader: i32| {
        MetadataResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(leader))
            .with_replica_nodes(vec![BrokerId(leader)])
            .with_isr_nodes(vec![BrokerId(leader)])
    };
    let topic = |name: &str, id: uuid::Uuid, partitions| {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
            .with_topic_id(id)
            .with_partitions(partitions)
    };
    Reply::Answer(ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_controller_id(BrokerId(1))
            .with_topics(vec![
                topic("b", b_id, vec![partition(0, 2), partition(1, 1)]),
                topic(PROGRESS, uuid::Uuid::from_u128(7), vec![partition(0, 2)]),
            ]),
    ))
}

/// A Produce request still in flight when its topic gets a new id (deleted and created
/// again) is answered under the id it was sent with: the answer is matched by that id (here
/// UNKNOWN_TOPIC_ID, resent under the new one), not taken for one that lacks the partition.
/// b-1's request, to broker 1, is answered late (10 s); meanwhile b-0, on broker 2, is
/// refused, and the engine looks the topic up (at broker 3, the bootstrap address, so that
/// the lookup does not queue behind the late answer) and learns its new id.
#[tokio::test]
async fn an_answer_under_the_old_topic_id_is_matched_by_the_id_it_was_sent_with() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .finish();
    // The current-thread runtime runs the engine here, under this subscriber.
    let _logging = tracing::subscriber::set_default(subscriber);
    let old_id = uuid::Uuid::from_u128(0xaaaa);
    let new_id = uuid::Uuid::from_u128(0xcccc);
    let again = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addrs: Arc<Mutex<[String; 2]>> = Arc::default();
    let under_old = move |r: &Received| match &r.body {
        RequestKind::Produce(p) => p.topic_data.iter().any(|t| t.topic_id == old_id),
        _ => false,
    };
    let refused = move |r: &Received| {
        let Reply::Answer(refused) = answer(
            r,
            &Topic {
                name: "b",
                id: old_id,
            },
            ResponseError::UnknownTopicId.code(),
            0,
        ) else {
            unreachable!()
        };
        refused
    };
    let (script_again, script_addrs) = (again.clone(), addrs.clone());
    let bootstrap = FakeBroker::start(3, &[], move |r| match &r.body {
        RequestKind::Metadata(_) => {
            let again = script_again.load(std::sync::atomic::Ordering::SeqCst);
            let id = if again { new_id } else { old_id };
            split_metadata(&script_addrs.lock().unwrap(), id)
        }
        // No `max.message.bytes` on the progress topic: the default batch size.
        RequestKind::DescribeConfigs(_) => Reply::Answer(ResponseKind::DescribeConfigs(
            kafka_protocol::messages::DescribeConfigsResponse::default(),
        )),
        _ => Reply::Default,
    })
    .await;
    let script_again = again.clone();
    let broker1 = FakeBroker::start(1, &[], move |r| {
        let again = script_again.load(std::sync::atomic::Ordering::SeqCst);
        match &r.body {
            // Held until the hold limit: nothing else comes on this connection.
            RequestKind::Produce(_) if again && under_old(r) => {
                Reply::AnswerAfter(refused(r), Box::new(|_| false))
            }
            _ => Reply::Default,
        }
    })
    .await;
    let script_again = again.clone();
    let broker2 = FakeBroker::start(2, &[], move |r| {
        let again = script_again.load(std::sync::atomic::Ordering::SeqCst);
        match &r.body {
            RequestKind::Produce(_) if again && under_old(r) => Reply::Answer(refused(r)),
            _ => Reply::Default,
        }
    })
    .await;
    *addrs.lock().unwrap() = [broker1.addr.clone(), broker2.addr.clone()];
    let target = target(&bootstrap, Duration::from_secs(30));
    let routes = (0..2).map(|p| fresh_route("sb", "b", p)).collect();
    let running = Running::start_routes(
        target,
        config(),
        routes,
        Fetcher::detached(),
        Translations::default(),
        None,
    )
    .await;
    let position = |p: i32| {
        let maps = running.translations.lock().unwrap();
        maps.get(&TopicPartition::new("sb", p))
            .map_or(-1, |m| m.position().source_next)
    };
    let feed = |p: i32, base: i64| {
        let permit = running.buffer.clone().try_acquire_owned().unwrap();
        let batch = batch(base, 2);
        let chunk = Chunk {
            tp: TopicPartition::new("sb", p),
            from: batch.base_offset(),
            next_offset: batch.next_offset(),
            batches: vec![Fetched {
                source_next: batch.next_offset(),
                batch,
                offset_deltas: None,
            }],
            source_end: 100,
            generation: 0,
            permit: Arc::new(permit),
        };
        running.events.try_send(FetchEvent::Chunk(chunk)).unwrap();
    };
    feed(0, 0);
    feed(1, 0);
    until(|| position(0) == 2 && position(1) == 2).await;
    assert_eq!((position(0), position(1)), (2, 2));

    again.store(true, std::sync::atomic::Ordering::SeqCst);
    feed(1, 2);
    let held = || broker1.received_of(ApiKey::Produce).iter().any(under_old);
    until(held).await;
    feed(0, 2);
    let limit = Duration::from_secs(30);
    within(limit, || position(0) == 4 && position(1) == 4).await;
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert_eq!((position(0), position(1)), (4, 4), "{text}");
    assert!(!text.contains("lacks the partition"), "{text}");
    running.stop().await;
}

/// A fake broker leading one-partition topics `targets` and the progress topic, a cluster of
/// it, and how Produce requests name the targets.
async fn broker_of(targets: &[&'static str]) -> (FakeBroker, Cluster, Vec<Topic>) {
    let mut topics: Vec<(&str, i32)> = targets.iter().map(|t| (*t, 1)).collect();
    topics.push((PROGRESS, 1));
    let broker = FakeBroker::start(1, &topics, |_| Reply::Default).await;
    let target = target(&broker, Duration::from_secs(5));
    let mut ids = Vec::new();
    for t in targets {
        ids.push(Topic::of(&target, t).await);
    }
    (broker, target, ids)
}

/// A fetch response brings a chunk for each of its partitions: the chunks that arrive
/// together go to the target together, in one Produce request, not one request each (which,
/// with thousands of partitions, is a request per partition and a walk over all of them
/// per chunk).
#[tokio::test]
async fn chunks_that_arrive_together_go_in_one_produce_request() {
    const TARGETS: [&str; 8] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"];
    const SOURCES: [&str; 8] = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
    let (broker, target, ids) = broker_of(&TARGETS).await;
    let routes: Vec<(&str, &str)> = SOURCES.into_iter().zip(TARGETS).collect();
    let running = Running::start(target, config(), &routes).await;
    let carrying_data = |broker: &FakeBroker| {
        broker
            .received_of(ApiKey::Produce)
            .into_iter()
            .filter(|r| ids.iter().any(|t| !produced(r, t).is_empty()))
            .count()
    };
    // Leaders known and every partition confirmed by a first acknowledged batch.
    for s in SOURCES {
        running.fetched(s, vec![batch(0, 1)], 1).await;
    }
    until(|| SOURCES.iter().all(|s| running.position(s) == 1)).await;
    assert!(SOURCES.iter().all(|s| running.position(s) == 1));
    let before = carrying_data(&broker);
    // The burst: all sent before the engine runs again (this runtime has one thread).
    for s in SOURCES {
        running.fetched(s, vec![batch(1, 1)], 2).await;
    }
    until(|| SOURCES.iter().all(|s| running.position(s) == 2)).await;
    assert!(SOURCES.iter().all(|s| running.position(s) == 2));
    assert_eq!(
        carrying_data(&broker) - before,
        1,
        "one request for the burst"
    );
    running.stop().await;
}

/// With two connections per broker (`produce.connections.per.broker`), the partitions are
/// spread over both, and each partition's batches all go over one of them: a broker serves
/// one connection's requests in order, which is what keeps a partition's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_over_the_connections_and_each_keeps_to_one() {
    const TARGETS: [&str; 4] = ["t0", "t1", "t2", "t3"];
    const SOURCES: [&str; 4] = ["s0", "s1", "s2", "s3"];
    let (broker, target, ids) = broker_of(&TARGETS).await;
    let routes: Vec<(&str, &str)> = SOURCES.into_iter().zip(TARGETS).collect();
    let two = ProduceConfig {
        connections: 2,
        ..config()
    };
    let running = Running::start(target, two, &routes).await;
    for round in 0..4 {
        for s in SOURCES {
            running.fetched(s, vec![batch(round, 1)], round + 1).await;
        }
    }
    until(|| SOURCES.iter().all(|s| running.position(s) == 4)).await;
    let requests = broker.received_of(ApiKey::Produce);
    let mut used = BTreeSet::new();
    for t in &ids {
        let over: BTreeSet<usize> = requests
            .iter()
            .filter(|r| !produced(r, t).is_empty())
            .map(|r| r.connection)
            .collect();
        let batches: usize = requests.iter().map(|r| produced(r, t).len()).sum();
        assert_eq!(batches, 4, "{}: every batch written once", t.name);
        assert_eq!(over.len(), 1, "{} went over connections {over:?}", t.name);
        used.extend(over);
    }
    assert_eq!(used.len(), 2, "the partitions used connections {used:?}");
    running.stop().await;
}

/// A backlog fills the window at once: every request the broker has room for goes out
/// before an answer comes back. Over a long round trip the answers are the only events, and
/// one request per event (or per 50 ms wake-up) kept the window far below
/// `produce.max.in.flight`. Here the first answer waits for the window's last request: sent
/// in one go it is there at once; one request per wake-up would take 31 of them (1.5 s).
#[tokio::test]
async fn a_backlog_fills_the_window_without_waiting_for_answers() {
    const WINDOW: usize = 32;
    let took = backlog_takes(Some(WINDOW), WINDOW, Duration::ZERO).await;
    assert!(
        took < Duration::from_secs(1),
        "the window was not filled at once: the backlog took {took:?}"
    );
}

/// Unset, `produce.max.in.flight` follows the round trip: once an answer took 100 ms (a
/// target 50 ms away each way), a partition with a backlog gets some 34 requests in flight
/// where 5 would move a seventh as much per round trip. Here the backlog's first answer
/// waits until its 30th request is on the wire: with a window of 5 it never comes (held
/// for `HOLD_LIMIT`).
#[tokio::test]
async fn a_distant_broker_gets_a_deeper_window() {
    const DEEP: usize = 30;
    let took = backlog_takes(None, DEEP, Duration::from_millis(100)).await;
    assert!(
        took < Duration::from_secs(2),
        "the window stayed shallow: the backlog took {took:?}"
    );
}

/// An engine at `max_in_flight` writes one batch to `t` (answered after `first_answer`; the
/// first batch confirms the partition: more may then be in flight), then, in one chunk (one
/// event, no commit ticks to wake the engine), `batches` batches of 1 to `batches` records,
/// whose first answer the broker holds until the last batch has arrived: how long the
/// backlog took to be acknowledged.
async fn backlog_takes(
    max_in_flight: Option<usize>,
    batches: usize,
    first_answer: Duration,
) -> Duration {
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let mut data_requests = 0;
    let broker = FakeBroker::start(1, &[("t", 1), (PROGRESS, 1)], move |r| {
        let Some(t) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        if produced(r, &t).is_empty() {
            return Reply::Default;
        }
        data_requests += 1;
        match data_requests {
            1 => Reply::DefaultAfter(first_answer),
            2 => {
                let Reply::Answer(ok) = answer(r, &t, 0, 0) else {
                    unreachable!("a Produce request is answered");
                };
                Reply::AnswerAfter(ok, Box::new(move |r| produced(r, &t) == [batches as i32]))
            }
            _ => Reply::Default,
        }
    })
    .await;
    let target = target(&broker, Duration::from_secs(5));
    *t.lock().unwrap() = Some(Topic::of(&target, "t").await);
    let config = ProduceConfig {
        max_in_flight,
        commit_interval: Duration::from_secs(600),
        ..config()
    };
    let running = Running::start(target, config, &[("s", "t")]).await;
    running.fetched("s", vec![batch(0, 1)], 1).await;
    until(|| running.position("s") == 1).await;
    let mut next = 1;
    let backlog: Vec<RawBatch> = (1..=batches)
        .map(|records| {
            let b = batch(next, records);
            next += records as i64;
            b
        })
        .collect();
    running.fetched("s", backlog, next).await;
    let took = within(HOLD_LIMIT, || running.position("s") == next).await;
    running.stop().await;
    took
}

/// A partition handed to another process of the group: what it took is written, the
/// position reached is committed at once (not a commit interval later), and only then is
/// the hand-over answered; a chunk that comes after is dropped, and the partition's offset
/// map goes (the new owner's checkpoints cover it now).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_commits_what_was_written_before_it_answers() {
    let broker = FakeBroker::start(1, &[("a", 1), (PROGRESS, 1)], |_| Reply::Default).await;
    let target = target(&broker, Duration::from_secs(5));
    let config = ProduceConfig {
        commit_interval: Duration::from_secs(3600),
        ..config()
    };
    let a = Topic::of(&target, "a").await;
    let running = Running::start(target, config, &[("sa", "a")]).await;
    let data_requests = || {
        broker
            .received_of(ApiKey::Produce)
            .iter()
            .filter(|r| !produced(r, &a).is_empty())
            .count()
    };
    running.fetched("sa", vec![batch(0, 4)], 4).await;
    until(|| running.position("sa") == 4).await;
    running
        .fetched("sa", vec![batch(4, 4), batch(8, 4)], 12)
        .await;
    // Taken (a chunk still on its way at the hand-over is dropped: the new owner fetches
    // it again from the commit).
    until(|| data_requests() == 3).await;
    let (done, handed) = tokio::sync::oneshot::channel();
    running
        .commands
        .send(Command::Release(Release {
            partitions: vec![TopicPartition::new("sa", 0)],
            slots: vec![0],
            commit: true,
            done,
        }))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), handed)
        .await
        .expect("the hand-over is answered")
        .unwrap();
    let sa = TopicPartition::new("sa", 0);
    assert_eq!(
        committed(&broker, &sa),
        Some(12),
        "committed before the answer"
    );
    assert_eq!(running.position("sa"), -1, "its offset map is gone");
    running.fetched("sa", vec![batch(12, 4)], 16).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(data_requests(), 3, "nothing written after the hand-over");
    running.stop().await;
}

/// A member whose lease ran out (frozen, or cut off from the group coordinator past most of
/// the session timeout) writes nothing, however much waits; renewed, it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_written_while_the_lease_has_run_out() {
    let broker = FakeBroker::start(1, &[("a", 1), (PROGRESS, 1)], |_| Reply::Default).await;
    let target = target(&broker, Duration::from_secs(5));
    let lease = Arc::new(crate::group::Lease::default());
    let running = Running::start_routes(
        target,
        config(),
        vec![fresh_route("sa", "a", 0)],
        Fetcher::detached(),
        Translations::default(),
        Some(lease.clone()),
    )
    .await;
    running.fetched("sa", vec![batch(0, 4)], 4).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(running.position("sa"), -1);
    assert!(
        broker.received_of(ApiKey::Produce).is_empty(),
        "nothing sent"
    );
    lease.renew(std::time::Instant::now(), Duration::from_secs(60));
    until(|| running.position("sa") == 4).await;
    assert_eq!(running.position("sa"), 4);
    running.stop().await;
}

/// Partitions lost to another member (no commit: the new owner may be writing already) are
/// never written again: a batch whose request was in flight when they were lost and then
/// failed is not sent again, since it would land behind the new owner's records. (The
/// producer is re-initialised instead: the target's next sequence there is unknown.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_partition_never_sends_a_failed_batch_again() {
    let t: Arc<Mutex<Option<Topic>>> = Arc::default();
    let topic = t.clone();
    let broker = FakeBroker::start(1, &[("a", 1), (PROGRESS, 1)], move |r| {
        let Some(t) = topic.lock().unwrap().clone() else {
            return Reply::Default;
        };
        // Data requests go unanswered: they fail at the request timeout.
        match produced(r, &t).is_empty() {
            true => Reply::Default,
            false => Reply::Stall,
        }
    })
    .await;
    let target = target(&broker, Duration::from_secs(2));
    let a = Topic::of(&target, "a").await;
    *t.lock().unwrap() = Some(a.clone());
    let running = Running::start(target, config(), &[("sa", "a")]).await;
    let data_requests = || {
        broker
            .received_of(ApiKey::Produce)
            .iter()
            .filter(|r| !produced(r, &a).is_empty())
            .count()
    };
    running.fetched("sa", vec![batch(0, 4)], 4).await;
    until(|| data_requests() == 1).await;
    let (done, lost) = tokio::sync::oneshot::channel();
    running
        .commands
        .send(Command::Release(Release {
            partitions: vec![TopicPartition::new("sa", 0)],
            slots: vec![0],
            commit: false,
            done,
        }))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("the release is answered")
        .unwrap();
    let inits = || broker.received_of(ApiKey::InitProducerId).len();
    until(|| inits() == 2).await;
    assert_eq!(inits(), 2, "the producer is re-initialised");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        data_requests(),
        1,
        "the lost partition's batch was sent again"
    );
    running.stop().await;
}

/// Exactly-once with scale-out: each Produce request carries one slot's transactional id,
/// and the slots take turns on a connection: one slot's backlog, enough to fill the
/// connection's requests in flight by itself, does not hold another slot's back until it
/// is written.
#[tokio::test]
async fn slots_take_turns_on_a_connection() {
    // Commits come every tick (the test's interval): EndTxn (v5) answered with the next epoch.
    let topics = [("t0", 1), ("t1", 1), (PROGRESS, 1)];
    let broker = FakeBroker::start(1, &topics, |r| match &r.body {
        RequestKind::EndTxn(end) => Reply::Answer(ResponseKind::EndTxn(
            kafka_protocol::messages::EndTxnResponse::default()
                .with_producer_id(end.producer_id)
                .with_producer_epoch(end.producer_epoch + 1),
        )),
        _ => Reply::Default,
    })
    .await;
    let target = target(&broker, Duration::from_secs(5));
    let data = [
        Topic::of(&target, "t0").await,
        Topic::of(&target, "t1").await,
    ];
    let routes = vec![
        Route {
            slot: 0,
            ..fresh_route("s0", "t0", 0)
        },
        Route {
            slot: 1,
            ..fresh_route("s1", "t1", 0)
        },
    ];
    let config = ProduceConfig {
        exactly_once: true,
        ..config()
    };
    let running = Running::start_routes(
        target,
        config,
        routes,
        Fetcher::detached(),
        Translations::default(),
        None,
    )
    .await;
    for slot in [0u32, 1] {
        let producer = TransactionalProducer {
            transactional_id: format!("slot-{slot}"),
            producer: (10 + i64::from(slot), 0),
            protocol: crate::kafka::transaction::Protocol::V2,
        };
        running
            .commands
            .send(Command::Adopt { slot, producer })
            .unwrap();
    }
    for s in ["s0", "s1"] {
        running.fetched(s, vec![batch(0, 1)], 1).await;
    }
    until(|| running.position("s0") == 1 && running.position("s1") == 1).await;
    let before = broker.received_of(ApiKey::Produce).len();
    for s in ["s0", "s1"] {
        running
            .fetched(s, (1..61).map(|o| batch(o, 1)).collect(), 61)
            .await;
    }
    until(|| running.position("s0") == 61 && running.position("s1") == 61).await;
    // The data requests, by transactional id (progress records go in requests of their own).
    let ids: Vec<String> = broker.received_of(ApiKey::Produce)[before..]
        .iter()
        .filter(|r| data.iter().any(|t| !produced(r, t).is_empty()))
        .filter_map(|r| match &r.body {
            RequestKind::Produce(p) => p.transactional_id.as_ref().map(|t| t.0.to_string()),
            _ => None,
        })
        .collect();
    let first = &ids[..20];
    for slot in ["slot-0", "slot-1"] {
        let turns = first.iter().filter(|t| *t == slot).count();
        assert!(
            turns >= 5,
            "{slot} had {turns} of the first 20 requests: {ids:?}"
        );
    }
    running.shutdown.cancel();
}
