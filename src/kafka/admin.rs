//! Admin requests about topics: CreateTopics, CreatePartitions, DescribeConfigs and
//! IncrementalAlterConfigs, with their per-topic results checked and named (topic, cluster,
//! Kafka error code and message). What to create or change is [`crate::mm2::topic_sync`]'s
//! business; these functions only say it to a cluster.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
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

use super::{Cluster, KafkaError};

/// A topic the target must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Kafka's `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;
/// `DescribeConfigs` config source of a value set on the topic itself.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// `AlterConfigOp.OpType.SET`.
const SET: i8 = 0;

/// Creates `topics`; one that already exists is not an error. Returns the names of the
/// topics created.
pub async fn create_topics(
    target: &Cluster,
    topics: &[&TopicSpec],
) -> Result<Vec<String>, KafkaError> {
    let mut created = Vec::new();
    if topics.is_empty() {
        return Ok(created);
    }
    let timeout_ms = target.timeout_ms();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(
            topics
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
    Ok(created)
}

/// Grows each topic of `grow` (spec, current partition count) to the spec's partition count.
pub async fn create_partitions(
    target: &Cluster,
    grow: &[(&TopicSpec, usize)],
) -> Result<(), KafkaError> {
    if grow.is_empty() {
        return Ok(());
    }
    let timeout_ms = target.timeout_ms();
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
    Ok(())
}

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

/// Sets `changes` on topic `topic` (IncrementalAlterConfigs SET).
pub async fn alter_topic_configs(
    target: &Cluster,
    topic: &str,
    changes: &BTreeMap<String, String>,
) -> Result<(), KafkaError> {
    let changes = changes
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(SET)
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
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
    Ok(())
}
