//! Checkpoints and consumer-group offset sync, as MM2's `MirrorCheckpointConnector` does
//! them, but exact: every `emit.checkpoints.interval.seconds` the committed source offsets of
//! the groups the filter selects are translated through the flow's offset maps (a breakpoint
//! at every offset gap, so the translation is the target offset of the very record the group
//! would read next) and written as MM2 `Checkpoint` records to
//! `<source>.checkpoints.internal` on the target. With `sync.group.offsets.enabled`, the
//! translated offsets are also committed for groups that are empty (or absent) on the
//! target, only ever moving them forward.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::records::{self, Checkpoint};
use crate::filter::GroupFilter;
use crate::kafka::appender::append;
use crate::kafka::groups::{self, Committed};
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::topic_sync::await_internal_topic;
use crate::now_ms;
use crate::offset_map::Translations;
use crate::policy::ReplicationPolicy;

#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    pub source_alias: String,
    pub groups: GroupFilter,
    pub policy: ReplicationPolicy,
    pub interval: Duration,
    /// `Some(interval)` when `sync.group.offsets.enabled`.
    pub sync_group_offsets: Option<Duration>,
    pub replication_factor: i16,
}

/// Emits checkpoints (and syncs group offsets) until `shutdown`.
pub async fn run(
    config: CheckpointConfig,
    source: Arc<Cluster>,
    target: Arc<Cluster>,
    translations: Translations,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    let topic = config.policy.checkpoints_topic(&config.source_alias);
    if !await_internal_topic(&target, &topic, config.replication_factor, &shutdown).await? {
        return Ok(());
    }
    let tp = TopicPartition::new(topic.as_str(), 0);
    let mut emitted: HashMap<(String, TopicPartition), Checkpoint> = HashMap::new();
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sync_tick = tokio::time::interval(
        config
            .sync_group_offsets
            .unwrap_or(Duration::from_secs(3600)),
    );
    sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tick.tick() => {
                match checkpoints(&config, &source, &translations).await {
                    Ok(all) => {
                        let fresh: Vec<&Checkpoint> = all
                            .iter()
                            .filter(|c| emitted.get(&(c.consumer_group_id.clone(), c.topic_partition.clone())) != Some(*c))
                            .collect();
                        if fresh.is_empty() {
                            continue;
                        }
                        let records: Vec<_> = fresh.iter().map(|c| (c.encode_key(), c.encode_value())).collect();
                        match append(&target, &tp, &records::batch(&records, now_ms())).await {
                            Ok(_) => {
                                tracing::debug!(count = fresh.len(), topic = %topic, "checkpoints written");
                                for c in all {
                                    emitted.insert((c.consumer_group_id.clone(), c.topic_partition.clone()), c);
                                }
                            }
                            Err(e) => tracing::warn!(topic = %topic, error = %e, "checkpoints not written"),
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read source consumer groups"),
                }
            }
            _ = sync_tick.tick(), if config.sync_group_offsets.is_some() => {
                if let Err(e) = sync_groups(&target, emitted.values()).await {
                    tracing::warn!(error = %e, "group offset sync failed; retrying at the next interval");
                }
            }
        }
    }
}

/// The checkpoints of every selected group for every partition with an exact translation.
async fn checkpoints(
    config: &CheckpointConfig,
    source: &Cluster,
    translations: &Translations,
) -> Result<Vec<Checkpoint>, KafkaError> {
    let mut out = Vec::new();
    for listing in groups::list(source).await? {
        if !config.groups.matches(&listing.group_id) {
            continue;
        }
        let committed = groups::committed(source, &listing.group_id).await?;
        let maps = translations.lock().unwrap();
        for (tp, Committed { offset, metadata }) in committed {
            // Only offsets strait has replicated up to translate exactly: a group ahead of
            // replication waits for the next checkpoint.
            let Some(downstream) = maps
                .get(&tp)
                .filter(|m| offset <= m.position().source_next)
                .and_then(|m| m.translate(offset))
            else {
                continue;
            };
            let checkpoint = Checkpoint {
                consumer_group_id: listing.group_id.clone(),
                topic_partition: TopicPartition::new(
                    config
                        .policy
                        .format_remote_topic(&config.source_alias, &tp.topic),
                    tp.partition,
                ),
                upstream_offset: offset,
                downstream_offset: downstream,
                metadata,
            };
            // Names come off the network: one MM2 cannot encode (a STRING is at most
            // 32767 bytes) is reported, not written.
            match checkpoint.validate() {
                Ok(()) => out.push(checkpoint),
                Err(e) => {
                    tracing::warn!(group = %listing.group_id, partition = %tp, error = %e, "checkpoint skipped")
                }
            }
        }
    }
    Ok(out)
}

/// Commits checkpointed offsets on the target for groups with no active members there,
/// never moving a group's offset backwards.
async fn sync_groups<'a>(
    target: &Cluster,
    checkpoints: impl Iterator<Item = &'a Checkpoint>,
) -> Result<(), KafkaError> {
    let mut by_group: BTreeMap<&str, Vec<&Checkpoint>> = BTreeMap::new();
    for c in checkpoints {
        by_group
            .entry(c.consumer_group_id.as_str())
            .or_default()
            .push(c);
    }
    if by_group.is_empty() {
        return Ok(());
    }
    let states: HashMap<String, String> = groups::list(target)
        .await?
        .into_iter()
        .map(|l| (l.group_id, l.state))
        .collect();
    for (group, checkpoints) in by_group {
        match states.get(group).map(String::as_str) {
            None | Some("Empty") | Some("Dead") => {}
            Some(state) => {
                tracing::debug!(%group, %state, "group is active on the target; its offsets are left alone");
                continue;
            }
        }
        let current = groups::committed(target, group).await?;
        let forward: Vec<(TopicPartition, Committed)> = checkpoints
            .iter()
            .filter(|c| {
                current
                    .get(&c.topic_partition)
                    .is_none_or(|now| now.offset < c.downstream_offset)
            })
            .map(|c| {
                (
                    c.topic_partition.clone(),
                    Committed {
                        offset: c.downstream_offset,
                        metadata: c.metadata.clone(),
                    },
                )
            })
            .collect();
        if forward.is_empty() {
            continue;
        }
        groups::commit(target, group, &forward).await?;
        tracing::info!(%group, partitions = forward.len(), "group offsets synced to the target");
    }
    Ok(())
}
