//! How many Produce requests a partition may have in flight when `produce.max.in.flight` is
//! not set: sized from the round trip to its target broker. A forwarder sends a source batch
//! as it is, one per partition per request (Kafka's rule), so over a long round trip it
//! moves at most window × batch size per round trip and partition: 5 in flight fill a
//! loopback or same-zone link, a target 50 ms away needs some 30.
//!
//! The round trip is the shortest Produce answer time seen lately (a windowed minimum over
//! two periods of [`PERIOD`]), not the mean: a broker with a queue answers late, and a
//! window sized from its queueing would deepen the queue it measures. The window is one
//! request per [`PER_REQUEST`] of that round trip, at least [`LEAST`] (the depth at which
//! the broker recognises every resend) and at most [`MOST`]; a broker not heard from yet
//! gets [`LEAST`].

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The window of a broker with a short round trip, and before any answer.
pub const LEAST: usize = 5;
/// The deepest window (`produce.max.in.flight` at most).
pub const MOST: usize = 64;
/// The part of the round trip one request in flight covers.
const PER_REQUEST: Duration = Duration::from_millis(3);
/// How long a minimum stands before a newer one replaces it.
const PERIOD: Duration = Duration::from_secs(30);

/// The shortest round trip of one broker, over the current and the last period.
#[derive(Debug, Clone, Copy)]
struct Shortest {
    current: Duration,
    last: Duration,
    since: Instant,
}

/// The round trips to the target brokers, and the windows they call for.
#[derive(Debug, Default)]
pub struct Windows {
    brokers: HashMap<i32, Shortest>,
}

impl Windows {
    /// A Produce request to `broker` was answered after `round_trip`, at `now`.
    pub fn observe(&mut self, broker: i32, round_trip: Duration, now: Instant) {
        let s = self.brokers.entry(broker).or_insert(Shortest {
            current: round_trip,
            last: round_trip,
            since: now,
        });
        if now.saturating_duration_since(s.since) >= PERIOD {
            s.last = s.current;
            s.current = round_trip;
            s.since = now;
        } else {
            s.current = s.current.min(round_trip);
        }
    }

    /// The requests a partition led by `broker` may have in flight.
    pub fn of(&self, broker: i32) -> usize {
        let Some(s) = self.brokers.get(&broker) else {
            return LEAST;
        };
        let shortest = s.current.min(s.last);
        let requests = shortest.as_micros().div_ceil(PER_REQUEST.as_micros());
        usize::try_from(requests).unwrap_or(MOST).clamp(LEAST, MOST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_near_broker_gets_the_least_window_and_a_far_one_a_deeper_one() {
        let now = Instant::now();
        let mut w = Windows::default();
        assert_eq!(w.of(1), LEAST, "not heard from yet");
        w.observe(1, 2 * MS, now);
        assert_eq!(w.of(1), LEAST);
        w.observe(2, 100 * MS, now);
        assert_eq!(w.of(2), 34);
        w.observe(3, 2 * Duration::from_secs(1), now);
        assert_eq!(w.of(3), MOST);
    }

    /// Answers slowed by a queue at the broker do not deepen the window: the shortest round
    /// trip counts, until it is two periods old.
    #[test]
    fn the_window_follows_the_shortest_round_trip_of_the_last_two_periods() {
        let start = Instant::now();
        let mut w = Windows::default();
        w.observe(1, 100 * MS, start);
        w.observe(1, 400 * MS, start + MS);
        assert_eq!(w.of(1), 34, "a queued answer changes nothing");
        // The route got shorter: the new minimum counts at once.
        w.observe(1, 10 * MS, start + 2 * MS);
        assert_eq!(w.of(1), LEAST);
        // Longer again: the short one stands for this period and the next.
        w.observe(1, 150 * MS, start + PERIOD);
        assert_eq!(w.of(1), LEAST);
        w.observe(1, 150 * MS, start + 2 * PERIOD);
        assert_eq!(w.of(1), 50);
    }
}
