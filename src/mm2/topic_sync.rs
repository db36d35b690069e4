//! Topic sync: makes the target hold a topic for every replicated source topic, with the
//! source's partition count (grown when the source grows) and its topic configs (MM2's
//! `sync.topic.configs`), and strait's own internal topics. It decides what to create, grow
//! or change; [`crate::kafka::admin`] sends the requests.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio_util::sync::CancellationToken;

use crate::kafka::admin::{alter_topic_configs, create_partitions, create_topics, TopicSpec};
use crate::kafka::backoff::Backoff;
use crate::kafka::{Cluster, KafkaError};

/// Creates the topics that do not exist yet and adds partitions to those that have fewer
/// than asked. Returns the names of topics created.
pub async fn ensure_topics(
    target: &Cluster,
    specs: &[TopicSpec],
) -> Result<Vec<String>, KafkaError> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let existing = target.metadata(Some(&names)).await?;
    let mut create = Vec::new();
    let mut grow = Vec::new();
    for spec in specs {
        match existing
            .iter()
            .find(|t| t.name == spec.name && t.error_code == 0)
        {
            None => create.push(spec),
            Some(t) if (t.partitions.len() as i32) < spec.partitions => {
                grow.push((spec, t.partitions.len()))
            }
            Some(_) => {}
        }
    }
    let created = create_topics(target, &create).await?;
    create_partitions(target, &grow).await?;
    Ok(created)
}

/// Creates one of strait's internal topics (MM2's and its own): one partition, compacted. A
/// cluster with fewer brokers than the internal replication factor (MM2's default is 3; a
/// one-broker test cluster has 1) gets a topic with one replica per broker and a warning,
/// rather than no replication at all.
pub async fn ensure_internal_topic(
    target: &Cluster,
    name: &str,
    replication_factor: i16,
) -> Result<(), KafkaError> {
    let spec = TopicSpec {
        name: name.to_string(),
        partitions: 1,
        replication_factor,
        configs: vec![("cleanup.policy".into(), "compact".into())],
    };
    match ensure_topics(target, std::slice::from_ref(&spec)).await {
        Err(KafkaError::Broker {
            code: ResponseError::InvalidReplicationFactor,
            ..
        }) if target.broker_count() > 0 => {
            let brokers = target.broker_count() as i16;
            tracing::warn!(
                topic = %spec.name, wanted = spec.replication_factor, brokers,
                "the target has fewer brokers than internal.topic.replication.factor; creating the topic with one replica per broker"
            );
            ensure_topics(
                target,
                &[TopicSpec {
                    replication_factor: brokers,
                    ..spec
                }],
            )
            .await?;
            Ok(())
        }
        other => other.map(|_| ()),
    }
}

/// [`ensure_internal_topic`] at the start of a background task (heartbeats, checkpoints,
/// offset syncs): a transient failure (the cluster unreachable, a controller moving) must
/// not disable the task for the life of the process, so it is retried with backoff, with a
/// warning each time; a lasting one (an ACL, a create policy) is the task's error. `false`
/// when `shutdown` came first.
pub async fn await_internal_topic(
    cluster: &Cluster,
    name: &str,
    replication_factor: i16,
    shutdown: &CancellationToken,
) -> Result<bool, KafkaError> {
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        let error = tokio::select! {
            _ = shutdown.cancelled() => return Ok(false),
            done = ensure_internal_topic(cluster, name, replication_factor) => match done {
                Err(e) if e.is_retriable() => e,
                done => return done.map(|()| true),
            },
        };
        let delay = backoff.next_delay();
        tracing::warn!(cluster = %cluster.alias(), topic = %name, error = %error, retry_in_ms = delay.as_millis() as u64, "cannot create an internal topic yet; retrying");
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(false),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// The configs strait copies from a source topic: MM2's `config.properties.exclude` applies,
/// and `compression.type` always stays `producer` on the target so that the broker stores the
/// forwarded batches as they are (whatever codec each was written with).
pub fn replicable_configs(
    configs: &BTreeMap<String, String>,
    exclude: &[regex::Regex],
) -> BTreeMap<String, String> {
    configs
        .iter()
        .filter(|(k, _)| k.as_str() != "compression.type" && !exclude.iter().any(|r| r.is_match(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Sets on the target topic every wanted config whose value differs (IncrementalAlterConfigs
/// SET). Returns the number of values changed.
pub async fn apply_configs(
    target: &Cluster,
    topic: &str,
    wanted: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
) -> Result<usize, KafkaError> {
    let changes: BTreeMap<String, String> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if changes.is_empty() {
        return Ok(0);
    }
    let count = changes.len();
    alter_topic_configs(target, topic, &changes).await?;
    tracing::info!(cluster = %target.alias(), %topic, changed = count, "synced topic configs");
    Ok(count)
}
