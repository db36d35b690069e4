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
use crate::offset_map::Position;

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
    /// A newer epoch of strait's producer id wrote here (INVALID_PRODUCER_EPOCH,
    /// PRODUCER_FENCED): another process registered the flow's transactional id. Without a
    /// transactional id (no fencing) the producer is re-initialised instead.
    Fenced(ResponseError),
    /// Resend the batch and every later one, once the partition's outstanding requests are
    /// back.
    Resend(Resend),
    /// The target refuses the batch for good: stop the partition.
    Stop(ResponseError),
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
            ResponseError::UnknownProducerId => Outcome::ResetProducer(Reset::LostState(error)),
            ResponseError::InvalidProducerEpoch | ResponseError::ProducerFenced => {
                Outcome::Fenced(error)
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

    /// Sends the front of the queue the way the engine does; its sequence, if any.
    fn send(p: &mut Partition) -> Option<i32> {
        let mut entry = p.queue.pop_front().unwrap();
        let seq = p.sequence(&mut entry).map(|(seq, _)| seq);
        if seq.is_some() {
            p.outstanding += 1;
        }
        p.inflight.push_back(entry);
        seq
    }

    fn seqs(entries: &VecDeque<Entry>) -> Vec<Option<i32>> {
        entries.iter().map(|e| e.seq).collect()
    }

    /// A partition with one batch in flight at sequence 0, answered with `code`.
    fn judge(code: ResponseError) -> Outcome {
        let mut p = partition();
        queue(&mut p, 1, 1);
        assert_eq!(send(&mut p), Some(0));
        p.judge(0, Some((code.code(), 42)))
    }

    #[test]
    fn none_and_duplicate_sequence_are_acknowledgements() {
        let p = partition();
        assert_eq!(
            p.judge(0, Some((0, 42))),
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
            p.judge(2, Some((out_of_order.code(), -1))),
            Outcome::Resend(Resend::Later(out_of_order))
        );
        // At the head of a partition that already failed: a consequence, not a cause.
        p.failed = true;
        assert_eq!(
            p.judge(0, Some((out_of_order.code(), -1))),
            Outcome::Resend(Resend::Later(out_of_order))
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
            p.judge(0, Some((1000, -1))),
            Outcome::Stop(ResponseError::Unknown(1000))
        );
    }

    #[test]
    fn a_missing_partition_resends_after_looking_the_leader_up() {
        let p = partition();
        let outcome = p.judge(0, None);
        assert_eq!(outcome, Outcome::Resend(Resend::Missing));
        assert!(matches!(outcome, Outcome::Resend(r) if r.looks_up_leader()));
        // UNKNOWN_SERVER_ERROR (-1) reads the same.
        assert_eq!(
            judge(ResponseError::UnknownServerError),
            Outcome::Resend(Resend::Missing)
        );
    }

    #[test]
    fn a_stopped_partition_releases_on_any_refusal_but_still_takes_acks() {
        let mut p = partition();
        p.stopped = true;
        assert_eq!(p.judge(0, None), Outcome::Release);
        for error in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::UnknownProducerId,
            ResponseError::OutOfOrderSequenceNumber,
            ResponseError::MessageTooLarge,
        ] {
            assert_eq!(p.judge(0, Some((error.code(), -1))), Outcome::Release);
        }
        assert_eq!(p.judge(0, Some((0, 7))), Outcome::Acked { base_offset: 7 });
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
        assert_eq!(p.sequence(&mut again).map(|(s, _)| s), Some(0));
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
    fn an_ack_takes_every_earlier_entry_with_its_target_offset() {
        let mut p = partition();
        for (records, next) in [(3, 3), (2, 5), (0, 6), (1, 7)] {
            queue(&mut p, records, next);
            send(&mut p);
        }
        p.backoff.next_delay();
        let done = p.take_acked(3, 100).unwrap();
        let got: Vec<(Option<i32>, i64, Option<i64>)> = done
            .iter()
            .map(|(e, base)| (e.seq, e.source_next, *base))
            .collect();
        // The batch at sequence 0 was acknowledged implicitly: its records end right
        // before 100. The position-only entry behind comes along.
        assert_eq!(
            got,
            vec![
                (Some(0), 3, Some(97)),
                (Some(3), 5, Some(100)),
                (None, 6, None)
            ]
        );
        assert_eq!(seqs(&p.inflight), vec![Some(5)]);
        assert!(p.confirmed);
        assert_eq!(p.backoff.attempts(), 0);
    }

    #[test]
    fn an_ack_without_offset_or_for_no_entry() {
        let mut p = partition();
        queue(&mut p, 2, 2);
        send(&mut p);
        assert!(p.take_acked(9, 100).is_none());
        assert_eq!(seqs(&p.inflight), vec![Some(0)]);
        assert!(!p.confirmed);
        let done = p.take_acked(0, -1).unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].1, None);
        assert!(p.inflight.is_empty());
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
}
