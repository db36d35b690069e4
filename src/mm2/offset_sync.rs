//! Offset syncs in MM2's format: strait writes an `OffsetSync(upstream, downstream)` record
//! at every offset gap of every replicated partition (where MM2 writes one every
//! `offset.lag.max` records), to `mm2-offset-syncs.<alias>.internal` on the cluster that
//! `offset-syncs.topic.location` names, so that MM2 tooling reading that topic sees exact
//! pairs. strait's own translation does not need to read them back while it runs, but a
//! restarted strait rebuilds its offset maps from them.
//!
//! That is why a position may be committed only once the syncs of the batches before it are
//! durable (`offset_map`'s restart rule): the produce engine hands its syncs over with
//! [`SyncSender::add`], the writer ([`run`]) appends them, retrying until they are written
//! (never dropping one), and [`SyncSender::durable`] tells the engine which position of each
//! partition the written syncs cover; the engine commits no further.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::records::{self, OffsetSync};
use crate::kafka::appender::append;
use crate::kafka::backoff::Backoff;
use crate::kafka::log_reader::read_keyed_records;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::topic_sync::await_internal_topic;
use crate::now_ms;
use crate::offset_map::{Position, MAX_POINTS};

/// Reads `topic` back (to its current end) and gives the syncs of each source partition in
/// the order they were written; a missing topic gives none. Records that are not
/// `OffsetSync`s are skipped with a warning.
pub async fn load(
    cluster: &Cluster,
    topic: &str,
) -> Result<HashMap<TopicPartition, Vec<(i64, i64)>>, KafkaError> {
    let mut out: HashMap<TopicPartition, Vec<(i64, i64)>> = HashMap::new();
    let tp = TopicPartition::new(topic, 0);
    for (offset, key, value) in read_keyed_records(cluster, &tp).await?.unwrap_or_default() {
        match OffsetSync::decode(&key, &value) {
            Ok(s) => out
                .entry(s.topic_partition)
                .or_default()
                .push((s.upstream_offset, s.downstream_offset)),
            Err(e) => {
                tracing::warn!(topic, offset, error = %e, "skipping a record that is not an offset sync")
            }
        }
    }
    Ok(out)
}

/// Unsent syncs of one partition past which they are replaced by its map's points (which
/// [`crate::offset_map::OffsetMap`] keeps at about `MAX_POINTS`): while the syncs topic
/// cannot be written, a transactional source adds two syncs per transaction.
const MAX_UNSENT: usize = 2 * MAX_POINTS;

/// Key and value bytes per appended batch at most: well under the 1 MiB a topic takes by
/// default (`max.message.bytes`), record framing included.
const MAX_BATCH_BYTES: usize = 512 * 1024;

/// The syncs of one source partition on their way to the syncs topic.
#[derive(Debug, Default)]
struct Ledger {
    /// Syncs not handed to the writer yet, in order.
    unsent: Vec<(i64, i64)>,
    /// The position the engine reached when it added the last syncs: durable once the
    /// unsent and in-flight syncs are.
    latest: Option<Position>,
    /// The position the syncs the writer is appending make durable, while it appends them.
    in_flight: Option<Position>,
    /// The furthest position whose syncs are all durable.
    durable: Option<Position>,
}

#[derive(Debug, Default)]
struct Shared {
    ledgers: Mutex<HashMap<TopicPartition, Ledger>>,
    /// Set when the engine is gone: the writer finishes what is left and ends.
    closed: AtomicBool,
    /// Set when the writer is gone: nothing more becomes durable.
    writer_gone: AtomicBool,
    wake: Notify,
}

/// The produce engine's side: syncs in, durable positions out. Dropping it lets the writer
/// finish.
#[derive(Debug)]
pub struct SyncSender(Arc<Shared>);

/// The writer's side, for [`run`].
#[derive(Debug)]
pub struct SyncReceiver(Arc<Shared>);

/// A connected sender and receiver.
pub fn queue() -> (SyncSender, SyncReceiver) {
    let shared = Arc::new(Shared::default());
    (SyncSender(shared.clone()), SyncReceiver(shared))
}

impl SyncSender {
    /// Hands over the `syncs` that acknowledged batches of `tp` added to its offset map, in
    /// order, and the position `tp` reached with them (`syncs` may be empty: the position
    /// still waits for the syncs before it). `points` gives the map's points: when too many
    /// syncs are waiting, they replace them (replayed after the written ones, the points give
    /// back the same map from its first point on).
    pub fn add(
        &self,
        tp: &TopicPartition,
        syncs: Vec<(i64, i64)>,
        position: Position,
        points: impl FnOnce() -> Vec<(i64, i64)>,
    ) {
        let mut ledgers = self.0.ledgers.lock().unwrap();
        let ledger = ledgers.entry(tp.clone()).or_default();
        let woke = !syncs.is_empty();
        ledger.unsent.extend(syncs);
        if ledger.unsent.len() > MAX_UNSENT {
            let points = points();
            if points.len() < ledger.unsent.len() {
                ledger.unsent = points;
            }
        }
        ledger.latest = Some(position);
        if ledger.unsent.is_empty() && ledger.in_flight.is_none() {
            ledger.durable = Some(position);
        }
        drop(ledgers);
        if woke {
            self.0.wake.notify_one();
        }
    }

    /// The furthest position of `tp` whose syncs are durable: what may be committed.
    pub fn durable(&self, tp: &TopicPartition) -> Option<Position> {
        self.0
            .ledgers
            .lock()
            .unwrap()
            .get(tp)
            .and_then(|l| l.durable)
    }

    /// Whether waiting is over: every sync handed over is durable, or none can become
    /// durable any more (the writer is gone).
    pub fn settled(&self) -> bool {
        self.0.writer_gone.load(Ordering::Acquire)
            || self
                .0
                .ledgers
                .lock()
                .unwrap()
                .values()
                .all(|l| l.unsent.is_empty() && l.in_flight.is_none())
    }
}

impl Drop for SyncSender {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

impl SyncReceiver {
    /// Takes every unsent sync, as records in order, and marks them in flight.
    fn take(&self) -> Vec<OffsetSync> {
        let mut ledgers = self.0.ledgers.lock().unwrap();
        let mut out = Vec::new();
        for (tp, ledger) in ledgers.iter_mut().filter(|(_, l)| !l.unsent.is_empty()) {
            ledger.in_flight = ledger.latest;
            out.extend(
                ledger
                    .unsent
                    .drain(..)
                    .map(|(upstream, downstream)| OffsetSync {
                        topic_partition: tp.clone(),
                        upstream_offset: upstream,
                        downstream_offset: downstream,
                    }),
            );
        }
        out
    }

    /// The syncs [`SyncReceiver::take`] gave are durable: so are the positions they cover,
    /// and those added since without syncs.
    fn written(&self) {
        let mut ledgers = self.0.ledgers.lock().unwrap();
        for ledger in ledgers.values_mut() {
            if let Some(pos) = ledger.in_flight.take() {
                ledger.durable = Some(pos);
                if ledger.unsent.is_empty() {
                    ledger.durable = ledger.latest;
                }
            }
        }
    }

    fn closed(&self) -> bool {
        self.0.closed.load(Ordering::Acquire)
    }
}

impl Drop for SyncReceiver {
    fn drop(&mut self) {
        self.0.writer_gone.store(true, Ordering::Release);
    }
}

/// Writes the syncs handed to `syncs` to `topic` on `cluster` until the sender is dropped
/// and every sync is written (`shutdown` only ends the wait for the topic at start: the
/// flow cancels it once the engine is gone). An append that fails is retried (backing off,
/// warning once per outage) until it succeeds; positions wait for it meanwhile. Ends with
/// an error when the cluster refuses the syncs for good (not retriable: authorization,
/// topic config), or when an append fails after the sender is gone (each append retries
/// for a request timeout): the positions they cover were not committed.
pub async fn run(
    cluster: Arc<Cluster>,
    topic: String,
    replication_factor: i16,
    syncs: SyncReceiver,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    if !await_internal_topic(&cluster, &topic, replication_factor, &shutdown).await? {
        return Ok(());
    }
    let tp = TopicPartition::new(topic.as_str(), 0);
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut failing = false;
    loop {
        if !syncs.closed() {
            syncs.0.wake.notified().await;
            // Gather a little: one append per burst of acknowledgements, not one per gap.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let taken = syncs.take();
        if taken.is_empty() {
            syncs.written();
            if syncs.closed() {
                return Ok(());
            }
            continue;
        }
        for chunk in chunks(&taken) {
            let batch = records::batch(&chunk, now_ms());
            loop {
                match append(&cluster, &tp, &batch).await {
                    Ok(_) => break,
                    // Once the engine is gone, one append (retried for a request timeout) is
                    // all a stopping process waits for.
                    Err(e) if !e.is_retriable() || syncs.closed() => return Err(e),
                    Err(e) => {
                        if !failing {
                            tracing::warn!(topic = %topic, error = %e, "offset syncs not written yet; retrying, and committing no progress past them meanwhile");
                        }
                        failing = true;
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                }
            }
            if failing {
                tracing::info!(topic = %topic, "offset syncs written again");
            }
            failing = false;
            backoff.reset();
        }
        syncs.written();
    }
}

/// The records of `syncs` in batches of at most `MAX_BATCH_BYTES` of keys and values.
fn chunks(syncs: &[OffsetSync]) -> Vec<Vec<(Bytes, Bytes)>> {
    let mut out: Vec<Vec<(Bytes, Bytes)>> = vec![Vec::new()];
    let mut bytes = 0;
    for s in syncs {
        let record = (s.encode_key(), s.encode_value());
        let size = record.0.len() + record.1.len();
        if bytes + size > MAX_BATCH_BYTES && !out.last().unwrap().is_empty() {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        out.last_mut().unwrap().push(record);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{
        ApiKey, ProduceRequest, ProduceResponse, RequestKind, ResponseKind,
    };

    fn pos(source_next: i64, target_next: i64) -> Position {
        Position {
            source_next,
            target_next,
        }
    }

    fn pairs(taken: &[OffsetSync]) -> Vec<(i64, i64)> {
        taken
            .iter()
            .map(|s| (s.upstream_offset, s.downstream_offset))
            .collect()
    }

    #[test]
    fn positions_wait_for_their_syncs() {
        let (tx, rx) = queue();
        let tp = TopicPartition::new("orders", 0);
        let none = Vec::new;
        // The example of the offset map: 0..9 → 0..9, a gap, 20..24 → 10..14.
        tx.add(&tp, vec![(0, 0)], pos(10, 10), none);
        assert_eq!(tx.durable(&tp), None);
        tx.add(&tp, vec![(9, 9), (20, 10)], pos(25, 15), none);
        assert_eq!(tx.durable(&tp), None);
        assert!(!tx.settled());
        let taken = rx.take();
        assert_eq!(pairs(&taken), [(0, 0), (9, 9), (20, 10)]);
        // Contiguous batches while the append is in flight: no syncs, but still not durable.
        tx.add(&tp, Vec::new(), pos(30, 20), none);
        assert_eq!(tx.durable(&tp), None);
        rx.written();
        assert_eq!(tx.durable(&tp), Some(pos(30, 20)));
        assert!(tx.settled());
        // A gap whose syncs are in flight holds back the positions after it, too.
        tx.add(&tp, vec![(29, 19), (40, 20)], pos(45, 25), none);
        assert_eq!(pairs(&rx.take()), [(29, 19), (40, 20)]);
        tx.add(&tp, vec![(44, 24), (50, 25)], pos(55, 30), none);
        rx.written();
        assert_eq!(tx.durable(&tp), Some(pos(45, 25)));
        assert_eq!(pairs(&rx.take()), [(44, 24), (50, 25)]);
        assert_eq!(tx.durable(&tp), Some(pos(45, 25)));
        rx.written();
        assert_eq!(tx.durable(&tp), Some(pos(55, 30)));
        // With nothing pending a position needs no append.
        tx.add(&tp, Vec::new(), pos(60, 35), none);
        assert_eq!(tx.durable(&tp), Some(pos(60, 35)));
        // Partitions are independent.
        let other = TopicPartition::new("orders", 1);
        tx.add(&other, vec![(0, 7)], pos(1, 8), none);
        assert_eq!(tx.durable(&other), None);
        assert_eq!(tx.durable(&tp), Some(pos(60, 35)));
        // Without a writer nothing is worth waiting for, and nothing more is durable.
        assert!(!tx.settled());
        drop(rx);
        assert!(tx.settled());
        assert_eq!(tx.durable(&other), None);
    }

    #[test]
    fn unsent_syncs_coalesce_into_the_map_points() {
        let (tx, rx) = queue();
        let tp = TopicPartition::new("orders", 0);
        let mut map = crate::offset_map::OffsetMap::new();
        let mut added = 0;
        // A transactional source while the syncs topic is down: two syncs per transaction.
        for k in 0..4 * MAX_POINTS as i64 {
            let syncs = map.record(&crate::offset_map::Forwarded {
                source_base: 6 * k,
                source_last: 6 * k + 4,
                record_count: 5,
                target_base: 5 * k,
                holes: None,
            });
            added += syncs.len();
            tx.add(&tp, syncs, map.position(), || map.points().to_vec());
        }
        assert!(added > 2 * MAX_UNSENT);
        let taken = rx.take();
        assert!(taken.len() <= MAX_UNSENT + 2, "{} unsent", taken.len());
        // Replayed after what was written before (nothing here), they rebuild the same map.
        let rebuilt = crate::offset_map::OffsetMap::from_syncs(pairs(&taken), Some(map.position()));
        for c in map.points()[0].0..6 * 4 * MAX_POINTS as i64 {
            assert_eq!(rebuilt.translate(c), map.translate(c), "translate({c})");
        }
        rx.written();
        assert_eq!(tx.durable(&tp), Some(map.position()));
    }

    /// A Produce answer refusing every partition of `request` with `code`.
    fn refuse(request: &ProduceRequest, code: ResponseError) -> Reply {
        let responses = request
            .topic_data
            .iter()
            .map(|t| {
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(
                        t.partition_data
                            .iter()
                            .map(|p| {
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_error_code(code.code())
                            })
                            .collect(),
                    )
            })
            .collect();
        Reply::Answer(ResponseKind::Produce(
            ProduceResponse::default().with_responses(responses),
        ))
    }

    /// Runs the writer against a broker that answers the first `refused` appends with
    /// `code`; gives the writer's result once the sender is gone, whether `tp`'s position
    /// became durable first, and the Produce requests the broker saw.
    async fn write_through(
        refused: usize,
        code: ResponseError,
    ) -> (Result<(), KafkaError>, bool, usize) {
        const TOPIC: &str = "mm2-offset-syncs.b.internal";
        let mut produced = 0;
        let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| match &r.body {
            RequestKind::Produce(request) if produced < refused => {
                produced += 1;
                refuse(request, code)
            }
            _ => Reply::Default,
        })
        .await;
        // A short request timeout: each append gives up quickly, the writer retries it.
        let cluster = Arc::new(Cluster::new(
            "b",
            vec![broker.addr.clone()],
            "t",
            Duration::from_millis(200),
        ));
        let (tx, rx) = queue();
        let writer = tokio::spawn(run(cluster, TOPIC.into(), 1, rx, CancellationToken::new()));
        let tp = TopicPartition::new("orders", 0);
        tx.add(&tp, vec![(0, 0), (9, 9), (20, 10)], pos(25, 15), Vec::new);
        let durable = tokio::time::timeout(Duration::from_secs(10), async {
            while tx.durable(&tp).is_none() && !writer.is_finished() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tx.durable(&tp)
        })
        .await
        .unwrap();
        assert!(durable.is_none() || durable == Some(pos(25, 15)));
        drop(tx);
        let result = writer.await.unwrap();
        (
            result,
            durable.is_some(),
            broker.received_of(ApiKey::Produce).len(),
        )
    }

    #[tokio::test]
    async fn appends_are_retried_until_written() {
        // Refused for longer than one append retries (its request timeout).
        let (result, durable, produced) = write_through(12, ResponseError::NotEnoughReplicas).await;
        result.unwrap();
        assert!(durable);
        assert_eq!(produced, 13);
    }

    #[tokio::test]
    async fn a_refusal_for_good_ends_the_writer_with_the_error() {
        let (result, durable, _) = write_through(1, ResponseError::TopicAuthorizationFailed).await;
        let error = result.unwrap_err().to_string();
        assert!(!durable);
        assert!(error.contains("mm2-offset-syncs.b.internal"), "{error}");
        let code = ResponseError::TopicAuthorizationFailed.code();
        assert!(error.contains(&format!("({code})")), "{error}");
    }

    #[test]
    fn batches_stay_under_the_byte_bound() {
        let syncs: Vec<OffsetSync> = (0..40_000)
            .map(|i| OffsetSync {
                topic_partition: TopicPartition::new("a-topic-with-a-longer-name", 3),
                upstream_offset: i,
                downstream_offset: i,
            })
            .collect();
        let chunks = chunks(&syncs);
        assert!(chunks.len() > 1);
        assert_eq!(chunks.iter().map(Vec::len).sum::<usize>(), syncs.len());
        for c in &chunks {
            let bytes: usize = c.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert!(bytes <= MAX_BATCH_BYTES);
            assert!(records::batch(c, 0).len() < 1024 * 1024);
        }
    }
}
