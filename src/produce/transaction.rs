//! The open transactions of an engine in exactly-once mode (`exactly.once`): every commit
//! interval the records written since the last commit and the progress records that say how
//! far they reach go to the target in one transaction, so that a read_committed reader sees
//! either both or neither, whatever ends strait in between. A process alone on its flow has
//! one; a member of a scale-out group one per slot it holds, each under the slot's own
//! transactional id, so that the slot's next owner fences it at the broker.
//!
//! A transaction goes through four phases. **Open**: the data partitions with batches
//! waiting are enrolled (AddPartitionsToTxn, in transactions v1; in v2 a partition's first
//! Produce enrols it) and written. **Draining**, once the commit is due: nothing new goes
//! out, only batches already numbered are sent again, until every answer is in. **Writing**:
//! the progress records of the positions reached go out. **Ending**: EndTxn commits; once the
//! coordinator answers, the positions count as committed and a new transaction opens (in v2
//! under the bumped epoch the answer gives). Whatever would need a new producer id on the
//! way (the target lost strait's producer state, an epoch fenced) ends the engine instead: a
//! new producer id aborts the open transaction, and a restart resumes from the last commit.

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

/// One transaction of the engine (one per scale-out slot it holds, or the flow's one), by
/// partition index (the engine's `parts`).
#[derive(Debug)]
pub struct Transaction {
    pub producer: TransactionalProducer,
    pub phase: Phase,
    /// The index of the progress partition its positions are written to.
    pub progress: usize,
    /// The partitions the open transaction holds: enrolled (v1) or written to (v2).
    enrolled: HashSet<usize>,
    /// An AddPartitionsToTxn is in flight.
    pub enrolling: bool,
    /// Positions whose progress records the open transaction holds: committed once it is.
    pending: Vec<(usize, Position)>,
}

impl Transaction {
    pub fn new(producer: TransactionalProducer, progress: usize) -> Transaction {
        Transaction {
            producer,
            phase: Phase::Open,
            progress,
            enrolled: HashSet::new(),
            enrolling: false,
            pending: Vec::new(),
        }
    }

    /// Says that the producer is ready (at start-up, or once its slot is this process's).
    pub fn ready(&self, cluster: &str) {
        let (producer_id, epoch) = self.producer.producer;
        tracing::info!(cluster, transactional_id = %self.producer.transactional_id, producer_id, epoch, transactions = %self.producer.protocol, "transactional producer ready (exactly-once)");
    }

    /// Whether partition `i` (of this transaction) may be written in this phase, enrolled
    /// or not.
    pub fn writes(&self, i: usize) -> bool {
        match self.phase {
            Phase::Open | Phase::Draining { .. } => i != self.progress,
            Phase::Writing => i == self.progress,
            Phase::Ending => false,
        }
    }

    /// Whether partition `i` may be sent batches now: its phase writes it, and it is enrolled
    /// (v1; in v2 a Produce enrols it).
    pub fn sends(&self, i: usize) -> bool {
        self.writes(i) && (!self.producer.protocol.enrols() || self.enrolled.contains(&i))
    }

    /// Whether partition `i` waits to be enrolled (v1) before it is written: a data partition
    /// while the transaction is open (draining, nothing new joins it), the progress
    /// partition once its records are due.
    pub fn needs_enrolling(&self, i: usize) -> bool {
        let joins = match self.phase {
            Phase::Open => i != self.progress,
            Phase::Writing => i == self.progress,
            Phase::Draining { .. } | Phase::Ending => false,
        };
        joins && self.producer.protocol.enrols() && !self.enrolled.contains(&i)
    }

    /// A batch of partition `i` goes out in this transaction: in v2 that enrols it.
    pub fn wrote(&mut self, i: usize) {
        if !self.producer.protocol.enrols() {
            self.enrolled.insert(i);
        }
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

    /// The coordinator committed the transaction, and the next one is written as `next`
    /// (v2 bumps the epoch): the positions it held, for the engine to count as committed, and
    /// a new transaction opens.
    pub fn committed(&mut self, next: (i64, i16)) -> Vec<(usize, Position)> {
        self.producer.producer = next;
        self.phase = Phase::Open;
        self.enrolled.clear();
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::transaction::Protocol;

    const PROGRESS: usize = 0;

    fn transaction(protocol: Protocol) -> Transaction {
        Transaction::new(
            TransactionalProducer {
                transactional_id: "t".into(),
                producer: (1, 0),
                protocol,
            },
            PROGRESS,
        )
    }

    #[test]
    fn each_phase_writes_only_its_partitions_and_only_once_enrolled() {
        let mut txn = transaction(Protocol::V1);
        assert!(txn.needs_enrolling(3) && !txn.sends(3));
        assert!(
            !txn.needs_enrolling(PROGRESS),
            "progress waits for the commit"
        );
        txn.enrolled([3]);
        assert!(txn.sends(3) && !txn.needs_enrolling(3));
        txn.phase = Phase::Draining {
            since: Instant::now(),
        };
        assert!(txn.sends(3), "resends still go out");
        assert!(!txn.needs_enrolling(4), "nothing new joins a draining one");
        txn.phase = Phase::Writing;
        assert!(!txn.sends(3) && !txn.needs_enrolling(3));
        assert!(txn.needs_enrolling(PROGRESS));
        txn.enrolled([PROGRESS]);
        assert!(txn.sends(PROGRESS));
        txn.phase = Phase::Ending;
        assert!(!txn.sends(PROGRESS) && !txn.sends(3));
    }

    #[test]
    fn positions_count_only_once_the_transaction_is_committed() {
        let mut txn = transaction(Protocol::V1);
        assert!(txn.is_empty());
        txn.enrolled([3, PROGRESS]);
        let pos = Position {
            source_next: 10,
            target_next: 12,
        };
        txn.hold(vec![(3, pos)]);
        txn.phase = Phase::Ending;
        assert!(!txn.is_empty());
        assert_eq!(txn.committed((1, 0)), vec![(3, pos)]);
        assert_eq!(txn.phase, Phase::Open);
        assert!(txn.is_empty() && txn.needs_enrolling(3));
    }

    /// Transactions v2: a partition is written without AddPartitionsToTxn, and held once a
    /// batch of it goes out; the next transaction is written under the epoch EndTxn gave.
    #[test]
    fn in_v2_a_write_enrols_and_each_commit_moves_to_the_next_epoch() {
        let mut txn = transaction(Protocol::V2);
        assert!(!txn.needs_enrolling(3) && txn.sends(3));
        assert!(txn.is_empty(), "nothing written, nothing to end");
        txn.wrote(3);
        assert_eq!(txn.holds().collect::<Vec<_>>(), vec![3]);
        txn.phase = Phase::Writing;
        assert!(!txn.sends(3) && txn.sends(PROGRESS));
        assert!(!txn.needs_enrolling(PROGRESS));
        txn.wrote(PROGRESS);
        txn.phase = Phase::Ending;
        txn.committed((1, 1));
        assert_eq!(txn.producer.producer, (1, 1));
        assert!(txn.is_empty() && txn.sends(3));
    }
}
