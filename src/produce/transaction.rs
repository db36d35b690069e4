//! The open transaction of an engine in exactly-once mode (`exactly.once`): every commit
//! interval the records written since the last commit and the progress records that say how
//! far they reach go to the target in one transaction, so that a read_committed reader sees
//! either both or neither, whatever ends strait in between.
//!
//! A transaction goes through four phases. **Open**: the data partitions with batches
//! waiting are enrolled (AddPartitionsToTxn) and written. **Draining**, once the commit is
//! due: nothing new goes out, only batches already numbered are sent again, until every
//! answer is in. **Writing**: the progress records of the positions reached go out.
//! **Ending**: EndTxn commits; once the coordinator answers, the positions count as
//! committed and a new transaction opens. Whatever would need a new producer id on the way
//! (the target lost strait's producer state, an epoch fenced) ends the engine instead: a new
//! producer id aborts the open transaction, and a restart resumes from the last commit.

use std::collections::HashSet;

use tokio::time::Instant;

use crate::kafka::transaction::TransactionalProducer;
use crate::offset_map::Position;

/// Where the open transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Data batches of enrolled partitions go out.
    Open,
    /// A commit is due (since `since`): only batches already numbered go out again, until
    /// every answer is in.
    Draining { since: Instant },
    /// The progress records go out.
    Writing,
    /// EndTxn is in flight.
    Ending,
}

/// The engine's transaction, by partition index (the engine's `parts`).
#[derive(Debug)]
pub struct Transaction {
    pub producer: TransactionalProducer,
    pub phase: Phase,
    /// The partitions the open transaction holds.
    enrolled: HashSet<usize>,
    /// An AddPartitionsToTxn is in flight.
    pub enrolling: bool,
    /// Positions whose progress records the open transaction holds: committed once it is.
    pending: Vec<(usize, Position)>,
}

impl Transaction {
    pub fn new(transactional_id: String, producer: (i64, i16)) -> Transaction {
        Transaction {
            producer: TransactionalProducer {
                transactional_id,
                producer,
            },
            phase: Phase::Open,
            enrolled: HashSet::new(),
            enrolling: false,
            pending: Vec::new(),
        }
    }

    /// Whether partition `i` may be written in this phase (`progress` is the progress
    /// partition's index), enrolled or not.
    pub fn writes(&self, i: usize, progress: usize) -> bool {
        match self.phase {
            Phase::Open | Phase::Draining { .. } => i != progress,
            Phase::Writing => i == progress,
            Phase::Ending => false,
        }
    }

    /// Whether partition `i` may be sent batches now: its phase writes it, and it is enrolled.
    pub fn sends(&self, i: usize, progress: usize) -> bool {
        self.writes(i, progress) && self.enrolled.contains(&i)
    }

    /// Whether partition `i` waits to be enrolled before it is written: a data partition
    /// while the transaction is open (draining, nothing new joins it), the progress
    /// partition once its records are due.
    pub fn needs_enrolling(&self, i: usize, progress: usize) -> bool {
        let joins = match self.phase {
            Phase::Open => i != progress,
            Phase::Writing => i == progress,
            Phase::Draining { .. } | Phase::Ending => false,
        };
        joins && !self.enrolled.contains(&i)
    }

    pub fn enrolled(&mut self, parts: impl IntoIterator<Item = usize>) {
        self.enrolling = false;
        self.enrolled.extend(parts);
    }

    /// The partitions written in the open transaction.
    pub fn holds(&self) -> impl Iterator<Item = usize> + '_ {
        self.enrolled.iter().copied()
    }

    /// Whether the open transaction has nothing yet: nothing to end.
    pub fn is_empty(&self) -> bool {
        self.enrolled.is_empty() && self.pending.is_empty()
    }

    /// A progress batch of the open transaction is acknowledged: its positions become
    /// committed with the transaction.
    pub fn hold(&mut self, commits: Vec<(usize, Position)>) {
        self.pending.extend(commits);
    }

    /// The coordinator committed the transaction: the positions it held, for the engine to
    /// count as committed, and a new transaction opens.
    pub fn committed(&mut self) -> Vec<(usize, Position)> {
        self.phase = Phase::Open;
        self.enrolled.clear();
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRESS: usize = 0;

    #[test]
    fn each_phase_writes_only_its_partitions_and_only_once_enrolled() {
        let mut txn = Transaction::new("t".into(), (1, 0));
        assert!(txn.needs_enrolling(3, PROGRESS) && !txn.sends(3, PROGRESS));
        assert!(
            !txn.needs_enrolling(PROGRESS, PROGRESS),
            "progress waits for the commit"
        );
        txn.enrolled([3]);
        assert!(txn.sends(3, PROGRESS) && !txn.needs_enrolling(3, PROGRESS));
        txn.phase = Phase::Draining {
            since: Instant::now(),
        };
        assert!(txn.sends(3, PROGRESS), "resends still go out");
        assert!(
            !txn.needs_enrolling(4, PROGRESS),
            "nothing new joins a draining one"
        );
        txn.phase = Phase::Writing;
        assert!(!txn.sends(3, PROGRESS) && !txn.needs_enrolling(3, PROGRESS));
        assert!(txn.needs_enrolling(PROGRESS, PROGRESS));
        txn.enrolled([PROGRESS]);
        assert!(txn.sends(PROGRESS, PROGRESS));
        txn.phase = Phase::Ending;
        assert!(!txn.sends(PROGRESS, PROGRESS) && !txn.sends(3, PROGRESS));
    }

    #[test]
    fn positions_count_only_once_the_transaction_is_committed() {
        let mut txn = Transaction::new("t".into(), (1, 0));
        assert!(txn.is_empty());
        txn.enrolled([3, PROGRESS]);
        let pos = Position {
            source_next: 10,
            target_next: 12,
        };
        txn.hold(vec![(3, pos)]);
        txn.phase = Phase::Ending;
        assert!(!txn.is_empty());
        assert_eq!(txn.committed(), vec![(3, pos)]);
        assert_eq!(txn.phase, Phase::Open);
        assert!(txn.is_empty() && txn.needs_enrolling(3, PROGRESS));
    }
}
