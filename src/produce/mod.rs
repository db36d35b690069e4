//! The produce engine: writes fetched batches to the target as strait's own idempotent
//! producer. One task owns every partition's queue, so ordering needs no locks:
//! * each batch gets strait's producer id/epoch and the partition's next sequence, then its
//!   CRC is recomputed (`RawBatch::stamp`); records bytes are never touched nor copied;
//! * a Produce request carries at most one batch per partition (Produce v3+ rule) and as
//!   many partitions of one leader as fit; `acks=all`;
//! * at most `max_in_flight` batches per partition are unacknowledged (unset: sized from
//!   the round trip to the partition's broker, `window`: 5 near, up to 64 far), and as
//!   many requests per connection, sent as soon as batches wait (a backlog fills the window
//!   at once); each target broker gets `connections` (default 2) connections, since a broker
//!   serves one connection's requests one at a time, and a partition keeps to one of them
//!   (`Link`); idempotence keeps order; a failed batch and every later one are resent with the
//!   same sequences once the partition's outstanding requests are back (past 5 in flight
//!   the broker may no longer recognise a resend it already has: the partition's target
//!   log is then read back to learn which batches it holds, and only the others are sent);
//! * a batch the target refuses for good stops its partition alone, and the fetcher stops
//!   reading it; leaders unknown or moved are looked up in the background;
//! * a partition the target keeps refusing (`partition::PAUSE_AFTER`) lets go of its batches
//!   not sent yet and its fetching is paused, so that it cannot fill the fetch buffer and
//!   stall the others; once the target writes what it kept, fetching resumes right after
//!   it, under a new assignment generation that tells stale chunks from fresh ones;
//! * what the target acknowledged becomes the partition's `Position`, the only thing the
//!   progress topic ever records (DESIGN.md rule 8);
//! * in exactly-once mode the records and the progress records go in transactions
//!   (`transaction`), and a position counts as committed once its transaction is.
//!
//! `partition` holds each target partition's state (queue, in-flight batches, sequences) and
//! decides what every Produce answer means for it, without I/O; this module carries the
//! decisions out: the loop, connections, requests, the producer id and the fetcher.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::batch::{ProducerStamp, RawBatch};
use crate::fetch::{Chunk, FetchEvent, Fetcher};
use crate::kafka::backoff::Backoff;
use crate::kafka::produce_request::{self, TopicData};
use crate::kafka::transaction::TransactionalProducer;
use crate::kafka::{log_reader, Cluster, Connection, KafkaError, TopicMeta, TopicPartition};
use crate::mm2::offset_sync::SyncSender;
use crate::now_ms;
use crate::offset_map::{Forwarded, Lineage, OffsetMap, Position, Translations};
use crate::progress;
use crate::telemetry::{EngineHealth, FlowHealth, FlowMetrics, PartitionState};

mod chatter;
#[cfg(test)]
mod commit_tests;
mod partition;
#[cfg(test)]
mod tests;
mod transaction;
mod visits;
mod window;

pub use partition::next_sequence;

use chatter::{Chatter, Line};
use partition::{Entry, LogCheck, Outcome, Partition, Resend, Reset};
use transaction::{Phase, Transaction};
use visits::Visits;
use window::Windows;

/// Produce knobs, from the flow's configuration.
#[derive(Debug, Clone)]
pub struct ProduceConfig {
    /// Unacknowledged batches per partition (`produce.max.in.flight`, 1..=64; past 5 a resend
    /// the broker no longer recognises is looked up in the target log: `Outcome::CheckLog`);
    /// `None`: sized from the round trip to the partition's broker (`window`).
    pub max_in_flight: Option<usize>,
    /// Soft limit of one Produce request (a single larger batch still goes alone).
    pub max_request_bytes: usize,
    /// How often acknowledged positions are written to the progress topic.
    pub commit_interval: Duration,
    /// How long a shutdown may spend draining in-flight batches.
    pub drain_timeout: Duration,
    /// How long a batch the target keeps refusing with a retriable error is resent before
    /// its partition is stopped (the Java producer's `delivery.timeout.ms`).
    pub delivery_timeout: Duration,
    /// Merge consecutive small uncompressed batches waiting in a partition's queue into
    /// batches of up to this many bytes (`batch::coalesce`); 0 never merges.
    pub coalesce_bytes: usize,
    /// The transactional id that makes this engine the flow's only writer
    /// (`Cluster::init_producer_id`); `None`: no fencing.
    pub transactional_id: Option<String>,
    /// Write in transactions, committed every `commit_interval` with the progress records
    /// of the positions they reach (`exactly.once`): under `transactional_id`, or, in a
    /// scale-out group (no `transactional_id`), one per slot, under the producers the flow
    /// hands over with the slots ([`Command::Adopt`]).
    pub exactly_once: bool,
    /// Connections to each target broker (`produce.connections.per.broker`, 1..=16): a
    /// broker works through one connection's requests one at a time, so more of them let it
    /// append to several partitions at once. A partition's requests all go over one of them.
    pub connections: usize,
}

/// Where one source partition goes, and where it resumes.
#[derive(Debug, Clone)]
pub struct Route {
    pub source: TopicPartition,
    pub target: TopicPartition,
    pub resume: Option<Position>,
    /// The scale-out slot the partition belongs to (0 outside a group): in exactly-once
    /// mode, its records go in that slot's transaction.
    pub slot: u32,
    /// The source log the partition is read from: its topic id now, and the leader epoch
    /// `resume` was committed with when that log is the one it was taken from.
    pub lineage: Lineage,
    /// The target partition is a new log, not the one `resume` was written to (its topic
    /// was deleted and created again while strait was stopped): it starts over there
    /// (`Engine::start_over`).
    pub new_log: bool,
    /// The committed position's log (from the progress topic), for the fetcher to compare
    /// with the log it finds.
    pub origin: Option<Lineage>,
}

/// What the engine counted, for the flow's status line and for tests.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    /// Records the source holds that the target has not acknowledged: the sum over
    /// partitions of (source end - acknowledged position, or the position the
    /// partition was first fetched from while nothing is acknowledged).
    pub lag: i64,
    pub stopped: usize,
}

/// Commands from the flow to a running engine.
#[derive(Debug)]
pub enum Command {
    Route(Route),
    /// The flow no longer replicates this source partition (its topic left the filter).
    Unroute(TopicPartition),
    /// Another member of the flow's scale-out group takes these partitions over.
    Release(Release),
    /// Exactly-once in a scale-out group: the slot's partitions are written in transactions
    /// of `producer` (its InitProducerId fenced the slot's earlier owner), from now on.
    Adopt {
        slot: u32,
        producer: TransactionalProducer,
    },
}

/// Partitions handed to another process (`crate::group`): fetching stops at once; with
/// `commit`, what was fetched is still written and the positions reached are committed
/// (so that the new owner repeats nothing), without, the batches not sent are let go and
/// nothing more is committed (the new owner may be writing already). `done` is answered
/// once nothing of them is in flight any more, or after the drain timeout.
#[derive(Debug)]
pub struct Release {
    pub partitions: Vec<TopicPartition>,
    /// The slots they make up: their transactions end with them (exactly-once mode).
    pub slots: Vec<u32>,
    pub commit: bool,
    pub done: tokio::sync::oneshot::Sender<()>,
}

/// A release under way.
struct Releasing {
    parts: Vec<usize>,
    slots: Vec<u32>,
    commit: bool,
    deadline: Instant,
    done: tokio::sync::oneshot::Sender<()>,
}

/// What finished in the background, carried back into the engine task.
enum Done {
    Produce(Completion),
    /// A metadata lookup for the target topics of partitions without a known leader.
    Leaders(Result<Vec<TopicMeta>, KafkaError>),
    /// Partitions enrolled in the open transaction of `slot`, sent by producer `by`
    /// (AddPartitionsToTxn).
    Enrolled {
        slot: u32,
        by: (i64, i16),
        parts: Vec<usize>,
        result: Result<(), KafkaError>,
    },
    /// The open transaction of `slot`, of producer `by`, committed (EndTxn).
    Ended {
        slot: u32,
        by: (i64, i16),
        result: Result<(i64, i16), KafkaError>,
    },
    /// Partition `i`'s target log read back from its acknowledged position
    /// (`Outcome::CheckLog`).
    Checked {
        i: usize,
        result: Result<Option<Vec<RawBatch>>, KafkaError>,
    },
    /// A connection dialled to a target broker.
    Connected {
        link: Link,
        result: Result<Connection, KafkaError>,
    },
}

/// One of the connections to a target broker (`ProduceConfig::connections`): partition `i`
/// of the engine goes over lane `i % connections` of its leader, so its requests keep their
/// order while the broker appends to the partitions of other lanes at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Link {
    broker: i32,
    lane: usize,
}

/// The result of one Produce request.
struct Completion {
    link: Link,
    /// When the request went out: its answer time sizes the window (`window`).
    sent_at: Instant,
    sent: Vec<(usize, i32)>,
    /// The topic ids the request named its topics by (Produce v13+): its answer names them
    /// so, whatever ids the topics have by the time it comes (a topic created again has a
    /// new one).
    ids: Vec<(uuid::Uuid, Arc<str>)>,
    result: Result<ProduceResponse, KafkaError>,
}

pub struct Engine {
    target: Arc<Cluster>,
    config: ProduceConfig,
    parts: Vec<Partition>,
    by_source: HashMap<TopicPartition, usize>,
    /// The progress partition of the engine's commits, and of slot 0's transaction.
    progress_part: usize,
    /// Per slot, the indexes of its partitions (its progress partition included): what a
    /// slot's new producer or epoch renumbers, and what its commits look at.
    in_slot: HashMap<u32, Vec<usize>>,
    /// The producer outside exactly-once mode (idempotent, or fencing by its transactional
    /// id); in exactly-once mode each transaction has its own.
    producer: (i64, i16),
    reset_pending: bool,
    /// What ends the engine at once, writing nothing more: another process's InitProducerId
    /// fenced it, or its transaction cannot be completed.
    fatal: Option<KafkaError>,
    /// The open transactions in exactly-once mode, by slot: the flow's one (slot 0), or one
    /// per slot this member of a scale-out group holds.
    txns: BTreeMap<u32, Transaction>,
    conns: HashMap<Link, Connection>,
    /// Connections being dialled in the background: one unreachable broker holds up
    /// neither the others nor the loop.
    dialing: HashSet<Link>,
    /// Per target broker that could not be reached: when to dial it again, and the backoff
    /// that grows with each failure in a row.
    redial: HashMap<i32, (Instant, Backoff)>,
    /// Produce requests in flight per connection.
    link_inflight: HashMap<Link, usize>,
    throttled_until: HashMap<i32, Instant>,
    /// Produce requests and the leader lookup in flight.
    requests: JoinSet<Done>,
    /// Whether a leader lookup is in flight.
    looking_up: bool,
    /// The topics the last lookup left unresolved: looking them up again waits until
    /// `lookup_after` (backing off), a lookup that includes any other topic does not.
    unresolved: Vec<Arc<str>>,
    lookup_after: Instant,
    lookup_backoff: Backoff,
    stats: Stats,
    topic_ids: HashMap<Arc<str>, uuid::Uuid>,
    /// The flow's offset maps, fed from every acknowledgement.
    translations: Translations,
    /// Where the breakpoints of the offset maps go, as MM2 offset syncs, and which positions
    /// their durable syncs cover (all that `commit` may write).
    syncs: SyncSender,
    /// The source side, told to stop reading the partitions the target refuses (for good,
    /// or until it writes them again).
    fetcher: Fetcher,
    /// Bytes of one progress record batch at most (`progress::batch_bytes`).
    progress_batch_bytes: usize,
    /// Where remote topics the target no longer has are reported, for topic sync to check
    /// and create again (`Engine::report_missing_topics`); `None`: nowhere.
    missing: Option<mpsc::UnboundedSender<String>>,
    /// Where each position goes once its progress record is durable
    /// (`Engine::report_commits`); `None`: nowhere.
    commits: Option<mpsc::UnboundedSender<(TopicPartition, Position)>>,
    /// When each remote topic was last reported missing: once per `REPORT_MISSING_EVERY`.
    reported: HashMap<Arc<str>, Instant>,
    /// Where the flow's series and health go (`Engine::report_to`); `None`: nowhere.
    telemetry: Option<(FlowMetrics, Arc<FlowHealth>)>,
    /// Since when batches have waited for the target with nothing acknowledged.
    waiting_since: Option<Instant>,
    /// The bound on per-partition log lines.
    chatter: Chatter,
    /// Partitions being handed to another process.
    releasing: Vec<Releasing>,
    /// A scale-out member writes only while its lease holds (`Engine::hold_by`).
    lease: Option<Arc<crate::group::Lease>>,
    /// The partitions with something to do: the loop walks these, not all.
    visits: Visits,
    /// The round trips to the target brokers, which size the windows when
    /// `produce.max.in.flight` is not set.
    windows: Windows,
    /// Counts the pumps: which slot goes first on a connection (`pump`).
    turn: usize,
    /// Slots handed back to this process ([`Command::Adopt`]) while requests of their
    /// earlier transactions are still out: adopted once those are answered.
    adopting: Vec<(u32, TransactionalProducer)>,
    /// Slots whose transaction was dropped on a refusal while the lease had run out
    /// (`refused_transaction`), with their transactional id and the refusal, until the group
    /// takes them ([`Release`]).
    fenced: BTreeMap<u32, (String, String)>,
}

/// How often a remote topic still missing is reported again: topic sync retries a creation
/// that failed when it is asked again.
const REPORT_MISSING_EVERY: Duration = Duration::from_secs(2);

/// `produce.coalesce.bytes` merges batches of at most this fraction of it: re-framing the
/// records of a batch already near the target size costs more than the batch does.
const COALESCE_SMALL: usize = 16;

/// Fetch events taken in at most before the engine sends what they brought.
const BURST: usize = 4096;

impl Engine {
    /// Prepares an engine that writes to `target` and records progress in `progress_topic`.
    pub async fn new(
        target: Arc<Cluster>,
        config: ProduceConfig,
        progress_topic: &str,
        translations: Translations,
        syncs: SyncSender,
        fetcher: Fetcher,
    ) -> Result<Engine, KafkaError> {
        let (producer, progress_batch_bytes) = tokio::join!(
            target.init_producer_id(config.transactional_id.as_deref()),
            progress::batch_bytes(&target, progress_topic)
        );
        let producer = producer?;
        // In a scale-out group the slots' transactions come with the slots.
        let mut txns = BTreeMap::new();
        if let (true, Some(id)) = (config.exactly_once, &config.transactional_id) {
            let producer = TransactionalProducer::new(&target, id.clone(), producer).await?;
            txns.insert(0, Transaction::new(producer, 0));
        }
        let progress_tp = TopicPartition::new(progress_topic, 0);
        let mut engine = Engine {
            target,
            config,
            parts: Vec::new(),
            by_source: HashMap::new(),
            progress_part: 0,
            in_slot: HashMap::from([(0, vec![0])]),
            producer,
            reset_pending: false,
            fatal: None,
            txns,
            conns: HashMap::new(),
            dialing: HashSet::new(),
            redial: HashMap::new(),
            link_inflight: HashMap::new(),
            throttled_until: HashMap::new(),
            requests: JoinSet::new(),
            looking_up: false,
            unresolved: Vec::new(),
            lookup_after: Instant::now(),
            lookup_backoff: Backoff::new(Duration::from_millis(20), Duration::from_secs(1)),
            stats: Stats::default(),
            topic_ids: HashMap::new(),
            translations,
            syncs,
            fetcher,
            progress_batch_bytes,
            missing: None,
            commits: None,
            reported: HashMap::new(),
            telemetry: None,
            waiting_since: None,
            chatter: Chatter::default(),
            releasing: Vec::new(),
            lease: None,
            visits: Visits::default(),
            windows: Windows::default(),
            turn: 0,
            adopting: Vec::new(),
            fenced: BTreeMap::new(),
        };
        engine.parts.push(Partition::progress(progress_tp, 0));
        engine.visits.mark(engine.progress_part);
        match engine.txns.get(&0) {
            Some(txn) => txn.ready(engine.target.alias()),
            None if engine.config.exactly_once => {
                tracing::info!(cluster = %engine.target.alias(), "exactly-once: each scale-out slot gets its transactional producer with the slot")
            }
            None => {
                tracing::info!(cluster = %engine.target.alias(), producer_id = producer.0, epoch = producer.1, "idempotent producer ready")
            }
        }
        Ok(engine)
    }

    /// Adopts the slots handed over ([`Command::Adopt`]) whose partitions have no request
    /// out any more: an answer to a request of the slot's earlier transaction must not be
    /// taken for one of the new producer's (answers name no producer).
    fn settle_adoptions(&mut self) {
        if self.adopting.is_empty() {
            return;
        }
        for (slot, producer) in std::mem::take(&mut self.adopting) {
            let quiet = self
                .in_slot
                .get(&slot)
                .into_iter()
                .flatten()
                .all(|&i| self.parts[i].outstanding == 0);
            if quiet {
                self.adopt(slot, producer);
            } else {
                self.adopting.push((slot, producer));
            }
        }
    }

    /// Writes the partitions of `slot` in transactions of `producer` from now on. Batches an
    /// earlier transaction of the slot left unanswered or unwritten are let go: the slot
    /// starts from its committed positions (the routes that came with it).
    fn adopt(&mut self, slot: u32, producer: TransactionalProducer) {
        let held = self.in_slot.get(&slot).into_iter().flatten();
        let progress = match held.copied().find(|&i| self.parts[i].progress) {
            Some(i) => i,
            None => {
                let tp = self.parts[self.progress_part].target.clone();
                let i = self.parts.len();
                self.parts.push(Partition::progress(tp, slot));
                self.in_slot.entry(slot).or_default().push(i);
                i
            }
        };
        for &i in self.in_slot.get(&slot).into_iter().flatten() {
            let part = &mut self.parts[i];
            part.inflight.clear();
            part.queue.retain(|e| e.seq.is_none());
            part.restart_sequences();
            self.visits.mark(i);
        }
        // Progress records of an earlier transaction of the slot are never written now.
        self.parts[progress].queue.clear();
        let txn = Transaction::new(producer, progress);
        txn.ready(self.target.alias());
        self.txns.insert(slot, txn);
    }

    /// Ends the transaction of `slot`, handed to another process: nothing more is written
    /// or committed in it, and answers still to come for it are let go.
    fn drop_transaction(&mut self, slot: u32) {
        if let Some(txn) = self.txns.remove(&slot) {
            // Its progress records, sent or not, belong to it alone.
            self.parts[txn.progress].queue.clear();
            self.visits.mark(txn.progress);
        }
    }

    /// The transaction that writes partition `i`, in exactly-once mode; `None` otherwise,
    /// or while its slot is not (or no longer) this process's.
    fn txn_of(&self, i: usize) -> Option<&Transaction> {
        self.txns.get(&self.parts[i].slot)
    }

    /// The producer id and epoch partition `i` is written under.
    fn producer_of(&self, i: usize) -> (i64, i16) {
        self.txn_of(i)
            .map_or(self.producer, |t| t.producer.producer)
    }

    /// Remote topics found missing on the target (UNKNOWN_TOPIC_OR_PARTITION or
    /// UNKNOWN_TOPIC_ID for a topic the engine wrote to, in a Produce answer or its metadata)
    /// go to `to`, by name, for topic sync to check and create again: their partitions are
    /// refused (and paused) meanwhile, and written again once the target has the topic.
    pub fn report_missing_topics(&mut self, to: mpsc::UnboundedSender<String>) {
        self.missing = Some(to);
    }

    /// Each position committed from now on goes to `to` once its progress record is durable
    /// (for the continuous hand-back to MirrorMaker 2, `crate::migration`).
    pub fn report_commits(&mut self, to: mpsc::UnboundedSender<(TopicPartition, Position)>) {
        self.commits = Some(to);
    }

    /// The flow's series and health are kept up to date in `metrics` and `health`, for
    /// the partitions routed from now on.
    pub fn report_to(&mut self, metrics: FlowMetrics, health: Arc<FlowHealth>) {
        self.telemetry = Some((metrics, health));
    }

    /// Sends nothing while `lease` has run out (a member of a scale-out group whose slots
    /// may be another's by now, `crate::group::Lease`).
    pub fn hold_by(&mut self, lease: Arc<crate::group::Lease>) {
        self.lease = Some(lease);
    }

    pub fn route(&mut self, route: Route) {
        if let Some(&i) = self.by_source.get(&route.source) {
            let part = &mut self.parts[i];
            if part.released {
                // Back from another process: it goes on from what that one committed, as
                // a new assignment generation (chunks of the earlier one are dropped).
                part.reacquire(route.resume, route.lineage, route.new_log);
                self.visits.mark(i);
                part.metrics = self
                    .telemetry
                    .as_ref()
                    .map(|(m, _)| m.partition(&part.source, &part.target));
                self.fetcher.assign(
                    part.source.clone(),
                    route.resume.map(|p| p.source_next),
                    route.origin,
                    part.generation,
                );
                return;
            }
            // Routed again after `unroute`: it goes on after the last batch written.
            self.visits.mark(i);
            if std::mem::take(&mut part.dropped) {
                part.metrics = self
                    .telemetry
                    .as_ref()
                    .map(|(m, _)| m.partition(&part.source, &part.target));
                if let Some(from) = part.resume() {
                    self.fetcher
                        .resume(part.source.clone(), from, part.lineage, part.generation);
                }
            }
            return;
        }
        self.by_source
            .insert(route.source.clone(), self.parts.len());
        self.visits.mark(self.parts.len());
        let metrics = self
            .telemetry
            .as_ref()
            .map(|(m, _)| m.partition(&route.source, &route.target));
        self.in_slot
            .entry(route.slot)
            .or_default()
            .push(self.parts.len());
        let mut part = Partition::new(route.source, route.target, route.resume);
        part.slot = route.slot;
        part.metrics = metrics;
        part.lineage = route.lineage;
        part.new_log = route.new_log;
        self.parts.push(part);
    }

    /// Stops replicating source partition `tp`: see [`Partition::unroute`].
    fn unroute(&mut self, tp: &TopicPartition) {
        if let Some(&i) = self.by_source.get(tp) {
            self.visits.mark(i);
            let part = &mut self.parts[i];
            if let Some(metrics) = part.unroute().then(|| part.metrics.take()).flatten() {
                metrics.forget();
            }
        }
    }

    /// Starts handing `release`'s partitions over ([`Release`]). Lost slots' transactions
    /// end here, uncommitted: nothing more is written in them (the new owner's
    /// InitProducerId aborts what they hold).
    fn release(&mut self, release: Release) {
        for slot in &release.slots {
            self.fenced.remove(slot);
            self.adopting.retain(|(s, _)| s != slot);
            if !release.commit {
                self.drop_transaction(*slot);
            }
        }
        let mut parts = Vec::new();
        for tp in &release.partitions {
            let Some(&i) = self.by_source.get(tp) else {
                continue;
            };
            self.fetcher.forget(tp.clone());
            self.parts[i].hand_over(release.commit);
            self.visits.mark(i);
            parts.push(i);
        }
        self.releasing.push(Releasing {
            parts,
            slots: release.slots,
            commit: release.commit,
            deadline: Instant::now() + self.config.drain_timeout,
            done: release.done,
        });
    }

    /// Completes the releases whose partitions are settled: nothing queued or in flight
    /// and, for a hand-over, the positions reached committed (a commit is made for them
    /// as soon as they are idle, not an interval later). At the deadline a release
    /// completes anyway: the new owner repeats what was not committed.
    fn settle_releases(&mut self) {
        if self.releasing.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut commit = false;
        for r in std::mem::take(&mut self.releasing) {
            // Lost partitions wait only for their answers: what is queued is never sent.
            let idle = r.parts.iter().all(|&i| {
                let p = &self.parts[i];
                p.stopped || p.inflight.is_empty() && (p.queue.is_empty() || !r.commit)
            });
            // In exactly-once mode, committed means the slots' transactions ended too.
            let uncommitted = r.commit
                && (r.parts.iter().any(|&i| {
                    let p = &self.parts[i];
                    !p.stopped && p.committed != p.acked && p.acked.source_next >= 0
                }) || r
                    .slots
                    .iter()
                    .any(|s| self.txns.get(s).is_some_and(|t| t.phase != Phase::Open)));
            if now < r.deadline && (!idle || uncommitted) {
                commit |= idle && uncommitted;
                self.releasing.push(r);
                continue;
            }
            if !idle || uncommitted {
                tracing::warn!(partitions = r.parts.len(), "partitions handed over before all they fetched was written and committed (past shutdown.drain.timeout.ms): their new owner writes the rest again");
            }
            let mut maps = self.translations.lock().unwrap();
            for &i in &r.parts {
                let part = &mut self.parts[i];
                // A batch sent but not acknowledged, never sent again: the target's next
                // sequence for this producer is unknown there now, so the producer starts
                // over under a new identity (as after any such doubt).
                // (In exactly-once mode its slot's producer goes with the slot.)
                if part.queue.iter().any(|e| e.seq.is_some()) && !self.config.exactly_once {
                    self.reset_pending = true;
                }
                part.queue.clear();
                part.released = true;
                maps.remove(&part.source);
                if let Some(metrics) = part.metrics.take() {
                    metrics.forget();
                }
            }
            drop(maps);
            if !r.commit && !self.config.exactly_once {
                // A commit not sent yet may carry their positions: the next one is made
                // without them. (In exactly-once mode their slots' transactions went.)
                self.parts[self.progress_part].drop_unsent();
            }
            for slot in &r.slots {
                self.drop_transaction(*slot);
            }
            let _ = r.done.send(());
        }
        if commit && self.parts[self.progress_part].idle() {
            self.commit();
        }
    }

    /// Runs until `shutdown`, then drains what is in flight and commits progress.
    pub async fn run(
        mut self,
        mut events: mpsc::Receiver<FetchEvent>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        stats: tokio::sync::watch::Sender<Stats>,
        shutdown: CancellationToken,
    ) -> Result<Stats, KafkaError> {
        let mut commit_tick = tokio::time::interval(self.config.commit_interval);
        commit_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut wake = tokio::time::interval(Duration::from_millis(50));
        wake.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(done) = self.requests.join_next(), if !self.requests.is_empty() => {
                    if let Ok(done) = done { self.finish(done); }
                    while let Some(done) = self.requests.try_join_next() {
                        if let Ok(done) = done { self.finish(done); }
                    }
                }
                Some(cmd) = commands.recv() => match cmd {
                    Command::Route(r) => self.route(r),
                    Command::Unroute(tp) => self.unroute(&tp),
                    Command::Release(r) => self.release(r),
                    Command::Adopt { slot, producer } => self.adopting.push((slot, producer)),
                },
                Some(event) = events.recv() => {
                    self.accept(event);
                    // What else has arrived goes in before the next pump: one walk over the
                    // partitions, and Produce requests that carry the whole burst, per burst
                    // instead of per chunk (a fetch response brings a chunk per partition).
                    for _ in 1..BURST {
                        let Ok(event) = events.try_recv() else { break };
                        self.accept(event);
                    }
                }
                _ = commit_tick.tick() => {
                    self.chatter.end_interval();
                    self.commit();
                    self.stats.lag = self.lag();
                    self.publish();
                    let _ = stats.send(self.stats.clone());
                }
                _ = wake.tick() => {}
            }
            if let Some(fatal) = self.fatal.take() {
                // Nothing more is written, not even progress: the new owner (or the next
                // start) resumes from the last commit.
                return Err(fatal);
            }
            self.recover().await?;
            self.pump();
            self.advance_transactions();
            self.settle_releases();
            self.settle_adoptions();
            self.check_visits();
        }
        // Drain: no new batches; finish what is queued or in flight, then commit. Batches
        // queued for a leader strait cannot reach now are not waited for: they are fetched
        // again on the next start.
        drop(events);
        let deadline = Instant::now() + self.config.drain_timeout;
        let syncs_deadline = Instant::now() + self.config.drain_timeout / 2;
        let mut committed = false;
        while Instant::now() < deadline {
            let data_idle = self
                .parts
                .iter()
                .enumerate()
                .all(|(i, p)| p.progress || p.idle() || p.stopped || self.stranded(i));
            // The last commit waits for the syncs of the last batches (half the drain at most:
            // a syncs topic that cannot be written then leaves the positions they cover).
            let syncs_done = self.syncs.settled() || Instant::now() >= syncs_deadline;
            if data_idle && syncs_done && !committed {
                self.commit();
                committed = true;
            }
            let ended = self.txns.values().all(|t| t.phase == Phase::Open);
            let progress_idle = self.parts.iter().all(|p| !p.progress || p.idle());
            if data_idle && committed && ended && progress_idle {
                break;
            }
            tokio::select! {
                Some(done) = self.requests.join_next(), if !self.requests.is_empty() => {
                    if let Ok(done) = done { self.finish(done); }
                }
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if let Some(fatal) = self.fatal.take() {
                return Err(fatal);
            }
            self.recover().await?;
            self.pump();
            self.advance_transactions();
            self.check_visits();
        }
        self.stats.lag = self.lag();
        let _ = stats.send(self.stats.clone());
        Ok(self.stats)
    }

    /// Whether nothing of `part` is in flight and its leader cannot be written to now:
    /// unknown, or no usable connection, unless one is being dialled to a broker that is
    /// reached over another (a second connection's handshake, not an outage).
    fn stranded(&self, i: usize) -> bool {
        if !self.parts[i].inflight.is_empty() {
            return false;
        }
        let Some(link) = self.link(i) else {
            return true;
        };
        let usable = |l: &Link| self.conns.get(l).is_some_and(Connection::is_usable);
        if usable(&link) {
            return false;
        }
        let reached = || {
            self.target.reaches(link.broker)
                || self
                    .conns
                    .keys()
                    .any(|l| l.broker == link.broker && usable(l))
        };
        !(self.dialing.contains(&link) && reached())
    }

    /// The connection partition `i` is written over, once its leader is known.
    fn link(&self, i: usize) -> Option<Link> {
        self.parts[i].leader.map(|broker| Link {
            broker,
            lane: i % self.config.connections.max(1),
        })
    }

    fn lag(&self) -> i64 {
        self.parts
            .iter()
            .filter_map(Partition::lag)
            .fold(0, i64::saturating_add)
    }

    /// Brings the flow's series and health up to date (`report_to`).
    fn publish(&mut self) {
        let now = Instant::now();
        let pending = self
            .parts
            .iter()
            .any(|p| !p.progress && !p.stopped && !p.idle());
        self.waiting_since = match pending {
            true => Some(self.waiting_since.unwrap_or(now)),
            false => None,
        };
        let Some((flow, health)) = &self.telemetry else {
            return;
        };
        let (now_ms, std_now) = (now_ms(), now.into_std());
        let (mut paused, mut stopped, mut active) = (0, 0, 0u64);
        for part in &mut self.parts {
            active += part
                .inflight
                .iter()
                .chain(&part.queue)
                .flat_map(|e| e.batch.iter().chain(&e.more))
                .map(|b| u64::try_from(b.record_count()).unwrap_or(0))
                .sum::<u64>();
            let lag = part.lag();
            let oldest = part.oldest_waiting(now_ms);
            if part.dropped {
                continue;
            }
            let state = match (part.stopped, part.paused) {
                (true, _) => PartitionState::Stopped,
                (false, true) => PartitionState::Paused,
                (false, false) => PartitionState::Replicating,
            };
            paused += usize::from(state == PartitionState::Paused);
            stopped += usize::from(state == PartitionState::Stopped);
            if let Some(m) = &mut part.metrics {
                m.publish(lag, oldest, state, now_ms, std_now);
            }
        }
        let fetch = self.fetcher.stats();
        flow.skipped(fetch.offsets_lost_to_retention, fetch.truncated_offsets);
        for (code, count) in self.fetcher.take_errors() {
            flow.errors("source", code, count);
        }
        flow.brokers("source", &self.fetcher.links());
        flow.brokers("target", &self.target.links().snapshot());
        let (held, capacity) = self.fetcher.buffer();
        flow.buffered(held, capacity, active);
        health.engine(EngineHealth {
            target_waiting_since: self.waiting_since.map(Instant::into_std),
            source_failing_since: self.fetcher.failing_since(),
            paused,
            stopped,
        });
    }

    fn accept(&mut self, event: FetchEvent) {
        match event {
            FetchEvent::Chunk(chunk) => self.enqueue(chunk),
            FetchEvent::Stopped { tp, .. } => {
                if let Some(&i) = self.by_source.get(&tp) {
                    self.stop(i);
                }
            }
        }
    }

    /// Gives a partition up: nothing more is sent for it and its queued batches are
    /// released. Its committed position stays where the target acknowledged, so a restart
    /// (after the cause is fixed) resumes without loss.
    fn stop(&mut self, i: usize) {
        self.visits.mark(i);
        let part = &mut self.parts[i];
        if !part.stopped {
            part.stopped = true;
            part.release();
            self.stats.stopped += 1;
        }
    }

    fn enqueue(&mut self, chunk: Chunk) {
        let Some(&i) = self
            .by_source
            .get(&chunk.tp)
            .filter(|&&i| self.parts[i].takes(chunk.generation))
        else {
            // Unrouted, stopped, or fetched before a pause (its batches were let go, and are
            // fetched again from where the kept ones end): dropping the chunk releases its
            // share of the fetch buffer.
            return;
        };
        self.visits.mark(i);
        let Chunk {
            batches,
            from,
            next_offset,
            source_end,
            permit,
            ..
        } = chunk;
        let coalesce_bytes = self.config.coalesce_bytes;
        // Only batches far below the target size are worth re-framing.
        let small = |b: &RawBatch| b.len().saturating_mul(COALESCE_SMALL) <= coalesce_bytes;
        let part = &mut self.parts[i];
        part.source_end = source_end;
        if part.first_fetched < 0 {
            part.first_fetched = from;
        }
        if batches.is_empty() && next_offset == from {
            return;
        }
        if let Some((flow, _)) = &self.telemetry {
            flow.fetched(batches.len(), batches.iter().map(|f| f.batch.len()).sum());
        }
        let part = &mut self.parts[i];
        let mut last = None;
        let now = (now_ms(), std::time::Instant::now());
        for fetched in batches {
            last = Some(fetched.source_next);
            if let Some(m) = &mut part.metrics {
                m.fetched(fetched.batch.max_timestamp(), now.0, now.1);
            }
            // Behind a batch not sent yet, a small one it can take along joins it.
            if let Some(back) = part.queue.back_mut().filter(|e| {
                e.seq.is_none()
                    && e.bytes + fetched.batch.len() <= coalesce_bytes
                    && fetched.offset_deltas.is_none()
                    && small(&fetched.batch)
                    && e.batch.as_ref().is_some_and(|first| {
                        small(first) && fetched.batch.can_follow(e.more.last().unwrap_or(first))
                    })
            }) {
                back.bytes += fetched.batch.len();
                back.more.push(fetched.batch);
                back.source_next = fetched.source_next;
                if !back._permits.iter().any(|p| Arc::ptr_eq(p, &permit)) {
                    back._permits.push(permit.clone());
                }
                continue;
            }
            part.queue.push_back(Entry {
                offset_deltas: fetched.offset_deltas,
                ..Entry::new(
                    Some(fetched.batch),
                    fetched.source_next,
                    vec![permit.clone()],
                )
            });
        }
        if last != Some(next_offset) {
            part.queue
                .push_back(Entry::new(None, next_offset, vec![permit]));
        }
    }

    /// Queues progress record batches holding every position acked since the last commit,
    /// as far as durable offset syncs cover it (a position whose syncs are still being
    /// written waits for a later tick), each batch within the progress topic's limit.
    fn commit(&mut self) {
        if self.config.exactly_once {
            // In exactly-once mode the transactions carry the positions: their commits are due.
            for txn in self.txns.values_mut() {
                if txn.phase == Phase::Open {
                    txn.phase = Phase::Draining {
                        since: Instant::now(),
                    };
                }
            }
            return;
        }
        let changed = self.changed(None, |p| self.syncs.durable(&p.source));
        self.queue_progress(changed, self.progress_part);
    }

    /// The data partitions (index, position), of `slot` if given, whose `position` to commit
    /// moved on since their last commit.
    fn changed(
        &self,
        slot: Option<u32>,
        position: impl Fn(&Partition) -> Option<Position>,
    ) -> Vec<(usize, Position)> {
        let indexes: Box<dyn Iterator<Item = usize>> = match slot {
            Some(slot) => Box::new(self.in_slot.get(&slot).into_iter().flatten().copied()),
            None => Box::new(0..self.parts.len()),
        };
        indexes
            .map(|i| (i, &self.parts[i]))
            .filter(|(_, p)| !p.progress && !p.released)
            .filter_map(|(i, p)| Some((i, p, position(p)?)))
            .filter(|(_, p, pos)| *pos != p.committed && pos.source_next >= 0)
            .map(|(i, _, pos)| (i, pos))
            .collect()
    }

    /// Queues the progress record batches of the `changed` positions (partition index,
    /// position) on progress partition `progress`, each batch within the progress topic's
    /// limit.
    fn queue_progress(&mut self, changed: Vec<(usize, Position)>, progress: usize) {
        if changed.is_empty() {
            return;
        }
        let records: Vec<progress::Committed> = changed
            .iter()
            .map(|(i, pos)| {
                let part = &self.parts[*i];
                // The epoch belongs to the acknowledged position; an older one (its offset
                // syncs not durable yet) goes without: an epoch from later in the log
                // would read as a divergence on the next start.
                let lineage = if *pos == part.acked {
                    part.lineage
                } else {
                    Lineage {
                        leader_epoch: -1,
                        ..part.lineage
                    }
                };
                (part.source.clone(), *pos, lineage)
            })
            .collect();
        let batches = progress::encode_batches(&records, self.progress_batch_bytes, now_ms());
        self.visits.mark(progress);
        let part = &mut self.parts[progress];
        // One commit waits at most: the new one replaces what was never sent (its positions
        // are as new or newer), or a target outage would queue a whole commit per tick.
        // Batches sent once keep their place and their sequences.
        part.drop_unsent();
        for (batch, range) in batches {
            part.queue.push_back(Entry {
                commits: changed[range].to_vec(),
                ..Entry::new(Some(batch), -1, Vec::new())
            });
        }
    }

    /// Moves the open transactions on (exactly-once mode), each on its own: once a due
    /// commit has every answer in, the progress records of the positions reached go out;
    /// once they are written, EndTxn commits. A transaction without records or positions
    /// ends without a request. Nothing moves while the lease has run out (a member of a
    /// scale-out group whose slots may be another's by now).
    fn advance_transactions(&mut self) {
        self.check_fenced();
        if self.lease.as_ref().is_some_and(|l| !l.holds()) {
            return;
        }
        let slots: Vec<u32> = self.txns.keys().copied().collect();
        for slot in slots {
            self.advance_transaction(slot);
        }
    }

    fn advance_transaction(&mut self, slot: u32) {
        let Some(txn) = self.txns.get(&slot) else {
            return;
        };
        match txn.phase {
            Phase::Open | Phase::Ending => {}
            Phase::Draining { since } => {
                // Every batch of the transaction answered, none waiting to be sent again.
                let answered = txn.holds().all(|i| {
                    let p = &self.parts[i];
                    p.inflight.is_empty() && p.queue.front().is_none_or(|e| e.seq.is_none())
                });
                // The offset syncs of what was written go first, unless they take longer
                // than an interval (a syncs topic that cannot be written must not hold the
                // records up: their translation is then as exact as the syncs written).
                let syncs = self.syncs.settled() || since.elapsed() >= self.config.commit_interval;
                if !answered || !syncs || self.reset_pending {
                    return;
                }
                // The transaction holds everything acknowledged.
                let changed = self.changed(Some(slot), |p| Some(p.acked));
                let txn = self.txns.get_mut(&slot).expect("checked above");
                if changed.is_empty() && txn.is_empty() {
                    txn.phase = Phase::Open;
                    return;
                }
                txn.phase = Phase::Writing;
                let progress = txn.progress;
                self.queue_progress(changed, progress);
            }
            Phase::Writing => {
                if self.parts[txn.progress].idle() {
                    self.end_transaction(slot);
                }
            }
        }
    }

    /// Sends EndTxn (commit) for the transaction of `slot` in the background.
    fn end_transaction(&mut self, slot: u32) {
        let Some(txn) = self.txns.get_mut(&slot) else {
            return;
        };
        txn.phase = Phase::Ending;
        let producer = txn.producer.clone();
        let target = self.target.clone();
        self.requests.spawn(async move {
            Done::Ended {
                slot,
                by: producer.producer,
                result: producer.end(&target, true).await,
            }
        });
    }

    /// Enrols `parts` in the open transaction of `slot` in the background, unless an
    /// enrolment is in flight (they are enrolled with the next one).
    fn enrol(&mut self, slot: u32, parts: Vec<usize>) {
        let Some(txn) = self
            .txns
            .get_mut(&slot)
            .filter(|t| !t.enrolling && !parts.is_empty())
        else {
            return;
        };
        txn.enrolling = true;
        let producer = txn.producer.clone();
        let target = self.target.clone();
        let tps: Vec<TopicPartition> = parts
            .iter()
            .map(|&i| self.parts[i].target.clone())
            .collect();
        self.requests.spawn(async move {
            Done::Enrolled {
                slot,
                by: producer.producer,
                result: producer.add_partitions(&target, &tps).await,
                parts,
            }
        });
    }

    /// The transaction of `slot` still written by producer `by`, for an answer sent under
    /// it: `None` once the slot went to another process (the answer is let go).
    fn txn_by(&mut self, slot: u32, by: (i64, i16)) -> Option<&mut Transaction> {
        self.txns
            .get_mut(&slot)
            .filter(|t| t.producer.producer == by)
    }

    /// An enrolment's answer. A coordinator that could not be reached within the request
    /// timeout, or kept saying it moves or loads, is asked again by the next pump; any other
    /// refusal ends the engine.
    fn on_enrolled(
        &mut self,
        (slot, by): (u32, (i64, i16)),
        parts: Vec<usize>,
        result: Result<(), KafkaError>,
    ) {
        let Some(txn) = self.txn_by(slot, by) else {
            return;
        };
        match result {
            Ok(()) => txn.enrolled(parts),
            Err(e) if e.is_retriable() => {
                txn.enrolling = false;
                tracing::warn!(error = %e, "the transaction coordinator did not enrol the partitions; asking again");
            }
            Err(e) => self.refused_transaction(slot, e),
        }
    }

    /// EndTxn's answer: the positions the transaction held are committed. Unanswered, it is
    /// sent again (for one producer epoch, a repeated commit of a committed transaction is
    /// answered as a success); any other refusal ends the engine.
    fn on_ended(&mut self, (slot, by): (u32, (i64, i16)), result: Result<(i64, i16), KafkaError>) {
        let Some(txn) = self.txn_by(slot, by) else {
            return;
        };
        match result {
            Ok(next) => {
                let commits = txn.committed(next);
                self.count_committed(commits);
                if next != by {
                    // Transactions v2: a new epoch, whose sequences start at 0. Every batch
                    // of the transaction is answered; no partition has one in flight.
                    for &i in self.in_slot.get(&slot).into_iter().flatten() {
                        self.parts[i].restart_sequences();
                    }
                }
            }
            Err(e) if e.is_retriable() => {
                tracing::warn!(error = %e, "the transaction coordinator did not answer EndTxn; committing again");
                self.end_transaction(slot);
            }
            Err(e) => self.refused_transaction(slot, e),
        }
    }

    /// The transaction of `slot` was refused for good (its producer fenced, mostly). A member
    /// of a scale-out group whose lease ran out (frozen, or cut off from the group's
    /// coordinator) was fenced by the slot's new owner: the slot is another's, nothing more
    /// is written in it here, and the group says so shortly ([`Release`]). Otherwise the
    /// engine ends ([`Engine::abandon_transaction`]).
    fn refused_transaction(&mut self, slot: u32, error: KafkaError) {
        if self.lease.as_ref().is_some_and(|l| !l.holds()) {
            tracing::warn!(slot, error = %error, "exactly-once: the slot's transaction was refused while this member was cut off from its group (the slot's new owner fenced it): nothing more is written for the slot here");
            if let Some(txn) = self.txns.get(&slot) {
                let id = txn.producer.transactional_id.clone();
                self.fenced.insert(slot, (id, error.to_string()));
            }
            self.drop_transaction(slot);
            return;
        }
        self.abandon_transaction(slot, error);
    }

    /// A slot whose transaction was dropped on a refusal (`refused_transaction`) that the
    /// group left with this member once the lease holds again: the refusal was not a new
    /// owner's (the coordinator aborted the transaction past its timeout, say), and what the
    /// transaction held is gone: the engine ends, and a restart resumes from the last commit.
    fn check_fenced(&mut self) {
        if self.lease.as_ref().is_none_or(|l| !l.holds()) {
            return;
        }
        if let Some((_, (id, error))) = self.fenced.pop_first() {
            self.fatal.get_or_insert(KafkaError::Other(format!(
                "exactly-once: the transaction of transactional id `{id}` was refused ({error}) \
                 while this member was cut off from its group, and the group kept the slot \
                 with it: a restart resumes from the last committed transaction"
            )));
        }
    }

    /// Ends the engine on a transaction (of `slot`) the coordinator refused to go on with,
    /// saying the two ways a producer epoch ends besides a second process: the coordinator
    /// aborts a transaction older than its timeout (a target outage that long) and bumps
    /// the epoch.
    fn abandon_transaction(&mut self, slot: u32, error: KafkaError) {
        let id = self
            .txns
            .get(&slot)
            .map_or("", |t| &t.producer.transactional_id);
        self.fatal.get_or_insert(KafkaError::Other(format!(
            "exactly-once: the open transaction cannot be completed ({error}); another process \
             registered transactional id `{id}`, or the coordinator aborted the transaction \
             past its {}-s timeout: a restart resumes from the last committed transaction",
            crate::kafka::cluster::TRANSACTION_TIMEOUT_MS / 1000
        )));
    }

    /// The positions a durable progress record holds: committed, and reported.
    fn count_committed(&mut self, commits: Vec<(usize, Position)>) {
        for (j, pos) in commits {
            self.parts[j].committed = pos;
            if let Some(to) = &self.commits {
                let _ = to.send((self.parts[j].source.clone(), pos));
            }
        }
    }

    /// Requests in flight per target broker: at least 5 (the Java producer's
    /// `max.in.flight.requests.per.connection`), and as many as batches per partition, since a
    /// request carries one batch of each partition: fewer would cap every partition's window.
    fn broker_in_flight(&self, broker: i32) -> usize {
        self.window(broker).max(window::LEAST)
    }

    /// Batches a partition led by `broker` may have unacknowledged.
    fn window(&self, broker: i32) -> usize {
        self.config
            .max_in_flight
            .unwrap_or_else(|| self.windows.of(broker))
    }

    /// Builds and sends requests to every target broker, as long as it has room and batches
    /// wait: a backlog fills the window at once, not one request per event (over a long
    /// round trip the events are the answers, and one request per answer would keep the
    /// window as small as it started). Dials, in the background, the brokers it has no
    /// connection to.
    fn pump(&mut self) {
        if self.reset_pending || self.lease.as_ref().is_some_and(|l| !l.holds()) {
            return;
        }
        let now = Instant::now();
        // The partitions with batches waiting, by leader (and by slot in exactly-once mode:
        // a Produce request is of one transactional id): the requests built below look at
        // those only (with thousands of partitions, most have nothing to send).
        let mut waiting: BTreeMap<Link, BTreeMap<u32, Vec<usize>>> = BTreeMap::new();
        let mut enrol: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let exactly_once = self.config.exactly_once;
        for i in self.visits.sorted() {
            // Position-only entries at the front of an idle partition are acknowledged at once.
            let done = self.parts[i].take_positions();
            if !done.is_empty() {
                self.acknowledged(i, done);
            }
            let part = &self.parts[i];
            let Some(link) = self.link(i).filter(|_| !part.queue.is_empty()) else {
                continue;
            };
            if exactly_once {
                // A partition is written in its slot's transaction once it is enrolled in
                // it; not at all while the slot is not this process's.
                let Some(txn) = self.txn_of(i) else {
                    continue;
                };
                if txn.needs_enrolling(i) && !part.stopped && !part.new_log {
                    enrol.entry(part.slot).or_default().push(i);
                }
                if !txn.sends(i) {
                    continue;
                }
            }
            let slot = if exactly_once { part.slot } else { 0 };
            waiting
                .entry(link)
                .or_default()
                .entry(slot)
                .or_default()
                .push(i);
        }
        for (slot, parts) in enrol {
            self.enrol(slot, parts);
        }
        for (link, slots) in waiting {
            if self
                .throttled_until
                .get(&link.broker)
                .is_some_and(|t| *t > now)
            {
                continue;
            }
            // The slots take turns on a connection, one request each, starting with another
            // one at every pump: one slot's backlog does not keep the others' out.
            let mut turns: Vec<(u32, Vec<usize>)> = slots.into_iter().collect();
            let first = self.turn % turns.len();
            turns.rotate_left(first);
            'fill: while !turns.is_empty() {
                let mut sending = Vec::with_capacity(turns.len());
                for (slot, candidates) in turns {
                    if self.link_inflight.get(&link).copied().unwrap_or(0)
                        >= self.broker_in_flight(link.broker)
                    {
                        break 'fill;
                    }
                    let Some(conn) = self.conns.get(&link).filter(|c| c.is_usable()).cloned()
                    else {
                        self.dial(link, now);
                        break 'fill;
                    };
                    if self.send_to(link, conn, now, &candidates, slot) {
                        sending.push((slot, candidates));
                    }
                }
                turns = sending;
            }
        }
        self.turn = self.turn.wrapping_add(1);
        let parts = &self.parts;
        self.visits.retain(|i| parts[i].needs_visit());
    }

    /// Every partition with something to do is listed (debug builds: the tests check the
    /// marks at every turn of the loop).
    fn check_visits(&self) {
        if cfg!(debug_assertions) {
            for (i, p) in self.parts.iter().enumerate() {
                assert!(
                    !p.needs_visit() || self.visits.contains(i),
                    "partition {} -> {} has work but is not listed",
                    p.source,
                    p.target
                );
            }
        }
    }

    /// Starts dialling `link` in the background, unless a dial is under way or its
    /// broker's backoff after failures has not passed.
    fn dial(&mut self, link: Link, now: Instant) {
        if self.dialing.contains(&link) || self.redial.get(&link.broker).is_some_and(|r| r.0 > now)
        {
            return;
        }
        self.dialing.insert(link);
        let target = self.target.clone();
        self.requests.spawn(async move {
            Done::Connected {
                link,
                result: target.broker_lane(link.broker, link.lane).await,
            }
        });
    }

    fn on_connected(&mut self, link: Link, result: Result<Connection, KafkaError>) {
        self.dialing.remove(&link);
        let broker = link.broker;
        match result {
            Ok(conn) => {
                self.redial.remove(&broker);
                self.conns.insert(link, conn);
            }
            Err(e) => {
                let (at, backoff) = self.redial.entry(broker).or_insert_with(|| {
                    // The Java client's reconnect.backoff.ms, growing to the partitions' 5 s.
                    (
                        Instant::now(),
                        Backoff::new(Duration::from_millis(50), Duration::from_secs(5)),
                    )
                });
                // Once per outage at WARN; the redials after it at DEBUG.
                if backoff.attempts() == 0 {
                    tracing::warn!(broker, error = %e, "cannot reach target broker; dialling it again with backoff");
                } else {
                    tracing::debug!(broker, error = %e, attempts = backoff.attempts(), "target broker still unreachable");
                }
                *at = Instant::now() + backoff.next_delay();
                // Its partitions may have a new leader by now.
                for (i, p) in self.parts.iter_mut().enumerate() {
                    if p.leader == Some(broker) {
                        p.needs_metadata = true;
                        p.leader = None;
                        self.visits.mark(i);
                    }
                }
            }
        }
    }

    /// Sends `broker` one request with what its partitions among `candidates` (those with
    /// batches waiting, all of `slot` in exactly-once mode) can take now; whether one went
    /// out (false: nothing to send, or the connection failed).
    fn send_to(
        &mut self,
        link: Link,
        conn: Connection,
        now: Instant,
        candidates: &[usize],
        slot: u32,
    ) -> bool {
        // A transaction only in exactly-once mode.
        let txn = self.txns.get(&slot);
        let (pid, epoch) = txn.map_or(self.producer, |t| t.producer.producer);
        let window = self.window(link.broker);
        // Draining a transaction, only batches sent before go out (again).
        let draining = txn.is_some_and(|t| matches!(t.phase, Phase::Draining { .. }));
        let mut topics: Vec<TopicData> = Vec::new();
        let mut topic_index = HashMap::new();
        let mut sent = Vec::new();
        let mut size = 0usize;
        for &i in candidates {
            let part = &mut self.parts[i];
            if part.leader != Some(link.broker)
                || part.failed
                || part.stopped
                || part.new_log
                || part.retry_at.is_some_and(|t| t > now)
            {
                continue;
            }
            // Until the broker acknowledged a first batch of this producer on the partition it
            // holds no sequence state, and would accept a later batch after an earlier one
            // failed: one batch at a time until then.
            let limit = if part.confirmed { window } else { 1 };
            if part.inflight.len() >= limit
                || (draining && part.queue.front().is_some_and(|e| e.seq.is_none()))
            {
                continue;
            }
            part.merge_front();
            let Some(mut entry) = part.queue.pop_front() else {
                continue;
            };
            let Some((seq, batch)) = part.sequence(&mut entry, now) else {
                // A position-only entry behind batches still in flight.
                part.inflight.push_back(entry);
                continue;
            };
            let stamped = batch.stamp(&ProducerStamp {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                transactional: self.config.exactly_once,
            });
            size += stamped.size();
            let topic_ids = &self.topic_ids;
            TopicData::push(
                &mut topics,
                &mut topic_index,
                &part.target.topic,
                || {
                    topic_ids
                        .get(&part.target.topic)
                        .copied()
                        .unwrap_or_default()
                },
                part.target.partition,
                stamped,
            );
            part.inflight.push_back(entry);
            part.outstanding += 1;
            sent.push((i, seq));
            if size >= self.config.max_request_bytes {
                break;
            }
        }
        if sent.is_empty() {
            return false;
        }
        let ids: Vec<(uuid::Uuid, Arc<str>)> = topics
            .iter()
            .map(|t| (t.topic_id, t.name.clone()))
            .collect();
        let timeout_ms = self.target.timeout_ms();
        let mut txn = self.txns.get_mut(&slot);
        if let Some(txn) = txn.as_deref_mut() {
            for &(i, _) in &sent {
                txn.wrote(i);
            }
        }
        let (at_most, transactional_id) = match txn {
            Some(txn) => (
                txn.producer.protocol.produce_at_most(),
                Some(&*txn.producer.transactional_id),
            ),
            None => (i16::MAX, None),
        };
        let started = conn.start_encoded::<ProduceRequest>(at_most, |version| {
            produce_request::encode(version, transactional_id, -1, timeout_ms, &topics)
        });
        *self.link_inflight.entry(link).or_default() += 1;
        match started {
            Ok(inflight) => {
                let sent_at = Instant::now();
                self.requests.spawn(async move {
                    Done::Produce(Completion {
                        link,
                        sent_at,
                        sent,
                        ids,
                        result: inflight.response().await,
                    })
                });
                true
            }
            Err(e) => {
                let result = Err(e);
                self.complete(Completion {
                    link,
                    sent_at: Instant::now(),
                    sent,
                    ids,
                    result,
                });
                false
            }
        }
    }

    fn finish(&mut self, done: Done) {
        match done {
            Done::Produce(completion) => self.complete(completion),
            Done::Leaders(found) => self.on_leaders(found),
            Done::Enrolled {
                slot,
                by,
                parts,
                result,
            } => self.on_enrolled((slot, by), parts, result),
            Done::Ended { slot, by, result } => self.on_ended((slot, by), result),
            Done::Connected { link, result } => self.on_connected(link, result),
            Done::Checked { i, result } => self.on_checked(i, result),
        }
    }

    fn complete(&mut self, done: Completion) {
        if let Some(n) = self.link_inflight.get_mut(&done.link) {
            *n = n.saturating_sub(1);
        }
        let response = match done.result {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(broker = done.link.broker, error = %e, "produce request failed; will resend");
                self.conns.remove(&done.link);
                for (i, _) in done.sent {
                    self.visits.mark(i);
                    let part = &mut self.parts[i];
                    part.outstanding -= 1;
                    part.failed = true;
                    part.needs_metadata = true;
                }
                return;
            }
        };
        self.windows
            .observe(done.link.broker, done.sent_at.elapsed(), Instant::now());
        if let Some(throttle) = throttle(response.throttle_time_ms, self.target.timeout()) {
            self.throttled_until
                .insert(done.link.broker, Instant::now() + throttle);
        }
        let mut results: HashMap<(Arc<str>, i32), (i16, i64)> = HashMap::new();
        // A nil id (unknown) names no topic: an answer under it is unmatched.
        let names: HashMap<uuid::Uuid, Arc<str>> = done
            .ids
            .iter()
            .filter(|(id, _)| !id.is_nil())
            .cloned()
            .collect();
        for t in response.responses {
            let name: Arc<str> = if t.name.0.is_empty() {
                names
                    .get(&t.topic_id)
                    .cloned()
                    .unwrap_or_else(|| Arc::from(""))
            } else {
                Arc::from(t.name.0.as_str())
            };
            for p in t.partition_responses {
                results.insert((name.clone(), p.index), (p.error_code, p.base_offset));
            }
        }
        for (i, seq) in done.sent {
            self.parts[i].outstanding -= 1;
            let key = (
                self.parts[i].target.topic.clone(),
                self.parts[i].target.partition,
            );
            self.on_result(i, seq, results.get(&key).copied());
        }
    }

    /// Carries out what the answer for partition `i`'s batch with sequence `seq` means
    /// (`Partition::judge`); `answer` is `None` when the response lacks the partition.
    fn on_result(&mut self, i: usize, seq: i32, answer: Option<(i16, i64)>) {
        self.visits.mark(i);
        if let (Some((flow, _)), Some((code, _))) = (&self.telemetry, answer) {
            if code != 0 {
                flow.errors("target", code, 1);
            }
        }
        let part = &mut self.parts[i];
        let outcome = match part.judge(seq, answer, Instant::now(), self.config.delivery_timeout) {
            // Without a transactional id nobody else holds strait's producer id: the target
            // lost its state.
            Outcome::Fenced(code)
                if self.config.transactional_id.is_none() && !self.config.exactly_once =>
            {
                Outcome::ResetProducer(Reset::LostState(code))
            }
            outcome => outcome,
        };
        if let Some(r) = part.record(seq, outcome) {
            tracing::warn!(
                source = %part.source,
                target = %part.target,
                refused_from = r.refused.0,
                refused_to = r.refused.1,
                written_at = r.written_at,
                "the target wrote a batch behind one it refused (it lost strait's producer state): \
                 the target partition holds records out of source order from `written_at`; the \
                 refused batch and every later one are written again after them"
            );
            if !part.stopped {
                // Its sequence state is strait's no longer: start a new one.
                part.failed = true;
                self.reset_pending = true;
            }
        }
        match outcome {
            Outcome::Acked { .. } | Outcome::Release => {}
            Outcome::ResetProducer(Reset::LostState(error)) => {
                tracing::warn!(partition = %part.target, code = error.code(), "target lost strait's producer state; re-initialising the producer");
                part.failed = true;
                self.reset_pending = true;
            }
            // The slot went to another process, whose producer fenced this one's: nothing
            // of it is written here any more (its release lets the batches go).
            Outcome::Fenced(_)
                if self.config.exactly_once && !self.txns.contains_key(&part.slot) =>
            {
                part.failed = true;
            }
            Outcome::Fenced(code) if self.config.exactly_once => {
                let error = produce_error(part, code);
                part.failed = true;
                let slot = part.slot;
                self.refused_transaction(slot, error);
            }
            Outcome::Fenced(code) => {
                let id = self.config.transactional_id.clone().unwrap_or_default();
                self.fatal.get_or_insert(KafkaError::Fenced {
                    transactional_id: id,
                    partition: part.target.to_string(),
                    code,
                });
            }
            Outcome::ResetProducer(Reset::OutOfOrderHead) => {
                tracing::warn!(partition = %part.target, seq, "out-of-order sequence at the head of the partition; re-initialising the producer");
                part.failed = true;
                self.reset_pending = true;
            }
            Outcome::CheckLog => {
                if part.check == LogCheck::Idle {
                    tracing::info!(partition = %part.target, seq, target_offset = part.acked.target_next, "the target no longer recognises a resent batch (more were in flight than the 5 it remembers): reading the partition back to learn which it holds");
                    part.check = LogCheck::Due(Instant::now());
                }
                part.failed = true;
            }
            Outcome::Resend(Resend::Missing) => {
                tracing::warn!(partition = %part.target, "Produce response lacks the partition; will resend");
                part.failed = true;
                part.needs_metadata = true;
            }
            Outcome::Resend(resend @ (Resend::Leadership(code) | Resend::Later(code))) => {
                let error = produce_error(part, code);
                if let Some(refusing) = part.refused(Instant::now()) {
                    let at = part.inflight.iter().find(|e| e.seq == Some(seq));
                    let offset = at
                        .and_then(|e| e.batch.as_ref())
                        .map_or(-1, RawBatch::base_offset);
                    let refusing_for_ms = refusing.as_millis() as u64;
                    if self.chatter.may(Line::Refusing) {
                        tracing::warn!(source = %part.source, target = %part.target, source_offset = offset, code = code.code(), error = %error, refusing_for_ms, "the target keeps refusing the partition; resending until produce.delivery.timeout.ms");
                    } else {
                        tracing::debug!(source = %part.source, target = %part.target, source_offset = offset, code = code.code(), refusing_for_ms, "the target keeps refusing the partition");
                    }
                } else {
                    tracing::debug!(error = %error, "retriable produce error");
                }
                part.failed = true;
                part.needs_metadata |= resend.looks_up_leader();
                let gone = matches!(
                    code,
                    ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId
                );
                if gone && !part.progress {
                    let topic = part.target.topic.clone();
                    self.report_missing(&topic);
                }
                let part = &mut self.parts[i];
                if !part.progress {
                    if let Some(from) = part.pause(Instant::now()) {
                        if self.chatter.may(Line::Paused) {
                            tracing::warn!(source = %part.source, target = %part.target, code = code.code(), error = %error, source_offset = from, "the target keeps refusing the partition: its batches not sent yet are let go and its fetching paused until the target writes it again");
                        } else {
                            tracing::debug!(source = %part.source, target = %part.target, code = code.code(), source_offset = from, "fetching paused");
                        }
                        self.fetcher.forget(part.source.clone());
                    }
                }
            }
            Outcome::Stop(code) => {
                let error = produce_error(part, code);
                self.give_up(i, seq, &error, false);
            }
            Outcome::Expired(resend) => {
                let error = match resend.error() {
                    Some(code) => produce_error(part, code),
                    None => KafkaError::Other(format!(
                        "Produce for {}: the responses lack the partition",
                        part.target
                    )),
                };
                self.give_up(i, seq, &error, true);
            }
        }
        let done = self.parts[i].settle();
        if !done.is_empty() {
            self.acknowledged(i, done);
        }
        let part = &mut self.parts[i];
        if let Some(from) = part.resume() {
            if self.chatter.may(Line::Resumed) {
                tracing::info!(source = %part.source, target = %part.target, source_offset = from, "the target writes the partition again: fetching it resumes");
            } else {
                tracing::debug!(source = %part.source, target = %part.target, source_offset = from, "fetching resumes");
            }
            self.fetcher
                .resume(part.source.clone(), from, part.lineage, part.generation);
        }
        if self.parts[i].stopped {
            self.parts[i].release();
        }
    }

    /// Stops partition `i`, whose batch with sequence `seq` the target refused for good
    /// (`error`), or past the delivery timeout (`expired`), with an ERROR naming both sides
    /// and the source offset a restart resumes at.
    fn give_up(&mut self, i: usize, seq: i32, error: &KafkaError, expired: bool) {
        let part = &self.parts[i];
        let entry = part.inflight.iter().find(|e| e.seq == Some(seq));
        let at = entry
            .and_then(|e| e.batch.as_ref())
            .map_or(-1, RawBatch::base_offset);
        if expired {
            let for_ms = entry
                .and_then(|e| e.first_sent)
                .map_or(0, |t| t.elapsed().as_millis() as u64);
            tracing::error!(source = %part.source, target = %part.target, source_offset = at, error = %error, refused_for_ms = for_ms, "partition stopped: the target kept refusing a batch past produce.delivery.timeout.ms (CORRUPT_MESSAGE: past its resends)");
        } else {
            tracing::error!(source = %part.source, target = %part.target, source_offset = at, error = %error, "partition stopped: the target refused a batch");
        }
        self.fetcher.forget(part.source.clone());
        self.stop(i);
    }

    /// Makes acknowledged entries of partition `i` count: positions, statistics, offset maps
    /// and offset syncs, and the durable positions a progress batch carried.
    fn acknowledged(&mut self, i: usize, done: Vec<(Entry, Option<i64>)>) {
        let data = !self.parts[i].progress;
        let mut acked = self.parts[i].acked;
        let mut lineage = self.parts[i].lineage;
        let mut maps = self.translations.lock().unwrap();
        let map = maps.entry(self.parts[i].source.clone()).or_default();
        let mut syncs = Vec::new();
        let mut durable = Vec::new();
        let now = (now_ms(), std::time::Instant::now());
        if data && self.waiting_since.is_some() {
            // Progress: the target answers.
            self.waiting_since = Some(Instant::now());
        }
        for (e, target_base) in done {
            match (&e.batch, target_base) {
                // A batch written at an offset the target did not say (-1) still moves the
                // map and the source position on; the target position stays the last one
                // known, a floor.
                (Some(b), tbase) if data => {
                    self.stats.batches = self.stats.batches.saturating_add(1);
                    let records = u64::try_from(b.record_count()).unwrap_or(0);
                    self.stats.records = self.stats.records.saturating_add(records);
                    self.stats.bytes = self.stats.bytes.saturating_add(b.len() as u64);
                    if let Some(m) = &mut self.parts[i].metrics {
                        m.acked(records, b.len() as u64, b.max_timestamp(), now.0, now.1);
                    }
                    let forwarded = Forwarded {
                        source_base: b.base_offset(),
                        source_last: e.source_next.saturating_sub(1),
                        record_count: b.record_count(),
                        target_base: tbase.unwrap_or(-1),
                        holes: e.offset_deltas.clone(),
                    };
                    syncs.extend(map.record(&forwarded));
                    lineage.leader_epoch = b.partition_leader_epoch().max(-1);
                    acked = Position {
                        source_next: e.source_next,
                        // `settle` gives only target offsets whose batch end fits.
                        target_next: tbase.map_or(acked.target_next, |t| {
                            t.saturating_add(i64::from(b.record_count()))
                        }),
                    };
                }
                (Some(_), _) => acked.source_next = e.source_next,
                // A position-only entry moves the source position; the target has nothing new.
                (None, _) => {
                    if data {
                        map.skip_to(e.source_next);
                    }
                    acked.source_next = e.source_next;
                    // The batches skipped (control, aborted) may be of a later epoch.
                    lineage.leader_epoch = -1;
                }
            }
            if !e.commits.is_empty() {
                if let Some((flow, _)) = &self.telemetry {
                    flow.committed(e.first_sent.map_or(Duration::ZERO, |t| t.elapsed()));
                }
            }
            // The progress record batch is acknowledged: these positions are durable, or
            // will be with their transaction.
            durable.extend(e.commits);
        }
        if data {
            self.syncs.add(&self.parts[i].source, syncs, acked, || {
                map.points().to_vec()
            });
            self.parts[i].acked = acked;
            self.parts[i].lineage = lineage;
        }
        drop(maps);
        if !self.config.exactly_once {
            self.count_committed(durable);
        } else if let Some(txn) = self.txns.get_mut(&self.parts[i].slot) {
            txn.hold(durable);
        }
    }

    /// Puts failed partitions back on their feet once their outstanding requests are back,
    /// refreshes leaders, and re-initialises the producer when the target asked for it.
    async fn recover(&mut self) -> Result<(), KafkaError> {
        if self.reset_pending && self.config.exactly_once {
            // A new producer id would abort the open transaction, whose records are
            // acknowledged already: the flow ends instead, and the next start (whose
            // InitProducerId aborts it) resumes from the last commit.
            return Err(KafkaError::Other(
                "exactly-once: the transaction cannot be completed (the target lost strait's \
                 producer state: see the WARN before); the flow stops and a restart resumes \
                 from the last committed transaction"
                    .into(),
            ));
        }
        // Once no Produce request is in flight (the leader lookup and dials may be).
        if self.reset_pending && self.link_inflight.values().all(|&n| n == 0) {
            self.producer = self
                .target
                .init_producer_id(self.config.transactional_id.as_deref())
                .await?;
            tracing::info!(
                producer_id = self.producer.0,
                epoch = self.producer.1,
                "producer re-initialised; resending unacknowledged batches"
            );
            for (i, part) in self.parts.iter_mut().enumerate() {
                part.restart_sequences();
                self.visits.mark(i);
            }
            self.reset_pending = false;
        }
        let now = Instant::now();
        for i in self.visits.sorted() {
            let part = &mut self.parts[i];
            if part.new_log && part.outstanding == 0 {
                self.start_over(i);
            }
            let part = &mut self.parts[i];
            match part.check {
                LogCheck::Due(at) if at <= now && part.outstanding == 0 => self.check_log(i),
                LogCheck::Idle if !self.reset_pending => part.recover(now),
                _ => {}
            }
        }
        self.look_up_leaders();
        Ok(())
    }

    /// Reads partition `i`'s target log from its acknowledged position, in the background
    /// (`Outcome::CheckLog`).
    fn check_log(&mut self, i: usize) {
        let part = &mut self.parts[i];
        part.check = LogCheck::Reading;
        let (target, tp, from) = (
            self.target.clone(),
            part.target.clone(),
            part.acked.target_next,
        );
        self.requests.spawn(async move {
            // The open transaction's batches too, in exactly-once mode.
            let everything = log_reader::Isolation::Uncommitted;
            let result = log_reader::read_from(&target, &tp, from, everything).await;
            Done::Checked { i, result }
        });
    }

    /// Partition `i`'s target log, read back: the resent batches found there under the
    /// current producer identity count as written at their offsets, and the others are
    /// resent. None found: the target's sequence state and strait's disagree, and the
    /// producer is re-initialised. A failed read is tried again after a backoff.
    fn on_checked(&mut self, i: usize, result: Result<Option<Vec<RawBatch>>, KafkaError>) {
        self.visits.mark(i);
        let (pid, epoch) = self.producer_of(i);
        let lost = self.config.exactly_once && self.txn_of(i).is_none();
        let part = &mut self.parts[i];
        if lost && part.check == LogCheck::Reading {
            // Its slot went to another process meanwhile: its batches are let go with it.
            part.check = LogCheck::Idle;
            part.failed = true;
            return;
        }
        if part.check != LogCheck::Reading {
            // The partition let its batches go, or the producer was re-initialised meanwhile.
            return;
        }
        let batches = match result {
            Ok(Some(batches)) => batches,
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!(partition = %part.target, error = %e, "cannot read the target partition back; trying again");
                part.check = LogCheck::Due(Instant::now() + part.backoff.next_delay());
                return;
            }
        };
        let written: HashMap<i32, i64> = batches
            .iter()
            .filter(|b| b.producer_id() == pid && b.producer_epoch() == epoch)
            .map(|b| (b.base_sequence(), b.base_offset()))
            .collect();
        let resent = part.inflight.iter().filter(|e| e.seq.is_some()).count();
        match part.found(&written) {
            None => {
                tracing::warn!(partition = %part.target, "the target holds none of the resent batches yet refused them out of sequence; re-initialising the producer");
                self.reset_pending = true;
            }
            Some(0) => {}
            Some(found) => {
                tracing::info!(partition = %part.target, found, resend = resent - found, "the target holds the oldest resent batches: they count as written, the others are resent");
            }
        }
        let done = self.parts[i].settle();
        if !done.is_empty() {
            self.acknowledged(i, done);
        }
    }

    /// Starts a metadata lookup for the target topics of the partitions without a known
    /// leader, in the background: batches of the other partitions keep flowing meanwhile.
    /// One lookup at a time; topics the last one left unresolved (not created yet, a leader
    /// being elected) are asked for again after a backoff, new ones at once.
    fn look_up_leaders(&mut self) {
        if self.looking_up {
            return;
        }
        let missing = self.missing_leaders(|p| p.outstanding == 0);
        if missing.is_empty()
            || (missing
                .iter()
                .all(|t| self.unresolved.binary_search(t).is_ok())
                && Instant::now() < self.lookup_after)
        {
            return;
        }
        self.looking_up = true;
        let target = self.target.clone();
        let missing: Vec<String> = missing.iter().map(|t| t.to_string()).collect();
        self.requests
            .spawn(async move { Done::Leaders(target.metadata(Some(&missing)).await) });
    }

    fn on_leaders(&mut self, found: Result<Vec<TopicMeta>, KafkaError>) {
        self.looking_up = false;
        match found {
            Ok(topics) => {
                // Each partition's leader, found in one pass over the partitions: a lookup
                // can answer for thousands of topics.
                let mut leaders: HashMap<(&str, i32), i32> = HashMap::new();
                for t in &topics {
                    for pm in t.partitions.iter().filter(|pm| pm.leader >= 0) {
                        leaders.insert((t.name.as_str(), pm.partition), pm.leader);
                    }
                }
                for t in &topics {
                    let name: Arc<str> = Arc::from(t.name.as_str());
                    if t.error_code == ResponseError::UnknownTopicOrPartition.code() {
                        // Gone, if the engine knew it: deleted on the target.
                        if self.topic_ids.contains_key(&name) {
                            self.report_missing(&name);
                        }
                        continue;
                    }
                    if t.error_code == 0 {
                        self.reported.remove(&name);
                    }
                    if !t.id.is_nil() {
                        let before = self.topic_ids.insert(name.clone(), t.id);
                        if before.is_some_and(|id| !id.is_nil() && id != t.id) {
                            self.new_log(&name, t.id);
                        }
                    }
                }
                for part in self.parts.iter_mut().filter(|p| p.needs_metadata) {
                    let key = (&*part.target.topic, part.target.partition);
                    if let Some(&leader) = leaders.get(&key) {
                        part.leader = Some(leader);
                        part.needs_metadata = false;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "target metadata refresh failed"),
        }
        self.unresolved = self.missing_leaders(|_| true);
        if self.unresolved.is_empty() {
            self.lookup_backoff.reset();
        } else {
            self.lookup_after = Instant::now() + self.lookup_backoff.next_delay();
        }
    }

    /// Tells topic sync that remote topic `topic` is missing on the target, unless it was
    /// told less than `REPORT_MISSING_EVERY` ago.
    fn report_missing(&mut self, topic: &Arc<str>) {
        let Some(to) = &self.missing else {
            return;
        };
        let now = Instant::now();
        if self
            .reported
            .get(topic)
            .is_some_and(|at| now.saturating_duration_since(*at) < REPORT_MISSING_EVERY)
        {
            return;
        }
        self.reported.insert(topic.clone(), now);
        tracing::debug!(topic = %topic, "remote topic missing on the target; asking topic sync to create it again");
        let _ = to.send(topic.to_string());
    }

    /// Target topic `topic` has a new id: it was deleted and created again, and its
    /// partitions are new logs. Each is started over once its requests to the old log are
    /// back (`Engine::start_over`).
    fn new_log(&mut self, topic: &Arc<str>, id: uuid::Uuid) {
        tracing::info!(topic = %topic, topic_id = %id, "the remote topic was created again (a new topic id): its partitions start over on the new logs");
        for (i, part) in self.parts.iter_mut().enumerate() {
            if !part.progress && part.target.topic == *topic && !part.stopped {
                part.new_log = true;
                self.visits.mark(i);
            }
        }
    }

    /// Starts data partition `i` over on a new target log, whose offsets restart at 0:
    /// its offset map forgets the points of the old log (a source offset must not
    /// translate to a target offset the new log does not hold), the position's target
    /// offset becomes the new log's start (committed as soon as the syncs before it are
    /// durable, so that a restart rebuilds no map from the old log's syncs either), and the
    /// first batch the new log acknowledges writes a fresh offset sync.
    fn start_over(&mut self, i: usize) {
        let part = &mut self.parts[i];
        part.start_over();
        let source = part.source.clone();
        if part.acked.source_next >= 0 {
            part.acked.target_next = 0;
        }
        let acked = part.acked;
        let mut maps = self.translations.lock().unwrap();
        let mut map = OffsetMap::new();
        map.skip_to(acked.source_next);
        maps.insert(source.clone(), map);
        drop(maps);
        if acked.source_next >= 0 {
            self.syncs.add(&source, Vec::new(), acked, Vec::new);
        }
        let part = &self.parts[i];
        tracing::info!(source = %part.source, target = %part.target, source_offset = acked.source_next, "the target partition is a new log: its offset translation starts over");
    }

    /// The target topics (sorted, once each) of the running partitions without a known
    /// leader that pass `filter`.
    fn missing_leaders(&self, filter: impl Fn(&Partition) -> bool) -> Vec<Arc<str>> {
        // They are all listed (`Partition::needs_visit`).
        let mut topics: Vec<Arc<str>> = self
            .visits
            .iter()
            .map(|i| &self.parts[i])
            .filter(|p| p.needs_metadata && !p.stopped && filter(p))
            .map(|p| p.target.topic.clone())
            .collect();
        // A topic's partitions mostly sit next to each other: fewer names to sort.
        topics.dedup();
        topics.sort_unstable();
        topics.dedup();
        topics
    }
}

/// How long to hold requests to a broker that answered with `throttle_time_ms` (KIP-219):
/// at most `cap`, the request timeout, whatever a broker says. `None` for no throttle.
fn throttle(throttle_time_ms: i32, cap: Duration) -> Option<Duration> {
    u64::try_from(throttle_time_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(|ms| Duration::from_millis(ms).min(cap))
}

/// A refusal of partition `part`'s batch, as the error the logs show.
fn produce_error(part: &Partition, code: ResponseError) -> KafkaError {
    KafkaError::Broker {
        api: "Produce",
        context: part.target.to_string(),
        code,
    }
}
