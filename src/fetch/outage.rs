//! Source outages as an operator reads them: the first failure of an outage (a fetch from a
//! broker, or the lookup of partition leaders) is one WARN naming the broker and the error,
//! the retries after it are DEBUG, and the first success after it is one INFO. A WARN per
//! retry would bury the log for as long as the source is down.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::kafka::KafkaError;

/// What is failing now, shared by the fetcher's coordinator and its sessions: a broker id,
/// or [`LOOKUP`] for the leader lookup.
#[derive(Clone, Default)]
pub(super) struct Outages {
    failing: Arc<Mutex<HashSet<i32>>>,
}

/// The key of the leader lookup (Metadata to any broker), which no broker id takes.
pub(super) const LOOKUP: i32 = -1;

impl Outages {
    /// `what` (at broker `key`, or the leader [`LOOKUP`]) failed with `error`.
    pub(super) fn failed(&self, cluster: &str, key: i32, what: &str, error: &KafkaError) {
        let first = self.failing.lock().unwrap().insert(key);
        let broker = (key != LOOKUP).then_some(key);
        if first {
            tracing::warn!(cluster, broker, error = %error, retries = "logged at DEBUG until it recovers", "{what}");
        } else {
            tracing::debug!(cluster, broker, error = %error, "{what}");
        }
    }

    /// `what` (at broker `key`, or the leader [`LOOKUP`]) succeeded.
    pub(super) fn succeeded(&self, cluster: &str, key: i32, what: &str) {
        if self.failing.lock().unwrap().remove(&key) {
            let broker = (key != LOOKUP).then_some(key);
            tracing::info!(cluster, broker, "{what} again: the source outage is over");
        }
    }
}
