//! Heartbeats, as MM2's `MirrorHeartbeatConnector` writes them: every
//! `emit.heartbeats.interval.seconds` a `Heartbeat(source, target, now)` record goes to the
//! `heartbeats` topic on the target. Replicated onward (`source.heartbeats`, nesting as
//! `a.b.heartbeats`), they are how `RemoteClusterUtils` finds upstream clusters and hops.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::records::{self, Heartbeat};
use crate::config::FlowConfig;
use crate::kafka::appender::append;
use crate::kafka::log_reader::read_keyed_tail;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::topic_sync::await_internal_topic;
use crate::now_ms;

/// Heartbeat intervals without a heartbeat after which a flow is taken as not running
/// (beyond a 5 s allowance for a slow target).
const SILENCE_INTERVALS: i64 = 3;

/// Heartbeat records looked at, from the end of the heartbeats topic: a second's worth of
/// many flows into one target.
const TAIL: i64 = 1000;

/// How long the heartbeats of `flow` may be silent while something still replicates it, in
/// milliseconds; `None` when the flow emits none (`emit.heartbeats.enabled = false`).
pub fn silence_ms(flow: &FlowConfig) -> Option<i64> {
    flow.emit_heartbeats
        .enabled
        .then(|| SILENCE_INTERVALS * flow.emit_heartbeats.interval_ms as i64 + 5_000)
}

/// The timestamp of the last heartbeat of `flow` among the last records of the heartbeats
/// topic on its target, if any: whoever wrote it (strait, or an MM2 on the same flow).
pub async fn last_heard(target: &Cluster, flow: &FlowConfig) -> Result<Option<i64>, KafkaError> {
    let tp = TopicPartition::new(flow.policy.heartbeats_topic(), 0);
    let records = read_keyed_tail(target, &tp, TAIL)
        .await?
        .unwrap_or_default();
    Ok(records
        .iter()
        .filter_map(|(_, key, value)| Heartbeat::decode(key, value).ok())
        .filter(|h| h.source_cluster_alias == flow.source && h.target_cluster_alias == flow.target)
        .map(|h| h.timestamp)
        .max())
}

/// Where and how often one flow's heartbeats are written.
#[derive(Debug, Clone)]
pub struct HeartbeatConfig {
    pub source_alias: String,
    pub target_alias: String,
    /// The heartbeats topic of the replication policy (`heartbeats`).
    pub topic: String,
    pub interval: Duration,
    pub replication_factor: i16,
}

/// Emits heartbeats until `shutdown`, which also cuts short a heartbeat on its way (it is
/// not worth a wait at shutdown), at the ticks `beats` holds true at (one process of a
/// scale-out group writes a flow's heartbeats). Failures are logged and retried at the next
/// tick: a missed heartbeat is what a lag dashboard should see, not a reason to stop
/// replicating.
pub async fn run(
    config: HeartbeatConfig,
    target: Arc<Cluster>,
    beats: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    if !await_internal_topic(&target, &config.topic, config.replication_factor, &shutdown).await? {
        return Ok(());
    }
    let tp = TopicPartition::new(config.topic.as_str(), 0);
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tick.tick() => {}
        }
        if !*beats.borrow() {
            continue;
        }
        let heartbeat = Heartbeat {
            source_cluster_alias: config.source_alias.clone(),
            target_cluster_alias: config.target_alias.clone(),
            timestamp: now_ms(),
        };
        let batch = records::batch(
            &[(heartbeat.encode_key(), heartbeat.encode_value())],
            heartbeat.timestamp,
        );
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            written = append(&target, &tp, &batch) => if let Err(e) = written {
                tracing::warn!(topic = %config.topic, error = %e, "heartbeat not written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use kafka_protocol::messages::RequestKind;

    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};

    /// A target unreachable when the task starts (nothing listens on loopback port 9) must
    /// not end the task: it retries until the target answers or the flow stops.
    #[tokio::test]
    async fn an_unreachable_target_at_start_is_retried_not_the_end_of_heartbeats() {
        let target = Arc::new(Cluster::new(
            "b",
            vec!["127.0.0.1:9".to_string()],
            "strait-test",
            Duration::from_millis(200),
        ));
        let config = HeartbeatConfig {
            source_alias: "a".into(),
            target_alias: "b".into(),
            topic: "heartbeats".into(),
            interval: Duration::from_secs(1),
            replication_factor: 1,
        };
        let shutdown = CancellationToken::new();
        let (_beats, beating) = watch::channel(true);
        let task = tokio::spawn(run(config, target, beating, shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!task.is_finished(), "gave up: {:?}", task.await);
        shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(2), task).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }

    /// A heartbeat the target never answers does not hold up shutdown until the request
    /// times out: the task ends as soon as the flow stops.
    #[tokio::test]
    async fn shutdown_does_not_wait_for_an_unanswered_heartbeat() {
        let produced = Arc::new(AtomicBool::new(false));
        let seen = produced.clone();
        let broker = FakeBroker::start(1, &[("heartbeats", 1)], move |r| match r.body {
            RequestKind::Produce(_) => {
                seen.store(true, Ordering::SeqCst);
                Reply::Stall
            }
            _ => Reply::Default,
        })
        .await;
        let target = Arc::new(Cluster::new(
            "b",
            vec![broker.addr.clone()],
            "strait-test",
            Duration::from_secs(60),
        ));
        let config = HeartbeatConfig {
            source_alias: "a".into(),
            target_alias: "b".into(),
            topic: "heartbeats".into(),
            interval: Duration::from_millis(100),
            replication_factor: 1,
        };
        let shutdown = CancellationToken::new();
        let (_beats, beating) = watch::channel(true);
        let task = tokio::spawn(run(config, target, beating, shutdown.clone()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !produced.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(produced.load(Ordering::SeqCst), "a heartbeat was sent");
        shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }

    /// A process of a scale-out group that does not own slot 0 writes no heartbeat; once it
    /// does, it writes them.
    #[tokio::test]
    async fn only_a_process_told_to_beat_writes_heartbeats() {
        use std::sync::atomic::AtomicUsize;
        let produced = Arc::new(AtomicUsize::new(0));
        let seen = produced.clone();
        let broker = FakeBroker::start(1, &[("heartbeats", 1)], move |r| {
            if let RequestKind::Produce(_) = r.body {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            Reply::Default
        })
        .await;
        let target = Arc::new(Cluster::new(
            "b",
            vec![broker.addr.clone()],
            "strait-test",
            Duration::from_secs(5),
        ));
        let config = HeartbeatConfig {
            source_alias: "a".into(),
            target_alias: "b".into(),
            topic: "heartbeats".into(),
            interval: Duration::from_millis(50),
            replication_factor: 1,
        };
        let shutdown = CancellationToken::new();
        let (beats, beating) = watch::channel(false);
        let task = tokio::spawn(run(config, target, beating, shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            produced.load(Ordering::SeqCst),
            0,
            "no heartbeat while not told to"
        );
        beats.send_replace(true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while produced.load(Ordering::SeqCst) < 2 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            produced.load(Ordering::SeqCst) >= 2,
            "heartbeats once told to"
        );
        shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }
}
