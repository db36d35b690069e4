//! A flow is one `source->target` replication link: it discovers the source topics its
//! filter selects, makes the target hold their remote twins, restores progress, and wires
//! the fetch engine into the produce engine. `run` is the whole process: every enabled flow
//! of the configuration, one shutdown token (mini-redis style), one drain. Every task a flow
//! spawns is supervised ([`Tasks`]): one that ends before the shutdown, with an error, a
//! panic or none, ends the flow with an error naming it, and so the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::{ClusterConfig, Config, FlowConfig, Location};
use crate::fetch::{FetchConfig, Fetcher};
use crate::kafka::admin::{topic_configs, TopicSpec};
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::acl_sync::sync_acls;
use crate::mm2::checkpoint::{self, CheckpointConfig};
use crate::mm2::heartbeat::{self, HeartbeatConfig};
use crate::mm2::offset_sync;
use crate::mm2::topic_sync::{
    apply_configs, ensure_internal_topic, ensure_topics, replicable_configs,
};
use crate::offset_map::{OffsetMap, Position, Translations};
use crate::produce::{Command, Engine, ProduceConfig, Route, Stats};
use crate::progress;

/// Why a flow ended badly.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("flow {flow}: {source}")]
    Kafka {
        flow: String,
        #[source]
        source: KafkaError,
    },
    /// A task of the flow ended while the flow ran: nothing may run on without it.
    #[error("flow {flow}: the {task} {cause}")]
    Task {
        flow: String,
        task: &'static str,
        cause: TaskEnd,
    },
    #[error("flow {flow}: {count} partition(s) stopped on errors (see the log)")]
    Stopped { flow: String, count: usize },
}

/// How a supervised task ended before its time.
#[derive(Debug, thiserror::Error)]
pub enum TaskEnd {
    #[error("failed: {0}")]
    Failed(KafkaError),
    #[error("panicked: {0}")]
    Panicked(String),
    #[error("stopped unexpectedly")]
    Returned,
}

/// Runs every enabled flow until `shutdown` is cancelled, then drains and commits.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), FlowError> {
    let mut tasks = JoinSet::new();
    let mut names = HashMap::new();
    for flow in config.flows.clone() {
        let source = cluster(&config.clusters[&flow.source]);
        let target = cluster(&config.clusters[&flow.target]);
        let shutdown = shutdown.clone();
        let name = format!("{}->{}", flow.source, flow.target);
        let task = tasks.spawn(async move { run_flow(flow, source, target, shutdown).await });
        names.insert(task.id(), name);
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next().await {
        let error = match done {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            // The control loop itself (discovery, config and ACL sync) panicked.
            Err(e) => FlowError::Task {
                flow: names.remove(&e.id()).unwrap_or_default(),
                task: "control loop",
                cause: TaskEnd::from_join(e),
            },
        };
        tracing::error!(error = %error, "flow failed");
        // One failed flow ends the process: an operator must see it, not a half-run.
        shutdown.cancel();
        first_error.get_or_insert(error);
    }
    first_error.map_or(Ok(()), Err)
}

impl TaskEnd {
    /// A task's end as its join handle reports it (a panic, or the task was aborted).
    fn from_join(e: JoinError) -> TaskEnd {
        match e.try_into_panic() {
            Ok(payload) => TaskEnd::Panicked(
                payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".to_string()),
            ),
            Err(e) => TaskEnd::Panicked(e.to_string()),
        }
    }
}

/// Named tasks, supervised together. While the flow runs, [`Tasks::ended`] reports the first
/// one to end, however it ended: each runs until its shutdown token says otherwise. At the
/// drain, [`Tasks::join`] waits for all of them.
#[derive(Default)]
struct Tasks {
    set: JoinSet<Result<(), KafkaError>>,
    names: HashMap<tokio::task::Id, &'static str>,
}

impl Tasks {
    fn spawn(
        &mut self,
        name: &'static str,
        task: impl std::future::Future<Output = Result<(), KafkaError>> + Send + 'static,
    ) {
        let id = self.set.spawn(task).id();
        self.names.insert(id, name);
    }

    /// Supervises a task spawned elsewhere; its panic is passed on as its own.
    fn adopt(&mut self, name: &'static str, task: tokio::task::JoinHandle<()>) {
        self.spawn(name, async move {
            match task.await {
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                _ => Ok(()),
            }
        });
    }

    /// The next task to end, and how (an end with no error too: while the flow runs, no task
    /// has reason to); pending while none has, or none is left.
    async fn ended(&mut self) -> (&'static str, TaskEnd) {
        match self.join_next().await {
            Some((name, end)) => (name, end.unwrap_or(TaskEnd::Returned)),
            None => std::future::pending().await,
        }
    }

    /// Waits for every task (their shutdown token cancelled, or about to end on their own);
    /// the first that failed or panicked, if any.
    async fn join(&mut self) -> Option<(&'static str, TaskEnd)> {
        let mut first = None;
        while let Some((name, end)) = self.join_next().await {
            if let Some(end) = end {
                first.get_or_insert((name, end));
            }
        }
        first
    }

    /// The next task to end: its name, and how it ended unless it returned `Ok`.
    async fn join_next(&mut self) -> Option<(&'static str, Option<TaskEnd>)> {
        let (id, end) = match self.set.join_next_with_id().await? {
            Ok((id, Ok(()))) => (id, None),
            Ok((id, Err(e))) => (id, Some(TaskEnd::Failed(e))),
            Err(e) => (e.id(), Some(TaskEnd::from_join(e))),
        };
        Some((self.names.remove(&id).unwrap_or("task"), end))
    }
}

/// The cluster `c` describes, with no connection yet.
pub fn cluster(c: &ClusterConfig) -> Arc<Cluster> {
    Arc::new(
        Cluster::new(
            &c.alias,
            c.bootstrap_servers.clone(),
            &c.client_id,
            Duration::from_millis(c.request_timeout_ms),
        )
        .with_send_buffer(c.send_buffer_bytes),
    )
}

/// How often a running flow logs its replication status.
const STATUS_INTERVAL: Duration = Duration::from_secs(5);
/// The shortest interval between two topic config or ACL syncs: each is a round of admin
/// requests to both clusters, which a smaller configured interval would hammer.
const MIN_SYNC_INTERVAL_MS: u64 = 1000;

async fn run_flow(
    flow: FlowConfig,
    source: Arc<Cluster>,
    target: Arc<Cluster>,
    shutdown: CancellationToken,
) -> Result<(), FlowError> {
    let name = format!("{}->{}", flow.source, flow.target);
    let fail = |source: KafkaError| FlowError::Kafka {
        flow: name.clone(),
        source,
    };
    let (mut running, first_discovery) = start(&flow, &source, &target).await.map_err(fail)?;
    tracing::info!(flow = %name, partitions = running.resume.len(), "progress restored");
    let error = control(
        &flow,
        &name,
        &source,
        &target,
        &mut running,
        first_discovery,
        &shutdown,
    )
    .await
    .err();
    let stats = match running.stop().await {
        Ok(stats) => stats,
        Err((task, cause)) => {
            return Err(error.unwrap_or(FlowError::Task {
                flow: name,
                task,
                cause,
            }))
        }
    };
    tracing::info!(flow = %name, records = stats.records, batches = stats.batches, bytes = stats.bytes, lag = stats.lag, "flow stopped; progress committed");
    if let Some(e) = error {
        return Err(e);
    }
    if stats.stopped > 0 {
        return Err(FlowError::Stopped {
            flow: name,
            count: stats.stopped,
        });
    }
    Ok(())
}

/// A started flow: its engines and background tasks, and what the control loop needs. The
/// tasks come in the order the drain stops them: the MM2 side tasks, the fetcher, the
/// produce engine, the offset syncs writer.
struct Running {
    fetcher: Fetcher,
    commands: mpsc::UnboundedSender<Command>,
    stats: watch::Receiver<Stats>,
    side: Tasks,
    side_shutdown: CancellationToken,
    fetch: Tasks,
    fetch_shutdown: CancellationToken,
    engine: Tasks,
    engine_shutdown: CancellationToken,
    /// Stopped once the engine (the only sender of syncs) is gone: it writes what is queued.
    syncs: Tasks,
    syncs_shutdown: CancellationToken,
    /// Committed positions restored at start-up.
    resume: HashMap<TopicPartition, Position>,
    /// The progress topic does not exist yet (a first start).
    create_progress: bool,
    progress_topic: String,
}

/// Restores the flow's state and starts its engines and background tasks. Also returns the
/// first discovery, made during start-up, for the control loop to act on.
async fn start(
    flow: &FlowConfig,
    source: &Arc<Cluster>,
    target: &Arc<Cluster>,
) -> Result<(Running, Result<Discovered, KafkaError>), KafkaError> {
    let progress_topic = progress::topic_name(&flow.source);
    let (syncs_cluster, syncs_topic) = match flow.offset_syncs_location {
        Location::Source => (source.clone(), flow.policy.offset_syncs_topic(&flow.target)),
        Location::Target => (target.clone(), flow.policy.offset_syncs_topic(&flow.source)),
    };
    let produce = ProduceConfig {
        max_in_flight: flow.produce_max_in_flight,
        max_request_bytes: flow.produce_max_request_bytes,
        commit_interval: Duration::from_millis(flow.progress_commit_interval_ms),
        drain_timeout: Duration::from_millis(flow.shutdown_drain_timeout_ms),
        coalesce_bytes: flow.produce_coalesce_bytes,
        transactional_id: flow.fencing_transactional_id.clone(),
        delivery_timeout: Duration::from_millis(flow.produce_delivery_timeout_ms),
    };
    let translations: Translations = Arc::default();
    let (syncs_tx, syncs_rx) = mpsc::unbounded_channel();
    // The engine has connections of its own: its metadata lookups and Produce requests must
    // not queue behind the CreateTopics and other admin requests of the control path. (The
    // fetcher's sessions get theirs from the fetcher.)
    let data_target = Arc::new(target.sibling());
    // Start-up is a handful of round trips to two clusters that do not depend on each other:
    // issued together, the first record leaves after the slowest of them, not their sum.
    // The progress topic is read back if it exists. A first start has nothing to restore and
    // creates it once replication runs (its first commit is an interval away), so that its
    // creation does not queue at the controller ahead of the remote topics'.
    let restore_progress = async {
        let found = target
            .metadata(Some(std::slice::from_ref(&progress_topic)))
            .await?;
        if found
            .iter()
            .any(|t| t.name == progress_topic && t.error_code == 0)
        {
            Ok((progress::load(target, &progress_topic).await?, false))
        } else {
            Ok((HashMap::new(), true))
        }
    };
    // The first discovery (source metadata, remote topics created on the target) too; its
    // errors are handled by the control loop like those of every later discovery.
    let first_discovery =
        async { Ok::<_, KafkaError>(discover(flow, source, target, &HashMap::new()).await) };
    // The fetcher reads nothing until partitions are assigned, after the discovery.
    let (events_tx, events_rx) = mpsc::channel(1024);
    let fetch_shutdown = CancellationToken::new();
    let (fetcher, fetch_task) = Fetcher::spawn(
        source,
        FetchConfig {
            max_wait_ms: flow.fetch_max_wait_ms,
            // Room for the response being read next to a buffer that may be full.
            max_bytes: flow.fetch_max_bytes.min((flow.buffer_bytes / 4) as i32),
            partition_max_bytes: flow.fetch_partition_max_bytes,
            offset_reset: flow.offset_reset,
            buffer_bytes: flow.buffer_bytes,
        },
        events_tx,
        fetch_shutdown.clone(),
    );
    let ((resume, create_progress), written, engine, first_discovery) = tokio::try_join!(
        restore_progress,
        offset_sync::load(&syncs_cluster, &syncs_topic),
        Engine::new(
            data_target,
            produce,
            &progress_topic,
            translations.clone(),
            syncs_tx,
            fetcher.clone(),
        ),
        first_discovery,
    )
    .inspect_err(|_| fetch_shutdown.cancel())?;
    // Offset maps as they were: the syncs written so far, bounded by the committed positions.
    *translations.lock().unwrap() = resume
        .iter()
        .map(|(tp, pos)| {
            let syncs = written.get(tp).cloned().unwrap_or_default();
            (tp.clone(), OffsetMap::from_syncs(syncs, Some(*pos)))
        })
        .collect();
    let (commands, commands_rx) = mpsc::unbounded_channel();
    let (stats_tx, stats) = watch::channel(Stats::default());
    let mut fetch = Tasks::default();
    fetch.adopt("fetcher", fetch_task);
    let engine_shutdown = CancellationToken::new();
    let mut engine_task = Tasks::default();
    let run = engine.run(events_rx, commands_rx, stats_tx, engine_shutdown.clone());
    // Its last stats reach `stats` before it returns.
    engine_task.spawn("produce engine", async move { run.await.map(drop) });
    let mut syncs = Tasks::default();
    let syncs_shutdown = CancellationToken::new();
    syncs.spawn(
        "offset syncs writer",
        offset_sync::run(
            syncs_cluster,
            syncs_topic,
            flow.internal_replication_factor,
            syncs_rx,
            syncs_shutdown.clone(),
        ),
    );
    let side_shutdown = CancellationToken::new();
    let side = spawn_side_tasks(flow, source, target, &translations, &side_shutdown);
    let running = Running {
        fetcher,
        commands,
        stats,
        side,
        side_shutdown,
        fetch,
        fetch_shutdown,
        engine: engine_task,
        engine_shutdown,
        syncs,
        syncs_shutdown,
        resume,
        create_progress,
        progress_topic,
    };
    Ok((running, first_discovery))
}

/// The flow's MM2 background tasks the configuration enables: heartbeats, and checkpoints
/// with consumer-group offset sync.
fn spawn_side_tasks(
    flow: &FlowConfig,
    source: &Arc<Cluster>,
    target: &Arc<Cluster>,
    translations: &Translations,
    shutdown: &CancellationToken,
) -> Tasks {
    let mut tasks = Tasks::default();
    if flow.emit_heartbeats.enabled {
        let config = HeartbeatConfig {
            source_alias: flow.source.clone(),
            target_alias: flow.target.clone(),
            topic: flow.policy.heartbeats_topic().to_string(),
            interval: Duration::from_millis(flow.emit_heartbeats.interval_ms),
            replication_factor: flow.internal_replication_factor,
        };
        tasks.spawn(
            "heartbeat task",
            heartbeat::run(config, target.clone(), shutdown.clone()),
        );
    }
    if flow.emit_checkpoints.enabled {
        let config = CheckpointConfig {
            source_alias: flow.source.clone(),
            groups: flow.groups.clone(),
            policy: flow.policy.clone(),
            interval: Duration::from_millis(flow.emit_checkpoints.interval_ms),
            sync_group_offsets: flow
                .sync_group_offsets
                .enabled
                .then(|| Duration::from_millis(flow.sync_group_offsets.interval_ms)),
            replication_factor: flow.internal_replication_factor,
        };
        tasks.spawn(
            "checkpoint task",
            checkpoint::run(
                config,
                source.clone(),
                target.clone(),
                translations.clone(),
                shutdown.clone(),
            ),
        );
    }
    tasks
}

/// The control loop of a running flow until `shutdown`: topic discovery and assignment,
/// config and ACL syncs, status lines, and the watch over the flow's tasks. Returns the
/// error that ends the flow early, if any.
async fn control(
    flow: &FlowConfig,
    name: &str,
    source: &Cluster,
    target: &Cluster,
    running: &mut Running,
    first_discovery: Result<Discovered, KafkaError>,
    shutdown: &CancellationToken,
) -> Result<(), FlowError> {
    let fail = |source: KafkaError| FlowError::Kafka {
        flow: name.to_string(),
        source,
    };
    let sync_interval = |ms: u64| Duration::from_millis(ms.max(MIN_SYNC_INTERVAL_MS));
    let mut known: HashMap<String, i32> = HashMap::new();
    let mut refresh = tokio::time::interval(Duration::from_millis(flow.refresh_topics_interval_ms));
    let mut config_sync = tokio::time::interval(sync_interval(flow.sync_topic_configs.interval_ms));
    let mut acl_sync = tokio::time::interval(sync_interval(flow.sync_topic_acls.interval_ms));
    let mut status = tokio::time::interval(STATUS_INTERVAL);
    refresh.tick().await;
    config_sync.tick().await;
    acl_sync.tick().await;
    status.tick().await;
    let mut discovered = Some(first_discovery);
    loop {
        match discovered.take().map(|found| {
            found.map(|found| {
                assign(
                    flow,
                    found,
                    &running.resume,
                    &mut known,
                    &running.fetcher,
                    &running.commands,
                )
            })
        }) {
            // New remote topics get the source's ACLs now, not an interval later.
            Some(Ok(new)) if !new.is_empty() && flow.sync_topic_acls.enabled => {
                if let Err(e) = sync_acls(source, target, &flow.policy, &flow.source, &new).await {
                    tracing::warn!(flow = %name, error = %e, "topic ACL sync failed; retrying at the next interval");
                }
            }
            Some(Err(e)) if known.is_empty() && !e.is_retriable() => return Err(fail(e)),
            Some(Err(e)) => {
                tracing::warn!(flow = %name, error = %e, "topic discovery failed; retrying at the next refresh")
            }
            Some(Ok(_)) | None => {}
        }
        if running.create_progress {
            running.create_progress = false;
            let rf = flow.internal_replication_factor;
            ensure_internal_topic(target, &running.progress_topic, rf)
                .await
                .map_err(fail)?;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = refresh.tick() => discovered = Some(discover(flow, source, target, &known).await),
            _ = config_sync.tick(), if flow.sync_topic_configs.enabled => {
                let topics: Vec<String> = known.keys().cloned().collect();
                if let Err(e) = sync_configs(flow, source, target, &topics).await {
                    tracing::warn!(flow = %name, error = %e, "topic config sync failed; retrying at the next interval");
                }
            }
            _ = acl_sync.tick(), if flow.sync_topic_acls.enabled => {
                let topics: Vec<String> = known.keys().cloned().collect();
                if let Err(e) = sync_acls(source, target, &flow.policy, &flow.source, &topics).await {
                    tracing::warn!(flow = %name, error = %e, "topic ACL sync failed; retrying at the next interval");
                }
            }
            (task, cause) = running.ended() => {
                return Err(FlowError::Task { flow: name.to_string(), task, cause });
            }
            _ = status.tick() => {
                let s = running.stats.borrow().clone();
                let f = running.fetcher.stats();
                tracing::info!(flow = %name, topics = known.len(), records = s.records, batches = s.batches, bytes = s.bytes, lag = s.lag, source_truncations = f.truncations, offsets_lost_to_retention = f.offsets_lost_to_retention, recreated_source_partitions = f.recreated_partitions, "replication status");
            }
        }
    }
}

impl Running {
    /// The first of the flow's tasks to end, and how.
    async fn ended(&mut self) -> (&'static str, TaskEnd) {
        tokio::select! {
            ended = self.side.ended() => ended,
            ended = self.fetch.ended() => ended,
            ended = self.engine.ended() => ended,
            ended = self.syncs.ended() => ended,
        }
    }

    /// The one drain: background tasks stop, then the source reads, then the engine drains
    /// its batches in flight and commits; the offset syncs writer finishes last. Every task
    /// is waited for, whatever one of them did; the first failure is the result.
    async fn stop(mut self) -> Result<Stats, (&'static str, TaskEnd)> {
        self.side_shutdown.cancel();
        let side = self.side.join().await;
        // Stop reading the source first, then let the engine drain and commit.
        self.fetch_shutdown.cancel();
        let fetch = self.fetch.join().await;
        self.engine_shutdown.cancel();
        let engine = self.engine.join().await;
        self.syncs_shutdown.cancel();
        let syncs = self.syncs.join().await;
        match side.or(fetch).or(engine).or(syncs) {
            Some(failed) => Err(failed),
            None => Ok(self.stats.borrow().clone()),
        }
    }
}

/// What one discovery found: the partition count of every source topic the flow replicates,
/// and which of them are new or grew since `known` (their remote twins now exist on the
/// target).
struct Discovered {
    wanted: BTreeMap<String, i32>,
    changed: Vec<String>,
}

/// Finds the source topics the flow replicates and creates or grows the remote twins of
/// those that are new or grew since `known`.
async fn discover(
    flow: &FlowConfig,
    source: &Cluster,
    target: &Cluster,
    known: &HashMap<String, i32>,
) -> Result<Discovered, KafkaError> {
    let topics = source.metadata(None).await?;
    let mut wanted: BTreeMap<String, i32> = BTreeMap::new();
    for t in topics
        .iter()
        .filter(|t| t.error_code == 0 && !t.is_internal)
    {
        if replicates(flow, &t.name) {
            wanted.insert(t.name.clone(), t.partitions.len() as i32);
        }
    }
    let changed: Vec<String> = wanted
        .iter()
        .filter(|(name, count)| known.get(*name) != Some(count))
        .map(|(name, _)| name.clone())
        .collect();
    if changed.is_empty() {
        return Ok(Discovered { wanted, changed });
    }
    let configs = if flow.sync_topic_configs.enabled {
        topic_configs(source, &changed).await?
    } else {
        BTreeMap::new()
    };
    let specs: Vec<TopicSpec> = changed
        .iter()
        .map(|name| TopicSpec {
            name: flow.policy.format_remote_topic(&flow.source, name),
            partitions: wanted[name],
            replication_factor: flow.replication_factor,
            configs: configs
                .get(name)
                .map(|c| {
                    replicable_configs(c, &flow.config_properties_exclude)
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    ensure_topics(target, &specs).await?;
    Ok(Discovered { wanted, changed })
}

/// Starts replicating the partitions of `found` not seen before, from their committed
/// positions. Returns the topics that were new or grew.
fn assign(
    flow: &FlowConfig,
    found: Discovered,
    resume: &HashMap<TopicPartition, Position>,
    known: &mut HashMap<String, i32>,
    fetcher: &Fetcher,
    commands: &mpsc::UnboundedSender<Command>,
) -> Vec<String> {
    for (name, count) in &found.wanted {
        let before = known.get(name).copied().unwrap_or(0);
        if before == *count {
            continue;
        }
        let remote: Arc<str> = Arc::from(flow.policy.format_remote_topic(&flow.source, name));
        let topic: Arc<str> = Arc::from(name.as_str());
        for partition in before..*count {
            let source_tp = TopicPartition::new(topic.clone(), partition);
            let position = resume.get(&source_tp).copied();
            let _ = commands.send(Command::Route(Route {
                source: source_tp.clone(),
                target: TopicPartition::new(remote.clone(), partition),
                resume: position,
            }));
            fetcher.assign(source_tp, position.map(|p| p.source_next));
        }
        tracing::info!(topic = %name, remote = %remote, partitions = *count, from_partition = before, "replicating");
        known.insert(name.clone(), *count);
    }
    found.changed
}

/// Copies the replicable configs of the source topics to their remote twins (MM2's
/// `sync.topic.configs`), setting only values that differ.
async fn sync_configs(
    flow: &FlowConfig,
    source: &Cluster,
    target: &Cluster,
    topics: &[String],
) -> Result<(), KafkaError> {
    let wanted = topic_configs(source, topics).await?;
    let remotes: Vec<String> = topics
        .iter()
        .map(|t| flow.policy.format_remote_topic(&flow.source, t))
        .collect();
    let current = topic_configs(target, &remotes).await?;
    for (topic, remote) in topics.iter().zip(&remotes) {
        let (Some(configs), Some(now)) = (wanted.get(topic), current.get(remote)) else {
            continue;
        };
        apply_configs(
            target,
            remote,
            &replicable_configs(configs, &flow.config_properties_exclude),
            now,
        )
        .await?;
    }
    Ok(())
}

/// Whether the flow copies source topic `topic`: the filter selects it (or it holds
/// heartbeats), it is not internal, and it did not come from the flow's own target (no
/// cycles in A<->B).
fn replicates(flow: &FlowConfig, topic: &str) -> bool {
    // Heartbeats travel whatever the filter says (MM2's heartbeats.replication.enabled).
    (flow.topics.matches(topic) || flow.policy.is_heartbeats_topic(topic))
        && !flow.policy.is_internal_topic(topic)
        && !topic.starts_with("strait-progress.")
        && !flow.policy.is_cycle(topic, &flow.target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken() -> KafkaError {
        KafkaError::Other("broken".into())
    }

    #[tokio::test]
    async fn a_task_that_fails_is_named_with_its_error() {
        let mut tasks = Tasks::default();
        tasks.spawn("heartbeat task", std::future::pending());
        tasks.spawn("produce engine", async { Err(broken()) });
        let (task, end) = tasks.ended().await;
        assert_eq!(task, "produce engine");
        assert!(
            matches!(end, TaskEnd::Failed(KafkaError::Other(_))),
            "{end:?}"
        );
        let message = FlowError::Task {
            flow: "a->b".into(),
            task,
            cause: end,
        }
        .to_string();
        assert_eq!(message, "flow a->b: the produce engine failed: broken");
    }

    #[tokio::test]
    async fn a_task_that_panics_is_named_with_its_panic_message() {
        let mut tasks = Tasks::default();
        tasks.spawn("checkpoint task", async { panic!("partition {} gone", 3) });
        let (task, end) = tasks.ended().await;
        assert_eq!(task, "checkpoint task");
        assert_eq!(end.to_string(), "panicked: partition 3 gone");

        // A task spawned elsewhere (the fetcher's) keeps its own panic message.
        tasks.adopt("fetcher", tokio::spawn(async { panic!("bad chunk") }));
        let (task, end) = tasks.ended().await;
        assert_eq!(
            (task, end.to_string().as_str()),
            ("fetcher", "panicked: bad chunk")
        );
    }

    #[tokio::test]
    async fn a_task_that_returns_while_the_flow_runs_is_an_end_too() {
        let mut tasks = Tasks::default();
        tasks.adopt("fetcher", tokio::spawn(async {}));
        let (task, end) = tasks.ended().await;
        assert_eq!(
            (task, end.to_string().as_str()),
            ("fetcher", "stopped unexpectedly")
        );
        // With none left, nothing more ends.
        let none = tokio::time::timeout(Duration::from_millis(50), tasks.ended()).await;
        assert!(none.is_err());
    }

    #[tokio::test]
    async fn the_drain_waits_for_every_task_and_reports_the_first_failure() {
        let mut tasks = Tasks::default();
        let stop = CancellationToken::new();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (token, done) = (stop.clone(), finished.clone());
        tasks.spawn("heartbeat task", async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        tasks.spawn("checkpoint task", async { Err(broken()) });
        stop.cancel();
        let (task, end) = tasks.join().await.expect("a failure");
        assert_eq!(
            (task, end.to_string().as_str()),
            ("checkpoint task", "failed: broken")
        );
        assert!(finished.load(std::sync::atomic::Ordering::SeqCst));
        // Tasks that ended cleanly at the drain are no failure.
        let mut tasks = Tasks::default();
        tasks.spawn("heartbeat task", async { Ok(()) });
        assert!(tasks.join().await.is_none());
    }
}
