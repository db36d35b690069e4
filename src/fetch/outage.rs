//! Source outages as an operator reads them: the first failure of an outage (a fetch from a
//! broker, or the lookup of partition leaders) is one WARN naming the broker and the error,
//! the retries after it are DEBUG, and the first success after it is one INFO. A WARN per
//! retry would bury the log for as long as the source is down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::kafka::KafkaError;

/// What is failing now, and since when, shared by the fetcher's coordinator and its
/// sessions: a broker id, or [`LOOKUP`] for the leader lookup.
#[derive(Clone, Default)]
pub(super) struct Outages {
    failing: Arc<Mutex<HashMap<i32, Instant>>>,
}

/// The key of the leader lookup (Metadata to any broker), which no broker id takes.
pub(super) const LOOKUP: i32 = -1;

impl Outages {
    /// `what` (at broker `key`, or the leader [`LOOKUP`]) failed with `error`.
    pub(super) fn failed(&self, cluster: &str, key: i32, what: &str, error: &KafkaError) {
        let first = {
            let mut failing = self.failing.lock().unwrap();
            let first = !failing.contains_key(&key);
            failing.entry(key).or_insert_with(Instant::now);
            first
        };
        let broker = (key != LOOKUP).then_some(key);
        if first {
            tracing::warn!(cluster, broker, error = %error, retries = "logged at DEBUG until it recovers", "{what}");
        } else {
            tracing::debug!(cluster, broker, error = %error, "{what}");
        }
    }

    /// `what` (at broker `key`, or the leader [`LOOKUP`]) succeeded.
    pub(super) fn succeeded(&self, cluster: &str, key: i32, what: &str) {
        if self.failing.lock().unwrap().remove(&key).is_some() {
            let broker = (key != LOOKUP).then_some(key);
            tracing::info!(cluster, broker, "{what} again: the source outage is over");
        }
    }

    /// Since when the oldest failure still going on has lasted, if any does.
    pub(super) fn failing_since(&self) -> Option<Instant> {
        self.failing.lock().unwrap().values().min().copied()
    }
}
