//! The fetch engine: reads the source cluster. One session task per source leader runs
//! `read_committed` Fetch requests in an incremental fetch session (KIP-227), so thousands of
//! partitions cost one small request per round trip. Each response is split into complete
//! record batches (zero-copy), CRC-checked, cleared of control batches and of aborted
//! transactions, and handed to the produce side as a `Chunk` under a memory budget.
//! Partitions whose leader moved go back to the fetcher task, which looks the new leader up.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::batch::{
    decode_uncompressed, renumber, split_batches, AbortedFilter, BatchError, RawBatch,
};
use crate::config::OffsetReset;
use crate::kafka::backoff::Backoff;
use crate::kafka::{Cluster, Connection, KafkaError, TopicPartition};

/// Fetch knobs, from the flow's configuration.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    pub max_wait_ms: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub offset_reset: OffsetReset,
    /// Bytes of fetched batches that may wait for the target's acknowledgement.
    pub buffer_bytes: usize,
}

/// Batches fetched from one source partition, in offset order.
#[derive(Debug)]
pub struct Chunk {
    pub tp: TopicPartition,
    /// Batches to forward; control batches and aborted transactions are already gone.
    pub batches: Vec<Fetched>,
    /// The source position after this chunk (past dropped batches too).
    pub next_offset: i64,
    pub high_watermark: i64,
    /// The Fetch response this chunk came from, held against the flow's buffer: its batches
    /// are slices of that response's one buffer, which lives until the last of them is gone,
    /// so the whole response counts until every chunk of it is released.
    pub permit: Arc<OwnedSemaphorePermit>,
}

/// One source batch on its way to the target.
#[derive(Debug)]
pub struct Fetched {
    /// What goes to the target: the source batch itself, or, when compaction left holes in
    /// its offsets (which a broker refuses on Produce), a copy with renumbered records.
    pub batch: RawBatch,
    /// The source offset after this batch.
    pub source_next: i64,
    /// The source records' offset deltas, for a renumbered batch.
    pub offset_deltas: Option<Vec<i32>>,
}

impl Fetched {
    fn new(batch: RawBatch) -> Result<Fetched, BatchError> {
        let source_next = batch.next_offset();
        if !batch.has_holes() {
            return Ok(Fetched {
                batch,
                source_next,
                offset_deltas: None,
            });
        }
        let renumbered = renumber(&batch)?;
        Ok(Fetched {
            batch: renumbered.batch,
            source_next,
            offset_deltas: Some(renumbered.offset_deltas),
        })
    }
}

/// What the fetch engine reports to the flow.
#[derive(Debug)]
pub enum FetchEvent {
    Chunk(Chunk),
    /// The partition cannot go on (corrupt batch, authorization, ...): it is no longer fetched.
    Stopped {
        tp: TopicPartition,
        error: String,
    },
}

/// A partition handed to the fetcher, with its start position (`None`: reset by policy).
#[derive(Debug, Clone)]
pub struct Assignment {
    pub tp: TopicPartition,
    pub offset: Option<i64>,
}

/// What the flow asks of the fetcher task.
#[derive(Debug)]
enum Order {
    Assign(Assignment),
    /// Stop fetching a partition (its target refused it): reading it on would only load the
    /// source for batches nobody sends.
    Forget(TopicPartition),
}

/// What the fetcher task asks of a session.
#[derive(Debug)]
enum SessionOrder {
    Place(Placed),
    Forget(TopicPartition),
}

/// Handle to the fetcher task of one flow.
#[derive(Clone)]
pub struct Fetcher {
    orders: mpsc::UnboundedSender<Order>,
}

impl Fetcher {
    /// Starts the fetcher task; `events` receives chunks until `shutdown` is cancelled.
    /// A broker handles one request per connection at a time, so the fetcher talks to
    /// `cluster` over connections of its own: one set for its lookups (Metadata, ListOffsets
    /// for newly assigned partitions), which must wait neither for the flow's admin requests
    /// (CreateTopics holds its connection until the controller commits) nor for a long-poll
    /// Fetch (which holds its connection until data arrives or `max_wait_ms` passes), and one
    /// set for the fetch sessions.
    pub fn spawn(
        cluster: &Cluster,
        config: FetchConfig,
        events: mpsc::Sender<FetchEvent>,
        shutdown: CancellationToken,
    ) -> (Fetcher, tokio::task::JoinHandle<()>) {
        let (orders, orders_rx) = mpsc::unbounded_channel();
        let budget = Arc::new(Semaphore::new(config.buffer_bytes));
        let task = tokio::spawn(
            Coordinator {
                sessions_cluster: Arc::new(cluster.sibling()),
                cluster: Arc::new(cluster.sibling()),
                config,
                events,
                shutdown,
                budget,
                sessions: HashMap::new(),
                homeless: Vec::new(),
                forgotten: HashSet::new(),
            }
            .run(orders_rx),
        );
        (Fetcher { orders }, task)
    }

    pub fn assign(&self, tp: TopicPartition, offset: Option<i64>) {
        let _ = self.orders.send(Order::Assign(Assignment { tp, offset }));
    }

    /// Stops fetching `tp` until it is assigned again.
    pub fn forget(&self, tp: TopicPartition) {
        let _ = self.orders.send(Order::Forget(tp));
    }
}

struct Coordinator {
    /// Metadata and ListOffsets.
    cluster: Arc<Cluster>,
    /// The fetch sessions' connections.
    sessions_cluster: Arc<Cluster>,
    config: FetchConfig,
    events: mpsc::Sender<FetchEvent>,
    shutdown: CancellationToken,
    budget: Arc<Semaphore>,
    sessions: HashMap<i32, mpsc::UnboundedSender<SessionOrder>>,
    homeless: Vec<Assignment>,
    /// Partitions forgotten since their last assignment: a session may still hand one
    /// back (its leader moved) before it hears of it.
    forgotten: HashSet<TopicPartition>,
}

/// A partition placed on a leader's session: its topic id and leader epoch from Metadata.
#[derive(Debug, Clone)]
struct Placed {
    tp: TopicPartition,
    topic_id: uuid::Uuid,
    leader_epoch: i32,
    offset: i64,
}

impl Coordinator {
    async fn run(mut self, mut orders: mpsc::UnboundedReceiver<Order>) {
        let (rehome_tx, mut rehome_rx) = mpsc::unbounded_channel::<Assignment>();
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        // Dialled while the flow discovers what to assign: the first placement does not wait.
        tokio::select! {
            _ = self.shutdown.cancelled() => return,
            _ = self.cluster.any_broker() => {}
        }
        // New assignments are placed at once (the first record of a new partition should not
        // wait); only retries back off.
        let mut fresh = false;
        loop {
            let wait = if self.homeless.is_empty() {
                Duration::from_secs(3600)
            } else if fresh {
                Duration::ZERO
            } else {
                backoff.next_delay()
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                Some(order) = orders.recv() => {
                    // A discovery assigns many partitions at once: one metadata lookup for all.
                    let mut assigned = self.obey(order);
                    while let Ok(order) = orders.try_recv() {
                        assigned |= self.obey(order);
                    }
                    if assigned {
                        backoff.reset();
                        fresh = true;
                    }
                }
                Some(a) = rehome_rx.recv() => {
                    if !self.forgotten.contains(&a.tp) {
                        self.homeless.push(a);
                    }
                }
                _ = tokio::time::sleep(wait) => {
                    fresh = false;
                    if let Err(e) = self.place(&rehome_tx).await {
                        tracing::warn!(cluster = %self.cluster.alias(), error = %e, "cannot place partitions on source leaders yet");
                    } else if self.homeless.is_empty() {
                        backoff.reset();
                    }
                }
            }
        }
    }

    /// Carries out one order; true if it assigned a partition.
    fn obey(&mut self, order: Order) -> bool {
        match order {
            Order::Assign(a) => {
                self.forgotten.remove(&a.tp);
                self.homeless.push(a);
                true
            }
            Order::Forget(tp) => {
                self.homeless.retain(|a| a.tp != tp);
                for session in self.sessions.values() {
                    let _ = session.send(SessionOrder::Forget(tp.clone()));
                }
                self.forgotten.insert(tp);
                false
            }
        }
    }

    /// Looks up the leaders of homeless partitions and hands each to its leader's session.
    async fn place(
        &mut self,
        rehome: &mpsc::UnboundedSender<Assignment>,
    ) -> Result<(), KafkaError> {
        let mut topics: Vec<String> = self
            .homeless
            .iter()
            .map(|a| a.tp.topic.to_string())
            .collect();
        topics.sort();
        topics.dedup();
        let meta = self.cluster.metadata(Some(&topics)).await?;
        let by_name: HashMap<&str, _> = meta.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut waiting = Vec::new();
        let mut by_leader: BTreeMap<i32, Vec<(Assignment, uuid::Uuid, i32)>> = BTreeMap::new();
        for a in std::mem::take(&mut self.homeless) {
            let found = by_name.get(&*a.tp.topic).and_then(|t| {
                t.partitions
                    .iter()
                    .find(|p| p.partition == a.tp.partition && p.leader >= 0)
                    .map(|p| (t.id, p.leader, p.leader_epoch))
            });
            match found {
                Some((id, leader, epoch)) => {
                    by_leader.entry(leader).or_default().push((a, id, epoch))
                }
                None => waiting.push(a),
            }
        }
        for (leader, parts) in by_leader {
            // The leader's session dials while the start offsets are looked up.
            self.session(leader, rehome);
            let unresolved: Vec<_> = parts
                .iter()
                .filter(|(a, _, _)| a.offset.is_none())
                .map(|(a, _, epoch)| (a.tp.clone(), *epoch))
                .collect();
            let resolved = if unresolved.is_empty() {
                HashMap::new()
            } else {
                match self.cluster.broker(leader).await {
                    Ok(conn) => list_offsets(
                        &conn,
                        &unresolved,
                        reset_timestamp(self.config.offset_reset),
                    )
                    .await
                    .unwrap_or_default(),
                    Err(_) => HashMap::new(),
                }
            };
            for (a, topic_id, leader_epoch) in parts {
                let Some(offset) = a.offset.or_else(|| resolved.get(&a.tp).copied()) else {
                    waiting.push(a);
                    continue;
                };
                let placed = Placed {
                    tp: a.tp,
                    topic_id,
                    leader_epoch,
                    offset,
                };
                let order = SessionOrder::Place(placed);
                if let Err(mpsc::error::SendError(order)) = self.session(leader, rehome).send(order)
                {
                    // The session ended (its broker failed) just now: a new one.
                    self.sessions.remove(&leader);
                    let _ = self.session(leader, rehome).send(order);
                }
            }
        }
        self.homeless = waiting;
        Ok(())
    }

    /// The fetch session with `leader`, started if there is none or it ended.
    fn session(
        &mut self,
        leader: i32,
        rehome: &mpsc::UnboundedSender<Assignment>,
    ) -> &mpsc::UnboundedSender<SessionOrder> {
        if self.sessions.get(&leader).is_none_or(|s| s.is_closed()) {
            let session = spawn_session(
                leader,
                self.sessions_cluster.clone(),
                self.config.clone(),
                self.events.clone(),
                rehome.clone(),
                self.budget.clone(),
                self.shutdown.clone(),
            );
            self.sessions.insert(leader, session);
        }
        &self.sessions[&leader]
    }
}

fn spawn_session(
    broker: i32,
    cluster: Arc<Cluster>,
    config: FetchConfig,
    events: mpsc::Sender<FetchEvent>,
    rehome: mpsc::UnboundedSender<Assignment>,
    budget: Arc<Semaphore>,
    shutdown: CancellationToken,
) -> mpsc::UnboundedSender<SessionOrder> {
    let (tx, rx) = mpsc::unbounded_channel();
    let session = Session {
        broker,
        cluster,
        config,
        events,
        rehome,
        budget,
        shutdown,
        parts: BTreeMap::new(),
        id: 0,
        epoch: 0,
        sent: HashMap::new(),
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
    shutdown: CancellationToken,
    parts: BTreeMap<TopicPartition, Placed>,
    /// KIP-227 session id (0: none) and the epoch of the next request.
    id: i32,
    epoch: i32,
    /// Fetch offsets the broker's session holds for us.
    sent: HashMap<TopicPartition, i64>,
    /// Ids of topics whose partitions left the session, for the forgotten-topics list.
    forgotten_ids: HashMap<Arc<str>, uuid::Uuid>,
}

/// Top-level Fetch errors after which the session must start over with a full fetch.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const OFFSET_OUT_OF_RANGE: i16 = 1;

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
                    if throttle > 0 {
                        tokio::time::sleep(Duration::from_millis(throttle as u64)).await;
                    }
                }
                Err(e) => {
                    failures += 1;
                    self.reset_session();
                    tracing::warn!(cluster = %self.cluster.alias(), broker = self.broker, error = %e, "fetch failed");
                    if failures >= 3 || !e.is_retriable() {
                        // The broker may be gone or no longer lead: let the fetcher look again.
                        for (_, p) in std::mem::take(&mut self.parts) {
                            let _ = self.rehome.send(Assignment {
                                tp: p.tp,
                                offset: Some(p.offset),
                            });
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
        Some(p)
    }

    fn reset_session(&mut self) {
        self.id = 0;
        self.epoch = 0;
        self.sent.clear();
    }

    fn request(&self) -> FetchRequest {
        let full = self.id == 0;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for p in self.parts.values() {
            if !full && self.sent.get(&p.tp) == Some(&p.offset) {
                continue;
            }
            let partition = FetchPartition::default()
                .with_partition(p.tp.partition)
                .with_current_leader_epoch(p.leader_epoch)
                .with_fetch_offset(p.offset)
                .with_last_fetched_epoch(-1)
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
            let mut gone: Vec<&TopicPartition> = self
                .sent
                .keys()
                .filter(|tp| !self.parts.contains_key(*tp))
                .collect();
            gone.sort();
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
        if response.error_code == FETCH_SESSION_ID_NOT_FOUND
            || response.error_code == INVALID_FETCH_SESSION_EPOCH
        {
            tracing::debug!(
                broker = self.broker,
                code = response.error_code,
                "fetch session reset"
            );
            self.reset_session();
            return Ok(response.throttle_time_ms);
        }
        KafkaError::check(
            "Fetch",
            || format!("broker {}", self.broker),
            response.error_code,
        )?;
        // The broker now holds what we sent.
        for t in &request.topics {
            for p in &t.partitions {
                self.sent.insert(
                    TopicPartition::new(t.topic.0.as_str(), p.partition),
                    p.fetch_offset,
                );
            }
        }
        for f in &request.forgotten_topics_data {
            for p in &f.partitions {
                self.sent
                    .remove(&TopicPartition::new(f.topic.0.as_str(), *p));
            }
        }
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
        let want = response_bytes.min(self.config.buffer_bytes) as u32;
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
        data: kafka_protocol::messages::fetch_response::PartitionData,
        permit: &Arc<OwnedSemaphorePermit>,
    ) {
        let Some(offset) = self.parts.get(&tp).map(|p| p.offset) else {
            return;
        };
        match data.error_code {
            0 => {}
            OFFSET_OUT_OF_RANGE => {
                let timestamp = reset_timestamp(self.config.offset_reset);
                let epoch = self.parts[&tp].leader_epoch;
                match list_offsets(conn, &[(tp.clone(), epoch)], timestamp).await {
                    Ok(found) if found.contains_key(&tp) => {
                        let reset = found[&tp];
                        tracing::warn!(
                            partition = %tp, from = offset, to = reset, gap = reset - offset,
                            policy = ?self.config.offset_reset, log_start = data.log_start_offset,
                            "source offset out of range: position reset by policy"
                        );
                        if let Some(p) = self.parts.get_mut(&tp) {
                            p.offset = reset;
                        }
                    }
                    _ => self.send_home(&tp),
                }
                return;
            }
            code => {
                let error = KafkaError::check("Fetch", || tp.to_string(), code).unwrap_err();
                if error.is_retriable() {
                    tracing::debug!(partition = %tp, error = %error, "partition moves to another leader");
                    self.send_home(&tp);
                } else {
                    self.stop(&tp, error.to_string()).await;
                }
                return;
            }
        }
        let Some(records) = data.records.filter(|r| !r.is_empty()) else {
            return;
        };
        let split = match split_batches(records) {
            Ok(s) => s,
            Err(e) => {
                return self
                    .stop(
                        &tp,
                        format!("source batch at offset {offset} is malformed: {e}"),
                    )
                    .await
            }
        };
        let aborted = data
            .aborted_transactions
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.producer_id.0, a.first_offset));
        let mut filter = AbortedFilter::new(aborted);
        let mut next = offset;
        let mut kept = Vec::with_capacity(split.batches.len());
        for batch in split.batches {
            if batch.next_offset() <= offset {
                continue;
            }
            let batch_end = batch.next_offset();
            let forward = batch.verify_crc().and_then(|()| {
                let keep = filter.keep(&batch) && batch.record_count() > 0;
                keep.then(|| Fetched::new(batch)).transpose()
            });
            match forward {
                Ok(Some(fetched)) => {
                    next = fetched.source_next;
                    kept.push(fetched);
                }
                // Control, aborted or emptied by compaction: nothing to send, the position moves.
                Ok(None) => next = batch_end,
                Err(e) => {
                    // Forward what came before the bad batch, then stop the partition.
                    if !kept.is_empty() {
                        self.emit(tp.clone(), kept, next, data.high_watermark, permit)
                            .await;
                    }
                    return self
                        .stop(&tp, format!("refusing to forward a batch: {e}"))
                        .await;
                }
            }
        }
        if next > offset {
            self.emit(tp, kept, next, data.high_watermark, permit).await;
        }
    }

    async fn emit(
        &mut self,
        tp: TopicPartition,
        batches: Vec<Fetched>,
        next_offset: i64,
        high_watermark: i64,
        permit: &Arc<OwnedSemaphorePermit>,
    ) {
        if let Some(p) = self.parts.get_mut(&tp) {
            p.offset = next_offset;
        }
        let chunk = Chunk {
            tp,
            batches,
            next_offset,
            high_watermark,
            permit: permit.clone(),
        };
        let _ = self.events.send(FetchEvent::Chunk(chunk)).await;
    }

    fn send_home(&mut self, tp: &TopicPartition) {
        if let Some(p) = self.leave(tp) {
            let _ = self.rehome.send(Assignment {
                tp: p.tp,
                offset: Some(p.offset),
            });
        }
    }

    async fn stop(&mut self, tp: &TopicPartition, error: String) {
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

/// The ListOffsets timestamp that implements a reset policy.
fn reset_timestamp(policy: OffsetReset) -> i64 {
    match policy {
        OffsetReset::Earliest => -2,
        OffsetReset::Latest => -1,
    }
}

/// ListOffsets (`read_committed`) for partitions led by the broker behind `conn`:
/// `timestamp` -2 gives the log start offset, -1 the last stable offset.
pub async fn list_offsets(
    conn: &Connection,
    partitions: &[(TopicPartition, i32)],
    timestamp: i64,
) -> Result<HashMap<TopicPartition, i64>, KafkaError> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (tp, epoch) in partitions {
        let p = ListOffsetsPartition::default()
            .with_partition_index(tp.partition)
            .with_current_leader_epoch(*epoch)
            .with_timestamp(timestamp);
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(1)
        .with_topics(topics);
    let response = conn.send(&request).await?;
    let mut out = HashMap::new();
    for t in response.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
            if p.error_code == 0 {
                out.insert(tp, p.offset);
            } else {
                tracing::debug!(partition = %tp, code = p.error_code, "ListOffsets error");
            }
        }
    }
    Ok(out)
}

/// The keyed records (offset, key, value) of one of strait's own internal topic partitions,
/// read with [`read_partition`]; records without a key or value are left out. `None` if the
/// topic does not exist. Those topics hold uncompressed batches only.
pub async fn read_keyed_records(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<(i64, Bytes, Bytes)>>, KafkaError> {
    let Some(batches) = read_partition(cluster, tp).await? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for batch in batches {
        let records =
            decode_uncompressed(&batch).map_err(|e| KafkaError::Other(format!("{tp}: {e}")))?;
        out.extend(
            records
                .into_iter()
                .filter_map(|r| Some((r.offset, r.key?, r.value?))),
        );
    }
    Ok(Some(out))
}

/// Reads one partition from its log start to its current last stable offset, as a
/// `read_committed` consumer sees it: the batches, with control batches and aborted
/// transactions dropped. `None` if the topic does not exist. For strait's own internal
/// topics and for checking what a flow wrote; not the replication path.
pub async fn read_partition(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    let meta = cluster.metadata(Some(&[tp.topic.to_string()])).await?;
    let Some(topic) = meta
        .into_iter()
        .find(|t| *t.name == *tp.topic && t.error_code == 0)
    else {
        return Ok(None);
    };
    let Some(p) = topic
        .partitions
        .iter()
        .find(|p| p.partition == tp.partition && p.leader >= 0)
    else {
        return Err(KafkaError::Other(format!("{tp} has no leader")));
    };
    let conn = cluster.broker(p.leader).await?;
    let here = [(tp.clone(), p.leader_epoch)];
    let (start, end) = (
        list_offsets(&conn, &here, -2).await?,
        list_offsets(&conn, &here, -1).await?,
    );
    let (Some(&start), Some(&end)) = (start.get(tp), end.get(tp)) else {
        return Err(KafkaError::Other(format!(
            "cannot list the offsets of {tp}"
        )));
    };
    let mut out = Vec::new();
    let mut offset = start;
    while offset < end {
        // A sessionless full fetch (session id 0, epoch -1; KIP-227).
        let request = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(16 * 1024 * 1024)
            .with_isolation_level(1)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                .with_topic_id(topic.id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(tp.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(8 * 1024 * 1024)])]);
        let response = conn.send(&request).await?;
        KafkaError::check("Fetch", || tp.to_string(), response.error_code)?;
        let data = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or_else(|| KafkaError::Other(format!("empty Fetch response for {tp}")))?;
        KafkaError::check("Fetch", || tp.to_string(), data.error_code)?;
        let split = split_batches(data.records.unwrap_or_default())
            .map_err(|e| KafkaError::Other(format!("{tp}: {e}")))?;
        if split.batches.is_empty() {
            break;
        }
        let aborted = data
            .aborted_transactions
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.producer_id.0, a.first_offset));
        let mut filter = AbortedFilter::new(aborted);
        for batch in split.batches {
            if batch.next_offset() <= offset {
                continue;
            }
            offset = batch.next_offset();
            if filter.keep(&batch) {
                out.push(batch);
            }
        }
    }
    Ok(Some(out))
}
