//! One target partition as the produce engine sees it, without any I/O: the batches queued
//! and in flight, their sequence numbers, and what each Produce answer means for them.
//! `Partition::judge` turns a partition's error code into an `Outcome`; the engine
//! (`produce::Engine`) carries it out (connections, requests, the producer id, the fetcher).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::batch::{self, RawBatch};
use crate::kafka::backoff::Backoff;
use crate::kafka::TopicPartition;
use crate::progress::Position;

/// One batch (or position) on its way to the target.
pub(super) struct Entry {
    /// `None` for a position-only entry (the chunk's tail was control/aborted batches).
    pub batch: Option<RawBatch>,
    /// Batches that follow `batch` and go with it as one, merged when first sent.
    pub more: Vec<RawBatch>,
    /// Bytes of `batch` and `more`.
    pub bytes: usize,
    pub source_next: i64,
    /// The source records' offset deltas when the batch was renumbered (compaction holes).
    pub offset_deltas: Option<Vec<i32>>,
    pub seq: Option<i32>,
    /// Positions this entry commits, when it is a progress record batch.
    pub commits: Vec<(usize, Position)>,
    /// The Fetch responses whose buffers this entry's batches hold (`fetch::Chunk::permit`).
    pub _permits: Vec<Arc<OwnedSemaphorePermit>>,
}

impl Entry {
    /// An entry not sent yet: `batch` (or none, for a position-only entry) up to
    /// `source_next`, holding `permits`.
    pub fn new(
        batch: Option<RawBatch>,
        source_next: i64,
        permits: Vec<Arc<OwnedSemaphorePermit>>,
    ) -> Entry {
        Entry {
            bytes: batch.as_ref().map_or(0, RawBatch::len),
            batch,
            more: Vec::new(),
            source_next,
            offset_deltas: None,
            seq: None,
            commits: Vec::new(),
            _permits: permits,
        }
    }
}

/// What an answer of the target means for a partition (`Partition::judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Written now (NONE) or before (DUPLICATE_SEQUENCE_NUMBER) at `base_offset`: the batch
    /// and every earlier one of the partition are done.
    Acked { base_offset: i64 },
    /// The partition was given up: let go of its batches, resend nothing.
    Release,
    /// Re-initialise the producer id, then resend every unacknowledged batch from sequence 0.
    ResetProducer(Reset),
    /// Resend the batch and every later one, once the partition's outstanding requests are
    /// back.
    Resend(Resend),
    /// The target refuses the batch for good: stop the partition.
    Stop(ResponseError),
}

/// Why the producer id is re-initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reset {
    /// The target lost strait's producer state (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH).
    LostState(ResponseError),
    /// OUT_OF_ORDER_SEQUENCE_NUMBER for the oldest batch in flight of a partition that had
    /// not failed: the target's sequence state and strait's disagree.
    OutOfOrderHead,
}

/// Why a batch is resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resend {
    /// The response lacks the partition, or says UNKNOWN_SERVER_ERROR: look its leader up.
    Missing,
    /// The leader is unknown or moved (`LEADERSHIP`): look it up first.
    Leadership(ResponseError),
    /// A transient refusal, or a batch out of order behind one that failed: same leader.
    Later(ResponseError),
}

impl Resend {
    /// Whether the partition's leader must be looked up before resending.
    pub fn looks_up_leader(self) -> bool {
        matches!(self, Resend::Missing | Resend::Leadership(_))
    }
}

/// The errors after which the partition's leader is looked up again.
const LEADERSHIP: [ResponseError; 5] = [
    ResponseError::UnknownTopicOrPartition,
    ResponseError::LeaderNotAvailable,
    ResponseError::NotLeaderOrFollower,
    ResponseError::KafkaStorageError,
    ResponseError::UnknownTopicId,
];

/// A target partition: where its batches come from, where they go, and how far they got.
pub(super) struct Partition {
    pub source: TopicPartition,
    pub target: TopicPartition,
    pub leader: Option<i32>,
    pub queue: VecDeque<Entry>,
    pub inflight: VecDeque<Entry>,
    /// Produce requests in flight that carry one of `inflight`.
    pub outstanding: usize,
    pub next_seq: i32,
    /// A batch failed: the in-flight ones are resent once `outstanding` is back to 0.
    pub failed: bool,
    pub needs_metadata: bool,
    pub retry_at: Option<Instant>,
    pub backoff: Backoff,
    pub acked: Position,
    pub committed: Position,
    pub high_watermark: i64,
    pub stopped: bool,
    /// Whether the target acknowledged a batch of the current producer identity here.
    pub confirmed: bool,
}

impl Partition {
    pub fn new(
        source: TopicPartition,
        target: TopicPartition,
        resume: Option<Position>,
    ) -> Partition {
        let start = resume.unwrap_or(Position {
            source_next: -1,
            target_next: -1,
        });
        Partition {
            source,
            target,
            leader: None,
            queue: VecDeque::new(),
            inflight: VecDeque::new(),
            outstanding: 0,
            next_seq: 0,
            failed: false,
            needs_metadata: true,
            retry_at: None,
            // A fresh topic's leader refuses its first batches (NOT_LEADER_OR_FOLLOWER) for
            // the few milliseconds it takes to apply its leadership: retry soon, then back off.
            backoff: Backoff::new(Duration::from_millis(20), Duration::from_secs(5)),
            acked: start,
            committed: start,
            high_watermark: -1,
            stopped: false,
            confirmed: false,
        }
    }

    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.inflight.is_empty()
    }

    /// Lets go of the batches of a stopped partition, releasing their share of the fetch
    /// buffer: the queued ones now, those in flight once the last answer is in (nothing is
    /// resent).
    pub fn release(&mut self) {
        self.queue.clear();
        if self.outstanding == 0 {
            self.inflight.clear();
        }
    }

    /// What the answer for the batch sent with sequence `seq` means: `answer` is its error
    /// code and base offset, `None` when the Produce response lacks the partition.
    pub fn judge(&self, seq: i32, answer: Option<(i16, i64)>) -> Outcome {
        let error = match answer {
            None => None,
            Some((code, base_offset)) => match ResponseError::try_from_code(code) {
                None | Some(ResponseError::DuplicateSequenceNumber) => {
                    return Outcome::Acked { base_offset }
                }
                Some(error) => Some(error),
            },
        };
        if self.stopped {
            // Given up: its batches sent behind the refused one fail out of sequence.
            return Outcome::Release;
        }
        let Some(error) = error else {
            return Outcome::Resend(Resend::Missing);
        };
        match error {
            ResponseError::UnknownProducerId | ResponseError::InvalidProducerEpoch => {
                Outcome::ResetProducer(Reset::LostState(error))
            }
            ResponseError::OutOfOrderSequenceNumber
                if !self.failed && self.inflight.front().and_then(|e| e.seq) == Some(seq) =>
            {
                Outcome::ResetProducer(Reset::OutOfOrderHead)
            }
            // Code -1, which strait has always read as a missing partition.
            ResponseError::UnknownServerError => Outcome::Resend(Resend::Missing),
            error if LEADERSHIP.contains(&error) => Outcome::Resend(Resend::Leadership(error)),
            error if error.is_retriable() || error == ResponseError::OutOfOrderSequenceNumber => {
                Outcome::Resend(Resend::Later(error))
            }
            error => Outcome::Stop(error),
        }
    }

    /// The sequence `entry` goes with, and its batch: the one it was first sent with, else
    /// the partition's next one, which then moves past the batch's records. `None` for a
    /// position-only entry, which has no sequence.
    pub fn sequence<'e>(&mut self, entry: &'e mut Entry) -> Option<(i32, &'e RawBatch)> {
        let batch = entry.batch.as_ref()?;
        let seq = *entry.seq.get_or_insert_with(|| {
            let seq = self.next_seq;
            self.next_seq = next_sequence(seq, batch.record_count());
            seq
        });
        Some((seq, batch))
    }

    /// The target appended the batch with sequence `seq` at `base_offset`: takes it and every
    /// earlier in-flight entry (and the position-only entries right behind), each with the
    /// target offset of its first record when known. `None` if no entry has that sequence.
    pub fn take_acked(&mut self, seq: i32, base_offset: i64) -> Option<Vec<(Entry, Option<i64>)>> {
        let pos = self.inflight.iter().position(|e| e.seq == Some(seq))?;
        let mut done: Vec<Entry> = self.inflight.drain(..=pos).collect();
        while self.inflight.front().is_some_and(|e| e.batch.is_none()) {
            done.extend(self.inflight.pop_front());
        }
        self.backoff.reset();
        self.confirmed = true;
        // The broker appends a partition's batches in sequence order, so batches acknowledged
        // implicitly (an earlier answer was lost) sit right before the one acknowledged here.
        let mut target_base = vec![None; done.len()];
        if base_offset >= 0 {
            let mut cursor = base_offset;
            target_base[pos] = Some(base_offset);
            for j in (0..pos).rev() {
                if let Some(b) = &done[j].batch {
                    cursor -= b.record_count() as i64;
                    target_base[j] = Some(cursor);
                }
            }
        }
        Some(done.into_iter().zip(target_base).collect())
    }

    /// The position-only entries at the front of the queue while nothing is in flight: they
    /// are acknowledged at once, having nothing to write.
    pub fn take_positions(&mut self) -> Vec<(Entry, Option<i64>)> {
        let mut done = Vec::new();
        while self.inflight.is_empty() && self.queue.front().is_some_and(|e| e.batch.is_none()) {
            done.extend(self.queue.pop_front().map(|e| (e, None)));
        }
        done
    }

    /// Moves unacknowledged in-flight entries back in front of the queue, in order.
    pub fn requeue(&mut self) {
        while let Some(e) = self.inflight.pop_back() {
            self.queue.push_front(e);
        }
    }

    /// A failed partition whose requests are all back gets its batches ready to resend,
    /// with their sequences, after a backoff.
    pub fn recover(&mut self, now: Instant) {
        if self.failed && self.outstanding == 0 {
            self.requeue();
            self.failed = false;
            self.retry_at = Some(now + self.backoff.next_delay());
        }
    }

    /// The producer id changed: every unacknowledged batch is resent, numbered from 0.
    pub fn restart_sequences(&mut self) {
        self.requeue();
        self.next_seq = 0;
        self.confirmed = false;
        for e in &mut self.queue {
            e.seq = None;
        }
        self.failed = false;
    }

    /// Merges the batches the front entry of the queue took along into one, before it is
    /// sent (and given its sequence) for the first time. Records that cannot be re-framed
    /// leave the batches as they are, each its own entry: they forward fine without being
    /// parsed.
    pub fn merge_front(&mut self) {
        let Some(entry) = self.queue.front_mut().filter(|e| !e.more.is_empty()) else {
            return;
        };
        let Some(first) = entry.batch.take() else {
            return;
        };
        let more = std::mem::take(&mut entry.more);
        match batch::coalesce(&first, &more) {
            Ok(merged) => entry.batch = Some(merged),
            Err(e) => {
                tracing::warn!(partition = %self.source, error = %e, "cannot coalesce batches; forwarding them as they are");
                let Some(last) = self.queue.pop_front() else {
                    return;
                };
                let mut split: Vec<Entry> = std::iter::once(first)
                    .chain(more)
                    .map(|b| {
                        let next = b.next_offset();
                        Entry::new(Some(b), next, Vec::new())
                    })
                    .collect();
                if let Some(tail) = split.last_mut() {
                    tail.source_next = last.source_next;
                    tail._permits = last._permits;
                }
                for e in split.into_iter().rev() {
                    self.queue.push_front(e);
                }
            }
        }
    }
}

/// Kafka's sequence arithmetic: sequences wrap from `i32::MAX` to 0
/// (`DefaultRecordBatch.incrementSequence`).
pub fn next_sequence(seq: i32, records: i32) -> i32 {
    if seq > i32::MAX - records {
        records - (i32::MAX - seq) - 1
    } else {
        seq + records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX - 1, 1), i32::MAX);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 2, 5), 2);
    }
}
