//! A flow is one `source->target` replication link: it discovers the source topics its
//! filter selects, makes the target hold their remote twins, restores progress, and wires
//! the fetch engine into the produce engine. `run` is the whole process: every enabled flow
//! of the configuration, one shutdown token (mini-redis style), one drain.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
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
    apply_configs, ensure_internal_topic, ensure_remote_topics, replicable_configs,
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
    #[error("flow {flow}: {count} partition(s) stopped on errors (see the log)")]
    Stopped { flow: String, count: usize },
}

/// Runs every enabled flow until `shutdown` is cancelled, then drains and commits.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), FlowError> {
    let mut tasks = tokio::task::JoinSet::new();
    for flow in config.flows.clone() {
        let source = cluster(&config.clusters[&flow.source]);
        let target = cluster(&config.clusters[&flow.target]);
        let shutdown = shutdown.clone();
        tasks.spawn(async move { run_flow(flow, source, target, shutdown).await });
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "flow failed");
                // One failed flow ends the process: an operator must see it, not a half-run.
                shutdown.cancel();
                first_error.get_or_insert(e);
            }
            Err(e) => tracing::error!(error = %e, "flow task panicked"),
        }
    }
    first_error.map_or(Ok(()), Err)
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
    .err()
    .map(fail);
    let stats = match running.stop(&name).await {
        Ok(stats) => stats,
        Err(e) => return Err(error.unwrap_or(fail(e))),
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

/// A started flow: its engines and background tasks, and what the control loop needs.
struct Running {
    fetcher: Fetcher,
    fetch_task: tokio::task::JoinHandle<()>,
    fetch_shutdown: CancellationToken,
    engine_task: tokio::task::JoinHandle<Result<Stats, KafkaError>>,
    engine_shutdown: CancellationToken,
    commands: mpsc::UnboundedSender<Command>,
    stats: watch::Receiver<Stats>,
    syncs_task: tokio::task::JoinHandle<Result<(), KafkaError>>,
    side_tasks: tokio::task::JoinSet<Result<(), KafkaError>>,
    side_shutdown: CancellationToken,
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
    let engine_shutdown = CancellationToken::new();
    let engine_task =
        tokio::spawn(engine.run(events_rx, commands_rx, stats_tx, engine_shutdown.clone()));
    // The writer drains on its own once the engine (the only sender) is gone.
    let syncs_task = tokio::spawn(offset_sync::run(
        syncs_cluster,
        syncs_topic,
        flow.internal_replication_factor,
        syncs_rx,
        CancellationToken::new(),
    ));
    let side_shutdown = CancellationToken::new();
    let side_tasks = spawn_side_tasks(flow, source, target, &translations, &side_shutdown);
    let running = Running {
        fetcher,
        fetch_task,
        fetch_shutdown,
        engine_task,
        engine_shutdown,
        commands,
        stats,
        syncs_task,
        side_tasks,
        side_shutdown,
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
) -> tokio::task::JoinSet<Result<(), KafkaError>> {
    let mut tasks = tokio::task::JoinSet::new();
    if flow.emit_heartbeats.enabled {
        let config = HeartbeatConfig {
            source_alias: flow.source.clone(),
            target_alias: flow.target.clone(),
            topic: flow.policy.heartbeats_topic().to_string(),
            interval: Duration::from_millis(flow.emit_heartbeats.interval_ms),
            replication_factor: flow.internal_replication_factor,
        };
        tasks.spawn(heartbeat::run(config, target.clone(), shutdown.clone()));
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
        tasks.spawn(checkpoint::run(
            config,
            source.clone(),
            target.clone(),
            translations.clone(),
            shutdown.clone(),
        ));
    }
    tasks
}

/// The control loop of a running flow until `shutdown`: topic discovery and assignment,
/// config and ACL syncs, status lines. Returns the error that ends the flow early, if any.
async fn control(
    flow: &FlowConfig,
    name: &str,
    source: &Cluster,
    target: &Cluster,
    running: &mut Running,
    first_discovery: Result<Discovered, KafkaError>,
    shutdown: &CancellationToken,
) -> Result<(), KafkaError> {
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
            Some(Err(e)) if known.is_empty() && !e.is_retriable() => return Err(e),
            Some(Err(e)) => {
                tracing::warn!(flow = %name, error = %e, "topic discovery failed; retrying at the next refresh")
            }
            Some(Ok(_)) | None => {}
        }
        if running.create_progress {
            running.create_progress = false;
            let rf = flow.internal_replication_factor;
            ensure_internal_topic(target, &running.progress_topic, rf).await?;
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
            Some(done) = running.side_tasks.join_next(), if !running.side_tasks.is_empty() => {
                if let Ok(Err(e)) = done {
                    tracing::error!(flow = %name, error = %e, "a background task of the flow failed");
                }
            }
            _ = status.tick() => {
                let s = running.stats.borrow().clone();
                tracing::info!(flow = %name, topics = known.len(), records = s.records, batches = s.batches, bytes = s.bytes, lag = s.lag, "replication status");
            }
        }
    }
}

impl Running {
    /// The one drain: background tasks stop, then the source reads, then the engine drains
    /// its batches in flight and commits; the offset syncs writer finishes last.
    async fn stop(mut self, name: &str) -> Result<Stats, KafkaError> {
        self.side_shutdown.cancel();
        while self.side_tasks.join_next().await.is_some() {}
        // Stop reading the source first, then let the engine drain and commit.
        self.fetch_shutdown.cancel();
        let _ = self.fetch_task.await;
        self.engine_shutdown.cancel();
        let stats = match self.engine_task.await {
            Ok(result) => result?,
            Err(e) => return Err(KafkaError::Other(format!("produce engine panicked: {e}"))),
        };
        if let Ok(Err(e)) = self.syncs_task.await {
            tracing::warn!(flow = %name, error = %e, "offset syncs topic unavailable");
        }
        Ok(stats)
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
    // A topic the target refused is left out of this discovery (not routed, not known), so
    // the next one tries again.
    let refused = ensure_remote_topics(target, &specs).await?;
    let remote = |name: &String| flow.policy.format_remote_topic(&flow.source, name);
    wanted.retain(|name, _| !refused.contains(&remote(name)));
    let changed = changed
        .into_iter()
        .filter(|name| !refused.contains(&remote(name)))
        .collect();
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
