//! Checkpoints and consumer-group offset sync, as MM2's `MirrorCheckpointConnector` does
//! them, but exact: every `emit.checkpoints.interval.seconds` the committed source offsets of
//! the groups the filter selects are translated through the flow's offset maps (a breakpoint
//! at every offset gap, so the translation is the target offset of the very record the group
//! would read next) and written as MM2 `Checkpoint` records to
//! `<source>.checkpoints.internal` on the target, in as many batches as its
//! `max.message.bytes` needs. With `sync.group.offsets.enabled`, the
//! translated offsets are also committed for groups that are empty (or absent) on the
//! target, only ever moving them forward.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
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
use crate::telemetry::FlowMetrics;

#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    pub source_alias: String,
    /// The group filter, which a config reload may change between rounds.
    pub groups: tokio::sync::watch::Receiver<GroupFilter>,
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
    metrics: FlowMetrics,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    let topic = config.policy.checkpoints_topic(&config.source_alias);
    if !await_internal_topic(&target, &topic, config.replication_factor, &shutdown).await? {
        return Ok(());
    }
    let mut emitter = Emitter {
        tp: TopicPartition::new(topic.as_str(), 0),
        emitted: HashMap::new(),
        batch_bytes: MAX_BATCH_BYTES,
        refused: HashSet::new(),
        metrics,
        watched: HashSet::new(),
    };
    let mut refused_on_target = HashSet::new();
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sync_tick = tokio::time::interval(
        config
            .sync_group_offsets
            .unwrap_or(Duration::from_secs(3600)),
    );
    sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A round on its way is cut short by `shutdown` too: what it did not write is written
    // again by the next process, and group offsets only ever move forward.
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => tokio::select! {
                _ = shutdown.cancelled() => break,
                () = emitter.emit(&config, &source, &target, &translations) => {}
            },
            _ = sync_tick.tick(), if config.sync_group_offsets.is_some() => tokio::select! {
                _ = shutdown.cancelled() => break,
                synced = sync_groups(&target, emitter.emitted.values(), &mut refused_on_target) => if let Err(e) = synced {
                    tracing::warn!(error = %e, "group offset sync failed; retrying at the next interval");
                }
            },
        }
    }
    // No task watches these groups now (a reload that turns checkpoints off, say): a time
    // frozen here would read as checkpoints gone stale.
    for group in &emitter.watched {
        emitter.metrics.forget_group(group);
    }
    Ok(())
}

/// What the checkpoint task wrote so far: the last checkpoint of each group-partition (one
/// is written again only when it changed) and the batch size the topic accepts.
struct Emitter {
    tp: TopicPartition,
    emitted: HashMap<(String, TopicPartition), Checkpoint>,
    batch_bytes: usize,
    /// Source groups the broker's ACLs keep strait from reading (said once each).
    refused: HashSet<String>,
    /// Where each checkpoint's latency goes (MM2's `checkpoint-latency-ms`), and when each
    /// group was last checkpointed in full.
    metrics: FlowMetrics,
    /// Groups with a checkpoint timestamp series: dropped when the group leaves the source
    /// or the filter.
    watched: HashSet<String>,
}

impl Emitter {
    /// One round: translates the groups' committed offsets and writes the checkpoints that
    /// changed.
    async fn emit(
        &mut self,
        config: &CheckpointConfig,
        source: &Cluster,
        target: &Cluster,
        translations: &Translations,
    ) {
        let round = match checkpoints(config, source, translations, &mut self.refused).await {
            Ok(round) => round,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read source consumer groups");
                return;
            }
        };
        let key = |c: &Checkpoint| (c.consumer_group_id.clone(), c.topic_partition.clone());
        let fresh: Vec<&Checkpoint> = round
            .checkpoints
            .iter()
            .filter(|c| self.emitted.get(&key(c)) != Some(*c))
            .collect();
        let unwritten = match fresh.is_empty() {
            true => HashSet::new(),
            false => self.write_fresh(target, &fresh).await,
        };
        self.watched.retain(|group| {
            let kept = round.groups.contains_key(group);
            if !kept {
                self.metrics.forget_group(group);
            }
            kept
        });
        for (group, complete) in round.groups {
            if complete && !unwritten.contains(&group) {
                self.metrics.group_checkpointed(&group);
                self.watched.insert(group);
            }
        }
    }

    /// Writes `fresh` and notes what was written; returns the groups of those left unwritten.
    async fn write_fresh(&mut self, target: &Cluster, fresh: &[&Checkpoint]) -> HashSet<String> {
        let records: Vec<_> = fresh
            .iter()
            .map(|c| (c.encode_key(), c.encode_value()))
            .collect();
        let stamped = now_ms();
        let (written, error) = write(target, &self.tp, &records, &mut self.batch_bytes).await;
        tracing::debug!(count = written, topic = %self.tp.topic, "checkpoints written");
        let latency = now_ms() - stamped;
        for c in &fresh[..written] {
            let key = (c.consumer_group_id.clone(), c.topic_partition.clone());
            self.emitted.insert(key, (*c).clone());
            self.metrics
                .checkpointed(&c.consumer_group_id, &c.topic_partition, latency);
        }
        if let Some(e) = error {
            tracing::warn!(topic = %self.tp.topic, error = %e, unwritten = fresh.len() - written, "checkpoints not written");
        }
        fresh[written..]
            .iter()
            .map(|c| c.consumer_group_id.clone())
            .collect()
    }
}

/// The most bytes of keys and values put in one checkpoint batch at first: well under
/// Kafka's default `max.message.bytes` (1 MiB), whatever the record framing adds.
const MAX_BATCH_BYTES: usize = 512 * 1024;
/// What a record adds to its key and value in a batch, at most (length varints, attributes,
/// deltas, header count).
const RECORD_OVERHEAD: usize = 32;

/// Appends `records` in order, in batches of at most `*batch_bytes`: one batch for every
/// checkpoint would exceed the topic's `max.message.bytes` past some thousands of
/// group-partitions and be refused every interval. A batch the broker refuses as too large
/// is halved and tried again, and `*batch_bytes` keeps the size that fit for later rounds.
/// Returns how many records (from the first) were written, and the error that stopped the
/// rest, if any (a single record too large, say).
async fn write(
    target: &Cluster,
    tp: &TopicPartition,
    records: &[(Bytes, Bytes)],
    batch_bytes: &mut usize,
) -> (usize, Option<KafkaError>) {
    let size = |r: &(Bytes, Bytes)| r.0.len() + r.1.len() + RECORD_OVERHEAD;
    let mut written = 0;
    while written < records.len() {
        let mut end = written + 1;
        let mut bytes = size(&records[written]);
        while end < records.len() && bytes + size(&records[end]) <= *batch_bytes {
            bytes += size(&records[end]);
            end += 1;
        }
        match append(
            target,
            tp,
            &records::batch(&records[written..end], now_ms()),
        )
        .await
        {
            Ok(_) => written = end,
            Err(KafkaError::Broker {
                code: ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge,
                ..
            }) if end - written > 1 => *batch_bytes = bytes / 2,
            Err(e) => return (written, Some(e)),
        }
    }
    (written, None)
}

/// The checkpoints of every selected group for every partition with an exact translation.
async fn checkpoints(
    config: &CheckpointConfig,
    source: &Cluster,
    translations: &Translations,
    refused: &mut HashSet<String>,
) -> Result<Round, KafkaError> {
    let mut out = Round::default();
    let selected = config.groups.borrow().clone();
    for listing in groups::list(source).await? {
        if !selected.matches(&listing.group_id) {
            continue;
        }
        let committed = match groups::committed(source, &listing.group_id).await {
            Ok(committed) => committed,
            Err(e) if skip_refused(&e, &listing.group_id, source, refused) => continue,
            Err(e) => return Err(e),
        };
        let maps = translations.lock().unwrap();
        let mut complete = true;
        for (tp, Committed { offset, metadata }) in committed {
            // Offsets of topics the flow does not replicate have nothing to translate.
            let Some(map) = maps.get(&tp) else {
                continue;
            };
            // Only offsets strait has replicated up to translate exactly: a group ahead of
            // replication waits for the next checkpoint.
            let Some(downstream) = Some(map)
                .filter(|m| offset <= m.position().source_next)
                .and_then(|m| m.translate(offset))
            else {
                complete = false;
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
                Ok(()) => out.checkpoints.push(checkpoint),
                Err(e) => {
                    complete = false;
                    tracing::warn!(group = %listing.group_id, partition = %tp, error = %e, "checkpoint skipped")
                }
            }
        }
        out.groups.insert(listing.group_id, complete);
    }
    Ok(out)
}

/// What one round of [`checkpoints`] found.
#[derive(Default)]
struct Round {
    /// The checkpoints of every offset that translates.
    checkpoints: Vec<Checkpoint>,
    /// Each selected group, and whether all its offsets in replicated partitions translated.
    groups: HashMap<String, bool>,
}

/// Whether `e` is the broker's ACLs refusing `group`: then that group is skipped and the others
/// go on (a principal allowed to list every group may still not read each one). The first
/// refusal of each group is a warning naming the ACL that is missing.
fn skip_refused(
    e: &KafkaError,
    group: &str,
    cluster: &Cluster,
    refused: &mut HashSet<String>,
) -> bool {
    let KafkaError::Broker {
        code: ResponseError::GroupAuthorizationFailed,
        ..
    } = e
    else {
        return false;
    };
    if refused.insert(group.to_string()) {
        tracing::warn!(cluster = cluster.alias(), %group, error = %e, "group skipped: the ACLs keep strait from its offsets");
    }
    true
}

/// Commits checkpointed offsets on the target for groups with no active members there,
/// never moving a group's offset backwards.
async fn sync_groups<'a>(
    target: &Cluster,
    checkpoints: impl Iterator<Item = &'a Checkpoint>,
    refused: &mut HashSet<String>,
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
        let current = match groups::committed(target, group).await {
            Ok(current) => current,
            Err(e) if skip_refused(&e, group, target, refused) => continue,
            Err(e) => return Err(e),
        };
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
        match groups::commit(target, group, &forward).await {
            Err(e) if skip_refused(&e, group, target, refused) => continue,
            committed => committed?,
        }
        tracing::info!(%group, partitions = forward.len(), "group offsets synced to the target");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use kafka_protocol::messages::RequestKind;

    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};

    /// A round the source never answers (its ListGroups stalls) does not hold up shutdown
    /// until the request times out: the task ends as soon as the flow stops.
    #[tokio::test]
    async fn shutdown_does_not_wait_for_a_round_the_source_never_answers() {
        let asked = Arc::new(AtomicBool::new(false));
        let seen = asked.clone();
        let source = FakeBroker::start(1, &[], move |r| match r.body {
            RequestKind::ListGroups(_) => {
                seen.store(true, Ordering::SeqCst);
                Reply::Stall
            }
            _ => Reply::Default,
        })
        .await;
        let target =
            FakeBroker::start(1, &[("a.checkpoints.internal", 1)], |_| Reply::Default).await;
        let cluster = |name: &str, broker: &FakeBroker| {
            Arc::new(Cluster::new(
                name,
                vec![broker.addr.clone()],
                "strait-test",
                Duration::from_secs(60),
            ))
        };
        let config = CheckpointConfig {
            source_alias: "a".into(),
            groups: tokio::sync::watch::channel(GroupFilter::default()).1,
            policy: ReplicationPolicy::default(),
            interval: Duration::from_millis(100),
            sync_group_offsets: None,
            replication_factor: 1,
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(
            config,
            cluster("a", &source),
            cluster("b", &target),
            Translations::default(),
            Arc::new(crate::telemetry::Metrics::new()).flow("a", "b", Default::default()),
            shutdown.clone(),
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !asked.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(asked.load(Ordering::SeqCst), "a round asked for the groups");
        shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }
}
