//! One fetch session with one source leader (KIP-227): its task sends `read_committed`
//! Fetch requests, full then incremental, tracks the session id and epoch and what the
//! broker holds for it, applies what `response` decided for each partition of the answer
//! (emit a chunk, rewind to a divergence point, move a position out of range back into the
//! log by ListOffsets, hand the partition back to the coordinator, stop it) and hands every
//! partition back when its broker fails.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::outage::Outages;
use super::response::{
    needs_renumbering, partition_action, session_verdict, source_end, Action, Delivery,
    SessionVerdict,
};
use super::{Assignment, Chunk, FetchConfig, FetchError, FetchEvent, FetchStats};
use crate::kafka::backoff::Backoff;
use crate::kafka::log_reader::list_offsets;
use crate::kafka::{Cluster, Connection, KafkaError, TopicPartition};
use crate::offset_map::Lineage;

/// What the fetcher task asks of a session.
#[derive(Debug)]
pub(super) enum SessionOrder {
    Place(Placed),
    Forget(TopicPartition),
}

/// A partition placed on a leader's session: its topic id and leader epoch from Metadata,
/// its position and the epoch of the last batch fetched before it (-1: none known).
#[derive(Debug, Clone)]
pub(super) struct Placed {
    pub(super) tp: TopicPartition,
    pub(super) topic_id: uuid::Uuid,
    pub(super) leader_epoch: i32,
    pub(super) offset: i64,
    pub(super) last_epoch: i32,
    /// Its assignment's generation, which its chunks carry (`Chunk::generation`).
    pub(super) generation: u32,
    /// The source end (`Chunk::source_end`) last told to the engine (-1: none yet).
    pub(super) source_end: i64,
}

impl Placed {
    /// The partition as handed back to the coordinator.
    fn homeless(self) -> Assignment {
        Assignment {
            tp: self.tp,
            offset: Some(self.offset),
            origin: Some(Lineage {
                topic_id: self.topic_id,
                leader_epoch: self.last_epoch,
                ..Lineage::UNKNOWN
            }),
            generation: self.generation,
        }
    }
}

/// What a fetcher's sessions share: connections, knobs, where chunks go, the buffer budget,
/// the counters, the outage reporter, the shutdown token.
pub(super) struct Shared {
    pub(super) cluster: Arc<Cluster>,
    pub(super) config: FetchConfig,
    pub(super) events: mpsc::Sender<FetchEvent>,
    pub(super) budget: Arc<Semaphore>,
    pub(super) stats: Arc<FetchStats>,
    pub(super) outages: Outages,
    pub(super) shutdown: CancellationToken,
}

/// Starts the session with `broker`; partitions it gives up go to `rehome`.
pub(super) fn spawn_session(
    broker: i32,
    shared: Shared,
    rehome: mpsc::UnboundedSender<Assignment>,
) -> mpsc::UnboundedSender<SessionOrder> {
    let (tx, rx) = mpsc::unbounded_channel();
    let Shared {
        cluster,
        config,
        events,
        budget,
        stats,
        outages,
        shutdown,
    } = shared;
    let session = Session {
        broker,
        cluster,
        config,
        events,
        rehome,
        budget,
        outages,
        stats,
        shutdown,
        parts: BTreeMap::new(),
        id: 0,
        epoch: 0,
        sent: HashMap::new(),
        left: BTreeSet::new(),
        forgotten_ids: HashMap::new(),
    };
    tokio::spawn(session.run(rx));
    tx
}

/// One fetch session with one source broker.
struct Session {
    broker: i32,
    cluster: Arc<Cluster>,
    config: FetchConfig,
    events: mpsc::Sender<FetchEvent>,
    rehome: mpsc::UnboundedSender<Assignment>,
    budget: Arc<Semaphore>,
    outages: Outages,
    stats: Arc<FetchStats>,
    shutdown: CancellationToken,
    parts: BTreeMap<TopicPartition, Placed>,
    /// KIP-227 session id (0: none) and the epoch of the next request.
    id: i32,
    epoch: i32,
    /// Fetch offsets and last fetched epochs the broker's session holds for us.
    sent: HashMap<TopicPartition, (i64, i32)>,
    /// Partitions that left since the last request: the broker's session may still hold them.
    left: BTreeSet<TopicPartition>,
    /// Ids of topics whose partitions left the session, for the forgotten-topics list.
    forgotten_ids: HashMap<Arc<str>, uuid::Uuid>,
}

impl Session {
    async fn run(mut self, mut orders: mpsc::UnboundedReceiver<SessionOrder>) {
        let shutdown = self.shutdown.clone();
        let mut failures = 0u32;
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        // Dialled at once: its first partitions come after their start offsets are known.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = self.cluster.broker(self.broker) => {}
        }
        loop {
            while let Ok(order) = orders.try_recv() {
                self.obey(order);
            }
            if self.parts.is_empty() {
                tokio::select! {
                    _ = self.shutdown.cancelled() => return,
                    order = orders.recv() => match order {
                        Some(order) => { self.obey(order); continue; }
                        None => return,
                    },
                }
            }
            let round = async {
                let conn = self.cluster.broker(self.broker).await?;
                self.fetch_once(&conn).await
            };
            let result = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = round => r,
            };
            match result {
                Ok(throttle) => {
                    failures = 0;
                    backoff.reset();
                    self.outages
                        .succeeded(self.cluster.alias(), self.broker, "fetching");
                    if throttle > 0 {
                        tokio::time::sleep(Duration::from_millis(throttle as u64)).await;
                    }
                }
                Err(e) => {
                    failures += 1;
                    self.reset_session();
                    self.outages
                        .failed(self.cluster.alias(), self.broker, "fetch failed", &e);
                    if failures >= 3 || !e.is_retriable() {
                        // The broker may be gone or no longer lead: let the fetcher look again.
                        for (_, p) in std::mem::take(&mut self.parts) {
                            let _ = self.rehome.send(p.homeless());
                        }
                        return;
                    }
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }

    fn obey(&mut self, order: SessionOrder) {
        match order {
            SessionOrder::Place(p) => {
                self.left.remove(&p.tp);
                self.parts.insert(p.tp.clone(), p);
            }
            SessionOrder::Forget(tp) => {
                if self.leave(&tp).is_some() {
                    tracing::debug!(partition = %tp, broker = self.broker, "partition left the fetch session");
                }
            }
        }
    }

    /// Takes a partition out of the session; the next request tells the broker.
    fn leave(&mut self, tp: &TopicPartition) -> Option<Placed> {
        let p = self.parts.remove(tp)?;
        self.forgotten_ids.insert(p.tp.topic.clone(), p.topic_id);
        self.left.insert(tp.clone());
        Some(p)
    }

    fn reset_session(&mut self) {
        self.id = 0;
        self.epoch = 0;
        self.sent.clear();
        self.left.clear();
    }

    fn request(&self) -> FetchRequest {
        let full = self.id == 0;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for p in self.parts.values() {
            if !full && self.sent.get(&p.tp) == Some(&(p.offset, p.last_epoch)) {
                continue;
            }
            let partition = FetchPartition::default()
                .with_partition(p.tp.partition)
                .with_current_leader_epoch(p.leader_epoch)
                .with_fetch_offset(p.offset)
                .with_last_fetched_epoch(p.last_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(self.config.partition_max_bytes);
            match topics.last_mut() {
                Some(t) if t.topic_id == p.topic_id && t.topic.0.as_str() == &*p.tp.topic => {
                    t.partitions.push(partition)
                }
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(p.tp.topic.to_string())))
                        .with_topic_id(p.topic_id)
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        if !full {
            // In order: one forgotten entry per topic.
            let gone = self.left.iter().filter(|tp| self.sent.contains_key(*tp));
            for tp in gone {
                let id = self.topic_id_hint(tp);
                match forgotten.last_mut() {
                    Some(f) if f.topic.0.as_str() == &*tp.topic => f.partitions.push(tp.partition),
                    _ => forgotten.push(
                        ForgottenTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                            .with_topic_id(id)
                            .with_partitions(vec![tp.partition]),
                    ),
                }
            }
        }
        FetchRequest::default()
            .with_max_wait_ms(self.config.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(self.config.max_bytes)
            .with_isolation_level(1)
            .with_session_id(self.id)
            .with_session_epoch(self.epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten)
    }

    /// The id of a topic that left the session (any partition of it still known, else nil).
    fn topic_id_hint(&self, tp: &TopicPartition) -> uuid::Uuid {
        self.parts
            .values()
            .find(|p| p.tp.topic == tp.topic)
            .map(|p| p.topic_id)
            .or_else(|| self.forgotten_ids.get(&tp.topic).copied())
            .unwrap_or_default()
    }

    /// One Fetch round trip. Returns the throttle time the broker asked for.
    async fn fetch_once(&mut self, conn: &Connection) -> Result<i32, KafkaError> {
        let request = self.request();
        let response = conn.send(&request).await?;
        if response.error_code != 0 {
            self.stats.error(response.error_code);
        }
        if let SessionVerdict::Reset(code) = session_verdict(self.broker, response.error_code)? {
            tracing::debug!(
                broker = self.broker,
                code = code.code(),
                "fetch session reset"
            );
            self.reset_session();
            return Ok(response.throttle_time_ms);
        }
        // The broker now holds what we sent.
        for t in &request.topics {
            for p in &t.partitions {
                self.sent.insert(
                    TopicPartition::new(t.topic.0.as_str(), p.partition),
                    (p.fetch_offset, p.last_fetched_epoch),
                );
            }
        }
        for f in &request.forgotten_topics_data {
            for p in &f.partitions {
                self.sent
                    .remove(&TopicPartition::new(f.topic.0.as_str(), *p));
            }
        }
        // Forgotten now, or never sent: nothing more to forget.
        self.left.retain(|tp| self.sent.contains_key(tp));
        if response.session_id != 0 {
            self.id = response.session_id;
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
        } else {
            self.reset_session();
        }
        let names: HashMap<uuid::Uuid, Arc<str>> = self
            .parts
            .values()
            .map(|p| (p.topic_id, p.tp.topic.clone()))
            .collect();
        let response_bytes: usize = response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        let want = permits(response_bytes, self.config.buffer_bytes);
        let Ok(permit) = self.budget.clone().acquire_many_owned(want).await else {
            return Ok(response.throttle_time_ms);
        };
        let permit = Arc::new(permit);
        for topic in response.responses {
            let name: Arc<str> = if topic.topic.0.is_empty() {
                match names.get(&topic.topic_id) {
                    Some(n) => n.clone(),
                    None => continue,
                }
            } else {
                Arc::from(topic.topic.0.as_str())
            };
            for p in topic.partitions {
                let tp = TopicPartition::new(name.clone(), p.partition_index);
                self.on_partition(conn, tp, p, &permit).await;
            }
        }
        Ok(response.throttle_time_ms)
    }

    async fn on_partition(
        &mut self,
        conn: &Connection,
        tp: TopicPartition,
        data: PartitionData,
        permit: &Arc<OwnedSemaphorePermit>,
    ) {
        let Some(offset) = self.parts.get(&tp).map(|p| p.offset) else {
            return;
        };
        if data.error_code != 0 {
            self.stats.error(data.error_code);
        }
        let end = source_end(&data);
        let action = if needs_renumbering(&data) {
            // Renumbering decompresses and compresses whole batches: milliseconds each,
            // which must not hold a worker thread that other sessions and the produce
            // engine run on.
            let on = tp.clone();
            let work = tokio::task::spawn_blocking(move || partition_action(&on, offset, data));
            match work.await {
                Ok(action) => action,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => return,
            }
        } else {
            partition_action(&tp, offset, data)
        };
        match action {
            Action::Idle => self.report_end(tp, offset, end, permit).await,
            Action::Deliver(delivery) => self.emit(tp, delivery, permit).await,
            Action::Diverged { epoch, end_offset } => self.rewind(&tp, epoch, end_offset),
            Action::OutOfRange => self.out_of_range(conn, &tp, offset).await,
            Action::Rehome(error) => {
                tracing::debug!(partition = %tp, error = %error, "partition moves to another leader");
                self.send_home(&tp);
            }
            Action::Stop { before, error } => {
                // Forward what came before the bad batch, then stop the partition.
                if let Some(delivery) = before {
                    self.emit(tp.clone(), delivery, permit).await;
                }
                self.stop(&tp, error).await;
            }
        }
    }

    async fn emit(
        &mut self,
        tp: TopicPartition,
        delivery: Delivery,
        permit: &Arc<OwnedSemaphorePermit>,
    ) {
        // A partition that left the session meanwhile (forgotten) has nobody to read it.
        let Some(p) = self.parts.get_mut(&tp) else {
            return;
        };
        let from = p.offset;
        p.offset = delivery.next_offset;
        p.last_epoch = delivery.last_epoch.unwrap_or(p.last_epoch);
        p.source_end = delivery.source_end;
        let generation = p.generation;
        let chunk = Chunk {
            tp,
            batches: delivery.batches,
            from,
            next_offset: delivery.next_offset,
            source_end: delivery.source_end,
            generation,
            permit: permit.clone(),
        };
        let _ = self.events.send(FetchEvent::Chunk(chunk)).await;
    }

    /// Tells the engine a new source end of partition `tp`, which has nothing to
    /// deliver at `offset`: its lag is the backlog even before its first records arrive.
    async fn report_end(
        &mut self,
        tp: TopicPartition,
        offset: i64,
        source_end: i64,
        permit: &Arc<OwnedSemaphorePermit>,
    ) {
        let Some(p) = self.parts.get_mut(&tp) else {
            return;
        };
        if source_end < 0 || source_end == p.source_end {
            return;
        }
        p.source_end = source_end;
        let chunk = Chunk {
            tp,
            batches: Vec::new(),
            from: offset,
            next_offset: offset,
            source_end,
            generation: p.generation,
            permit: permit.clone(),
        };
        let _ = self.events.send(FetchEvent::Chunk(chunk)).await;
    }

    /// The leader holds epoch `epoch` only up to `end_offset` (KIP-320): what was fetched
    /// from there on came from a log an unclean leader election truncated. The partition
    /// goes back to `end_offset` and reads the leader's records from there. The copies of
    /// the lost records already sent stay on the target: a log cannot be un-written, and
    /// MirrorMaker 2 would have copied them as well; consumers of the target see them
    /// followed by the new leader's records. The next Fetch sends `epoch`, so a leader
    /// whose log diverged earlier still says so.
    fn rewind(&mut self, tp: &TopicPartition, epoch: i32, end_offset: i64) {
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        let from = p.offset;
        if end_offset >= from {
            if p.last_epoch == epoch {
                // Nothing to correct, and the same Fetch would get the same answer: look
                // the leader up again after a backoff rather than ask in a loop.
                tracing::debug!(partition = %tp, epoch, end_offset, position = from, "diverging epoch that changes nothing");
                return self.send_home(tp);
            }
            // The log holds the position: fetch on, checked against the epoch the leader
            // knows.
            p.last_epoch = epoch;
            return;
        }
        p.last_epoch = epoch;
        p.offset = end_offset;
        self.stats.truncated(from - end_offset);
        tracing::error!(
            partition = %tp, from, to = end_offset, lost_on_source = from - end_offset, epoch,
            "source log truncated (unclean leader election?): rewinding to where it diverged; \
             the target keeps the copies of the records the source lost"
        );
    }

    /// The broker found `offset` outside `tp`'s log: below its start, retention deleted
    /// records before they were copied, and the log start is where the rest is; above its
    /// end, the log was truncated under the position, which goes back to the end. The reset
    /// policy plays no part: it would skip the retained backlog (`latest`) or re-copy the
    /// log (`earliest`).
    async fn out_of_range(&mut self, conn: &Connection, tp: &TopicPartition, offset: i64) {
        let Some(epoch) = self.parts.get(tp).map(|p| p.leader_epoch) else {
            return;
        };
        let bounds = async {
            let start = list_offsets(conn, &[(tp.clone(), epoch)], -2).await?;
            let end = list_offsets(conn, &[(tp.clone(), epoch)], -1).await?;
            Ok::<_, KafkaError>(start.get(tp).copied().zip(end.get(tp).copied()))
        };
        let (start, end) = match bounds.await {
            Ok(Some(bounds)) => bounds,
            Ok(None) | Err(_) => return self.send_home(tp),
        };
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        if offset < start {
            p.offset = start;
            p.last_epoch = -1;
            self.stats.retention_reset(start - offset);
            tracing::warn!(
                partition = %tp, from = offset, to = start, lost = start - offset,
                "source records deleted (retention) before they were copied: going on from the log start"
            );
        } else if offset > end {
            p.offset = end;
            p.last_epoch = -1;
            self.stats.truncated(offset - end);
            tracing::error!(
                partition = %tp, from = offset, to = end, lost_on_source = offset - end,
                "source log ends before the position (truncated by an unclean leader election?): \
                 rewinding to its end; the target keeps the copies of the records the source lost"
            );
        } else {
            // The log moved between the Fetch and ListOffsets (a new leader): look again.
            self.send_home(tp);
        }
    }

    fn send_home(&mut self, tp: &TopicPartition) {
        if let Some(p) = self.leave(tp) {
            let _ = self.rehome.send(p.homeless());
        }
    }

    async fn stop(&mut self, tp: &TopicPartition, error: FetchError) {
        self.leave(tp);
        tracing::error!(partition = %tp, %error, "partition stopped");
        let _ = self
            .events
            .send(FetchEvent::Stopped {
                tp: tp.clone(),
                error,
            })
            .await;
    }
}

/// The buffer permits a response of `response_bytes` takes: its size, at most the whole
/// buffer (a larger response must not wait for ever), saturated to the `u32` that
/// semaphores count in rather than wrapped to a small number at 4 GiB.
fn permits(response_bytes: usize, buffer_bytes: usize) -> u32 {
    u32::try_from(response_bytes.min(buffer_bytes)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::permits;

    #[test]
    fn permits_are_the_response_size_capped_by_the_buffer_and_saturated() {
        assert_eq!(permits(1000, 1 << 20), 1000);
        assert_eq!(permits(2 << 20, 1 << 20), 1 << 20);
        assert_eq!(permits(5 << 30, 8 << 30), u32::MAX);
        assert_eq!(permits(usize::MAX, usize::MAX), u32::MAX);
    }
}
