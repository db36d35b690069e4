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

/// What a cluster answered for each topic of [`create_topics`] or [`create_partitions`]:
/// one topic refused (a name too long, a create policy, an ACL) leaves the others done.
#[derive(Debug, Default)]
pub struct TopicResults {
    /// Topics created, or grown.
    pub done: Vec<String>,
    /// Topics the cluster refused, each with its error (Kafka error code and message).
    pub refused: Vec<(String, KafkaError)>,
}

impl TopicResults {
    fn merge(&mut self, other: TopicResults) {
        self.done.extend(other.done);
        self.refused.extend(other.refused);
    }
}

/// Metadata records one request may ask the controller for. A KRaft controller refuses an
/// operation of more than 10,000 records (`QuorumController.MAX_RECORDS_PER_USER_OP`:
/// "Unable to perform excessively large batch operation"); a new topic takes one record,
/// plus one per partition and one per config, a new partition one.
const MAX_RECORDS_PER_REQUEST: usize = 5_000;

/// Splits `items` into runs of at most `budget` in total `weight`, in order; an item
/// heavier than the budget goes alone (the cluster judges it).
fn chunks<T>(items: &[T], weight: impl Fn(&T) -> usize, budget: usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut total) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let w = weight(item);
        if i > start && total + w > budget {
            out.push(&items[start..i]);
            (start, total) = (i, 0);
        }
        total += w;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// The controller records creating `spec` takes: the topic, its partitions, its configs.
fn creation_records(spec: &TopicSpec) -> usize {
    1 + usize::try_from(spec.partitions).unwrap_or(0) + spec.configs.len()
}

/// Creates `topics`, in requests of at most [`MAX_RECORDS_PER_REQUEST`] controller records;
/// one that already exists is neither created nor refused. A failed request is an error;
/// refused topics are in the results.
pub async fn create_topics(
    target: &Cluster,
    topics: &[&TopicSpec],
) -> Result<TopicResults, KafkaError> {
    let mut results = TopicResults::default();
    for chunk in chunks(topics, |s| creation_records(s), MAX_RECORDS_PER_REQUEST) {
        results.merge(create_topics_request(target, chunk).await?);
    }
    Ok(results)
}

/// One CreateTopics request for `topics`.
async fn create_topics_request(
    target: &Cluster,
    topics: &[&TopicSpec],
) -> Result<TopicResults, KafkaError> {
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
    let mut results = TopicResults::default();
    for t in response.topics {
        let name = t.name.0.to_string();
        match t.error_code {
            0 => {
                tracing::info!(cluster = %target.alias(), topic = %name, partitions = t.num_partitions, "created topic");
                results.done.push(name);
            }
            code if code == ResponseError::TopicAlreadyExists.code() => {}
            code => {
                let detail = t.error_message.map(|m| m.to_string()).unwrap_or_default();
                if let Err(e) = KafkaError::check(
                    "CreateTopics",
                    || format!("topic {name} on {}: {detail}", target.alias()),
                    code,
                ) {
                    results.refused.push((name, e));
                }
            }
        }
    }
    Ok(results)
}

/// Grows each topic of `grow` (spec, current partition count) to the spec's partition
/// count, in requests of at most [`MAX_RECORDS_PER_REQUEST`] new partitions. A failed
/// request is an error; refused topics are in the results.
pub async fn create_partitions(
    target: &Cluster,
    grow: &[(&TopicSpec, usize)],
) -> Result<TopicResults, KafkaError> {
    let weight = |(s, from): &(&TopicSpec, usize)| {
        usize::try_from(s.partitions)
            .unwrap_or(0)
            .saturating_sub(*from)
    };
    let mut results = TopicResults::default();
    for chunk in chunks(grow, weight, MAX_RECORDS_PER_REQUEST) {
        results.merge(create_partitions_request(target, chunk).await?);
    }
    Ok(results)
}

/// One CreatePartitions request for `grow`.
async fn create_partitions_request(
    target: &Cluster,
    grow: &[(&TopicSpec, usize)],
) -> Result<TopicResults, KafkaError> {
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
    let mut results = TopicResults::default();
    for r in response.results {
        let name = r.name.0.to_string();
        let detail = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        if let Err(e) = KafkaError::check(
            "CreatePartitions",
            || format!("topic {name} on {}: {detail}", target.alias()),
            r.error_code,
        ) {
            results.refused.push((name, e));
            continue;
        }
        if let Some((s, from)) = grow.iter().find(|(s, _)| s.name == name) {
            tracing::info!(cluster = %target.alias(), topic = %name, from, to = s.partitions, "added partitions");
        }
        results.done.push(name);
    }
    Ok(results)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::{ApiKey, CreateTopicsResponse, RequestKind, ResponseKind};

    /// A KRaft controller's limit on the records of one operation
    /// (`QuorumController.MAX_RECORDS_PER_USER_OP`).
    const CONTROLLER_MAX_RECORDS: usize = 10_000;

    /// The records a CreateTopics request asks the controller for.
    fn records_asked(request: &CreateTopicsRequest) -> usize {
        request
            .topics
            .iter()
            .map(|t| 1 + t.num_partitions.max(0) as usize + t.configs.len())
            .sum()
    }

    /// 1,000 topics of 10 partitions are 11,000 controller records: in one request the
    /// controller refuses them all ("Unable to perform excessively large batch operation",
    /// POLICY_VIOLATION, as a KRaft broker answered at that scale); split, all are created.
    #[tokio::test]
    async fn many_topics_are_created_in_requests_the_controller_accepts() {
        let broker = FakeBroker::start(1, &[], |r| match &r.body {
            RequestKind::CreateTopics(request) => {
                let too_large = records_asked(request) > CONTROLLER_MAX_RECORDS;
                let topics = request
                    .topics
                    .iter()
                    .map(|t| {
                        let result = CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_num_partitions(t.num_partitions);
                        if too_large {
                            result
                                .with_error_code(ResponseError::PolicyViolation.code())
                                .with_error_message(Some(StrBytes::from_static_str(
                                    "Unable to perform excessively large batch operation.",
                                )))
                        } else {
                            result
                        }
                    })
                    .collect();
                Reply::Answer(ResponseKind::CreateTopics(
                    CreateTopicsResponse::default().with_topics(topics),
                ))
            }
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new(
            "fake",
            vec![broker.addr.clone()],
            "test",
            std::time::Duration::from_secs(2),
        );
        let specs: Vec<TopicSpec> = (0..1_000)
            .map(|i| TopicSpec {
                name: format!("a.topic-{i}"),
                partitions: 10,
                replication_factor: -1,
                configs: Vec::new(),
            })
            .collect();
        let specs: Vec<&TopicSpec> = specs.iter().collect();
        let results = create_topics(&cluster, &specs).await.unwrap();
        assert!(
            results.refused.is_empty(),
            "{} topics refused, the first: {}",
            results.refused.len(),
            results.refused[0].1
        );
        assert_eq!(results.done.len(), 1_000);
        let asked: Vec<usize> = broker
            .received_of(ApiKey::CreateTopics)
            .iter()
            .map(|r| match &r.body {
                RequestKind::CreateTopics(request) => records_asked(request),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(asked.iter().sum::<usize>(), 11_000);
        assert!(
            asked.iter().all(|&n| n <= MAX_RECORDS_PER_REQUEST),
            "{asked:?}"
        );
    }

    #[test]
    fn chunks_stay_within_the_budget_and_keep_every_item_in_order() {
        let weights = [3, 4, 2, 9, 1, 1, 12, 5];
        let split = chunks(&weights, |w| *w, 10);
        assert_eq!(
            split,
            [&[3, 4, 2][..], &[9, 1][..], &[1][..], &[12][..], &[5][..]]
        );
        assert!(chunks(&weights[..0], |w| *w, 10).is_empty());
    }
}
