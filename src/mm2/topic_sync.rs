//! Topic sync: makes the target hold a topic for every replicated source topic, with the
//! source's partition count (grown when the source grows) and its topic configs (MM2's
//! `sync.topic.configs`), and strait's own internal topics; a remote topic deleted on the
//! target while strait runs is created again ([`recreate_remote_topics`]), as soon as the
//! produce engine finds it missing. It decides what to create, grow or change;
//! [`crate::kafka::admin`] sends the requests.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio_util::sync::CancellationToken;

use crate::kafka::admin::{
    alter_topic_configs, create_partitions, create_topics, TopicResults, TopicSpec,
};
use crate::kafka::backoff::Backoff;
use crate::kafka::{Cluster, KafkaError};

/// Creates the topics that do not exist yet and adds partitions to those that have fewer
/// than asked. Each topic is done or refused on its own; a failed request is an error. The
/// results' `done` are the topics created (not those grown).
pub async fn ensure_topics(
    target: &Cluster,
    specs: &[TopicSpec],
) -> Result<TopicResults, KafkaError> {
    if specs.is_empty() {
        return Ok(TopicResults::default());
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
    let mut results = create_topics(target, &create).await?;
    let grown = create_partitions(target, &grow).await?;
    results.refused.extend(grown.refused);
    Ok(results)
}

/// [`ensure_topics`] for the remote twins of source topics, created with
/// `compression.type=producer` whatever the target's default, so that the broker stores the
/// forwarded batches as they are. A topic the target refuses (a name too long, a create
/// policy, an ACL) is reported and returned, so that its source topic is left out until a
/// later discovery gets it created; the others go ahead.
pub async fn ensure_remote_topics(
    target: &Cluster,
    specs: &[TopicSpec],
) -> Result<RemoteTopics, KafkaError> {
    let specs: Vec<TopicSpec> = specs.iter().map(remote_spec).collect();
    let results = ensure_topics(target, &specs).await?;
    let mut refused = HashSet::new();
    let created = results.done.into_iter().collect();
    for (topic, error) in results.refused {
        if error.is_retriable() {
            tracing::warn!(cluster = %target.alias(), %topic, %error, "cannot create or grow a remote topic yet; its source topic waits for the next discovery");
        } else {
            tracing::error!(cluster = %target.alias(), %topic, %error, "the target refused a remote topic; its source topic is not replicated (retried at each discovery)");
        }
        refused.insert(topic);
    }
    Ok(RemoteTopics { created, refused })
}

/// What [`ensure_remote_topics`] did: the remote topics it created, and those the target
/// refused.
#[derive(Debug, Default)]
pub struct RemoteTopics {
    pub created: HashSet<String>,
    pub refused: HashSet<String>,
}

/// `spec` with `compression.type=producer`, whatever the source topic has: the broker then
/// stores the forwarded batches as they are.
fn remote_spec(spec: &TopicSpec) -> TopicSpec {
    let mut spec = spec.clone();
    spec.configs.retain(|(k, _)| k != "compression.type");
    spec.configs
        .push(("compression.type".into(), "producer".into()));
    spec
}

/// The topics of `names` the target does not have: its metadata answers
/// UNKNOWN_TOPIC_OR_PARTITION for them (or leaves them out). A topic it has but cannot
/// serve right now (no leader, say) is not missing.
pub async fn missing_topics(target: &Cluster, names: &[String]) -> Result<Vec<String>, KafkaError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let found = target.metadata(Some(names)).await?;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    Ok(names
        .iter()
        .filter(|name| {
            found
                .iter()
                .find(|t| t.name == **name)
                .is_none_or(|t| t.error_code == unknown)
        })
        .cloned()
        .collect())
}

/// Creates again remote topics the target no longer has (deleted there while strait
/// replicates into them), as [`ensure_remote_topics`] creates them: the specs carry the
/// source's partition count and replicable configs, and `compression.type=producer` is
/// added. Each created is reported at WARN: the records the deleted topic held are gone with it,
/// and replication goes on in the new one from what the target had acknowledged. A topic
/// the target refuses is reported (ERROR when for good, a policy or an ACL; WARN when
/// retriable) and returned with its error: its partitions stay refused (paused) until it
/// is created or `produce.delivery.timeout.ms` stops them.
pub async fn recreate_remote_topics(
    target: &Cluster,
    specs: &[TopicSpec],
) -> Result<TopicResults, KafkaError> {
    let specs: Vec<TopicSpec> = specs.iter().map(remote_spec).collect();
    let refs: Vec<&TopicSpec> = specs.iter().collect();
    let results = create_topics(target, &refs).await?;
    // One that exists after all (created meanwhile) is neither done nor refused: no WARN.
    for spec in specs.iter().filter(|s| results.done.contains(&s.name)) {
        tracing::warn!(cluster = %target.alias(), topic = %spec.name, partitions = spec.partitions, "a remote topic was missing on the target (deleted there): re-created it with the source's partition count and configs; the records it held are gone, replication goes on from what the target had acknowledged");
    }
    for (topic, error) in &results.refused {
        if error.is_retriable() {
            tracing::warn!(cluster = %target.alias(), %topic, %error, "cannot re-create a remote topic yet; retrying while its partitions are refused");
        } else {
            tracing::error!(cluster = %target.alias(), %topic, %error, "the target refused to re-create a remote topic: its partitions stay paused until produce.delivery.timeout.ms stops them (asked again with backoff meanwhile)");
        }
    }
    Ok(results)
}

/// The first refusal of `results` as an error.
fn refusal(results: TopicResults) -> Result<(), KafkaError> {
    match results.refused.into_iter().next() {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// Creates one of strait's internal topics (MM2's and its own) of `partitions`, compacted,
/// `compression.type=producer` so that the broker keeps the uncompressed batches strait
/// writes (a broker default such as lz4 would recompress them; strait reads any codec back,
/// but MM2's tools and older readers may not). A cluster with fewer brokers than the
/// internal replication factor (MM2's default is 3; a one-broker test cluster has 1) gets a
/// topic with one replica per broker and a warning, rather than no replication at all.
pub async fn ensure_internal_topic(
    target: &Cluster,
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), KafkaError> {
    let spec = TopicSpec {
        name: name.to_string(),
        partitions,
        replication_factor,
        configs: vec![
            ("cleanup.policy".into(), "compact".into()),
            ("compression.type".into(), "producer".into()),
        ],
    };
    match refusal(ensure_topics(target, std::slice::from_ref(&spec)).await?) {
        Err(KafkaError::Broker {
            code: ResponseError::InvalidReplicationFactor,
            ..
        }) if target.broker_count() > 0 => {
            let brokers = target.broker_count() as i16;
            tracing::warn!(
                topic = %spec.name, wanted = spec.replication_factor, brokers,
                "the target has fewer brokers than internal.topic.replication.factor; creating the topic with one replica per broker"
            );
            refusal(
                ensure_topics(
                    target,
                    &[TopicSpec {
                        replication_factor: brokers,
                        ..spec
                    }],
                )
                .await?,
            )
        }
        other => other,
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
            done = ensure_internal_topic(cluster, name, 1, replication_factor) => match done {
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
