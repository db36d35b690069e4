//! Topic sync: makes the target hold a topic for every replicated source topic, with the
//! source's partition count (grown when the source grows), and strait's own internal topics.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::{Cluster, KafkaError};

const TOPIC_ALREADY_EXISTS: i16 = 36;

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
    let timeout_ms = target.timeout().as_millis().min(i32::MAX as u128) as i32;
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
        let response = target
            .with_retry(|conn| {
                let request = &request;
                async move { conn.send(request).await }
            })
            .await?;
        for t in response.topics {
            let name = t.name.0.to_string();
            match t.error_code {
                0 => {
                    tracing::info!(cluster = %target.alias(), topic = %name, partitions = t.num_partitions, "created topic");
                    created.push(name);
                }
                TOPIC_ALREADY_EXISTS => {}
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
        let response = target
            .with_retry(|conn| {
                let request = &request;
                async move { conn.send(request).await }
            })
            .await?;
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
