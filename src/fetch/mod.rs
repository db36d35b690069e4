//! The fetch engine: reads the source cluster. One session task per source leader runs
//! `read_committed` Fetch requests in an incremental fetch session (KIP-227), so thousands of
//! partitions cost one small request per round trip. Each response is split into complete
//! record batches (zero-copy), CRC-checked, cleared of control batches and of aborted
//! transactions, and handed to the produce side as a `Chunk` under a memory budget.
//! Partitions whose leader moved go back to the fetcher task, which looks the new leader up.
//!
//! This file holds the handle ([`Fetcher`]) and what it hands out; `coordinator` places
//! partitions on leaders, `session` runs one leader's fetch session, `response` decides what
//! each Fetch response means without I/O.

mod coordinator;
mod outage;
pub mod response;
mod session;

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::batch::{renumber, BatchError, RawBatch};
use crate::config::OffsetReset;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use coordinator::Coordinator;

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
        let task = tokio::spawn(Coordinator::new(cluster, config, events, shutdown).run(orders_rx));
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
