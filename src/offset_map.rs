//! Exact source→target offset translation for one replicated partition.
//!
//! strait forwards every source batch unchanged and the target broker assigns the offsets:
//! the Produce response gives the target base offset of each batch, and its `recordCount`
//! records land at `tbase..tbase + recordCount` in order. So `target - source` is constant
//! along a run of records that are contiguous on both sides, and the [`OffsetMap`] of a
//! partition is a short sorted list of breakpoints, one where a run starts and one where it
//! ends at a gap (compaction, aborted transactions and control markers dropped on the source,
//! transaction markers on the target, a retention reset). Those breakpoints are exactly the
//! MM2 `OffsetSync` records strait writes (upstream, downstream): a sync at every gap instead
//! of MM2's lossy one per `offset.lag.max` records, so a failed-over consumer group resumes at
//! the very record it would have read next on the source.
//!
//! Batches with holes (compaction removed records but kept `lastOffsetDelta`) are renumbered
//! by [`crate::batch::renumber`] before they are forwarded; the original offset deltas it
//! returns come here as [`Forwarded::holes`].
//!
//! # Breakpoints
//!
//! The map keeps points `(source, target)`, source strictly increasing, target never
//! decreasing, and the end of the partition: `target_next`, the target offset after the last
//! forwarded record. Each point is a replicated record (or, where the target did not report
//! where a batch landed, a lower bound for it). Between two consecutive points `p`, `q`:
//! - if `q.source - p.source == q.target - p.target` the records between them are contiguous
//!   and a source offset translates linearly;
//! - otherwise `p` is the last record of its run and nothing replicated lies between them:
//!   every source offset in `(p.source, q.source]` translates to `q.target`.
//!
//! After the last point the records are contiguous up to `target_next - 1` and every later
//! source offset translates to `target_next`. Reading MM2's way ("the sync's downstream, + 1
//! past it") gives the exact answer at every gap, too, because the run's last record has a sync.
//!
//! When a source gap and a target gap have the same size (a source control marker opposite one
//! of strait's own transaction markers on the target) the two points look contiguous and an
//! offset in the gap translates to a target offset that holds no record: a consumer that seeks
//! there reads the same next record, so the translation is still exact in effect.
//!
//! # Bounded memory
//!
//! A transactional source adds two points per transaction (its commit marker is a gap), so a
//! map keeps at most about [`MAX_POINTS`] points exactly. Older points are thinned into a
//! sparse tail of at most `MAX_SPARSE` (MM2's `OffsetSyncStore` keeps 64 syncs per partition
//! for the same reason). Offsets at or after the first exact point translate exactly, as
//! above. An offset below it (a consumer group lagging by more than about `MAX_POINTS / 2`
//! gaps) translates to the target of the last sparse point at or before it: at or before
//! the exact answer, so a failed-over group re-reads records but never skips one. Before the
//! first sparse point nothing translates.
//!
//! # Restart
//!
//! [`OffsetMap::from_syncs`] rebuilds the map from the `OffsetSync`s read back in the order
//! they were written, and the partition's persisted position ([`Position`], the record strait
//! already keeps in its progress topic): `source_next` and `target_next`. The syncs alone are
//! not enough: after the last sync the run's length is unknown (a consumer committed past it
//! could be sent beyond records it has not read), and syncs written after the last committed
//! position describe batches that will be forwarded again. With the position:
//! - replaying the syncs through the same rule as [`OffsetMap::record`] (a point at or before
//!   an earlier one replaces everything after it) gives back the points the map had;
//! - points at or past the position (`source >= source_next` or `target >= target_next`) are
//!   dropped: they come from batches forwarded after the last committed position, which the
//!   restarted process forwards again and syncs anew;
//! - `target_next` bounds the last run again, so translation is as exact as before the restart.
//!
//! This needs one ordering rule from the caller: the syncs that [`OffsetMap::record`] returns
//! for the batches before a position must be durable before that position is committed (the
//! produce engine commits only what `mm2::offset_sync` reports durable). The
//! run end that a gap adds is only returned with the batch after the gap; it is not needed
//! before then, because the position's `target_next` bounds the run. Without a position (or with
//! an unknown `target_next`) the map falls back to MM2's rule after the last sync, its target
//! plus one, which can re-deliver records but never skips one. Extra syncs at replicated records
//! (say every `offset.lag.max` records, for MM2's own readers) change no translation when
//! replayed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::kafka::TopicPartition;

/// Points a map keeps for exact translation: about 2048 transactions back (32 KiB).
/// It trims when it holds a quarter more, so trimming costs nothing per batch on average.
pub const MAX_POINTS: usize = 4096;

/// Older points kept (thinned by half when full) for conservative translation.
const MAX_SPARSE: usize = 64;

/// Where a source partition stands, as `progress` commits it: everything before
/// `source_next` is on the target. It bounds the partition's map (see above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub source_next: i64,
    /// Target offset of the record after the last acknowledged one; -1 when unknown.
    pub target_next: i64,
}

/// Which source log a position belongs to, so that a restart can tell whether the log it
/// resumes in is still the one it left: the topic's id (another id under the same name is a
/// re-created topic) and the partition leader epoch of the last batch before the position
/// (the leader checks its log against it, KIP-320, and answers with the divergence point if
/// it was truncated meanwhile); and who replicated the records before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    /// Nil when unknown (brokers before Kafka 2.8 give no ids).
    pub topic_id: uuid::Uuid,
    /// -1 when unknown (nothing fetched yet).
    pub leader_epoch: i32,
    /// The source offset at which strait took the partition over from MirrorMaker 2: MM2
    /// replicated the records before it, and their translation follows MM2's offset syncs
    /// with MM2's own rule ([`OffsetMap::taken_over_at`]). -1: strait replicated it all.
    pub taken_over_at: i64,
}

impl Lineage {
    pub const UNKNOWN: Lineage = Lineage {
        topic_id: uuid::Uuid::nil(),
        leader_epoch: -1,
        taken_over_at: -1,
    };
}

/// One forwarded batch as the target acknowledged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// The source batch's `baseOffset`.
    pub source_base: i64,
    /// `baseOffset + lastOffsetDelta` of the source batch.
    pub source_last: i64,
    pub record_count: i32,
    /// The target's base offset from the Produce response; negative when the target did not
    /// report it (the map then only knows that the records lie past its end).
    pub target_base: i64,
    /// The original offset deltas of the records when the batch has holes
    /// ([`crate::batch::RawBatch::has_holes`]), as [`crate::batch::renumber`] returns them
    /// in [`crate::batch::Renumbered::offset_deltas`]; else `None`. Missing or inconsistent
    /// deltas are read as "the records are the last ones of the batch", which can re-deliver
    /// records on translation but never skips one.
    pub holes: Option<Vec<i32>>,
}

/// The source→target offset map of one partition; see the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetMap {
    /// `(source, target)`: source strictly increasing, target non-decreasing.
    points: Vec<(i64, i64)>,
    /// Points trimmed off the front of `points`, thinned: below `points` they give
    /// conservative translations (see "Bounded memory").
    sparse: Vec<(i64, i64)>,
    /// The source offset after the last batch recorded or skipped; -1 before any.
    source_next: i64,
    /// The target offset after the last replicated record; the run that starts at the last
    /// point is contiguous up to `target_next - 1`. Meaningless while `points` is empty.
    target_next: i64,
    /// Whether `target_next` is the true end: false once a batch was appended at a target
    /// offset the map was not told, then `target_next` is only a lower bound.
    target_known: bool,
    /// Source offsets below it were replicated by MirrorMaker 2 (see
    /// [`OffsetMap::taken_over_at`]); -1: none.
    taken_over_at: i64,
}

impl OffsetMap {
    pub fn new() -> Self {
        OffsetMap {
            points: Vec::new(),
            sparse: Vec::new(),
            source_next: -1,
            target_next: -1,
            target_known: false,
            taken_over_at: -1,
        }
    }

    /// The map of a partition strait took over from MirrorMaker 2 at source offset `at`:
    /// its points below `at` are MM2's offset syncs, one per `offset.lag.max` records and
    /// not at every gap, so between two of them nothing says the records are contiguous.
    /// An offset there translates as MM2 translates it: the sync's target if it is the
    /// sync's source, else one past it (a failed-over group re-reads what MM2 would have
    /// made it re-read, never skips a record).
    pub fn taken_over_at(mut self, at: i64) -> Self {
        self.taken_over_at = at;
        self
    }

    /// Records a forwarded batch; batches come in the order the target appended them.
    /// Returns the breakpoints it added, as `(source, target)` pairs, in order: these are the
    /// `OffsetSync` records to write. Contiguous batches add none; a gap adds the end of the
    /// run before it (unless that is a single record) and the start of the next; a batch with
    /// holes adds the ends and starts of its runs.
    ///
    /// A batch that starts at or before a source offset already recorded (forwarded again)
    /// replaces the map from there on; the returned syncs, replayed by
    /// [`OffsetMap::from_syncs`], do the same.
    pub fn record(&mut self, b: &Forwarded) -> Vec<(i64, i64)> {
        let mut syncs = Vec::new();
        if b.record_count <= 0 {
            // An empty batch (compaction keeps one for the producer state): offsets only.
            self.skip_to(b.source_last.saturating_add(1));
            return syncs;
        }
        if b.target_base < 0 {
            // Appended somewhere past `target_next`: from here on `target_next` is a floor.
            self.target_known = false;
            self.source_next = b.source_last.saturating_add(1);
            return syncs;
        }
        let mut target = b.target_base;
        for (source, len) in runs(b) {
            self.add_run(source, target, len, &mut syncs);
            target = target.saturating_add(len);
        }
        self.source_next = b.source_last.saturating_add(1);
        syncs
    }

    /// Source offsets skipped without forwarding anything (aborted or control batches at
    /// the end of a fetch): moves the next source offset on, never back.
    pub fn skip_to(&mut self, source_next: i64) {
        self.source_next = self.source_next.max(source_next);
    }

    /// Translates a consumer's committed source offset (the next record it would read) to
    /// the target offset of that same record: the target offset of the first replicated
    /// record at or after `committed`, or the target's next offset if there is none yet.
    /// `None` if `committed` is before the first point (not replicated by this map). Below the
    /// points kept exactly, the target of the sparse point before it (see "Bounded memory").
    pub fn translate(&self, committed: i64) -> Option<i64> {
        let i = self.points.partition_point(|&(s, _)| s <= committed);
        let Some(&(ps, pt)) = i.checked_sub(1).and_then(|i| self.points.get(i)) else {
            let j = self.sparse.partition_point(|&(s, _)| s <= committed);
            return self.sparse.get(j.checked_sub(1)?).map(|&(_, t)| t);
        };
        if committed == ps {
            return Some(pt);
        }
        if committed < self.taken_over_at {
            let next = self.points.get(i).map_or(self.target_next, |&(_, qt)| qt);
            return Some(pt.saturating_add(1).min(next));
        }
        let linear = pt.saturating_add(committed.saturating_sub(ps));
        Some(match self.points.get(i) {
            Some(&(qs, qt)) if contiguous((ps, pt), (qs, qt)) => linear,
            Some(&(_, qt)) => qt,
            None => linear.min(self.target_next),
        })
    }

    /// Rebuilds a map after a restart from the `OffsetSync`s `(upstream, downstream)` of the
    /// partition, in the order they were written, and the persisted position of the
    /// partition (see the module documentation). Syncs at or past the position are dropped;
    /// without a position, or with an unknown `target_next` (-1), offsets past the last
    /// sync translate to its target + 1, as MM2 does.
    pub fn from_syncs(syncs: impl IntoIterator<Item = (i64, i64)>, end: Option<Position>) -> Self {
        let mut map = OffsetMap::new();
        let mut ignored = Vec::new();
        for (source, target) in syncs {
            map.push(source, target, &mut ignored);
        }
        if let Some(end) = end.filter(|e| e.source_next >= 0) {
            let target_end = Some(end.target_next).filter(|&t| t >= 0);
            map.pop_while(|(s, t)| s >= end.source_next || target_end.is_some_and(|e| t >= e));
            map.source_next = end.source_next;
            if let (Some(target_next), Some(_)) = (target_end, map.points.last()) {
                map.target_next = target_next;
                map.target_known = true;
                return map;
            }
        }
        if let Some(&(s, t)) = map.points.last() {
            map.source_next = map.source_next.max(s.saturating_add(1));
            map.target_next = t.saturating_add(1);
            map.target_known = false;
        }
        map
    }

    /// The position to persist with the partition's progress: the next source offset and
    /// the target offset after the last replicated record (-1 when unknown).
    pub fn position(&self) -> Position {
        Position {
            source_next: self.source_next,
            target_next: if self.target_known && !self.points.is_empty() {
                self.target_next
            } else {
                -1
            },
        }
    }

    /// The breakpoints, `(source, target)`, in source order.
    pub fn points(&self) -> &[(i64, i64)] {
        &self.points
    }

    /// Number of breakpoints.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Adds `len` contiguous records at `source..`, appended at `target..`.
    fn add_run(&mut self, source: i64, target: i64, len: i64, syncs: &mut Vec<(i64, i64)>) {
        if let Some(&(ps, pt)) = self.points.last() {
            // The open run: `ps..=last` at `pt..target_next`.
            let last = ps.saturating_add(self.target_next.saturating_sub(1).saturating_sub(pt));
            if source == last.saturating_add(1) && target == self.target_next {
                self.target_next = target.saturating_add(len);
                self.target_known = true;
                return;
            }
            if source > last {
                if last > ps {
                    self.push(last, self.target_next.saturating_sub(1), syncs);
                }
                let before = source.saturating_sub(1);
                if !self.target_known && target > self.target_next && before > last {
                    // Records appended at unreported offsets lie between: offsets before
                    // `source` translate to the floor, not to `target`.
                    self.push(before, self.target_next, syncs);
                }
            } else {
                self.cut(source, syncs);
            }
        }
        self.push(source, target, syncs);
        self.target_next = target.saturating_add(len);
        self.target_known = true;
    }

    /// Before `source` is forwarded again: keeps the translation of the offsets before it
    /// by adding a point at `source - 1` when that is a record inside a run (the caller's
    /// next point then drops everything from `source` on).
    fn cut(&mut self, source: i64, syncs: &mut Vec<(i64, i64)>) {
        let i = self.points.partition_point(|&(s, _)| s < source);
        let Some(&(ps, pt)) = i.checked_sub(1).and_then(|i| self.points.get(i)) else {
            return;
        };
        let before = source.saturating_sub(1);
        let in_run = match self.points.get(i) {
            Some(&q) => contiguous((ps, pt), q),
            // The open run covers the last point to `target_next - 1`, past `before`.
            None => true,
        };
        if before > ps && in_run {
            self.push(before, pt.saturating_add(before.saturating_sub(ps)), syncs);
        }
    }

    /// Appends a point, first dropping the points it supersedes (at or after its source, or
    /// past its target), and returns it as a sync.
    fn push(&mut self, source: i64, target: i64, syncs: &mut Vec<(i64, i64)>) {
        self.pop_while(|(s, t)| s >= source || t > target);
        self.points.push((source, target));
        syncs.push((source, target));
        if self.points.len() > MAX_POINTS + MAX_POINTS / 4 {
            self.trim();
        }
    }

    /// Drops the last points (exact, then sparse) while `drop` says so.
    fn pop_while(&mut self, drop: impl Fn((i64, i64)) -> bool) {
        for points in [&mut self.points, &mut self.sparse] {
            while points.last().is_some_and(|&p| drop(p)) {
                points.pop();
            }
            if !points.is_empty() {
                return;
            }
        }
    }

    /// Moves the oldest points past `MAX_POINTS` to the sparse tail, thinning it by half
    /// whenever it is full; its first point stays, so every offset ever replicated still
    /// translates.
    fn trim(&mut self) {
        let excess = self.points.len() - MAX_POINTS;
        self.sparse.extend(self.points.drain(..excess));
        while self.sparse.len() > MAX_SPARSE {
            let newest = self.sparse.len() - 1;
            let mut i = 0;
            self.sparse.retain(|_| {
                let keep = i == 0 || (newest - i).is_multiple_of(2);
                i += 1;
                keep
            });
        }
    }
}

/// Whether the records from `p` to `q` are contiguous on both sides.
fn contiguous(p: (i64, i64), q: (i64, i64)) -> bool {
    i128::from(q.0) - i128::from(p.0) == i128::from(q.1) - i128::from(p.1)
}

/// The runs of contiguous source offsets of a batch with records: `(first offset, length)`.
fn runs(b: &Forwarded) -> Vec<(i64, i64)> {
    let count = i64::from(b.record_count);
    let span = b
        .source_last
        .saturating_sub(b.source_base)
        .saturating_add(1);
    if span <= count {
        // No holes (or a garbage header that claims more records than offsets).
        return vec![(b.source_base, count)];
    }
    let deltas = b.holes.as_deref().filter(|d| deltas_fit(d, count, span));
    let Some(deltas) = deltas else {
        // Unknown holes: place the records last, the latest they can be. A committed offset
        // then translates at or before its exact target: re-delivery, never a skip.
        return vec![(b.source_last.saturating_sub(count - 1), count)];
    };
    let mut runs: Vec<(i64, i64)> = Vec::new();
    let mut prev: Option<i32> = None;
    for &d in deltas {
        let source = b.source_base.saturating_add(i64::from(d));
        match runs.last_mut() {
            Some(run) if prev.is_some_and(|p| i64::from(p) + 1 == i64::from(d)) => run.1 += 1,
            _ => runs.push((source, 1)),
        }
        prev = Some(d);
    }
    runs
}

/// `count` deltas, strictly increasing, inside `0..span`.
fn deltas_fit(deltas: &[i32], count: i64, span: i64) -> bool {
    i64::try_from(deltas.len()) == Ok(count)
        && deltas.first().is_some_and(|&d| d >= 0)
        && deltas.last().is_some_and(|&d| i64::from(d) < span)
        && deltas.windows(2).all(|w| w[0] < w[1])
}

/// The offset maps of a flow, by source partition: written by the produce engine as the
/// target acknowledges batches, read by the checkpoint task to translate group offsets.
pub type Translations = Arc<Mutex<HashMap<TopicPartition, OffsetMap>>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{renumber, split_batches, Compression, RawBatch};
    use bytes::Bytes;
    use proptest::prelude::*;

    fn fwd(source_base: i64, source_last: i64, count: i32, target_base: i64) -> Forwarded {
        Forwarded {
            source_base,
            source_last,
            record_count: count,
            target_base,
            holes: None,
        }
    }

    fn holed(source_base: i64, deltas: &[i32], lod: i32, target_base: i64) -> Forwarded {
        Forwarded {
            source_base,
            source_last: source_base + i64::from(lod),
            record_count: deltas.len() as i32,
            target_base,
            holes: Some(deltas.to_vec()),
        }
    }

    fn translations(m: &OffsetMap, range: std::ops::Range<i64>) -> Vec<Option<i64>> {
        range.map(|c| m.translate(c)).collect()
    }

    // --- the map ----------------------------------------------------------------------

    #[test]
    fn contiguous_batches_need_one_point() {
        let mut m = OffsetMap::new();
        assert_eq!(m.record(&fwd(100, 109, 10, 0)), vec![(100, 0)]);
        assert!(m.record(&fwd(110, 114, 5, 10)).is_empty());
        assert!(m.record(&fwd(115, 115, 1, 15)).is_empty());
        assert_eq!(m.len(), 1);
        assert_eq!(m.translate(99), None);
        assert_eq!(m.translate(100), Some(0));
        assert_eq!(m.translate(112), Some(12));
        assert_eq!(m.translate(115), Some(15));
        assert_eq!(m.translate(116), Some(16)); // everything read: the target's next offset
        assert_eq!(m.translate(1_000), Some(16));
        assert_eq!(
            m.position(),
            Position {
                source_next: 116,
                target_next: 16
            }
        );
    }

    #[test]
    fn jump_between_batches() {
        // Offsets 10..=19 were compacted away (or an aborted transaction and its marker).
        let mut m = OffsetMap::new();
        m.record(&fwd(0, 9, 10, 500));
        assert_eq!(m.record(&fwd(20, 24, 5, 510)), vec![(9, 509), (20, 510)]);
        assert_eq!(
            translations(&m, 8..12),
            [Some(508), Some(509), Some(510), Some(510)]
        );
        assert_eq!(m.translate(19), Some(510));
        assert_eq!(m.translate(20), Some(510));
        assert_eq!(m.translate(24), Some(514));
        assert_eq!(m.translate(25), Some(515));
        // A single-record run needs no separate end point.
        assert_eq!(m.record(&fwd(30, 30, 1, 515)), vec![(24, 514), (30, 515)]);
        assert_eq!(m.record(&fwd(40, 40, 1, 516)), vec![(40, 516)]);
        assert_eq!(m.translate(31), Some(516));
        assert_eq!(m.translate(41), Some(517));
    }

    #[test]
    fn target_gap_from_own_transaction_markers() {
        // Source contiguous, target jumps over a commit marker at 110.
        let mut m = OffsetMap::new();
        m.record(&fwd(0, 9, 10, 100));
        assert_eq!(m.record(&fwd(10, 19, 10, 111)), vec![(9, 109), (10, 111)]);
        assert_eq!(m.translate(9), Some(109));
        assert_eq!(m.translate(10), Some(111));
        assert_eq!(m.translate(15), Some(116));
    }

    #[test]
    fn batch_with_holes() {
        // Records at 50, 51, 52, 55, 58, 59; lastOffsetDelta 9 (59), so 60 is next.
        let mut m = OffsetMap::new();
        let syncs = m.record(&holed(50, &[0, 1, 2, 5, 8, 9], 9, 1000));
        assert_eq!(syncs, vec![(50, 1000), (52, 1002), (55, 1003), (58, 1004)]);
        let want = [
            (49, None),
            (50, Some(1000)),
            (52, Some(1002)),
            (53, Some(1003)),
            (54, Some(1003)),
            (55, Some(1003)),
            (56, Some(1004)),
            (58, Some(1004)),
            (59, Some(1005)),
            (60, Some(1006)),
        ];
        for (c, t) in want {
            assert_eq!(m.translate(c), t, "translate({c})");
        }
        // The next batch continues at 60 -> 1006: the run 58..=59 goes on.
        assert!(m.record(&fwd(60, 61, 2, 1006)).is_empty());
        assert_eq!(m.translate(61), Some(1007));
        // Holes at both ends of a batch (a compacted batch keeps base and last offset).
        let syncs = m.record(&holed(70, &[2, 3, 5], 6, 1008));
        assert_eq!(syncs, vec![(61, 1007), (72, 1008), (73, 1009), (75, 1010)]);
        assert_eq!(
            translations(&m, 70..79),
            [1008, 1008, 1008, 1009, 1010, 1010, 1011, 1011, 1011].map(Some)
        );
    }

    #[test]
    fn holes_unknown_translate_no_later_than_exact() {
        let mut m = OffsetMap::new();
        // 3 records somewhere in 10..=19: assumed at 17, 18, 19.
        assert_eq!(m.record(&fwd(10, 19, 3, 0)), vec![(17, 0)]);
        assert_eq!(m.translate(16), None); // before the first point
        assert_eq!(m.translate(17), Some(0));
        assert_eq!(m.translate(19), Some(2));
        assert_eq!(m.translate(20), Some(3));
        // Deltas that do not fit the header are not trusted either.
        let mut bad = holed(20, &[0, 5, 3], 9, 3);
        assert_eq!(m.record(&bad), vec![(19, 2), (27, 3)]);
        bad.holes = Some(vec![0, 10]);
        bad.source_base = 40;
        bad.record_count = 2;
        bad.source_last = 49;
        bad.target_base = 6;
        assert_eq!(m.record(&bad), vec![(29, 5), (48, 6)]);
    }

    #[test]
    fn skip_then_translate_inside_the_skipped_range() {
        let mut m = OffsetMap::new();
        m.record(&fwd(0, 4, 5, 10));
        // Offsets 5..=8: an aborted transaction and its marker, dropped.
        m.skip_to(9);
        m.skip_to(7); // never moves back
        assert_eq!(
            m.position(),
            Position {
                source_next: 9,
                target_next: 15
            }
        );
        assert_eq!(m.translate(4), Some(14));
        for c in 5..=9 {
            assert_eq!(m.translate(c), Some(15), "translate({c})");
        }
        // The next batch comes after the skipped offsets: a gap.
        assert_eq!(m.record(&fwd(9, 9, 1, 15)), vec![(4, 14), (9, 15)]);
        assert_eq!(m.translate(6), Some(15));
        assert_eq!(m.translate(10), Some(16));
        // Empty batches (compaction keeps them for the producer state) only move offsets on.
        assert!(m.record(&fwd(10, 12, 0, -1)).is_empty());
        assert_eq!(m.position().source_next, 13);
    }

    #[test]
    fn translate_before_start_and_empty_map() {
        let m = OffsetMap::new();
        assert!(m.is_empty());
        assert_eq!(m.translate(0), None);
        assert_eq!(m.position().target_next, -1);
        let mut m = OffsetMap::new();
        m.record(&fwd(1_000, 1_009, 10, 0));
        assert_eq!(m.translate(0), None);
        assert_eq!(m.translate(999), None);
        assert_eq!(m.translate(i64::MIN), None);
        assert_eq!(m.translate(i64::MAX), Some(10));
    }

    /// Exact translation of a source offset in a stream of transactions of 5 records, each
    /// followed by its commit marker on the source (strait writes no markers on the target).
    fn txn_exact(c: i64) -> i64 {
        let (k, r) = (c / 6, c % 6);
        if r < 5 {
            5 * k + r
        } else {
            5 * (k + 1)
        }
    }

    #[test]
    fn long_transactional_stream_stays_bounded() {
        let mut m = OffsetMap::new();
        let mut syncs = Vec::new();
        let transactions = 50_000i64;
        for k in 0..transactions {
            syncs.extend(m.record(&fwd(6 * k, 6 * k + 4, 5, 5 * k)));
            assert!(m.len() <= MAX_POINTS + MAX_POINTS / 4, "{} points", m.len());
            assert!(m.sparse.len() <= MAX_SPARSE);
        }
        let first = m.points()[0].0;
        assert!(first > 6 * (transactions - MAX_POINTS as i64), "{first}");
        // Exact from the first point kept on, conservative (re-reads, never skips) below it.
        for c in first..6 * transactions + 3 {
            assert_eq!(
                m.translate(c),
                Some(txn_exact(c).min(5 * transactions)),
                "{c}"
            );
        }
        for c in (0..first).step_by(97).chain([first - 1]) {
            let got = m.translate(c).unwrap();
            assert!(
                got <= txn_exact(c),
                "translate({c}) = {got} > {}",
                txn_exact(c)
            );
        }
        assert_eq!(m.translate(-1), None);
        // The map rebuilt from every sync ever written is bounded the same way.
        let rebuilt = OffsetMap::from_syncs(syncs, Some(m.position()));
        assert_eq!(rebuilt, m);
    }

    #[test]
    fn from_syncs_with_position_is_exact() {
        let mut m = OffsetMap::new();
        let mut syncs = Vec::new();
        syncs.extend(m.record(&fwd(0, 9, 10, 0)));
        syncs.extend(m.record(&fwd(20, 29, 10, 10)));
        syncs.extend(m.record(&holed(30, &[0, 1, 4], 4, 20)));
        m.skip_to(40);
        let pos = m.position();
        assert_eq!(
            pos,
            Position {
                source_next: 40,
                target_next: 23
            }
        );
        let r = OffsetMap::from_syncs(syncs.clone(), Some(pos));
        assert_eq!(r, m);
        assert_eq!(translations(&r, -1..45), translations(&m, -1..45));

        // Without the position, MM2's rule past the last sync: its target + 1.
        let r = OffsetMap::from_syncs(syncs.clone(), None);
        assert_eq!(r.translate(34), Some(22));
        assert_eq!(r.translate(39), Some(23));
        let r = OffsetMap::from_syncs(
            syncs[..1].to_vec(),
            Some(Position {
                source_next: 10,
                target_next: -1,
            }),
        );
        assert_eq!(r.translate(0), Some(0));
        assert_eq!(r.translate(5), Some(1)); // exact is 5: re-delivery, no skip
        assert_eq!(r.position().target_next, -1);
    }

    #[test]
    fn from_syncs_drops_what_a_crashed_run_wrote_past_its_position() {
        let mut m = OffsetMap::new();
        let mut log = Vec::new();
        log.extend(m.record(&fwd(0, 9, 10, 0)));
        let committed = m.position();
        // Forwarded and synced, but the process died before committing the position.
        log.extend(m.record(&fwd(20, 29, 10, 10)));
        log.extend(m.record(&fwd(40, 49, 10, 20)));
        let mut r = OffsetMap::from_syncs(log.clone(), Some(committed));
        assert_eq!(r.points(), &[(0, 0), (9, 9)]); // the run's end, still true
        assert_eq!(r.translate(15), Some(10));
        // The restarted process forwards 20.. again; the copies land after the old ones.
        log.extend(r.record(&fwd(20, 29, 10, 30)));
        assert_eq!(r.translate(15), Some(30));
        assert_eq!(r.translate(25), Some(35));
        // And a second restart, from the whole log, agrees.
        let again = OffsetMap::from_syncs(log, Some(r.position()));
        assert_eq!(translations(&again, -1..60), translations(&r, -1..60));
    }

    #[test]
    fn forwarded_again_replaces_the_tail() {
        let mut m = OffsetMap::new();
        let mut log = Vec::new();
        log.extend(m.record(&fwd(0, 9, 10, 0)));
        log.extend(m.record(&fwd(20, 29, 10, 10)));
        // 25.. forwarded again (a retry after the answer was lost), appended at 20..
        log.extend(m.record(&fwd(25, 29, 5, 20)));
        assert_eq!(m.points(), &[(0, 0), (9, 9), (20, 10), (24, 14), (25, 20)]);
        assert_eq!(m.translate(24), Some(14));
        assert_eq!(m.translate(25), Some(20));
        assert_eq!(m.translate(30), Some(25));
        let r = OffsetMap::from_syncs(log, Some(m.position()));
        assert_eq!(r, m);
        // Forwarded again from the start of a run: no cut point is needed.
        let mut log = Vec::new();
        log.extend(m.record(&fwd(20, 29, 10, 25)));
        assert_eq!(m.points(), &[(0, 0), (9, 9), (20, 25)]);
        assert_eq!(m.translate(15), Some(25));
        assert_eq!(log, vec![(20, 25)]);
    }

    #[test]
    fn unknown_target_offsets_translate_to_a_floor() {
        let mut m = OffsetMap::new();
        m.record(&fwd(0, 9, 10, 0));
        assert!(m.record(&fwd(10, 19, 10, -1)).is_empty()); // appended at 10.., not reported
        assert_eq!(m.position().target_next, -1);
        assert_eq!(m.translate(15), Some(10)); // exact is 15
                                               // Known again: the unplaced records sit between the floor and 20.
        assert_eq!(
            m.record(&fwd(20, 29, 10, 20)),
            vec![(9, 9), (19, 10), (20, 20)]
        );
        assert_eq!(m.translate(10), Some(10));
        assert_eq!(m.translate(15), Some(10));
        assert_eq!(m.translate(19), Some(10));
        assert_eq!(m.translate(20), Some(20));
        assert_eq!(m.position().target_next, 30);
        // Unreported, then contiguous with the floor: nothing was appended in between.
        m.record(&fwd(30, 30, 1, -1));
        assert_eq!(m.record(&fwd(31, 31, 1, 30)), vec![(29, 29), (31, 30)]);
        assert_eq!(m.translate(30), Some(30));
        assert_eq!(m.translate(31), Some(30));
    }

    // --- property: the map against a brute-force model ---------------------------------

    /// One step of a generated source log.
    #[derive(Clone, Debug)]
    enum Step {
        /// A batch after `gap` missing offsets: `span` offsets, `present[i]` says whether
        /// offset i holds a record (the rest were compacted away), `unknown` if the target
        /// does not report where it landed, after `target_gap` target offsets of markers.
        Batch {
            gap: i64,
            span: usize,
            present: Vec<bool>,
            target_gap: i64,
            unknown: bool,
        },
        /// Batches dropped at the end of a fetch (aborted, control): `skip_to`.
        Skip(i64),
    }

    fn arb_step(target_gaps: bool, unknown: bool) -> impl Strategy<Value = Step> {
        let batch = (
            prop_oneof![4 => Just(0i64), 1 => 1i64..6],
            prop::collection::vec(prop::bool::weighted(0.8), 1..8),
            if target_gaps {
                prop_oneof![3 => Just(0i64), 1 => 1i64..3].boxed()
            } else {
                Just(0i64).boxed()
            },
            prop::bool::weighted(if unknown { 0.2 } else { 0.0 }),
        )
            .prop_map(|(gap, present, target_gap, unknown)| Step::Batch {
                gap,
                span: present.len(),
                present,
                target_gap,
                unknown,
            });
        prop_oneof![6 => batch, 1 => (1i64..4).prop_map(Step::Skip)]
    }

    /// The replicated records `(source, target)` and the map fed with the same log.
    struct Replayed {
        records: Vec<(i64, i64)>,
        map: OffsetMap,
        syncs: Vec<(i64, i64)>,
        /// The target's next offset.
        target_end: i64,
        start: i64,
    }

    fn replay(start: i64, steps: &[Step]) -> Replayed {
        let mut map = OffsetMap::new();
        map.skip_to(start); // where fetching starts
        let mut r = Replayed {
            records: Vec::new(),
            map: OffsetMap::new(),
            syncs: Vec::new(),
            target_end: 1_000,
            start,
        };
        let mut source = start;
        for step in steps {
            match step {
                Step::Skip(n) => {
                    source += n;
                    map.skip_to(source);
                }
                Step::Batch {
                    gap,
                    span,
                    present,
                    target_gap,
                    unknown,
                } => {
                    source += gap;
                    r.target_end += target_gap;
                    let deltas: Vec<i32> =
                        (0..*span as i32).filter(|&d| present[d as usize]).collect();
                    let target_base = r.target_end;
                    for &d in &deltas {
                        r.records.push((source + i64::from(d), r.target_end));
                        r.target_end += 1;
                    }
                    let count = deltas.len() as i32;
                    let b = Forwarded {
                        source_base: source,
                        source_last: source + *span as i64 - 1,
                        record_count: count,
                        target_base: if *unknown { -1 } else { target_base },
                        holes: (count as usize != *span).then_some(deltas),
                    };
                    r.syncs.extend(map.record(&b));
                    source += *span as i64;
                }
            }
        }
        r.map = map;
        r
    }

    /// The exact answer: the target of the first record at or after `c`, or the end.
    fn exact(records: &[(i64, i64)], target_end: i64, c: i64) -> i64 {
        records
            .iter()
            .find(|&&(s, _)| s >= c)
            .map_or(target_end, |&(_, t)| t)
    }

    /// `got` reads the same next record as `want`: nothing replicated lies between them.
    fn same_next_record(records: &[(i64, i64)], got: i64, want: i64) -> bool {
        got <= want && !records.iter().any(|&(_, t)| t >= got && t < want)
    }

    fn check_exact(r: &Replayed, map: &OffsetMap, target_gaps: bool) -> Result<(), TestCaseError> {
        let first = r.records.first().map(|&(s, _)| s);
        let last = r.records.last().map_or(r.start, |&(s, _)| s);
        for c in r.start - 2..last + 4 {
            let got = map.translate(c);
            match first {
                Some(first) if c >= first => {
                    let want = exact(&r.records, r.target_end, c);
                    let got = got.unwrap();
                    if target_gaps {
                        prop_assert!(
                            same_next_record(&r.records, got, want),
                            "translate({}) = {}, exact {}",
                            c,
                            got,
                            want
                        );
                    } else {
                        prop_assert_eq!(got, want, "translate({})", c);
                    }
                }
                _ => prop_assert_eq!(got, None, "translate({})", c),
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn prop_translate_is_exact(
            start in 0i64..50,
            steps in prop::collection::vec(arb_step(false, false), 0..25),
        ) {
            let r = replay(start, &steps);
            check_exact(&r, &r.map, false)?;
            // A map rebuilt from its syncs and its position is the same map.
            let rebuilt = OffsetMap::from_syncs(r.syncs.clone(), Some(r.map.position()));
            prop_assert_eq!(&rebuilt, &r.map);
            // Fewer points than records, and never more than two per run boundary.
            prop_assert!(r.map.len() <= r.records.len());
        }

        #[test]
        fn prop_translate_with_target_gaps(
            start in 0i64..50,
            steps in prop::collection::vec(arb_step(true, false), 0..25),
        ) {
            let r = replay(start, &steps);
            check_exact(&r, &r.map, true)?;
            let rebuilt = OffsetMap::from_syncs(r.syncs.clone(), Some(r.map.position()));
            prop_assert_eq!(&rebuilt, &r.map);
        }

        #[test]
        fn prop_unknown_targets_never_skip(
            start in 0i64..50,
            steps in prop::collection::vec(arb_step(true, true), 0..25),
        ) {
            let r = replay(start, &steps);
            let last = r.records.last().map_or(r.start, |&(s, _)| s);
            // Conservative: never past the exact record, before or after a restart.
            let rebuilt = OffsetMap::from_syncs(r.syncs.clone(), Some(r.map.position()));
            for c in r.start - 2..last + 4 {
                let want = exact(&r.records, r.target_end, c);
                for map in [&r.map, &rebuilt] {
                    if let Some(got) = map.translate(c) {
                        prop_assert!(got <= want, "translate({}) = {} > exact {}", c, got, want);
                    }
                }
            }
        }

        #[test]
        fn prop_any_order_rebuilds_from_syncs(
            batches in prop::collection::vec(
                (0i64..60, prop::collection::vec(prop::bool::weighted(0.7), 1..6), 0i64..3,
                 prop::bool::weighted(0.1)),
                0..20,
            ),
        ) {
            // Batches in any source order (forwarded again, rewound), targets increasing.
            let mut map = OffsetMap::new();
            let mut syncs = Vec::new();
            let mut target = 0i64;
            for (base, present, advance, unknown) in batches {
                target += advance;
                let deltas: Vec<i32> =
                    (0..present.len() as i32).filter(|&d| present[d as usize]).collect();
                let count = deltas.len() as i32;
                syncs.extend(map.record(&Forwarded {
                    source_base: base,
                    source_last: base + present.len() as i64 - 1,
                    record_count: count,
                    target_base: if unknown { -1 } else { target },
                    holes: (count as usize != present.len()).then_some(deltas),
                }));
                target += i64::from(count);
                let p = map.points();
                prop_assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
                let rebuilt = OffsetMap::from_syncs(syncs.clone(), Some(map.position()));
                if map.position().target_next >= 0 {
                    prop_assert_eq!(&rebuilt, &map);
                }
                for c in -1..70 {
                    let _ = rebuilt.translate(c);
                }
            }
        }

        #[test]
        fn prop_restart_from_committed_position(
            steps in prop::collection::vec(arb_step(true, false), 1..20),
            cut in any::<prop::sample::Index>(),
            lost in 0usize..5,
        ) {
            // The process commits its position after `cut` steps, forwards and syncs `lost`
            // more, dies, restarts from the position and forwards those steps again; their
            // second copies land after the first on the target.
            let cut = cut.index(steps.len() + 1);
            let first_run = replay(0, &steps[..(cut + lost).min(steps.len())]);
            let committed = replay(0, &steps[..cut]);
            let mut map =
                OffsetMap::from_syncs(first_run.syncs.clone(), Some(committed.map.position()));
            // Rebuilt at the position, it translates like the map of the committed steps.
            for c in -2..150 {
                prop_assert_eq!(map.translate(c), committed.map.translate(c), "translate({})", c);
            }
            // Forward the rest again, on top of the whole first run's target offsets.
            let full = replay(0, &steps);
            let shift = first_run.target_end - committed.target_end;
            let mut records: Vec<(i64, i64)> = committed.records.clone();
            let mut syncs = first_run.syncs.clone();
            let again = replay_from(&mut map, &steps, cut, shift, &mut syncs);
            records.extend(
                full.records[committed.records.len()..].iter().map(|&(s, t)| (s, t + shift)),
            );
            prop_assert_eq!(again, full.target_end + shift);
            let model = Replayed {
                records,
                map: map.clone(),
                syncs: syncs.clone(),
                target_end: full.target_end + shift,
                start: 0,
            };
            // Old copies of re-forwarded records are not in the model: a translation that
            // lands on them still reads the same next record.
            check_exact(&model, &map, true)?;
            let rebuilt = OffsetMap::from_syncs(syncs, Some(map.position()));
            check_exact(&model, &rebuilt, true)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(8))]

        /// Streams long enough to be trimmed: exact translation from the first point kept on,
        /// never past the exact record below it.
        #[test]
        fn prop_trimmed_map_is_exact_above_and_conservative_below(
            steps in prop::collection::vec(arb_step(false, false), 4_000..6_000),
        ) {
            let r = replay(0, &steps);
            let Some(&(first, _)) = r.map.points().first() else { return Ok(()) };
            let last = r.records.last().map_or(0, |&(s, _)| s);
            // The exact answers, by one walk over the records.
            let mut next = r.records.iter().peekable();
            for c in 0..last + 4 {
                while next.peek().is_some_and(|&&(s, _)| s < c) {
                    next.next();
                }
                let want = next.peek().map_or(r.target_end, |&&(_, t)| t);
                match r.map.translate(c) {
                    Some(got) if c >= first => prop_assert_eq!(got, want, "translate({})", c),
                    Some(got) => prop_assert!(got <= want, "translate({}) = {} > {}", c, got, want),
                    None => prop_assert!(c < r.records[0].0, "translate({}) = None", c),
                }
            }
            prop_assert!(r.map.len() <= MAX_POINTS + MAX_POINTS / 4);
        }
    }

    /// Feeds `steps[from..]` to `map` as `replay` would, target offsets moved by `shift`;
    /// returns the target's next offset.
    fn replay_from(
        map: &mut OffsetMap,
        steps: &[Step],
        from: usize,
        shift: i64,
        syncs: &mut Vec<(i64, i64)>,
    ) -> i64 {
        // Recompute the source and target positions of the first `from` steps.
        let prefix = replay(0, &steps[..from]);
        let mut source = source_after(&steps[..from]);
        let mut target = prefix.target_end + shift;
        for step in &steps[from..] {
            match step {
                Step::Skip(n) => {
                    source += n;
                    map.skip_to(source);
                }
                Step::Batch {
                    gap,
                    span,
                    present,
                    target_gap,
                    ..
                } => {
                    source += gap;
                    target += target_gap;
                    let deltas: Vec<i32> =
                        (0..*span as i32).filter(|&d| present[d as usize]).collect();
                    let count = deltas.len() as i32;
                    syncs.extend(map.record(&Forwarded {
                        source_base: source,
                        source_last: source + *span as i64 - 1,
                        record_count: count,
                        target_base: target,
                        holes: (count as usize != *span).then_some(deltas),
                    }));
                    target += i64::from(count);
                    source += *span as i64;
                }
            }
        }
        target
    }

    fn source_after(steps: &[Step]) -> i64 {
        steps
            .iter()
            .map(|s| match s {
                Step::Skip(n) => *n,
                Step::Batch { gap, span, .. } => gap + *span as i64,
            })
            .sum()
    }

    // --- a batch compacted by Kafka ----------------------------------------------------

    /// A batch rewritten by Kafka's log cleaner, with holes (see testdata/batches/README.md).
    const LZ4_COMPACTED: &[u8] = include_bytes!("../testdata/batches/lz4-compacted.bin");

    #[test]
    fn compacted_batch_translates_through_renumbered_deltas() {
        // Keys key-0..3, key-0, key-1 at 0..=5, then key-0 again at 6 (another batch): the
        // cleaner kept 2, 3 and 5 and the batch's base offset and lastOffsetDelta.
        let split = split_batches(Bytes::from_static(LZ4_COMPACTED)).unwrap();
        assert_eq!(split.truncated_bytes, 0);
        let [b]: [RawBatch; 1] = split.batches.try_into().unwrap();
        assert_eq!(b.compression().unwrap(), Compression::Lz4);
        assert_eq!((b.base_offset(), b.last_offset_delta()), (0, 5));
        assert!(b.has_holes());
        // As the fetch path does: the renumbered batch is forwarded, the original deltas go
        // to the map.
        let renumbered = renumber(&b).unwrap();
        assert_eq!(renumbered.offset_deltas, [2, 3, 5]);
        assert!(!renumbered.batch.has_holes());
        let f = Forwarded {
            source_base: b.base_offset(),
            source_last: b.last_offset(),
            record_count: b.record_count(),
            target_base: 40,
            holes: Some(renumbered.offset_deltas),
        };
        assert_eq!(f, holed(0, &[2, 3, 5], 5, 40));
        let mut m = OffsetMap::new();
        assert_eq!(m.record(&f), vec![(2, 40), (3, 41), (5, 42)]);
        assert_eq!(
            translations(&m, 0..7),
            [None, None, Some(40), Some(41), Some(42), Some(42), Some(43)]
        );
    }

    /// MM2's syncs say nothing of the records between two of them: below the take-over
    /// point they translate MM2's way, never past a record MM2's reader would read.
    #[test]
    fn below_the_take_over_point_mm2_syncs_translate_as_mm2_does() {
        // MM2 synced every 100 records; 5 source offsets between 100 and 200 were
        // transaction markers (a gap). strait took over at 250; MM2's last sync was 200.
        let mm2 = [(0, 0), (100, 100), (200, 195)];
        let position = Position {
            source_next: 250,
            target_next: -1,
        };
        let exact = OffsetMap::from_syncs(mm2, Some(position));
        // Read as strait's own points the gap would send offset 150 past 95 records.
        assert_eq!(exact.translate(150), Some(195));
        let mut m = OffsetMap::from_syncs(mm2, Some(position)).taken_over_at(250);
        assert_eq!(m.translate(100), Some(100));
        assert_eq!(m.translate(150), Some(101));
        assert_eq!(m.translate(200), Some(195));
        assert_eq!(m.translate(230), Some(196));
        // strait's first batch lands after what MM2 wrote past its last sync: exact from
        // there on, MM2's rule up to it.
        m.record(&fwd(250, 259, 10, 260));
        assert_eq!(m.translate(150), Some(101));
        assert_eq!(m.translate(249), Some(196));
        assert_eq!(m.translate(250), Some(260));
        assert_eq!(m.translate(255), Some(265));
        assert_eq!(m.translate(300), Some(270));
    }
}
