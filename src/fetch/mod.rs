//! The fetch engine: reads the source cluster. One session task per source leader runs
//! `read_committed` Fetch requests in an incremental fetch session (KIP-227), so thousands of
//! partitions cost one small request per round trip. Each response is split into complete
//! record batches (zero-copy), CRC-checked, cleared of control batches and of aborted
//! transactions, and handed to the produce side as a `Chunk` under a memory budget.
//! Partitions whose leader moved go back to the fetcher task, which looks the new leader up.
//!
//! It follows the source log as the Java consumer does: each Fetch carries the epoch of the
//! last batch fetched, so the leader reports a log that diverged from it (KIP-320, an
//! unclean election truncated it) and the partition rewinds to the divergence point; a
//! position below the log start goes to the log start (retention deleted what was not yet
//! copied), one above the log end rewinds to the end (truncation again); a topic id that
//! changed means the topic was re-created, which is read from its log start. Each is logged
//! and counted in [`FetchStats`]. The reset policy only places partitions with no position.
//!
//! This file holds the handle ([`Fetcher`]) and what it hands out; `coordinator` places
//! partitions on leaders, `session` runs one leader's fetch session, `response` decides what
//! each Fetch response means without I/O.

mod coordinator;
mod outage;
pub mod response;
mod session;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::batch::{renumber, BatchError, RawBatch};
use crate::config::OffsetReset;
use crate::kafka::{BrokerLinks, Cluster, KafkaError, TopicPartition};
use crate::offset_map::Lineage;
use coordinator::Coordinator;
use outage::Outages;

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
    /// The source position this chunk was fetched from.
    pub from: i64,
    /// The source position after this chunk (past dropped batches too). A chunk with no
    /// batches and `next_offset == from` only reports a new `source_end`.
    pub next_offset: i64,
    /// The end of what strait can read of the partition: the last stable offset (it reads
    /// committed records only), or the high watermark from a broker that gives none.
    pub source_end: i64,
    /// The assignment of the partition this chunk was fetched under ([`Fetcher::resume`]):
    /// a chunk fetched before a pause can arrive after the resume, and only this tells it
    /// apart (an offset cannot: compaction leaves gaps, so a fresh chunk may legitimately
    /// start past the position asked for).
    pub generation: u32,
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
        error: FetchError,
    },
}

/// Why a partition stopped.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The source broker refused the partition for good (authorization, unknown error, ...).
    #[error(transparent)]
    Broker(KafkaError),
    /// The records do not split into batches.
    #[error("source batch at offset {offset} is malformed: {source}")]
    Malformed {
        offset: i64,
        #[source]
        source: BatchError,
    },
    /// A batch failed its CRC or could not be renumbered.
    #[error("refusing to forward a batch: {0}")]
    Refused(#[source] BatchError),
}

/// A partition handed to the fetcher, with its start position (`None`: reset by policy).
#[derive(Debug, Clone)]
pub(crate) struct Assignment {
    pub(crate) tp: TopicPartition,
    pub(crate) offset: Option<i64>,
    /// The log the position belongs to (from the session that hands the partition back, or
    /// from the progress it resumes from); `None` when unknown.
    origin: Option<Lineage>,
    /// Which assignment of the partition this is (0 for the first, then one per resume): its
    /// chunks carry it, and a session handing back an older one is not heard.
    pub(crate) generation: u32,
}

/// What the fetcher saw the source logs do that lost or rewrote records, for the metrics:
/// each is also logged (ERROR for truncation, WARN for the others) when it happens.
#[derive(Debug, Default)]
pub struct FetchStats {
    /// Times a source partition's log diverged from what was fetched (an unclean leader
    /// election truncated it) and the partition rewound.
    truncations: AtomicU64,
    /// Source offsets fetched from a log that was then truncated: the target keeps the
    /// copies of those records, which the source lost.
    truncated_offsets: AtomicU64,
    /// Times a position was found below its log start (retention deleted records before
    /// strait copied them).
    retention_resets: AtomicU64,
    /// Source offsets deleted by retention before strait copied them.
    offsets_lost_to_retention: AtomicU64,
    /// Partitions whose topic was deleted and re-created while they were replicated.
    recreated_partitions: AtomicU64,
    /// Error codes in Fetch answers (whole-response and per-partition) not yet taken by
    /// [`Fetcher::take_errors`], with their counts.
    errors: Mutex<BTreeMap<i16, u64>>,
}

/// A snapshot of [`FetchStats`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FetchCounts {
    pub truncations: u64,
    pub truncated_offsets: u64,
    pub retention_resets: u64,
    pub offsets_lost_to_retention: u64,
    pub recreated_partitions: u64,
}

impl FetchStats {
    fn truncated(&self, offsets: i64) {
        self.truncations.fetch_add(1, Ordering::Relaxed);
        self.truncated_offsets
            .fetch_add(offsets.max(0) as u64, Ordering::Relaxed);
    }

    fn retention_reset(&self, offsets: i64) {
        self.retention_resets.fetch_add(1, Ordering::Relaxed);
        self.offsets_lost_to_retention
            .fetch_add(offsets.max(0) as u64, Ordering::Relaxed);
    }

    fn error(&self, code: i16) {
        *self.errors.lock().unwrap().entry(code).or_default() += 1;
    }

    fn recreated(&self) {
        self.recreated_partitions.fetch_add(1, Ordering::Relaxed);
    }

    pub fn counts(&self) -> FetchCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FetchCounts {
            truncations: get(&self.truncations),
            truncated_offsets: get(&self.truncated_offsets),
            retention_resets: get(&self.retention_resets),
            offsets_lost_to_retention: get(&self.offsets_lost_to_retention),
            recreated_partitions: get(&self.recreated_partitions),
        }
    }
}

/// What the flow asks of the fetcher task.
#[derive(Debug)]
pub(crate) enum Order {
    Assign(Assignment),
    /// Stop fetching a partition (its target refused it, for good or for now): reading it on
    /// would only load the source for batches nobody sends.
    Forget(TopicPartition),
}

/// Handle to the fetcher task of one flow.
#[derive(Clone)]
pub struct Fetcher {
    orders: mpsc::UnboundedSender<Order>,
    stats: Arc<FetchStats>,
    outages: Outages,
    /// The flow's fetch buffer (`buffer.bytes` permits), and its size.
    budget: Arc<Semaphore>,
    buffer_bytes: usize,
    links: BrokerLinks,
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
        let stats = Arc::new(FetchStats::default());
        let outages = Outages::default();
        let buffer_bytes = config.buffer_bytes;
        let budget = Arc::new(Semaphore::new(buffer_bytes));
        let shared = (outages.clone(), budget.clone());
        let coordinator =
            Coordinator::new(cluster, config, events, stats.clone(), shared, shutdown);
        let task = tokio::spawn(coordinator.run(orders_rx));
        let fetcher = Fetcher {
            orders,
            stats,
            outages,
            budget,
            buffer_bytes,
            links: cluster.links(),
        };
        (fetcher, task)
    }

    /// A handle whose orders go nowhere: for tests of the produce engine on its own.
    #[cfg(test)]
    pub(crate) fn detached() -> Fetcher {
        Fetcher::scripted().0
    }

    /// A handle whose orders come out of the receiver: for tests that play the source.
    #[cfg(test)]
    pub(crate) fn scripted() -> (Fetcher, mpsc::UnboundedReceiver<Order>) {
        let (orders, rx) = mpsc::unbounded_channel();
        let fetcher = Fetcher {
            orders,
            stats: Arc::default(),
            outages: Outages::default(),
            budget: Arc::new(Semaphore::new(0)),
            buffer_bytes: 0,
            links: BrokerLinks::default(),
        };
        (fetcher, rx)
    }

    /// Starts fetching `tp` at `offset` (`None`: where the reset policy says). `origin`, the
    /// log a committed position was taken from, lets the fetcher see that the log changed
    /// while strait was away: a re-created topic starts at its log start, a truncated one
    /// rewinds to where it diverged.
    /// `generation` tells its chunks from those of an earlier assignment (0 for the first).
    pub fn assign(
        &self,
        tp: TopicPartition,
        offset: Option<i64>,
        origin: Option<Lineage>,
        generation: u32,
    ) {
        let _ = self.orders.send(Order::Assign(Assignment {
            tp,
            offset,
            origin,
            generation,
        }));
    }

    /// Fetches `tp` again from `offset` after a pause ([`Fetcher::forget`]), as its
    /// assignment `generation` (higher than any before): chunks of earlier generations still
    /// on their way are the caller's to drop.
    pub fn resume(&self, tp: TopicPartition, offset: i64, origin: Lineage, generation: u32) {
        let _ = self.orders.send(Order::Assign(Assignment {
            tp,
            offset: Some(offset),
            origin: Some(origin),
            generation,
        }));
    }

    /// What the source logs did that lost or rewrote records, so far.
    pub fn stats(&self) -> FetchCounts {
        self.stats.counts()
    }

    /// Whether the fetcher reaches each source broker it dialled.
    pub fn links(&self) -> Vec<(i32, bool)> {
        self.links.snapshot()
    }

    /// Errors the source answered with since the last call: Kafka error code and count.
    pub fn take_errors(&self) -> Vec<(i16, u64)> {
        std::mem::take(&mut *self.stats.errors.lock().unwrap())
            .into_iter()
            .collect()
    }

    /// Since when reading the source has been failing (a fetch from a broker, or the
    /// lookup of leaders), if it is now.
    pub fn failing_since(&self) -> Option<std::time::Instant> {
        self.outages.failing_since()
    }

    /// Bytes of fetched batches held in the flow's buffer now, and the buffer's size.
    pub fn buffer(&self) -> (usize, usize) {
        let held = self
            .buffer_bytes
            .saturating_sub(self.budget.available_permits());
        (held, self.buffer_bytes)
    }

    /// Stops fetching `tp` until it is assigned (or resumed) again.
    pub fn forget(&self, tp: TopicPartition) {
        let _ = self.orders.send(Order::Forget(tp));
    }
}
