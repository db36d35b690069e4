//! Consumer groups as strait reads them on the source and writes them on the target:
//! listing (every broker coordinates some groups), members (DescribeGroups: is MirrorMaker
//! 2's Connect worker group alive?), committed offsets (OffsetFetch at the group's
//! coordinator) and commits on behalf of an empty group (OffsetCommit with generation -1,
//! which a coordinator accepts only while the group has no members).

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::backoff::retry;
use crate::kafka::cluster::CoordinatorKind;
use crate::kafka::{Cluster, Connection, KafkaError, TopicPartition};

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub group_id: String,
    /// `Empty`, `Stable`, `PreparingRebalance`, ... (empty when the broker does not say).
    pub state: String,
}

/// A live group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// `consumer`, `connect`, ... (empty for a group without members).
    pub protocol_type: String,
    /// Each member as `client_id@host`.
    pub members: Vec<String>,
}

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub metadata: String,
}

/// Every group of the cluster (ListGroups goes to each broker, retried while a broker's
/// group coordinator is loading, as it is for a while after the broker starts).
pub async fn list(cluster: &Cluster) -> Result<Vec<Listing>, KafkaError> {
    cluster.metadata(Some(&[])).await?;
    let mut out = Vec::new();
    for id in cluster.broker_ids() {
        let response = retry(cluster.timeout(), || async {
            let conn = cluster.broker(id).await?;
            let response = conn.send(&ListGroupsRequest::default()).await?;
            KafkaError::check("ListGroups", || format!("broker {id}"), response.error_code)?;
            Ok(response)
        })
        .await?;
        out.extend(response.groups.into_iter().map(|g| Listing {
            group_id: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
        }));
    }
    out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    out.dedup_by(|a, b| a.group_id == b.group_id);
    Ok(out)
}

/// `group` as its coordinator describes it; `None` if it does not exist.
pub async fn describe(cluster: &Cluster, group: &str) -> Result<Option<Described>, KafkaError> {
    let conn = coordinator(cluster, group).await?;
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
    let response = conn.send(&request).await?;
    let Some(g) = response.groups.into_iter().next() else {
        return Ok(None);
    };
    if g.error_code == ResponseError::GroupIdNotFound.code() || g.group_state.as_str() == "Dead" {
        return Ok(None);
    }
    KafkaError::check(
        "DescribeGroups",
        || format!("group {group} on {}", cluster.alias()),
        g.error_code,
    )?;
    Ok(Some(Described {
        protocol_type: g.protocol_type.to_string(),
        members: g
            .members
            .iter()
            .map(|m| format!("{}@{}", m.client_id, m.client_host))
            .collect(),
    }))
}

/// The connection to `group`'s coordinator, retried while the coordinator is loading.
pub async fn coordinator(cluster: &Cluster, group: &str) -> Result<Connection, KafkaError> {
    retry(cluster.timeout(), || {
        cluster.coordinator(CoordinatorKind::Group, group)
    })
    .await
}

/// The offsets `group` committed, by topic-partition (partitions without a commit are left out).
pub async fn committed(
    cluster: &Cluster,
    group: &str,
) -> Result<HashMap<TopicPartition, Committed>, KafkaError> {
    retry(cluster.timeout(), || async {
        let conn = coordinator(cluster, group).await?;
        let id = GroupId(StrBytes::from_string(group.to_string()));
        // v8+ takes a list of groups (KIP-709); earlier versions one group id.
        let request = match conn.version::<OffsetFetchRequest>() {
            Some(v) if v >= 8 => {
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(id)
                    .with_topics(None)])
            }
            _ => OffsetFetchRequest::default()
                .with_group_id(id)
                .with_topics(None),
        };
        let response = conn.send(&request).await?;
        let mut out = HashMap::new();
        let mut add =
            |topic: &str, partition: i32, offset: i64, metadata: Option<&StrBytes>, code: i16| {
                if code == 0 && offset >= 0 {
                    out.insert(
                        TopicPartition::new(topic, partition),
                        Committed {
                            offset,
                            metadata: metadata.map(|m| m.to_string()).unwrap_or_default(),
                        },
                    );
                }
            };
        if let Some(g) = response.groups.first() {
            KafkaError::check("OffsetFetch", || format!("group {group}"), g.error_code)?;
            for t in &g.topics {
                for p in &t.partitions {
                    add(
                        &t.name.0,
                        p.partition_index,
                        p.committed_offset,
                        p.metadata.as_ref(),
                        p.error_code,
                    );
                }
            }
        } else {
            KafkaError::check(
                "OffsetFetch",
                || format!("group {group}"),
                response.error_code,
            )?;
            for t in &response.topics {
                for p in &t.partitions {
                    add(
                        &t.name.0,
                        p.partition_index,
                        p.committed_offset,
                        p.metadata.as_ref(),
                        p.error_code,
                    );
                }
            }
        }
        Ok(out)
    })
    .await
}

/// Commits `offsets` for `group` as an outsider (generation -1, no member id): the
/// coordinator refuses it while the group has members, which is what strait wants.
pub async fn commit(
    cluster: &Cluster,
    group: &str,
    offsets: &[(TopicPartition, Committed)],
) -> Result<(), KafkaError> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (tp, c) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(c.offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(StrBytes::from_string(c.metadata.clone())));
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::default())
        .with_retention_time_ms(-1)
        .with_topics(topics);
    retry(cluster.timeout(), || async {
        let conn = coordinator(cluster, group).await?;
        let response = conn.send(&request).await?;
        for t in &response.topics {
            for p in &t.partitions {
                KafkaError::check(
                    "OffsetCommit",
                    || format!("group {group} {}-{}", t.name.0.as_str(), p.partition_index),
                    p.error_code,
                )?;
            }
        }
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::list_groups_response::ListedGroup;
    use kafka_protocol::messages::{ListGroupsResponse, RequestKind, ResponseKind};

    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};

    /// A broker whose group coordinator is still loading answers ListGroups with
    /// COORDINATOR_LOAD_IN_PROGRESS: that is a wait, not a failed round of checkpoints.
    #[tokio::test]
    async fn a_loading_coordinator_is_waited_for() {
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        let broker = FakeBroker::start(1, &[], move |r| match r.body {
            RequestKind::ListGroups(_) => {
                let loading = count.fetch_add(1, Ordering::SeqCst) < 2;
                let response = if loading {
                    ListGroupsResponse::default()
                        .with_error_code(ResponseError::CoordinatorLoadInProgress.code())
                } else {
                    ListGroupsResponse::default().with_groups(vec![ListedGroup::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("g")))
                        .with_group_state(StrBytes::from_static_str("Empty"))])
                };
                Reply::Answer(ResponseKind::ListGroups(response))
            }
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new(
            "source",
            vec![broker.addr.clone()],
            "strait-test",
            Duration::from_secs(10),
        );
        let groups = list(&cluster).await.unwrap();
        assert_eq!(
            groups,
            [Listing {
                group_id: "g".into(),
                state: "Empty".into()
            }]
        );
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }
}
