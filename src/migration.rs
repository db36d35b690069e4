//! Switching a flow from MirrorMaker 2 to strait, and back, without a re-copy.
//!
//! MM2 in dedicated mode runs flow `A->B` in the Kafka Connect worker group `A-mm2` on `B`
//! (`takeover.group`) and keeps each source partition's position in Connect's offsets topic
//! there (`mm2-offsets.A.internal` by default, `takeover.offsets.topic`; the format is
//! [`crate::mm2::source_offsets`]'s), committed every `offset.flush.interval.ms` (60 s by
//! default) and at a clean stop. MM2's offset syncs, checkpoints and heartbeats are the
//! topics strait writes too.
//!
//! - **No two writers** ([`wait_for_mm2`]): while that group has members MM2 runs the flow,
//!   and strait on it would write every record a second time: strait refuses to start, or
//!   with `takeover.wait` waits until the group is empty.
//! - **Take-over** ([`take_over`]): a partition whose MM2 position is further on than
//!   strait's committed one (strait never ran it, or MM2 ran it after a hand-back) resumes
//!   at MM2's position. What MM2 copied after its last commit is copied again;
//!   [`report_repeats`] says how much at most. Below the take-over point offsets translate
//!   by MM2's own offset syncs with MM2's rule (`Lineage::taken_over_at`), exactly from it on.
//! - **Hand-back** ([`hand_back`]): strait's committed positions go into the offsets topic in
//!   MM2's exact bytes, each in the partition Connect's producer puts its key in, so that MM2
//!   started on the same file resumes where strait stopped; with
//!   `takeover.handback.continuous`, all along while strait runs ([`keep_handing_back`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::mpsc;

use crate::config::FlowConfig;
use crate::kafka::appender::append;
use crate::kafka::groups;
use crate::kafka::log_reader::{end_offsets, read_entries};
use crate::kafka::partitioner::partition_for;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::heartbeat;
use crate::mm2::records;
use crate::mm2::source_offsets;
use crate::mm2::topic_sync::ensure_internal_topic;
use crate::offset_map::{Lineage, Position, Translations};
use crate::progress;

/// How long the target may take to describe MM2's group before strait goes on without
/// knowing (no ACL to describe it, the target not reachable yet).
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often [`wait_for_mm2`] looks again while MM2 runs the flow.
const WAIT_POLL: Duration = Duration::from_secs(2);

/// Partitions of the offsets topic [`hand_back`] creates when MM2 never ran on the target:
/// Connect's default `offset.storage.partitions`.
const OFFSETS_TOPIC_PARTITIONS: i32 = 25;

/// The Connect group MM2 runs `flow` in, on its target (`takeover.group`; empty: none).
fn mm2_group(flow: &FlowConfig) -> &str {
    flow.takeover.group.as_deref().unwrap_or_default()
}

/// The members of MM2's group for `flow` (`client id@host`); empty when MM2 does not run
/// the flow, no group is configured, or the group cannot be described in time (which is
/// logged at DEBUG).
async fn mm2_members(flow: &FlowConfig, target: &Cluster) -> Vec<String> {
    let group = mm2_group(flow);
    if group.is_empty() {
        return Vec::new();
    }
    let described = tokio::time::timeout(DESCRIBE_TIMEOUT, groups::describe(target, group))
        .await
        .unwrap_or_else(|_| Err(KafkaError::Other("no answer in time".to_string())));
    match described {
        Ok(Some(g)) if g.protocol_type == "connect" => g.members,
        Ok(_) => Vec::new(),
        Err(e) => {
            tracing::debug!(%group, error = %e, "cannot tell whether MirrorMaker 2 runs the flow");
            Vec::new()
        }
    }
}

/// Returns once MirrorMaker 2 does not run `flow` (at once if it never did). While it does:
/// an error naming its group and members, or with `takeover.wait` a wait until they are
/// gone (a SIGKILLed MM2 leaves the group when its session times out).
pub async fn wait_for_mm2(flow: &FlowConfig, target: &Cluster) -> Result<(), KafkaError> {
    let group = mm2_group(flow);
    let mut waited = false;
    loop {
        let members = mm2_members(flow, target).await;
        if members.is_empty() {
            if waited {
                tracing::info!(%group, "MirrorMaker 2 stopped; strait takes the flow over");
            }
            return Ok(());
        }
        if !flow.takeover.wait {
            return Err(KafkaError::Other(format!(
                "MirrorMaker 2 runs this flow: its Connect worker group {group} on {} has {} \
                 member(s) ({}); stop it before strait takes the flow over (or start strait \
                 with --takeover to wait for that), or every record is written twice",
                target.alias(),
                members.len(),
                members.join(", ")
            )));
        }
        if !waited {
            tracing::info!(%group, members = %members.join(", "), "MirrorMaker 2 runs this flow; waiting until it stops (takeover.wait)");
            waited = true;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// Where MM2 resumes each partition of `flow` (the offset after the last it committed), read
/// from the offsets topic on the target; empty when take-over is off or the topic does not
/// exist.
pub async fn mm2_positions(
    flow: &FlowConfig,
    target: &Cluster,
) -> Result<HashMap<TopicPartition, i64>, KafkaError> {
    let Some(topic) = &flow.takeover.offsets_topic else {
        return Ok(HashMap::new());
    };
    let meta = target.metadata(Some(std::slice::from_ref(topic))).await?;
    let Some(found) = meta.iter().find(|t| *t.name == **topic) else {
        return Ok(HashMap::new());
    };
    if found.error_code == ResponseError::TopicAuthorizationFailed.code() {
        // What a cluster with ACLs answers for a topic one may not see, whether it exists
        // or not: said once per start, where an operator looks for why nothing was taken over.
        tracing::info!(%topic, "MirrorMaker 2's offsets topic is not readable (TOPIC_AUTHORIZATION_FAILED): no take-over from MM2; grant Describe and Read on it to take over, or set takeover.offsets.topic empty");
        return Ok(HashMap::new());
    }
    if found.error_code != 0 {
        return Ok(HashMap::new());
    }
    let mut entries = Vec::new();
    for p in &found.partitions {
        let tp = TopicPartition::new(topic.as_str(), p.partition);
        entries.extend(read_entries(target, &tp).await?.unwrap_or_default());
    }
    source_offsets::resume_points(
        entries.iter().map(|(k, v)| (k.as_ref(), v.as_deref())),
        &flow.takeover.connector,
        &flow.source,
    )
    .map_err(|e| KafkaError::Other(format!("{topic} on {}: {e}", target.alias())))
}

/// Takes over from MM2 the partitions of `flow` whose MM2 position is further on than the
/// committed one in `resume` (or that have none): their position becomes MM2's, with the
/// take-over point in its lineage. Returns them.
pub async fn take_over(
    flow: &FlowConfig,
    target: &Cluster,
    resume: &mut HashMap<TopicPartition, (Position, Lineage)>,
) -> Result<Vec<TopicPartition>, KafkaError> {
    let mm2 = mm2_positions(flow, target).await?;
    Ok(merge(resume, mm2))
}

/// [`take_over`]'s rule, on positions read.
fn merge(
    resume: &mut HashMap<TopicPartition, (Position, Lineage)>,
    mm2: HashMap<TopicPartition, i64>,
) -> Vec<TopicPartition> {
    let mut taken = Vec::new();
    for (tp, next) in mm2 {
        if resume
            .get(&tp)
            .is_some_and(|(pos, _)| pos.source_next >= next)
        {
            continue;
        }
        let position = Position {
            source_next: next,
            target_next: -1,
        };
        let lineage = Lineage {
            taken_over_at: next,
            ..Lineage::UNKNOWN
        };
        resume.insert(tp.clone(), (position, lineage));
        taken.push(tp);
    }
    taken.sort();
    taken
}

/// Logs how many records at most the partitions just `taken` over copy a second time: what
/// MM2 wrote to the target after its last committed position, the remote partition's end
/// less the target offset MM2's offset syncs give the take-over point.
pub async fn report_repeats(
    flow: &FlowConfig,
    target: &Cluster,
    taken: &[TopicPartition],
    translations: &Translations,
) {
    if taken.is_empty() {
        return;
    }
    let remote = |tp: &TopicPartition| {
        TopicPartition::new(
            flow.policy.format_remote_topic(&flow.source, &tp.topic),
            tp.partition,
        )
    };
    let names: HashSet<String> = taken
        .iter()
        .map(|tp| remote(tp).topic.to_string())
        .collect();
    let ends: HashMap<TopicPartition, i64> = match end_offsets(target, |t| names.contains(t)).await
    {
        Ok(ends) => ends
            .into_iter()
            .filter_map(|(tp, end)| Some((tp, end?)))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "remote partition ends not read");
            HashMap::new()
        }
    };
    let maps = translations.lock().unwrap();
    let mut repeats = 0;
    for tp in taken {
        let Some(end) = ends.get(&remote(tp)) else {
            continue;
        };
        let at = maps
            .get(tp)
            .and_then(|m| m.translate(m.position().source_next))
            .unwrap_or(0);
        repeats += (end - at).max(0);
    }
    tracing::info!(
        flow = %format!("{}->{}", flow.source, flow.target),
        partitions = taken.len(),
        repeated_at_most = repeats,
        "took over from MirrorMaker 2: each partition resumes after the last offset MM2 committed; what MM2 copied after that commit (up to its offset.flush.interval.ms) is copied again"
    );
}

/// The partition count of MM2's offsets topic `topic` on `target`, creating it as Connect
/// would if it is missing. An existing topic is left as it is, whatever its count: Connect
/// put each key in the partition that count gives, and growing it would send the positions
/// written next to other partitions than the ones MM2's older positions are in.
async fn offsets_partitions(
    flow: &FlowConfig,
    target: &Cluster,
    topic: &str,
) -> Result<i32, KafkaError> {
    let count = || async {
        let meta = target.metadata(Some(&[topic.to_string()])).await?;
        Ok::<_, KafkaError>(
            meta.iter()
                .find(|t| *t.name == *topic && t.error_code == 0)
                .map(|t| t.partitions.len() as i32)
                .filter(|&n| n > 0),
        )
    };
    if let Some(n) = count().await? {
        return Ok(n);
    }
    ensure_internal_topic(
        target,
        topic,
        OFFSETS_TOPIC_PARTITIONS,
        flow.internal_replication_factor,
    )
    .await?;
    count().await?.ok_or_else(|| {
        KafkaError::Other(format!(
            "{topic} on {}: no partitions in its metadata",
            target.alias()
        ))
    })
}

/// Writes `positions` into MM2's offsets topic `topic` of `partitions` on `target` in MM2's
/// bytes, each to the partition Connect's producer picks for its key. Positions with
/// nothing replicated yet are left out. Returns how many it wrote.
async fn write_positions<'p>(
    flow: &FlowConfig,
    target: &Cluster,
    (topic, partitions): (&str, i32),
    positions: impl Iterator<Item = (&'p TopicPartition, &'p Position)>,
) -> Result<usize, KafkaError> {
    let mut entries: Vec<(Bytes, Bytes)> = positions
        .filter(|(_, pos)| pos.source_next > 0)
        .map(|(tp, pos)| {
            let key = source_offsets::key(&flow.takeover.connector, &flow.source, tp);
            let value = source_offsets::value(pos.source_next - 1);
            (Bytes::from(key), Bytes::from(value))
        })
        .collect();
    if entries.is_empty() {
        return Ok(0);
    }
    entries.sort();
    let mut by_partition: HashMap<i32, Vec<(Bytes, Bytes)>> = HashMap::new();
    for (key, value) in entries {
        by_partition
            .entry(partition_for(&key, partitions))
            .or_default()
            .push((key, value));
    }
    let mut written = 0;
    for (partition, records) in by_partition {
        let batch = records::batch(&records, crate::now_ms());
        append(target, &TopicPartition::new(topic, partition), &batch).await?;
        written += records.len();
    }
    Ok(written)
}

/// The continuous hand-back (`takeover.handback.continuous`): writes the positions the
/// engine reports durable (`commits`) into MM2's offsets topic, what arrived within a
/// progress commit interval at a time, until the engine is gone and the last ones are
/// written. The topic's partition count is looked up once (again after a failed write). A
/// failed write is a warning, and its positions go with the next one: replication does not
/// wait on MM2's topic.
pub async fn keep_handing_back(
    flow: FlowConfig,
    target: Arc<Cluster>,
    mut commits: mpsc::UnboundedReceiver<(TopicPartition, Position)>,
) -> Result<(), KafkaError> {
    let Some(topic) = flow.takeover.offsets_topic.clone() else {
        return Err(KafkaError::Other(
            "the continuous hand-back needs takeover.offsets.topic".to_string(),
        ));
    };
    let interval = Duration::from_millis(flow.progress_commit_interval_ms);
    let mut partitions = None;
    let mut pending: HashMap<TopicPartition, Position> = HashMap::new();
    let mut open = true;
    while open {
        match commits.recv().await {
            Some((tp, pos)) => pending.insert(tp, pos),
            None => break,
        };
        let gather = tokio::time::sleep(interval);
        tokio::pin!(gather);
        loop {
            tokio::select! {
                next = commits.recv() => match next {
                    Some((tp, pos)) => { pending.insert(tp, pos); }
                    None => { open = false; break; }
                },
                () = &mut gather => break,
            }
        }
        let written = async {
            let n = match partitions {
                Some(n) => n,
                None => *partitions.insert(offsets_partitions(&flow, &target, &topic).await?),
            };
            write_positions(&flow, &target, (&topic, n), pending.iter()).await
        };
        match written.await {
            Ok(_) => pending.clear(),
            Err(e) => {
                partitions = None;
                tracing::warn!(%topic, error = %e, positions = pending.len(), "positions not handed back to MirrorMaker 2's offsets topic; retried with the next commit");
            }
        }
    }
    if !pending.is_empty() {
        let n = offsets_partitions(&flow, &target, &topic).await?;
        write_positions(&flow, &target, (&topic, n), pending.iter()).await?;
    }
    Ok(())
}

/// Returns once the flow's heartbeats have stopped (at once when the last is older than
/// [`heartbeat::silence_ms`]): strait still running would commit positions past the ones
/// handed back, and MM2 would copy those records again. Heartbeats that keep coming for
/// twice that window are an error. A flow without heartbeats cannot tell.
async fn wait_for_silence(flow: &FlowConfig, target: &Cluster) -> Result<(), KafkaError> {
    let Some(silence) = heartbeat::silence_ms(flow) else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2 * silence as u64);
    loop {
        let age = heartbeat::last_heard(target, flow)
            .await?
            .map(|t| crate::now_ms() - t);
        match age {
            Some(age) if age <= silence => {}
            _ => return Ok(()),
        }
        if tokio::time::Instant::now() > deadline {
            return Err(KafkaError::Other(format!(
                "the flow still runs: its heartbeats on {} keep coming (the last {} ms ago); \
                 stop strait before handing back, or it commits positions past the ones MM2 \
                 would resume from",
                target.alias(),
                age.unwrap_or_default()
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What [`hand_back`] wrote.
#[derive(Debug)]
pub struct HandedBack {
    pub topic: String,
    pub positions: usize,
}

/// Writes the committed positions of `flow` into MM2's offsets topic on its target (created
/// as Connect creates it if MM2 never ran there), so that MM2 started on the same file
/// resumes where strait stopped. strait must be stopped first: while the flow's heartbeats
/// keep coming it is refused (what strait replicated after the hand-back, MM2 would copy
/// again); so is a running MM2, which reads the topic only when it starts and overwrites
/// the positions at its next commit.
pub async fn hand_back(flow: &FlowConfig, target: &Cluster) -> Result<HandedBack, KafkaError> {
    let Some(topic) = flow.takeover.offsets_topic.clone() else {
        return Err(KafkaError::Other(
            "takeover.offsets.topic is set empty: there is no MirrorMaker 2 offsets topic to \
             hand back to"
                .to_string(),
        ));
    };
    let members = mm2_members(flow, target).await;
    if !members.is_empty() {
        return Err(KafkaError::Other(format!(
            "MirrorMaker 2 runs this flow already (group {} has {} member(s): {}): it would \
             not read the positions; stop it, hand back, then start it",
            mm2_group(flow),
            members.len(),
            members.join(", ")
        )));
    }
    wait_for_silence(flow, target).await?;
    let committed = progress::load(target, &progress::topic_name(&flow.source)).await?;
    let partitions = offsets_partitions(flow, target, &topic).await?;
    let positions = write_positions(
        flow,
        target,
        (&topic, partitions),
        committed.iter().map(|(tp, (pos, _))| (tp, pos)),
    )
    .await?;
    Ok(HandedBack { topic, positions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(next: i64) -> (Position, Lineage) {
        let pos = Position {
            source_next: next,
            target_next: next + 3,
        };
        (pos, Lineage::UNKNOWN)
    }

    /// MM2's position wins where it is further on: strait never ran the partition, or MM2
    /// ran it after a hand-back; strait's own where it is as far or further.
    #[test]
    fn the_further_position_wins_and_one_taken_from_mm2_says_where() {
        let (a, b, c) = (
            TopicPartition::new("t", 0),
            TopicPartition::new("t", 1),
            TopicPartition::new("t", 2),
        );
        let mut resume = HashMap::from([(a.clone(), committed(50)), (b.clone(), committed(10))]);
        let mm2 = HashMap::from([(a.clone(), 40), (b.clone(), 20), (c.clone(), 7)]);
        assert_eq!(merge(&mut resume, mm2), [b.clone(), c.clone()]);
        assert_eq!(resume[&a], committed(50));
        let from_mm2 = |next| {
            (
                Position {
                    source_next: next,
                    target_next: -1,
                },
                Lineage {
                    taken_over_at: next,
                    ..Lineage::UNKNOWN
                },
            )
        };
        assert_eq!(resume[&b], from_mm2(20));
        assert_eq!(resume[&c], from_mm2(7));
        // Handed back and taken over again before MM2 moved: strait's own, exact, position.
        let mut resume = HashMap::from([(a.clone(), committed(50))]);
        assert!(merge(&mut resume, HashMap::from([(a.clone(), 50)])).is_empty());
    }
}
