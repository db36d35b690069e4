//! One target partition as the produce engine sees it, without any I/O: the batches queued
//! and in flight, their sequence numbers, and what each Produce answer means for them.
//! `Partition::judge` turns a partition's error code into an `Outcome`; `Partition::record`
//! keeps each in-flight batch's own answer, and `Partition::settle` lets go only of the
//! batches the target wrote with nothing unwritten before them. The engine
//! (`produce::Engine`) carries the decisions out (connections, requests, the producer id,
//! the fetcher).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::batch::{self, RawBatch};
use crate::kafka::backoff::Backoff;
use crate::kafka::TopicPartition;
use crate::offset_map::{Lineage, Position};
use crate::telemetry::PartitionMetrics;

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
    /// The target's answer to the last time this entry was sent.
    pub answer: Answer,
    /// When the batch was first sent: the start of its `delivery.timeout.ms`.
    pub first_sent: Option<Instant>,
    /// Whether the last send was a resend under the sequence it was first sent with: the
    /// target may hold the batch already.
    pub resent: bool,
    /// CORRUPT_MESSAGE answers so far (`CORRUPT_RESENDS`).
    pub corrupt: u32,
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
            answer: Answer::Pending,
            first_sent: None,
            resent: false,
            corrupt: 0,
            _permits: permits,
        }
    }
}

/// The target's answer for one entry in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// Not answered yet (a position-only entry never is).
    Pending,
    /// Written at this base offset (the broker's value, possibly -1: unknown).
    Written(i64),
    /// Refused, or lost with its request: not written as far as strait knows.
    Refused,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER for a resend: maybe written before, further back than
    /// the broker remembers; the target's log tells (`Outcome::CheckLog`).
    Unsure,
}

/// Where a partition is in reading its target log back to learn which of its resent
/// batches the target holds (`Outcome::CheckLog`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LogCheck {
    Idle,
    /// To be read once the partition's requests are back, and not before this.
    Due(Instant),
    Reading,
}

/// The target wrote a batch behind one it refused: it had lost strait's producer state (its
/// sequence check would otherwise have refused the later batch too). The refused batch and
/// everything after it are written again behind the one written out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reordered {
    /// Source offsets `[first, next)` of the refused batch.
    pub refused: (i64, i64),
    /// The target offset of the batch written behind it (-1: not given).
    pub written_at: i64,
}

/// What an answer of the target means for a partition (`Partition::judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Written now (NONE) or before (DUPLICATE_SEQUENCE_NUMBER) at `base_offset`: the batch
    /// is done once every earlier one of the partition is (`Partition::settle`).
    Acked { base_offset: i64 },
    /// The partition was given up: let go of its batches, resend nothing.
    Release,
    /// Re-initialise the producer id, then resend every unacknowledged batch from sequence 0.
    ResetProducer(Reset),
    /// OUT_OF_ORDER_SEQUENCE_NUMBER for a batch resent after its answer was lost (or for
    /// any batch while such a check is due): the broker remembers a producer's last 5
    /// batches per partition, so with more in flight it no longer recognises one it wrote.
    /// Read the target partition from the acknowledged position to learn which batches it
    /// holds, and resend only the others.
    CheckLog,
    /// A newer epoch of strait's producer id wrote here (INVALID_PRODUCER_EPOCH,
    /// PRODUCER_FENCED): another process registered the flow's transactional id. Without a
    /// transactional id (no fencing) the producer is re-initialised instead.
    Fenced(ResponseError),
    /// Resend the batch and every later one, once the partition's outstanding requests are
    /// back.
    Resend(Resend),
    /// The target refuses the batch for good: stop the partition.
    Stop(ResponseError),
    /// The target kept refusing the batch (or answering without its partition) past
    /// `delivery.timeout.ms` (or past `CORRUPT_RESENDS` for CORRUPT_MESSAGE): stop the
    /// partition.
    Expired(Resend),
}

/// Why the producer id is re-initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reset {
    /// The target lost strait's producer state (UNKNOWN_PRODUCER_ID; INVALID_PRODUCER_EPOCH
    /// without fencing).
    LostState(ResponseError),
    /// OUT_OF_ORDER_SEQUENCE_NUMBER for the oldest batch in flight of a partition that had
    /// not failed: the target's sequence state and strait's disagree.
    OutOfOrderHead,
}

/// Why a batch is resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resend {
    /// The response lacks the partition: look its leader up.
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

    /// The Kafka error the target refused with; `None` when it did not answer for the
    /// partition at all.
    pub fn error(self) -> Option<ResponseError> {
        match self {
            Resend::Missing => None,
            Resend::Leadership(error) | Resend::Later(error) => Some(error),
        }
    }
}

/// How often a batch is resent after CORRUPT_MESSAGE. strait checked the source CRC and
/// recomputed it after stamping, so a refusal that repeats is a strait bug or corruption in
/// transit that resending will not cure.
pub(super) const CORRUPT_RESENDS: u32 = 3;

/// How long a partition may be refused before an operator is told (at WARN, once per
/// streak): leader elections and ISR changes pass well within it; a leader offline, an ISR
/// below `min.insync.replicas` or a deleted remote topic do not.
pub(super) const UNWRITABLE_WARN_AFTER: Duration = Duration::from_secs(10);

/// How long a partition may be refused before its batches not sent yet are let go and its
/// fetching paused (`Partition::pause`): each queued chunk holds its whole Fetch response
/// against `buffer.bytes`, so a partition refused for longer than elections take would
/// otherwise fill the buffer and stall every other partition of the flow.
pub(super) const PAUSE_AFTER: Duration = Duration::from_secs(3);

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
    /// The source log `acked` was read from (`progress` commits it with the position).
    pub lineage: Lineage,
    pub committed: Position,
    /// The end of what can be read of the source partition (`fetch::Chunk::source_end`).
    pub source_end: i64,
    /// The source position of the first chunk fetched (-1: none yet): where the backlog
    /// starts while nothing is acknowledged.
    pub first_fetched: i64,
    pub stopped: bool,
    /// Whether the target acknowledged a batch of the current producer identity here.
    pub confirmed: bool,
    /// Reading the target log back (`Outcome::CheckLog`): nothing is sent meanwhile.
    pub check: LogCheck,
    /// The sequence right after the last batch settled with a known target offset, under
    /// the current producer identity, and the target offset after that batch: a batch
    /// acknowledged at that sequence without an offset (DUPLICATE_SEQUENCE_NUMBER with -1)
    /// was written right there.
    follows: Option<(i32, i64)>,
    /// When the target started refusing the partition's batches (since the last one it
    /// wrote), and whether that was reported.
    refused_since: Option<Instant>,
    warned: bool,
    /// The assignment generation whose chunks the partition takes (`fetch::Chunk::generation`);
    /// each pause moves it on, so chunks fetched before the pause are dropped.
    pub generation: u32,
    /// Fetching is paused (`pause`) until the batches kept are written (`resume`).
    pub paused: bool,
    /// The target topic was found to be a new log (deleted and created again): the engine
    /// starts the partition over on it (`Partition::start_over`) once its requests to the
    /// old one are back, and sends nothing meanwhile.
    pub new_log: bool,
    /// The partition's series (`None` for the progress partition, or without telemetry).
    pub metrics: Option<PartitionMetrics>,
    /// When the source was first seen ahead of the acknowledged position (Unix ms), since
    /// the partition was last caught up: its oldest record waiting is at least that old.
    behind_since: Option<i64>,
    /// The flow no longer replicates the partition (`unroute`): what was sent is written,
    /// and fetching waits until it is routed again.
    pub dropped: bool,
    /// Handed to another process of the flow's group (`hand_over`): nothing of it is
    /// committed any more, until it comes back (`reacquire`).
    pub released: bool,
    /// The scale-out slot whose transaction writes the partition in exactly-once mode
    /// (`crate::group::assignor::slot_of`; 0 for a process that replicates the whole flow).
    pub slot: u32,
    /// A partition of the progress topic, which the positions of the others go to.
    pub progress: bool,
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
            lineage: Lineage::UNKNOWN,
            committed: start,
            source_end: -1,
            first_fetched: -1,
            stopped: false,
            confirmed: false,
            check: LogCheck::Idle,
            follows: None,
            refused_since: None,
            warned: false,
            generation: 0,
            paused: false,
            new_log: false,
            metrics: None,
            behind_since: None,
            dropped: false,
            released: false,
            slot: 0,
            progress: false,
        }
    }

    /// The progress partition `tp` the transaction of `slot` writes its positions to (or,
    /// outside exactly-once mode, the engine its commits).
    pub fn progress(tp: TopicPartition, slot: u32) -> Partition {
        Partition {
            slot,
            progress: true,
            ..Partition::new(tp.clone(), tp, None)
        }
    }

    /// The timestamp of the oldest record not yet replicated, as far as strait knows at
    /// `now_ms`: the first batch fetched and not acknowledged; while none is (the fetch
    /// buffer is full of other partitions' batches, say) and the source is ahead, when
    /// that was first seen, which its records are at least as old as. `None` when caught
    /// up, or without timestamps.
    pub fn oldest_waiting(&mut self, now_ms: i64) -> Option<i64> {
        self.behind_since = match self.lag() {
            Some(lag) if lag > 0 => Some(self.behind_since.unwrap_or(now_ms)),
            _ => None,
        };
        self.inflight
            .iter()
            .chain(&self.queue)
            .find_map(|e| e.batch.as_ref())
            .map(RawBatch::base_timestamp)
            .filter(|t| *t >= 0)
            .or(self.behind_since)
    }

    /// Records of the source partition the target has not acknowledged: from the
    /// acknowledged position (or, while there is none, where fetching started) to the
    /// source end. `None` until both are known.
    pub fn lag(&self) -> Option<i64> {
        if self.dropped {
            return None;
        }
        let position = match self.acked.source_next {
            next if next >= 0 => next,
            _ => self.first_fetched,
        };
        (self.source_end >= 0 && position >= 0).then(|| (self.source_end - position).max(0))
    }

    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.inflight.is_empty()
    }

    /// Whether the engine's loop has something to do for the partition: batches to send or
    /// positions to pass on, a failure or a new log to recover from, its log to read back,
    /// or its leader to look up (`super::visits`).
    pub fn needs_visit(&self) -> bool {
        !self.queue.is_empty()
            || self.failed
            || self.new_log
            || self.check != LogCheck::Idle
            || (self.needs_metadata && !self.stopped)
    }

    /// Lets go of the batches of a stopped partition, releasing their share of the fetch
    /// buffer: the queued ones now, those in flight once the last answer is in (nothing is
    /// resent).
    pub fn release(&mut self) {
        self.check = LogCheck::Idle;
        self.queue.clear();
        if self.outstanding == 0 {
            self.inflight.clear();
        }
    }

    /// What the answer for the batch sent with sequence `seq` means: `answer` is its error
    /// code and base offset, `None` when the Produce response lacks the partition. A
    /// refusal worth retrying, or an answer lacking the partition, becomes `Expired` once the
    /// batch was first sent longer than `delivery_timeout` before `now`, like the Java
    /// producer's `delivery.timeout.ms`.
    pub fn judge(
        &self,
        seq: i32,
        answer: Option<(i16, i64)>,
        now: Instant,
        delivery_timeout: Duration,
    ) -> Outcome {
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
            return self.retry(seq, Resend::Missing, now, delivery_timeout);
        };
        match error {
            ResponseError::UnknownProducerId => Outcome::ResetProducer(Reset::LostState(error)),
            ResponseError::InvalidProducerEpoch | ResponseError::ProducerFenced => {
                Outcome::Fenced(error)
            }
            // A resend, or any batch behind one being checked: the target log tells (from
            // the acknowledged position on). Answers are taken in any order, so this does
            // not wait for the oldest batch's own.
            ResponseError::OutOfOrderSequenceNumber
                if self.check != LogCheck::Idle
                    || (self.acked.target_next >= 0
                        && self.inflight.iter().any(|e| e.seq == Some(seq) && e.resent)) =>
            {
                Outcome::CheckLog
            }
            ResponseError::OutOfOrderSequenceNumber
                if !self.failed && self.inflight.front().and_then(|e| e.seq) == Some(seq) =>
            {
                Outcome::ResetProducer(Reset::OutOfOrderHead)
            }
            error if LEADERSHIP.contains(&error) => {
                self.retry(seq, Resend::Leadership(error), now, delivery_timeout)
            }
            // UNKNOWN_SERVER_ERROR (-1) is an unexpected exception in the broker, often
            // passing: resent like a transient refusal, within the delivery timeout.
            // CONCURRENT_TRANSACTIONS: in transactions v2 the leader enrols the partition at
            // the transaction coordinator, which is still writing the markers of the
            // transaction before (the Java client retries it too).
            error
                if error.is_retriable()
                    || error == ResponseError::OutOfOrderSequenceNumber
                    || error == ResponseError::UnknownServerError
                    || error == ResponseError::ConcurrentTransactions =>
            {
                self.retry(seq, Resend::Later(error), now, delivery_timeout)
            }
            error => Outcome::Stop(error),
        }
    }

    /// `Resend(resend)` for the batch with sequence `seq`, unless it was refused too long
    /// (or too often, for CORRUPT_MESSAGE): then `Expired`.
    fn retry(&self, seq: i32, resend: Resend, now: Instant, delivery_timeout: Duration) -> Outcome {
        let Some(entry) = self.inflight.iter().find(|e| e.seq == Some(seq)) else {
            return Outcome::Resend(resend);
        };
        let expired = entry
            .first_sent
            .is_some_and(|t| now.saturating_duration_since(t) >= delivery_timeout);
        let corrupt = resend.error() == Some(ResponseError::CorruptMessage)
            && entry.corrupt >= CORRUPT_RESENDS;
        if expired || corrupt {
            Outcome::Expired(resend)
        } else {
            Outcome::Resend(resend)
        }
    }

    /// Keeps `outcome`, the judged answer for the batch with sequence `seq`, on its entry.
    /// Returns what happened when this answer makes the target's log disagree with the
    /// order strait sent in: a batch written behind a refused one (reported once, by the
    /// answer that makes the first such pair).
    pub fn record(&mut self, seq: i32, outcome: Outcome) -> Option<Reordered> {
        let before = self.reordered();
        let entry = self.inflight.iter_mut().find(|e| e.seq == Some(seq))?;
        entry.answer = match outcome {
            Outcome::Acked { base_offset } => Answer::Written(base_offset),
            Outcome::CheckLog => Answer::Unsure,
            _ => Answer::Refused,
        };
        if outcome == Outcome::Resend(Resend::Later(ResponseError::CorruptMessage)) {
            entry.corrupt += 1;
        }
        before.is_none().then(|| self.reordered()).flatten()
    }

    /// The first refused batch in flight with a written one behind it, if any.
    fn reordered(&self) -> Option<Reordered> {
        let refused = self
            .inflight
            .iter()
            .position(|e| e.answer == Answer::Refused)?;
        let written_at = self
            .inflight
            .iter()
            .skip(refused + 1)
            .find_map(|e| match e.answer {
                Answer::Written(base) => Some(base),
                _ => None,
            })?;
        let entry = &self.inflight[refused];
        let first = entry.batch.as_ref().map_or(-1, RawBatch::base_offset);
        Some(Reordered {
            refused: (first, entry.source_next),
            written_at,
        })
    }

    /// The sequence `entry` goes with, sent at `now`, and its batch: the one it was first
    /// sent with, else the partition's next one, which then moves past the batch's records.
    /// `None` for a position-only entry, which has no sequence.
    pub fn sequence<'e>(
        &mut self,
        entry: &'e mut Entry,
        now: Instant,
    ) -> Option<(i32, &'e RawBatch)> {
        let batch = entry.batch.as_ref()?;
        entry.first_sent.get_or_insert(now);
        entry.resent = entry.seq.is_some();
        let seq = *entry.seq.get_or_insert_with(|| {
            let seq = self.next_seq;
            self.next_seq = next_sequence(seq, batch.record_count());
            seq
        });
        Some((seq, batch))
    }

    /// Takes the entries at the front of the in-flight ones that the target wrote (and the
    /// position-only entries among them), each with the target offset of its first record
    /// when known. An entry not answered yet, or refused, holds back every later one: the
    /// position never passes a batch the target did not write.
    pub fn settle(&mut self) -> Vec<(Entry, Option<i64>)> {
        let mut done = Vec::new();
        while let Some(front) = self.inflight.front() {
            let base = match (&front.batch, front.answer) {
                (None, _) => None,
                (Some(_), Answer::Written(base)) => Some(base),
                (Some(_), _) => break,
            };
            let Some(entry) = self.inflight.pop_front() else {
                break;
            };
            let target_base = match (&entry.batch, base, entry.seq) {
                (Some(batch), Some(base), Some(seq)) => self.written(seq, batch, base),
                _ => None,
            };
            done.push((entry, target_base));
        }
        if done.iter().any(|(e, _)| e.batch.is_some()) {
            self.backoff.reset();
            self.confirmed = true;
            self.refused_since = None;
            self.warned = false;
        }
        done
    }

    /// The target refused a batch at `now`, to be resent: how long it has been refusing
    /// the partition, once that passes `UNWRITABLE_WARN_AFTER` (once per streak, for the
    /// WARN that tells an operator).
    pub fn refused(&mut self, now: Instant) -> Option<Duration> {
        let since = *self.refused_since.get_or_insert(now);
        let refusing = now.saturating_duration_since(since);
        if self.warned || refusing < UNWRITABLE_WARN_AFTER {
            return None;
        }
        self.warned = true;
        Some(refusing)
    }

    /// The target has refused the partition for `PAUSE_AFTER` by `now`: lets go of the
    /// queued batches never sent (dropping them releases their share of the fetch buffer),
    /// keeps those that have a sequence (in flight, or waiting to be resent: the target's
    /// sequence check needs them to come back), and moves to the next assignment generation.
    /// Returns the source offset after the last batch kept, where fetching goes on when the
    /// partition is resumed; `None` (nothing done) unless it is due and something is kept to
    /// tell when the target writes again.
    pub fn pause(&mut self, now: Instant) -> Option<i64> {
        let due = self
            .refused_since
            .is_some_and(|since| now.saturating_duration_since(since) >= PAUSE_AFTER);
        if self.paused
            || self.stopped
            || !due
            || (self.sent_queued() == 0 && self.inflight.is_empty())
        {
            return None;
        }
        self.drop_unsent();
        self.paused = true;
        self.generation = self.generation.wrapping_add(1);
        self.queue
            .back()
            .or(self.inflight.back())
            .map(|e| e.source_next)
    }

    /// Queued entries sent before (they have a sequence): they come first in the queue,
    /// requeued ones going in front.
    fn sent_queued(&self) -> usize {
        self.queue.iter().take_while(|e| e.seq.is_some()).count()
    }

    /// Lets go of the queued entries never sent; those sent keep their place and their
    /// sequences (the target's sequence check needs them back).
    pub fn drop_unsent(&mut self) {
        self.queue.truncate(self.sent_queued());
    }

    /// The flow no longer replicates the partition (its topic left the filter): the batches
    /// not sent yet are let go, those sent are still written (their sequence numbers are
    /// taken), and nothing fetched before is queued. Routed again, it resumes right after
    /// the last batch written ([`Partition::resume`]), so nothing is copied twice. False if
    /// it was not replicated anyway.
    pub fn unroute(&mut self) -> bool {
        if self.dropped || self.stopped {
            return false;
        }
        self.drop_unsent();
        self.dropped = true;
        // Nothing written here yet: fetching starts over where the flow's assignment says.
        if self.acked.source_next >= 0 || !self.idle() {
            self.paused = true;
            self.generation = self.generation.wrapping_add(1);
        }
        true
    }

    /// The partition goes to another process: no chunk is taken any more (a new assignment
    /// generation), the batches fetched are still written when `commit`, else those not
    /// sent yet are let go (those sent keep their sequence numbers and are written).
    pub fn hand_over(&mut self, commit: bool) {
        if !commit {
            self.drop_unsent();
        }
        self.dropped = true;
        self.generation = self.generation.wrapping_add(1);
    }

    /// Back from another process, which committed `resume` (`None`: nothing): the
    /// positions start there, under a new assignment generation. The sequence numbers go
    /// on: the target knows this producer's last one on the partition.
    pub fn reacquire(&mut self, resume: Option<Position>, lineage: Lineage, new_log: bool) {
        let start = resume.unwrap_or(Position {
            source_next: -1,
            target_next: -1,
        });
        self.acked = start;
        self.committed = start;
        self.lineage = lineage;
        self.new_log = new_log;
        self.first_fetched = -1;
        self.source_end = -1;
        self.behind_since = None;
        self.paused = false;
        self.dropped = false;
        self.released = false;
        self.generation = self.generation.wrapping_add(1);
    }

    /// Whether a chunk fetched under assignment `generation` is queued: not for a stopped
    /// partition, nor one fetched before a pause (its batches were let go with the others
    /// and are fetched again from where the kept ones end; an offset cannot tell it, as
    /// compaction gaps let a fresh chunk start past the position asked for).
    pub fn takes(&self, generation: u32) -> bool {
        !self.stopped && self.generation == generation
    }

    /// A paused partition whose kept batches are all written is fetched again: returns the
    /// source offset to fetch from, right after the last batch kept (all acknowledged now).
    pub fn resume(&mut self) -> Option<i64> {
        if !self.paused || self.stopped || self.dropped || !self.idle() {
            return None;
        }
        self.paused = false;
        Some(self.acked.source_next)
    }

    /// The target offset of the first record of `batch`, written with sequence `seq` at
    /// `base` as the broker says: its value when it is a real offset (and the batch's end
    /// fits in an i64); else, right after the previous batch when `seq` directly follows it
    /// (the broker appends one producer's batches in sequence order); else unknown.
    fn written(&mut self, seq: i32, batch: &RawBatch, base: i64) -> Option<i64> {
        let records = i64::from(batch.record_count());
        let end = |base: i64| base.checked_add(records).filter(|_| base >= 0);
        let known = end(base).map(|_| base).or_else(|| {
            self.follows
                .filter(|&(next, _)| next == seq)
                .map(|(_, target)| target)
        });
        self.follows = known
            .and_then(end)
            .map(|target| (next_sequence(seq, batch.record_count()), target));
        known
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

    /// Moves unacknowledged in-flight entries back in front of the queue, in order, to be
    /// sent again (those written behind a refused one too: they follow it again).
    pub fn requeue(&mut self) {
        while let Some(mut e) = self.inflight.pop_back() {
            e.answer = Answer::Pending;
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

    /// The target log was read back (`Outcome::CheckLog`): `written` maps the base sequence
    /// of each batch of the current producer identity found there to its base offset. The
    /// in-flight batches found, from the oldest on up to the first not found, count as
    /// written there (the broker appends a producer's batches in sequence order, so none
    /// after that one is); the others are resent once `recover` requeues them. Returns how
    /// many were found; `None` when none was though the oldest was refused out of sequence:
    /// the target's sequence state and strait's disagree.
    pub fn found(&mut self, written: &HashMap<i32, i64>) -> Option<usize> {
        self.check = LogCheck::Idle;
        let oldest_unsure = self
            .inflight
            .iter()
            .find(|e| e.seq.is_some())
            .is_some_and(|e| e.answer == Answer::Unsure);
        let mut found = 0;
        for e in &mut self.inflight {
            let Some(seq) = e.seq else {
                continue;
            };
            match written.get(&seq) {
                Some(&base) => e.answer = Answer::Written(base),
                None => break,
            }
            found += 1;
        }
        (found > 0 || !oldest_unsure).then_some(found)
    }

    /// The target partition is a new log (its topic deleted and created again): it holds no
    /// producer state, so, like a partition that never acknowledged strait's producer, it
    /// takes one batch at a time until it acknowledges one (a broker without state for a
    /// producer takes any sequence, so a batch behind a failed one would be written ahead of
    /// it); nothing written before is known to precede what comes next there. The batches
    /// kept go with the sequences they have, which such a broker accepts.
    pub fn start_over(&mut self) {
        self.new_log = false;
        self.check = LogCheck::Idle;
        self.confirmed = false;
        self.follows = None;
    }

    /// The producer id changed: every unacknowledged batch is resent, numbered from 0.
    pub fn restart_sequences(&mut self) {
        self.check = LogCheck::Idle;
        self.requeue();
        self.next_seq = 0;
        self.confirmed = false;
        self.follows = None;
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
/// (`DefaultRecordBatch.incrementSequence`). A record count from a hostile batch header
/// cannot overflow it: negative counts add nothing (the target refuses such a batch).
pub fn next_sequence(seq: i32, records: i32) -> i32 {
    let next = (i64::from(seq) + i64::from(records.max(0))) % (i64::from(i32::MAX) + 1);
    i32::try_from(next).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_batch, OwnRecord, ProducerStamp};

    fn partition() -> Partition {
        let tp = TopicPartition::new("t", 0);
        Partition::new(tp.clone(), tp, None)
    }

    /// A batch of `records` records.
    fn batch(records: usize) -> RawBatch {
        let records: Vec<OwnRecord> = (0..records)
            .map(|i| OwnRecord {
                key: None,
                value: Some(b"v"),
                timestamp: i as i64,
            })
            .collect();
        RawBatch::new(encode_batch(&records, &ProducerStamp::NONE)).unwrap()
    }

    /// Queues a batch of `records` records (0: a position-only entry) up to `source_next`.
    fn queue(p: &mut Partition, records: usize, source_next: i64) {
        let batch = (records > 0).then(|| batch(records));
        p.queue
            .push_back(Entry::new(batch, source_next, Vec::new()));
    }

    const DELIVERY: Duration = Duration::from_secs(120);

    /// Sends the front of the queue the way the engine does; its sequence, if any.
    fn send(p: &mut Partition) -> Option<i32> {
        let mut entry = p.queue.pop_front().unwrap();
        let seq = p.sequence(&mut entry, Instant::now()).map(|(seq, _)| seq);
        if seq.is_some() {
            p.outstanding += 1;
        }
        p.inflight.push_back(entry);
        seq
    }

    #[test]
    fn the_oldest_record_waiting_is_bounded_while_nothing_of_it_is_fetched() {
        let mut p = partition();
        p.acked.source_next = 10;
        p.source_end = 10;
        assert_eq!(p.oldest_waiting(1_000), None);
        // The source moved on; nothing of it fetched yet: at least as old as first seen.
        p.source_end = 15;
        assert_eq!(p.oldest_waiting(2_000), Some(2_000));
        assert_eq!(p.oldest_waiting(9_000), Some(2_000));
        // Fetched: its own timestamp (the batch's records are stamped 0..).
        queue(&mut p, 5, 15);
        assert_eq!(p.oldest_waiting(9_500), Some(0));
        // Caught up: nothing waits, and a later backlog starts its own clock.
        p.queue.clear();
        p.acked.source_next = 15;
        assert_eq!(p.oldest_waiting(10_000), None);
        p.source_end = 16;
        assert_eq!(p.oldest_waiting(11_000), Some(11_000));
    }

    fn seqs(entries: &VecDeque<Entry>) -> Vec<Option<i32>> {
        entries.iter().map(|e| e.seq).collect()
    }

    /// `p`'s judgement of `answer` for the batch with sequence `seq`, now.
    fn judged(p: &Partition, seq: i32, answer: Option<(i16, i64)>) -> Outcome {
        p.judge(seq, answer, Instant::now(), DELIVERY)
    }

    /// What the target answered for the batch with sequence `seq`, judged and recorded the
    /// way the engine does; whether it reordered the target's log.
    fn answer(p: &mut Partition, seq: i32, code: i16, base: i64) -> Option<Reordered> {
        p.outstanding -= 1;
        let outcome = judged(p, seq, Some((code, base)));
        p.record(seq, outcome)
    }

    /// The source position and target offset of each settled entry.
    fn settle(p: &mut Partition) -> Vec<(i64, Option<i64>)> {
        p.settle()
            .iter()
            .map(|(e, base)| (e.source_next, *base))
            .collect()
    }

    /// A partition with one batch in flight at sequence 0, answered with `code`.
    fn judge(code: ResponseError) -> Outcome {
        let mut p = partition();
        queue(&mut p, 1, 1);
        assert_eq!(send(&mut p), Some(0));
        judged(&p, 0, Some((code.code(), 42)))
    }

    #[test]
    fn none_and_duplicate_sequence_are_acknowledgements() {
        let p = partition();
        assert_eq!(
            judged(&p, 0, Some((0, 42))),
            Outcome::Acked { base_offset: 42 }
        );
        assert_eq!(
            judge(ResponseError::DuplicateSequenceNumber),
            Outcome::Acked { base_offset: 42 }
        );
    }

    #[test]
    fn leadership_errors_resend_after_looking_the_leader_up() {
        for (code, error) in [
            (3, ResponseError::UnknownTopicOrPartition),
            (5, ResponseError::LeaderNotAvailable),
            (6, ResponseError::NotLeaderOrFollower),
            (56, ResponseError::KafkaStorageError),
            (100, ResponseError::UnknownTopicId),
        ] {
            assert_eq!(error.code(), code);
            let outcome = judge(error);
            assert_eq!(outcome, Outcome::Resend(Resend::Leadership(error)));
            assert!(matches!(outcome, Outcome::Resend(r) if r.looks_up_leader()));
        }
    }

    #[test]
    fn transient_errors_resend_to_the_same_leader() {
        for error in [
            ResponseError::NotEnoughReplicas,
            ResponseError::NotEnoughReplicasAfterAppend,
            ResponseError::RequestTimedOut,
            ResponseError::CorruptMessage,
            ResponseError::FencedLeaderEpoch,
            ResponseError::UnknownServerError,
            ResponseError::ConcurrentTransactions,
        ] {
            let outcome = judge(error);
            assert_eq!(outcome, Outcome::Resend(Resend::Later(error)), "{error}");
            assert!(matches!(outcome, Outcome::Resend(r) if !r.looks_up_leader()));
        }
    }

    #[test]
    fn lost_producer_state_resets_the_producer() {
        let error = ResponseError::UnknownProducerId;
        assert_eq!(
            judge(error),
            Outcome::ResetProducer(Reset::LostState(error))
        );
    }

    #[test]
    fn a_newer_epoch_is_a_fence() {
        for error in [
            ResponseError::InvalidProducerEpoch,
            ResponseError::ProducerFenced,
        ] {
            assert_eq!(judge(error), Outcome::Fenced(error));
        }
    }

    #[test]
    fn out_of_order_resets_only_at_the_head_of_a_healthy_partition() {
        let out_of_order = ResponseError::OutOfOrderSequenceNumber;
        assert_eq!(
            judge(out_of_order),
            Outcome::ResetProducer(Reset::OutOfOrderHead)
        );
        let mut p = partition();
        queue(&mut p, 2, 2);
        queue(&mut p, 1, 3);
        assert_eq!(send(&mut p), Some(0));
        assert_eq!(send(&mut p), Some(2));
        // Behind the head: the head's own answer decides.
        assert_eq!(
            judged(&p, 2, Some((out_of_order.code(), -1))),
            Outcome::Resend(Resend::Later(out_of_order))
        );
        // At the head of a partition that already failed: a consequence, not a cause.
        p.failed = true;
        assert_eq!(
            judged(&p, 0, Some((out_of_order.code(), -1))),
            Outcome::Resend(Resend::Later(out_of_order))
        );
    }

    /// A resent head refused out of sequence may be written further back than the broker
    /// remembers: the target log decides, and every later out-of-sequence answer waits for
    /// it without counting as a refusal (no reordering is reported).
    #[test]
    fn an_out_of_order_resend_is_checked_against_the_target_log() {
        let out_of_order = Some((ResponseError::OutOfOrderSequenceNumber.code(), -1));
        let mut p = partition();
        p.acked.target_next = 100;
        for n in 1..=3 {
            queue(&mut p, 2, 2 * n);
        }
        for _ in 0..3 {
            send(&mut p);
        }
        // The answers are lost with the connection: resent with their sequences.
        p.outstanding = 0;
        p.failed = true;
        p.recover(Instant::now());
        assert_eq!(send(&mut p), Some(0));
        assert_eq!(send(&mut p), Some(2));
        assert_eq!(send(&mut p), Some(4));
        // Answers are taken in any order: the second batch's first.
        assert_eq!(judged(&p, 2, out_of_order), Outcome::CheckLog);
        assert_eq!(p.record(2, Outcome::CheckLog), None);
        p.check = LogCheck::Due(Instant::now());
        p.failed = true;
        assert_eq!(judged(&p, 0, out_of_order), Outcome::CheckLog);
        assert_eq!(p.record(0, Outcome::CheckLog), None);
        // The third was still in the broker's memory: a duplicate, written at 104.
        assert_eq!(p.record(4, Outcome::Acked { base_offset: 104 }), None);
        p.outstanding = 0;
        // The log holds the first two (and batches of others, not looked at).
        let written = [(0, 100), (2, 102), (4, 104)].into_iter().collect();
        assert_eq!(p.found(&written), Some(3));
        assert_eq!(p.check, LogCheck::Idle);
        assert_eq!(
            settle(&mut p),
            vec![(2, Some(100)), (4, Some(102)), (6, Some(104))]
        );

        // Found up to the first batch the log lacks; the rest is resent.
        let mut p = partition();
        p.acked.target_next = 0;
        for n in 1..=3 {
            queue(&mut p, 2, 2 * n);
            send(&mut p);
        }
        let written = [(0, 0), (4, 9)].into_iter().collect();
        assert_eq!(p.found(&written), Some(1));
        assert_eq!(settle(&mut p), vec![(2, Some(0))]);
        assert_eq!(p.inflight.len(), 2);

        // None found: the oldest was refused for another reason (resent as usual), or out
        // of sequence (the target's state and strait's disagree).
        let mut p = partition();
        p.acked.target_next = 0;
        queue(&mut p, 2, 2);
        send(&mut p);
        p.record(
            0,
            Outcome::Resend(Resend::Later(ResponseError::NotEnoughReplicas)),
        );
        assert_eq!(p.found(&HashMap::new()), Some(0));
        p.record(0, Outcome::CheckLog);
        assert_eq!(p.found(&HashMap::new()), None);

        // A head sent once, or with no known target position to read from: reset.
        let mut p = partition();
        queue(&mut p, 1, 1);
        send(&mut p);
        assert_eq!(
            judged(&p, 0, out_of_order),
            Outcome::ResetProducer(Reset::OutOfOrderHead)
        );
        p.failed = true;
        p.outstanding = 0;
        p.recover(Instant::now());
        send(&mut p);
        assert_eq!(
            judged(&p, 0, out_of_order),
            Outcome::ResetProducer(Reset::OutOfOrderHead),
            "target position unknown"
        );
    }

    #[test]
    fn refusals_for_good_stop_the_partition() {
        for error in [
            ResponseError::MessageTooLarge,
            ResponseError::RecordListTooLarge,
            ResponseError::InvalidRecord,
            ResponseError::TopicAuthorizationFailed,
            ResponseError::InvalidTopicException,
        ] {
            assert_eq!(judge(error), Outcome::Stop(error), "{error}");
        }
        let p = partition();
        assert_eq!(
            judged(&p, 0, Some((1000, -1))),
            Outcome::Stop(ResponseError::Unknown(1000))
        );
    }

    #[test]
    fn a_missing_partition_resends_after_looking_the_leader_up() {
        let p = partition();
        let outcome = judged(&p, 0, None);
        assert_eq!(outcome, Outcome::Resend(Resend::Missing));
        assert!(matches!(outcome, Outcome::Resend(r) if r.looks_up_leader()));
    }

    #[test]
    fn refusals_worth_retrying_expire_after_the_delivery_timeout() {
        let mut p = partition();
        queue(&mut p, 1, 1);
        let sent = Instant::now();
        let mut entry = p.queue.pop_front().unwrap();
        p.sequence(&mut entry, sent);
        p.inflight.push_back(entry);
        let refused = |error: ResponseError, after: Duration| {
            p.judge(0, Some((error.code(), -1)), sent + after, DELIVERY)
        };
        for error in [
            ResponseError::NotEnoughReplicas,
            ResponseError::NotLeaderOrFollower,
            ResponseError::UnknownServerError,
        ] {
            assert!(matches!(refused(error, DELIVERY / 2), Outcome::Resend(_)));
            assert!(
                matches!(refused(error, DELIVERY), Outcome::Expired(r) if r.error() == Some(error)),
                "{error}"
            );
        }
        let lacking = |after: Duration| p.judge(0, None, sent + after, DELIVERY);
        assert_eq!(lacking(DELIVERY / 2), Outcome::Resend(Resend::Missing));
        assert_eq!(lacking(DELIVERY), Outcome::Expired(Resend::Missing));
        // A resend keeps the time of the first send.
        let mut again = p.inflight.pop_front().unwrap();
        p.sequence(&mut again, sent + DELIVERY);
        assert_eq!(again.first_sent, Some(sent));
    }

    #[test]
    fn corrupt_message_is_resent_a_bounded_number_of_times() {
        let corrupt = ResponseError::CorruptMessage;
        let mut p = partition();
        queue(&mut p, 1, 1);
        for _ in 0..CORRUPT_RESENDS {
            send(&mut p);
            assert_eq!(answer(&mut p, 0, corrupt.code(), -1), None);
            p.failed = true;
            p.recover(Instant::now());
        }
        send(&mut p);
        p.outstanding -= 1;
        assert_eq!(
            judged(&p, 0, Some((corrupt.code(), -1))),
            Outcome::Expired(Resend::Later(corrupt))
        );
    }

    #[test]
    fn a_stopped_partition_releases_on_any_refusal_but_still_takes_acks() {
        let mut p = partition();
        p.stopped = true;
        assert_eq!(judged(&p, 0, None), Outcome::Release);
        for error in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::UnknownProducerId,
            ResponseError::OutOfOrderSequenceNumber,
            ResponseError::MessageTooLarge,
        ] {
            assert_eq!(judged(&p, 0, Some((error.code(), -1))), Outcome::Release);
        }
        assert_eq!(
            judged(&p, 0, Some((0, 7))),
            Outcome::Acked { base_offset: 7 }
        );
    }

    #[test]
    fn sequences_follow_record_counts_and_stay_with_their_batch() {
        let mut p = partition();
        queue(&mut p, 3, 3);
        queue(&mut p, 0, 4);
        queue(&mut p, 2, 6);
        assert_eq!(send(&mut p), Some(0));
        assert_eq!(send(&mut p), None);
        assert_eq!(send(&mut p), Some(3));
        assert_eq!(p.next_seq, 5);
        // A resent batch keeps its sequence and takes no new one.
        let mut again = p.inflight.pop_front().unwrap();
        assert_eq!(
            p.sequence(&mut again, Instant::now()).map(|(s, _)| s),
            Some(0)
        );
        assert_eq!(p.next_seq, 5);
    }

    #[test]
    fn partition_sequences_wrap_like_kafka() {
        let mut p = partition();
        p.next_seq = i32::MAX - 1;
        queue(&mut p, 3, 3);
        queue(&mut p, 1, 4);
        assert_eq!(send(&mut p), Some(i32::MAX - 1));
        assert_eq!(send(&mut p), Some(1));
        assert_eq!(p.next_seq, 2);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX - 1, 1), i32::MAX);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 2, 5), 2);
    }

    #[test]
    fn hostile_record_counts_do_not_overflow_sequences() {
        assert_eq!(next_sequence(5, -3), 5);
        assert_eq!(next_sequence(5, i32::MIN), 5);
        assert_eq!(next_sequence(i32::MAX, i32::MAX), i32::MAX - 1);
    }

    #[test]
    fn answers_settle_in_order_each_with_its_own_target_offset() {
        let mut p = partition();
        for (records, next) in [(3, 3), (2, 5), (0, 6), (1, 7)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        p.backoff.next_delay();
        // The answer for sequence 3 comes first: it waits for the one before it.
        assert_eq!(answer(&mut p, 3, 0, 100), None);
        assert!(settle(&mut p).is_empty());
        assert!(!p.confirmed);
        assert_eq!(answer(&mut p, 0, 0, 97), None);
        // The position-only entry behind comes along.
        assert_eq!(
            settle(&mut p),
            vec![(3, Some(97)), (5, Some(100)), (6, None)]
        );
        assert_eq!(seqs(&p.inflight), vec![Some(5)]);
        assert!(p.confirmed);
        assert_eq!(p.backoff.attempts(), 0);
    }

    /// Item: a target that lost strait's producer state refuses E1 and writes E2 behind it.
    #[test]
    fn a_batch_written_behind_a_refused_one_settles_nothing_and_is_written_again() {
        let mut p = partition();
        p.confirmed = true;
        for (records, next) in [(2, 2), (3, 5), (1, 6)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        let refused = ResponseError::NotEnoughReplicas.code();
        assert_eq!(answer(&mut p, 0, refused, -1), None);
        p.failed = true;
        assert_eq!(
            answer(&mut p, 2, 0, 100),
            Some(Reordered {
                refused: (0, 2),
                written_at: 100
            })
        );
        // Reported once: the next batch written behind it adds nothing.
        assert_eq!(answer(&mut p, 5, 0, 103), None);
        assert!(
            settle(&mut p).is_empty(),
            "the position passed a refused batch"
        );
        // All three are written again, in order, with their answers forgotten.
        p.recover(Instant::now());
        assert_eq!(seqs(&p.queue), vec![Some(0), Some(2), Some(5)]);
        assert!(p.queue.iter().all(|e| e.answer == Answer::Pending));
    }

    #[test]
    fn the_answer_that_completes_a_reorder_reports_it_whichever_comes_first() {
        let mut p = partition();
        p.confirmed = true;
        for (records, next) in [(2, 2), (3, 5)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        assert_eq!(answer(&mut p, 2, 0, 40), None);
        let refused = ResponseError::MessageTooLarge.code();
        assert_eq!(
            answer(&mut p, 0, refused, -1),
            Some(Reordered {
                refused: (0, 2),
                written_at: 40
            })
        );
        assert!(settle(&mut p).is_empty());
    }

    #[test]
    fn a_partition_refused_for_long_is_reported_once_per_streak() {
        let mut p = partition();
        let t0 = Instant::now();
        assert_eq!(p.refused(t0), None);
        assert_eq!(p.refused(t0 + UNWRITABLE_WARN_AFTER / 2), None);
        let long = t0 + UNWRITABLE_WARN_AFTER;
        assert_eq!(p.refused(long), Some(UNWRITABLE_WARN_AFTER));
        assert_eq!(p.refused(long + UNWRITABLE_WARN_AFTER), None, "once");
        // A batch written ends the streak.
        queue(&mut p, 1, 1);
        send(&mut p);
        answer(&mut p, 0, 0, 0);
        assert_eq!(settle(&mut p).len(), 1);
        let later = long + UNWRITABLE_WARN_AFTER * 2;
        assert_eq!(p.refused(later), None);
        assert_eq!(
            p.refused(later + UNWRITABLE_WARN_AFTER),
            Some(UNWRITABLE_WARN_AFTER)
        );
    }

    #[test]
    fn a_duplicate_without_offset_right_after_a_known_one_follows_it() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        send(&mut p);
        answer(&mut p, 0, 0, 10);
        assert_eq!(settle(&mut p), vec![(2, Some(10))]);
        queue(&mut p, 3, 5);
        send(&mut p);
        let duplicate = ResponseError::DuplicateSequenceNumber.code();
        answer(&mut p, 2, duplicate, -1);
        assert_eq!(settle(&mut p), vec![(5, Some(12))]);
        // After a new producer identity nothing is known to follow.
        queue(&mut p, 1, 6);
        p.restart_sequences();
        send(&mut p);
        answer(&mut p, 0, duplicate, -1);
        assert_eq!(settle(&mut p), vec![(6, None)]);
    }

    /// A partition started over on a new log (its topic deleted and created again) keeps its
    /// sequences, which a broker without state for strait's producer takes, but takes one
    /// batch at a time again, and no batch of the new log follows the old log's last one.
    #[test]
    fn a_new_log_is_unconfirmed_and_follows_nothing_of_the_old_one() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        send(&mut p);
        answer(&mut p, 0, 0, 10);
        assert_eq!(settle(&mut p), vec![(2, Some(10))]);
        assert!(p.confirmed);
        p.new_log = true;
        p.start_over();
        assert!(!p.confirmed && !p.new_log);
        queue(&mut p, 3, 5);
        assert_eq!(send(&mut p), Some(2), "the sequences go on");
        let duplicate = ResponseError::DuplicateSequenceNumber.code();
        answer(&mut p, 2, duplicate, -1);
        assert_eq!(settle(&mut p), vec![(5, None)], "not at 12: another log");
    }

    #[test]
    fn hostile_base_offsets_are_unknown() {
        for base in [i64::MAX - 1, i64::MAX, -7, i64::MIN] {
            let mut p = partition();
            queue(&mut p, 3, 3);
            send(&mut p);
            answer(&mut p, 0, 0, base);
            assert_eq!(settle(&mut p), vec![(3, None)], "{base}");
        }
    }

    #[test]
    fn a_refused_or_unanswered_batch_is_not_settled() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        send(&mut p);
        assert!(settle(&mut p).is_empty());
        let written = Outcome::Acked { base_offset: 100 };
        assert_eq!(p.record(9, written), None, "no entry has sequence 9");
        answer(&mut p, 0, ResponseError::NotLeaderOrFollower.code(), -1);
        assert!(settle(&mut p).is_empty());
        assert_eq!(seqs(&p.inflight), vec![Some(0)]);
        assert!(!p.confirmed);
    }

    #[test]
    fn positions_are_taken_only_while_nothing_is_in_flight() {
        let mut p = partition();
        queue(&mut p, 1, 1);
        send(&mut p);
        queue(&mut p, 0, 2);
        assert!(p.take_positions().is_empty());
        p.inflight.clear();
        queue(&mut p, 0, 3);
        queue(&mut p, 1, 4);
        let taken: Vec<i64> = p
            .take_positions()
            .iter()
            .map(|(e, _)| e.source_next)
            .collect();
        assert_eq!(taken, vec![2, 3]);
        assert_eq!(p.queue.len(), 1);
    }

    #[test]
    fn a_failed_partition_requeues_with_its_sequences_once_its_requests_are_back() {
        let mut p = partition();
        for (records, next) in [(2, 2), (1, 3)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        queue(&mut p, 4, 7);
        p.failed = true;
        let now = Instant::now();
        p.recover(now);
        assert_eq!(seqs(&p.inflight), vec![Some(0), Some(2)]);
        assert!(p.failed && p.retry_at.is_none());
        p.outstanding = 0;
        p.recover(now);
        assert!(p.inflight.is_empty());
        assert_eq!(seqs(&p.queue), vec![Some(0), Some(2), None]);
        assert!(!p.failed);
        assert!(p.retry_at.is_some_and(|t| t > now));
        assert_eq!(p.next_seq, 3);
        // A healthy partition is left alone.
        let before = p.retry_at;
        p.recover(now);
        assert_eq!(p.retry_at, before);
    }

    #[test]
    fn a_new_producer_renumbers_every_unacknowledged_batch_from_zero() {
        let mut p = partition();
        p.next_seq = 40;
        for (records, next) in [(2, 2), (1, 3)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        p.confirmed = true;
        p.failed = true;
        p.outstanding = 0;
        p.restart_sequences();
        assert!(p.inflight.is_empty());
        assert_eq!(seqs(&p.queue), vec![None, None]);
        assert_eq!((p.next_seq, p.confirmed, p.failed), (0, false, false));
        assert_eq!(send(&mut p), Some(0));
        assert_eq!(send(&mut p), Some(2));
    }

    #[test]
    fn release_keeps_in_flight_entries_until_their_answers_are_in() {
        let mut p = partition();
        queue(&mut p, 1, 1);
        send(&mut p);
        queue(&mut p, 1, 2);
        p.release();
        assert!(p.queue.is_empty());
        assert_eq!(p.inflight.len(), 1);
        assert!(!p.idle());
        p.outstanding = 0;
        p.release();
        assert!(p.idle());
    }

    #[test]
    fn a_chunk_fetched_before_a_pause_is_dropped_after_the_resume() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        queue(&mut p, 3, 5);
        assert_eq!(send(&mut p), Some(0));
        // Fetched before the pause, not sent yet: the target keeps refusing the one in flight.
        queue(&mut p, 1, 6);
        queue(&mut p, 0, 9);
        let refused_at = Instant::now();
        assert!(answer(&mut p, 0, ResponseError::NotEnoughReplicas.code(), -1).is_none());
        p.failed = true;
        assert_eq!(p.refused(refused_at), None);
        assert_eq!(p.pause(refused_at), None, "not refused long enough yet");
        let later = refused_at + PAUSE_AFTER;
        assert_eq!(
            p.pause(later),
            Some(2),
            "fetching goes on after the batch kept"
        );
        assert_eq!(p.queue.len(), 0, "the batches never sent are let go");
        assert_eq!(seqs(&p.inflight), vec![Some(0)], "the one in flight stays");
        assert_eq!(p.pause(later), None, "paused once");
        assert!(!p.takes(0), "a chunk still on its way is dropped");
        assert_eq!(p.resume(), None, "not written yet");
        // Resent and written.
        p.recover(later);
        assert_eq!(send(&mut p), Some(0));
        assert!(answer(&mut p, 0, 0, 7).is_none());
        assert_eq!(settle(&mut p), vec![(2, Some(7))]);
        p.acked.source_next = 2;
        assert_eq!(p.resume(), Some(2));
        assert!(
            !p.takes(0),
            "a chunk fetched before the pause is dropped after the resume"
        );
        assert!(p.takes(1), "chunks of the resumed assignment are taken");
        assert_eq!(p.resume(), None, "resumed once");
    }

    #[test]
    fn an_unrouted_partition_writes_what_it_sent_and_resumes_after_it_once_routed_again() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        assert_eq!(send(&mut p), Some(0));
        queue(&mut p, 3, 5);
        assert!(p.unroute());
        assert!(!p.unroute(), "unrouted once");
        assert_eq!(p.queue.len(), 0, "the batch never sent is let go");
        assert_eq!(seqs(&p.inflight), vec![Some(0)], "the one in flight stays");
        assert!(!p.takes(0), "a chunk still on its way is dropped");
        assert_eq!(p.lag(), None, "not replicated: no lag");
        assert!(answer(&mut p, 0, 0, 7).is_none());
        assert_eq!(settle(&mut p), vec![(2, Some(7))]);
        p.acked.source_next = 2;
        assert_eq!(p.resume(), None, "not while unrouted");
        p.dropped = false;
        assert_eq!(p.resume(), Some(2), "routed again: after the batch written");
        assert!(p.takes(1));
    }

    #[test]
    fn an_unrouted_partition_that_wrote_nothing_starts_over_where_it_is_assigned() {
        let mut p = partition();
        assert!(p.unroute());
        assert!(
            p.takes(0),
            "no pause: the assignment it is routed with again is taken"
        );
        p.dropped = false;
        assert_eq!(p.resume(), None);
    }
}
