//! Exponential backoff with full jitter, used for every retry against a broker.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The delay before the next attempt: uniform in `[ceiling/2, ceiling]` where the ceiling
    /// doubles per attempt up to `max` (half-jitter keeps a floor so retries never spin).
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = ceiling / 2;
        let jitter = rand::random_range(0..=half.as_micros().max(1) as u64);
        half + Duration::from_micros(jitter)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(101));
        for _ in 0..20 {
            let d = b.next_delay();
            assert!(d <= Duration::from_millis(1001), "{d:?}");
            assert!(d >= Duration::from_millis(50));
        }
        assert!(b.next_delay() >= Duration::from_millis(500));
        b.reset();
        assert_eq!(b.attempts(), 0);
    }
}
