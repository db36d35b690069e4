//! The partitions the produce engine's loop looks at. With thousands of partitions most
//! have nothing to do at any moment; walking all of them on every turn of the loop (to send,
//! to recover, to look leaders up) was most of strait's CPU at 8,000 partitions. A partition
//! is marked when something happens to it (a fetched chunk, an answer, a lookup, a hand-over)
//! and stays listed as long as it has work left (`Partition::needs_visit`).

/// A set of partition indexes, listed in the order they were marked.
#[derive(Debug, Default)]
pub(super) struct Visits {
    listed: Vec<bool>,
    list: Vec<usize>,
}

impl Visits {
    /// Lists partition `i`, unless it is listed.
    pub fn mark(&mut self, i: usize) {
        if i >= self.listed.len() {
            self.listed.resize(i + 1, false);
        }
        if !std::mem::replace(&mut self.listed[i], true) {
            self.list.push(i);
        }
    }

    pub fn contains(&self, i: usize) -> bool {
        self.listed.get(i).copied().unwrap_or(false)
    }

    /// The listed partitions, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.list.iter().copied()
    }

    /// The listed partitions in index order (the order the engine fills requests in, as
    /// when it walked every partition).
    pub fn sorted(&mut self) -> Vec<usize> {
        self.list.sort_unstable();
        self.list.clone()
    }

    /// Keeps listed only the partitions for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let listed = &mut self.listed;
        self.list.retain(|&i| {
            let kept = keep(i);
            listed[i] = kept;
            kept
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_listed_once_and_until_it_is_let_go() {
        let mut v = Visits::default();
        for i in [7, 2, 7, 0, 2] {
            v.mark(i);
        }
        assert_eq!(v.sorted(), [0, 2, 7]);
        assert!(v.contains(7) && !v.contains(3) && !v.contains(100));
        v.retain(|i| i != 2);
        assert_eq!(v.sorted(), [0, 7]);
        assert!(!v.contains(2));
        v.mark(2);
        assert_eq!(v.sorted(), [0, 2, 7], "marked again after it was let go");
    }
}
