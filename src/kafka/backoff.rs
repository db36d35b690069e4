//! Exponential backoff with full jitter, used for every retry against a broker, and
//! [`retry`]: the one retry-until-deadline loop of the request helpers.

use std::future::Future;
use std::time::Duration;

use super::KafkaError;

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

/// Runs `attempt` until it succeeds, fails with an error that is not retriable, or `timeout`
/// has passed since the first attempt (then the last error is returned). Retriable
/// failures (leader moving, coordinator loading, a dropped connection) wait a backoff delay
/// of 50 ms growing to 2 s.
pub async fn retry<T, F, Fut>(timeout: Duration, mut attempt: F) -> Result<T, KafkaError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, KafkaError>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        match attempt().await {
            Err(e) if e.is_retriable() && tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            other => return other,
        }
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

    fn retriable() -> KafkaError {
        KafkaError::Broker {
            api: "Produce",
            context: "t-0".into(),
            code: kafka_protocol::error::ResponseError::NotLeaderOrFollower,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_retries_retriable_errors_until_success() {
        let mut calls = 0;
        let got = retry(Duration::from_secs(30), || {
            calls += 1;
            let n = calls;
            async move {
                if n < 4 {
                    Err(retriable())
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(got.unwrap(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_gives_up_at_the_deadline_and_on_fatal_errors() {
        let start = tokio::time::Instant::now();
        let mut calls = 0;
        let got: Result<(), _> = retry(Duration::from_secs(10), || {
            calls += 1;
            async { Err(retriable()) }
        })
        .await;
        assert!(got.unwrap_err().is_retriable());
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_secs(10) && waited < Duration::from_secs(13),
            "{waited:?}"
        );
        assert!(calls > 5, "{calls} attempts");

        let mut calls = 0;
        let fatal: Result<(), _> = retry(Duration::from_secs(10), || {
            calls += 1;
            async { Err(KafkaError::Other("broken".into())) }
        })
        .await;
        assert!(fatal.is_err());
        assert_eq!(calls, 1);
    }
}
