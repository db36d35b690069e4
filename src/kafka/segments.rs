//! An outgoing request frame as a list of byte segments. Most requests are one segment; a
//! Produce request interleaves its small encoded parts with the records bytes of the batches
//! it carries, which stay shared slices of the Fetch responses they came in. The connection
//! writes queued frames with vectored writes (`writev`), so no segment is ever copied in user
//! space.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// Bytes to write, in order. Implements [`Buf`] with `chunks_vectored`.
#[derive(Debug, Default)]
pub struct Segments {
    segments: VecDeque<Bytes>,
    remaining: usize,
}

impl Segments {
    /// Appends a segment (empty ones are skipped).
    pub fn push(&mut self, segment: Bytes) {
        if !segment.is_empty() {
            self.remaining += segment.len();
            self.segments.push_back(segment);
        }
    }

    /// Appends every segment of `other`.
    pub fn append(&mut self, other: Segments) {
        self.remaining += other.remaining;
        self.segments.extend(other.segments);
    }

    /// Number of segments still to write.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The whole frame in one buffer (a copy; for tests).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.segments
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect()
    }
}

impl From<Bytes> for Segments {
    fn from(segment: Bytes) -> Segments {
        let mut frame = Segments::default();
        frame.push(segment);
        frame
    }
}

impl Buf for Segments {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.segments.front().map_or(&[], |s| s.as_ref())
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, segment) in dst.iter_mut().zip(&self.segments) {
            *slot = IoSlice::new(segment);
            n += 1;
        }
        n
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of a frame");
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.segments.front_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.segments.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(parts: &[&'static [u8]]) -> Segments {
        let mut f = Segments::default();
        for p in parts {
            f.push(Bytes::from_static(p));
        }
        f
    }

    #[test]
    fn vectored_chunks_follow_the_segments() {
        let f = frame(&[b"ab", b"", b"cde", b"f"]);
        assert_eq!(f.remaining(), 6);
        assert_eq!(f.segments(), 3);
        let mut slots = [IoSlice::new(&[]); 2];
        assert_eq!(f.chunks_vectored(&mut slots), 2);
        assert_eq!(&*slots[0], b"ab");
        assert_eq!(&*slots[1], b"cde");
    }

    proptest! {
        /// Whatever the write sizes, the bytes come out once each and in order.
        #[test]
        fn prop_advancing_yields_every_byte_in_order(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..8),
            steps in proptest::collection::vec(1usize..16, 1..40),
        ) {
            let mut f = Segments::default();
            let mut other = Segments::default();
            for (i, p) in parts.iter().enumerate() {
                if i % 2 == 0 { f.push(Bytes::from(p.clone())) } else { other.push(Bytes::from(p.clone())) }
            }
            let expected: Vec<u8> = f.to_vec().into_iter().chain(other.to_vec()).collect();
            f.append(other);
            let mut out = Vec::new();
            let mut steps = steps.into_iter().cycle();
            while f.has_remaining() {
                let take = steps.next().unwrap().min(f.chunk().len());
                out.extend_from_slice(&f.chunk()[..take]);
                f.advance(take);
            }
            prop_assert_eq!(out, expected);
        }
    }
}
