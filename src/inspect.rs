//! What an operator asks during an incident, answered from what the flows wrote to Kafka,
//! with no running instance needed: where a consumer group resumes on the target
//! ([`translate_offsets`], what MM2's `RemoteClusterUtils.translateOffsets` answers) and how
//! far each partition is replicated ([`status`]). Each answer renders as a table for a
//! person, as JSON for a script, and the offsets also as the CSV
//! `kafka-consumer-groups --reset-offsets --from-file` reads.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::{Config, FlowConfig};
use crate::kafka::log_reader::{end_offsets, read_keyed_records, read_partition};
use crate::kafka::{KafkaError, TopicPartition};
use crate::migration;
use crate::mm2::heartbeat;
use crate::mm2::records::Checkpoint;
use crate::progress;

/// A consumer group's position on the target, from the flow's latest checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Translated {
    pub flow: String,
    pub group: String,
    /// The remote topic on the target.
    pub topic: String,
    pub partition: i32,
    /// Where the group resumes on the target.
    pub offset: i64,
    /// The group's committed offset on the source that `offset` translates.
    pub source_offset: i64,
    pub metadata: String,
}

/// The latest checkpoint of `group` for every partition of every flow (of topic `topic`,
/// its source or remote name, if given), read from each flow's checkpoints topic on its
/// target, as `RemoteClusterUtils.translateOffsets` reads it.
pub async fn translate_offsets(
    config: &Config,
    group: &str,
    topic: Option<&str>,
) -> anyhow::Result<Vec<Translated>> {
    let mut out = Vec::new();
    for flow in &config.flows {
        let target = crate::flow::cluster(&config.clusters[&flow.target])?;
        let tp = TopicPartition::new(flow.policy.checkpoints_topic(&flow.source), 0);
        let records = read_keyed_records(&target, &tp)
            .await
            .map_err(on(&flow.target))?
            .unwrap_or_default();
        let mut latest: BTreeMap<(String, i32), Checkpoint> = BTreeMap::new();
        for (offset, key, value) in records {
            let c = Checkpoint::decode(&key, &value)
                .map_err(|e| anyhow::anyhow!("{tp} offset {offset}: {e}"))?;
            if c.consumer_group_id != group {
                continue;
            }
            let remote = c.topic_partition.topic.to_string();
            let wanted = topic.is_none_or(|t| {
                remote == t || remote == flow.policy.format_remote_topic(&flow.source, t)
            });
            if wanted {
                latest.insert((remote, c.topic_partition.partition), c);
            }
        }
        out.extend(
            latest
                .into_iter()
                .map(|((topic, partition), c)| Translated {
                    flow: flow_name(flow),
                    group: c.consumer_group_id,
                    topic,
                    partition,
                    offset: c.downstream_offset,
                    source_offset: c.upstream_offset,
                    metadata: c.metadata,
                }),
        );
    }
    Ok(out)
}

/// How far one source partition is replicated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionStatus {
    pub flow: String,
    pub topic: String,
    pub partition: i32,
    pub remote_topic: String,
    /// The source's last stable offset (the end of what strait copies); `None` when its
    /// leader did not answer.
    pub source_end: Option<i64>,
    /// The next source offset to replicate, as last committed; `None` before a commit.
    pub committed: Option<i64>,
    /// The target offset after the last committed batch.
    pub target_committed: Option<i64>,
    /// Records from the committed position to the source end (`None` before a commit:
    /// where the flow starts then is the offset reset policy's).
    pub lag: Option<i64>,
    /// Who committed the position: `strait`, or `mirrormaker2` (MM2's position in its offsets
    /// topic, further on than strait's: strait takes over from it); `None` before a commit.
    pub origin: Option<&'static str>,
    /// Where strait took the partition over from MM2: MM2 replicated the offsets before it.
    pub taken_over_at: Option<i64>,
}

/// A flow's status: its partitions, and when its progress was last committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowStatus {
    pub flow: String,
    /// When the flow last committed progress (Unix ms), and how long ago that was; `None`:
    /// never. An instance commits only when positions move: an idle one does not.
    pub last_commit_ms: Option<i64>,
    pub last_commit_age_ms: Option<i64>,
    /// When the flow's last heartbeat was written to the target (Unix ms), and how long ago;
    /// `None`: none among the heartbeats topic's last records.
    pub last_heartbeat_ms: Option<i64>,
    pub last_heartbeat_age_ms: Option<i64>,
    /// Whether an instance replicates the flow now: its heartbeats keep coming (the last
    /// within `mm2::heartbeat::silence_ms`). Any writer of the flow's heartbeats counts:
    /// strait, or a MirrorMaker 2 running the same flow. `None` when the flow emits no
    /// heartbeats (`emit.heartbeats.enabled = false`): nothing tells.
    pub running: Option<bool>,
    pub partitions: Vec<PartitionStatus>,
}

/// Every flow's partitions: the source end offset, the committed position, the lag.
pub async fn status(config: &Config) -> anyhow::Result<Vec<FlowStatus>> {
    let mut out = Vec::new();
    for flow in &config.flows {
        let source = crate::flow::cluster(&config.clusters[&flow.source])?;
        let target = crate::flow::cluster(&config.clusters[&flow.target])?;
        let progress_tp = TopicPartition::new(progress::topic_name(&flow.source), 0);
        let batches = read_partition(&target, &progress_tp)
            .await
            .map_err(on(&flow.target))?
            .unwrap_or_default();
        let last_commit_ms = batches.iter().map(|b| b.max_timestamp()).max();
        let mut committed = progress::load(&target, &progress_tp.topic)
            .await
            .map_err(on(&flow.target))?;
        // As a start would resume: MM2's positions where MM2 got further.
        let mm2 = migration::take_over(flow, &target, &mut committed)
            .await
            .map_err(on(&flow.target))?;
        let ends = end_offsets(&source, |t| crate::flow::replicates(flow, t))
            .await
            .map_err(on(&flow.source))?;
        let last_heartbeat_ms = heartbeat::last_heard(&target, flow)
            .await
            .map_err(on(&flow.target))?;
        let now = crate::now_ms();
        let running = heartbeat::silence_ms(flow)
            .map(|silence| last_heartbeat_ms.is_some_and(|t| now - t <= silence));
        let mut partitions: Vec<PartitionStatus> = ends
            .into_iter()
            .map(|(tp, end)| {
                let pos = committed.get(&tp).map(|(p, _)| *p);
                let next = pos.map(|p| p.source_next).filter(|n| *n >= 0);
                let origin = pos.map(|_| {
                    if mm2.binary_search(&tp).is_ok() {
                        "mirrormaker2"
                    } else {
                        "strait"
                    }
                });
                let taken_over_at = committed
                    .get(&tp)
                    .map(|(_, l)| l.taken_over_at)
                    .filter(|at| *at >= 0);
                PartitionStatus {
                    flow: flow_name(flow),
                    remote_topic: flow.policy.format_remote_topic(&flow.source, &tp.topic),
                    topic: tp.topic.to_string(),
                    partition: tp.partition,
                    source_end: end,
                    committed: next,
                    target_committed: pos.map(|p| p.target_next).filter(|n| *n >= 0),
                    lag: end.zip(next).map(|(end, next)| (end - next).max(0)),
                    origin,
                    taken_over_at,
                }
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out.push(FlowStatus {
            flow: flow_name(flow),
            last_commit_ms,
            last_commit_age_ms: last_commit_ms.map(|t| now - t),
            last_heartbeat_ms,
            last_heartbeat_age_ms: last_heartbeat_ms.map(|t| now - t),
            running,
            partitions,
        });
    }
    Ok(out)
}

/// An error of cluster `alias`, naming it.
fn on(alias: &str) -> impl Fn(KafkaError) -> anyhow::Error + '_ {
    move |e| anyhow::anyhow!("cluster {alias}: {e}")
}

fn flow_name(flow: &FlowConfig) -> String {
    format!("{}->{}", flow.source, flow.target)
}

/// Rows as a table: a header and left-aligned columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_its_columns() {
        let rows = vec![
            vec!["s->t".to_string(), "s.orders".to_string(), "12".to_string()],
            vec!["s->t".to_string(), "s.o".to_string(), "7".to_string()],
        ];
        assert_eq!(
            table(&["FLOW", "TOPIC", "OFFSET"], &rows),
            "FLOW  TOPIC     OFFSET\ns->t  s.orders  12\ns->t  s.o       7\n"
        );
    }
}
