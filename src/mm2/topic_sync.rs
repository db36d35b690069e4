//! Topic sync: makes the target hold a topic for every replicated source topic, with the
//! source's partition count (grown when the source grows) and its topic configs (MM2's
//! `sync.topic.configs`), and strait's own internal topics.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use kafka_protocol::error::ResponseError;

use crate::kafka::{Cluster, KafkaError};

/// A topic the target must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

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
    let timeout_ms = target.timeout_ms();
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
    let mut created = Vec::new();
    if !create.is_empty() {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(
                create
                    .iter()
                    .map(|s| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(s.name.clone())))
                            .with_num_partitions(s.partitions)
                            .with_replication_factor(s.replication_factor)
                            .with_configs(
                                s.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = target.send_any(&request).await?;
        for t in response.topics {
            let name = t.name.0.to_string();
            match t.error_code {
                0 => {
                    tracing::info!(cluster = %target.alias(), topic = %name, partitions = t.num_partitions, "created topic");
                    created.push(name);
                }
                code if code == ResponseError::TopicAlreadyExists.code() => {}
                code => {
                    let detail = t.error_message.map(|m| m.to_string()).unwrap_or_default();
                    KafkaError::check(
                        "CreateTopics",
                        || format!("topic {name} on {}: {detail}", target.alias()),
                        code,
                    )?;
                }
            }
        }
    }
    if !grow.is_empty() {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(
                grow.iter()
                    .map(|(s, _)| {
                        CreatePartitionsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(s.name.clone())))
                            .with_count(s.partitions)
                            .with_assignments(None)
                    })
                    .collect(),
            );
        let response = target.send_any(&request).await?;
        for r in response.results {
            let name = r.name.0.to_string();
            let detail = r.error_message.map(|m| m.to_string()).unwrap_or_default();
            KafkaError::check(
                "CreatePartitions",
                || format!("topic {name} on {}: {detail}", target.alias()),
                r.error_code,
            )?;
            if let Some((s, from)) = grow.iter().find(|(s, _)| s.name == name) {
                tracing::info!(cluster = %target.alias(), topic = %name, from, to = s.partitions, "added partitions");
            }
        }
    }
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

/// Kafka's `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;
/// `DescribeConfigs` config source of a value set on the topic itself.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// `AlterConfigOp.OpType.SET`.
const SET: i8 = 0;

/// Topic configs that differ from the broker defaults (set on the topic itself), by topic.
/// Sensitive values are left out.
pub async fn topic_configs(
    cluster: &Cluster,
    topics: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, KafkaError> {
    let mut out = BTreeMap::new();
    if topics.is_empty() {
        return Ok(out);
    }
    let request = DescribeConfigsRequest::default().with_resources(
        topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(StrBytes::from_string(t.clone()))
                    .with_configuration_keys(None)
            })
            .collect(),
    );
    let response = cluster.send_any(&request).await?;
    for r in response.results {
        let topic = r.resource_name.to_string();
        if r.error_code != 0 {
            tracing::debug!(%topic, code = r.error_code, "DescribeConfigs error; topic skipped");
            continue;
        }
        let configs = r
            .configs
            .into_iter()
            .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG && !c.is_sensitive)
            .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
            .collect();
        out.insert(topic, configs);
    }
    Ok(out)
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
    let changes: Vec<AlterableConfig> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(SET)
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    if changes.is_empty() {
        return Ok(0);
    }
    let count = changes.len();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(changes),
    ]);
    let response = target.send_any(&request).await?;
    for r in response.responses {
        let detail = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        KafkaError::check(
            "IncrementalAlterConfigs",
            || format!("topic {topic} on {}: {detail}", target.alias()),
            r.error_code,
        )?;
    }
    tracing::info!(cluster = %target.alias(), %topic, changed = count, "synced topic configs");
    Ok(count)
}
