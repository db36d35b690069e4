//! A flow is one `source->target` replication link: it discovers the source topics its
//! filter selects, makes the target hold their remote twins, restores progress, and wires
//! the fetch engine into the produce engine. `run` is the whole process: every enabled flow
//! of the configuration, one shutdown token (mini-redis style), one drain. Every task a flow
//! spawns is supervised ([`Tasks`]): one that ends before the shutdown, with an error, a
//! panic or none, ends the flow with an error naming it, and so the process.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::{ClusterConfig, Config, FlowConfig, Location};
use crate::fetch::{FetchConfig, Fetcher};
use crate::group::{self, assignor, Change, GroupConfig};
use crate::kafka::admin::{topic_configs, TopicSpec};
use crate::kafka::backoff::Backoff;
use crate::kafka::tls::Tls;
use crate::kafka::transaction::TransactionalProducer;
use crate::kafka::{log_reader, Cluster, KafkaError, TopicPartition};
use crate::migration;
use crate::mm2::acl_sync::sync_acls;
use crate::mm2::checkpoint::{self, CheckpointConfig};
use crate::mm2::heartbeat::{self, HeartbeatConfig};
use crate::mm2::offset_sync;
use crate::mm2::topic_sync::{
    apply_configs, await_internal_topic, ensure_remote_topics, missing_topics,
    recreate_remote_topics, replicable_configs,
};
use crate::offset_map::{Lineage, OffsetMap, Position, Translations};
use crate::produce::{Command, Engine, ProduceConfig, Release, Route, Stats};
use crate::progress;
use crate::telemetry::{FlowHealth, FlowMetrics, Telemetry};

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
    /// A cluster's connection settings cannot be put to use.
    #[error("{0}")]
    Setup(String),
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
    #[error("was cancelled")]
    Cancelled,
}

/// Runs every enabled flow until `shutdown` is cancelled, then drains and commits; each
/// reports its series and health to `telemetry`, and applies the settings that change live
/// ([`restart_only_changes`] names the others) from each config `updates` brings.
pub async fn run(
    config: Config,
    telemetry: Arc<Telemetry>,
    updates: watch::Receiver<Config>,
    shutdown: CancellationToken,
) -> Result<(), FlowError> {
    let mut tasks = JoinSet::new();
    let mut names = HashMap::new();
    // As MM2 counts them: a source connector per flow, a checkpoint and a heartbeat
    // connector where enabled.
    let connectors = config
        .flows
        .iter()
        .map(|f| {
            1 + usize::from(f.emit_checkpoints.enabled) + usize::from(f.emit_heartbeats.enabled)
        })
        .sum();
    telemetry.metrics.connectors(connectors);
    for flow in config.flows.clone() {
        let setup = |alias: &str| {
            cluster(&config.clusters[alias]).map_err(|e| FlowError::Setup(format!("{e:#}")))
        };
        let source = setup(&flow.source)?;
        let target = setup(&flow.target)?;
        let shutdown = shutdown.clone();
        let name = format!("{}->{}", flow.source, flow.target);
        let health = telemetry
            .health
            .flow(&name, source.timeout(), target.timeout());
        let reports = Reports {
            metrics: telemetry
                .metrics
                .flow(&flow.source, &flow.target, flow.metrics_aggregation),
            health: health.clone(),
        };
        let updates = updates.clone();
        let task = tasks
            .spawn(async move { run_flow(flow, source, target, reports, updates, shutdown).await });
        names.insert(task.id(), (name, health));
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next_with_id().await {
        let (error, health) = match done {
            Ok((_, Ok(()))) => continue,
            Ok((id, Err(e))) => (e, names.remove(&id).map(|(_, h)| h)),
            // The control loop itself (discovery, config and ACL sync) panicked.
            Err(e) => {
                let (flow, health) = names.remove(&e.id()).unzip();
                let error = FlowError::Task {
                    flow: flow.unwrap_or_default(),
                    task: "control loop",
                    cause: TaskEnd::from_join(e),
                };
                (error, health)
            }
        };
        if let Some(health) = health {
            health.failed(error.to_string());
        }
        tracing::error!(error = %error, "flow failed");
        // One failed flow ends the process: an operator must see it, not a half-run.
        shutdown.cancel();
        first_error.get_or_insert(error);
    }
    first_error.map_or(Ok(()), Err)
}

impl TaskEnd {
    /// A task's end as its join handle reports it: a panic, or the task was aborted.
    fn from_join(e: JoinError) -> TaskEnd {
        match e.try_into_panic() {
            Ok(payload) => TaskEnd::Panicked(
                payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".to_string()),
            ),
            Err(_) => TaskEnd::Cancelled,
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

/// The cluster `c` describes, with no connection yet. Fails only on TLS settings that
/// validation could not judge (a key that does not fit its certificate, a CPU without the
/// instructions TLS needs).
pub fn cluster(c: &ClusterConfig) -> anyhow::Result<Arc<Cluster>> {
    let tls = c
        .tls
        .as_ref()
        .map(Tls::new)
        .transpose()
        .map_err(|e| anyhow::anyhow!("cluster {}: TLS: {e}", c.alias))?;
    Ok(Arc::new(
        Cluster::new(
            &c.alias,
            c.bootstrap_servers.clone(),
            &c.client_id,
            Duration::from_millis(c.request_timeout_ms),
        )
        .with_send_buffer(c.send_buffer_bytes)
        .with_tls(tls)
        .with_sasl(c.sasl.clone()),
    ))
}

/// Where a flow reports: its series and its health.
#[derive(Clone)]
struct Reports {
    metrics: FlowMetrics,
    health: Arc<FlowHealth>,
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
    reports: Reports,
    updates: watch::Receiver<Config>,
    shutdown: CancellationToken,
) -> Result<(), FlowError> {
    let name = format!("{}->{}", flow.source, flow.target);
    let fail = |source: KafkaError| FlowError::Kafka {
        flow: name.clone(),
        source,
    };
    tokio::select! {
        beside = migration::wait_for_mm2(&flow, &target) => beside.map_err(fail)?,
        () = shutdown.cancelled() => return Ok(()),
    }
    let (mut running, started) = start(&flow, &source, &target, &reports, updates)
        .await
        .map_err(fail)?;
    tracing::info!(flow = %name, partitions = running.resume.len(), "progress restored");
    reports.health.started();
    let error = control(
        &flow,
        &name,
        &source,
        &target,
        &mut running,
        started,
        &shutdown,
    )
    .await
    .err();
    let stats = match running.stop(&name).await {
        Ok(Some(stats)) => stats,
        // The engine ended before the drain: nothing was committed at the stop.
        Ok(None) => {
            return Err(error.unwrap_or(FlowError::Task {
                flow: name,
                task: "produce engine",
                cause: TaskEnd::Returned,
            }))
        }
        Err((task, cause)) => {
            return Err(error.unwrap_or(FlowError::Task {
                flow: name,
                task,
                cause,
            }))
        }
    };
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
/// tasks come in the order the drain tells them to stop: the MM2 side tasks, the fetcher,
/// the produce engine, the offset syncs writer (see [`Running::stop`]).
struct Running {
    fetcher: Fetcher,
    commands: mpsc::UnboundedSender<Command>,
    stats: watch::Receiver<Stats>,
    side: Side,
    fetch: Tasks,
    fetch_shutdown: CancellationToken,
    engine: Tasks,
    engine_shutdown: CancellationToken,
    /// Stopped once the engine (the only sender of syncs) is gone: it writes what is queued.
    syncs: Tasks,
    syncs_shutdown: CancellationToken,
    /// Committed positions restored at start-up, with the source log each was taken from.
    resume: HashMap<TopicPartition, (Position, Lineage)>,
    /// The progress topic does not exist yet (a first start).
    create_progress: bool,
    /// Told when a task ends.
    health: Arc<FlowHealth>,
    progress_topic: String,
    /// Where the offset syncs go: read again for partitions that come from another process.
    syncs_at: (Arc<Cluster>, String),
    /// The flow's scale-out group membership; `None`: this process replicates it all.
    membership: Option<Membership>,
    /// The source topic ids the discoveries found.
    topic_ids: HashMap<String, uuid::Uuid>,
}

/// This process's place in the flow's scale-out group (`crate::group`): the slots it owns
/// and the member task that follows the group.
struct Membership {
    slots: u32,
    owned: BTreeSet<u32>,
    /// In exactly-once mode, the transactional id the slots' own are made from
    /// ([`Membership::producers`]).
    transactional_id: Option<String>,
    /// Partitions handed to another process: routed again, the engine starts fetching them
    /// (under a new assignment generation), not the flow.
    handed: HashSet<TopicPartition>,
    /// Whether this process writes the flow's heartbeats: the owner of slot 0 does, so that
    /// the flow beats once per interval however many processes share it (as MM2's single
    /// heartbeat task).
    beats: watch::Sender<bool>,
    tasks: Tasks,
    shutdown: CancellationToken,
}

impl Membership {
    /// Joins the group; what it changes comes through the receiver. The engine writes
    /// only while the member's lease holds.
    fn start(
        flow: &FlowConfig,
        target: &Cluster,
        engine: &mut Engine,
        beats: watch::Sender<bool>,
    ) -> (Membership, mpsc::UnboundedReceiver<Change>) {
        let scale = &flow.scale_out;
        let session_timeout = Duration::from_millis(scale.session_timeout_ms);
        // Time to hand slots over (a drain) before the coordinator gives up on a member.
        let rebalance_timeout =
            Duration::from_millis(flow.shutdown_drain_timeout_ms) + session_timeout;
        let config = GroupConfig {
            group: scale.group.clone(),
            instance_id: scale.instance_id.clone(),
            session_timeout,
            rebalance_timeout,
            slots: scale.slots,
            fingerprint: assignor::fingerprint(&[
                ("slots", scale.slots.to_string()),
                ("topics", flow.topics.fingerprint()),
                ("remote", flow.policy.format_remote_topic(&flow.source, "t")),
                ("target", flow.target.clone()),
            ]),
        };
        // A JoinGroup waits at the coordinator until every member joined.
        let cluster = Arc::new(
            target.sibling().with_timeout(
                target
                    .timeout()
                    .max(rebalance_timeout + Duration::from_secs(5)),
            ),
        );
        let (changes_tx, changes) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let lease = Arc::new(group::Lease::default());
        engine.hold_by(lease.clone());
        let mut tasks = Tasks::default();
        tasks.spawn(
            "scale-out group member",
            group::run(cluster, config, lease, changes_tx, shutdown.clone()),
        );
        let membership = Membership {
            slots: scale.slots,
            owned: BTreeSet::new(),
            transactional_id: flow
                .fencing_transactional_id
                .clone()
                .filter(|_| flow.exactly_once.enabled),
            handed: HashSet::new(),
            beats,
            tasks,
            shutdown,
        };
        (membership, changes)
    }

    fn owns(&self, tp: &TopicPartition) -> bool {
        self.owned.contains(&self.slot_of(tp))
    }

    fn slot_of(&self, tp: &TopicPartition) -> u32 {
        assignor::slot_of(&tp.topic, tp.partition, self.slots)
    }

    /// In exactly-once mode, the transactional producers of `slots`, each under its own id
    /// (`<fencing.transactional.id>-slot-<n>`): its InitProducerId fences the slot's earlier
    /// owner and ends the transaction that one left open (committed or aborted), so that
    /// nothing the earlier owner still sends is written and its commits can be read.
    async fn producers(
        &self,
        target: &Arc<Cluster>,
        slots: &BTreeSet<u32>,
    ) -> Result<Vec<(u32, TransactionalProducer)>, KafkaError> {
        let Some(base) = &self.transactional_id else {
            return Ok(Vec::new());
        };
        let mut producers = JoinSet::new();
        for &slot in slots {
            let (target, id) = (target.clone(), format!("{base}-slot-{slot}"));
            producers.spawn(async move {
                let producer = target.init_producer_id(Some(&id)).await?;
                let producer = TransactionalProducer::new(&target, id, producer).await?;
                Ok::<_, KafkaError>((slot, producer))
            });
        }
        let mut out = Vec::new();
        while let Some(done) = producers.join_next().await {
            out.push(done.map_err(|e| KafkaError::Other(format!("InitProducerId task: {e}")))??);
        }
        Ok(out)
    }
}

/// Whether this process replicates `tp`: all of the flow alone, its slots' in a group.
fn mine(membership: &Option<Membership>, tp: &TopicPartition) -> bool {
    membership.as_ref().is_none_or(|m| m.owns(tp))
}

/// The offset map of `tp` as it was: the offset syncs `written` for it, bounded by its
/// committed position (and translated as MM2 does below where strait took it over).
fn restored_map(
    written: &HashMap<TopicPartition, Vec<(i64, i64)>>,
    tp: &TopicPartition,
    committed: Option<(Position, Lineage)>,
) -> OffsetMap {
    let syncs = written.get(tp).cloned().unwrap_or_default();
    OffsetMap::from_syncs(syncs, committed.map(|(pos, _)| pos))
        .taken_over_at(committed.map_or(-1, |(_, from)| from.taken_over_at))
}

/// The committed positions in `topic` on `target`, and whether the topic is still to be
/// created (nothing committed yet). In exactly-once mode (`transactions`) once every
/// transaction open on it has ended: a scale-out group's slots commit in transactions of
/// their own, and one slot's commit stays out of a `read_committed` read as long as another
/// slot's transaction that began before it is open.
async fn committed(
    target: &Cluster,
    topic: &str,
    transactions: bool,
) -> Result<(HashMap<TopicPartition, (Position, Lineage)>, bool), KafkaError> {
    let found = target.metadata(Some(&[topic.to_string()])).await?;
    if found.iter().any(|t| t.name == topic && t.error_code == 0) {
        if transactions {
            // A transaction left open by a process gone for good ends at its timeout, once
            // the coordinator's scan for those comes by (every 10 s by default).
            let within =
                Duration::from_millis(crate::kafka::cluster::TRANSACTION_TIMEOUT_MS as u64)
                    + Duration::from_secs(30);
            log_reader::await_stable(target, &TopicPartition::new(topic, 0), within).await?;
        }
        Ok((progress::load(target, topic).await?, false))
    } else {
        Ok((HashMap::new(), true))
    }
}

/// The flow's MM2 side tasks (heartbeats; checkpoints with consumer-group offset sync), and
/// what starting them takes: a config reload that changes their settings starts them again.
struct Side {
    tasks: Tasks,
    shutdown: CancellationToken,
    /// The checkpoint task's group filter, changed by a config reload.
    groups: watch::Sender<crate::filter::GroupFilter>,
    clusters: (Arc<Cluster>, Arc<Cluster>),
    translations: Translations,
    reports: Reports,
    /// Whether this process writes the flow's heartbeats now (`Membership::beats`).
    beats: watch::Receiver<bool>,
}

impl Side {
    fn start(
        flow: &FlowConfig,
        clusters: (Arc<Cluster>, Arc<Cluster>),
        translations: Translations,
        reports: Reports,
        beats: watch::Receiver<bool>,
    ) -> Side {
        let shutdown = CancellationToken::new();
        let (groups, groups_rx) = watch::channel(flow.groups.clone());
        let tasks = spawn_side_tasks(
            flow,
            (&clusters.0, &clusters.1),
            &translations,
            &reports,
            groups_rx,
            beats.clone(),
            &shutdown,
        );
        Side {
            tasks,
            shutdown,
            groups,
            clusters,
            translations,
            reports,
            beats,
        }
    }

    /// Stops the tasks and starts them again with `flow`'s settings. Returns the first that
    /// had failed, if any (then none is started).
    async fn restart(&mut self, flow: &FlowConfig) -> Option<(&'static str, TaskEnd)> {
        self.shutdown.cancel();
        if let Some(failed) = self.tasks.join().await {
            return Some(failed);
        }
        *self = Side::start(
            flow,
            self.clusters.clone(),
            self.translations.clone(),
            self.reports.clone(),
            self.beats.clone(),
        );
        None
    }
}

/// What the control loop takes over from start-up besides the running flow.
struct Started {
    /// The first discovery, made during start-up, for the control loop to act on.
    first_discovery: Result<Discovered, KafkaError>,
    /// Remote topics the produce engine found missing on the target, for topic sync to
    /// check and create again.
    missing: mpsc::UnboundedReceiver<String>,
    /// Config reloads.
    updates: watch::Receiver<Config>,
    /// What the scale-out group changes, in one.
    changes: Option<mpsc::UnboundedReceiver<Change>>,
}

/// Restores the flow's state and starts its engines and background tasks. Also returns
/// what the control loop takes over ([`Started`]).
async fn start(
    flow: &FlowConfig,
    source: &Arc<Cluster>,
    target: &Arc<Cluster>,
    reports: &Reports,
    updates: watch::Receiver<Config>,
) -> Result<(Running, Started), KafkaError> {
    let progress_topic = progress::topic_name(&flow.source);
    let (syncs_cluster, syncs_topic) = match flow.offset_syncs_location {
        Location::Source => (source.clone(), flow.policy.offset_syncs_topic(&flow.target)),
        Location::Target => (target.clone(), flow.policy.offset_syncs_topic(&flow.source)),
    };
    let produce = ProduceConfig {
        max_in_flight: flow.produce_max_in_flight,
        max_request_bytes: flow.produce_max_request_bytes,
        // In exactly-once mode progress is committed with every transaction.
        commit_interval: Duration::from_millis(match flow.exactly_once.enabled {
            true => flow.exactly_once.transaction_interval_ms,
            false => flow.progress_commit_interval_ms,
        }),
        drain_timeout: Duration::from_millis(flow.shutdown_drain_timeout_ms),
        coalesce_bytes: flow.produce_coalesce_bytes,
        connections: flow.produce_connections_per_broker,
        // A scale-out group's members share the flow: the group, not a fencing id, keeps
        // two of them off one partition.
        transactional_id: flow
            .fencing_transactional_id
            .clone()
            .filter(|_| !flow.scale_out.enabled),
        delivery_timeout: Duration::from_millis(flow.produce_delivery_timeout_ms),
        exactly_once: flow.exactly_once.enabled,
    };
    let translations: Translations = Arc::default();
    let (syncs_tx, syncs_rx) = offset_sync::queue();
    // The engine has connections of its own: its metadata lookups and Produce requests must
    // not queue behind the CreateTopics and other admin requests of the control path. (The
    // fetcher's sessions get theirs from the fetcher.)
    let data_target = Arc::new(target.sibling());
    // Start-up is a handful of round trips to two clusters that do not depend on each other:
    // issued together, the first record leaves after the slowest of them, not their sum.
    // The progress topic is read back if it exists. A first start has nothing to restore and
    // creates it once replication runs (its first commit is an interval away), so that its
    // creation does not queue at the controller ahead of the remote topics'.
    // Then MirrorMaker 2's positions: a partition MM2 got further with is taken over.
    let restore_progress = async {
        let (mut resume, create) =
            committed(target, &progress_topic, flow.exactly_once.enabled).await?;
        let taken = migration::take_over(flow, target, &mut resume).await?;
        Ok((resume, create, taken))
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
    // A member of a scale-out group reads the offset syncs of the partitions it gets, when
    // it gets them (`Running::regroup`).
    let load_syncs = async {
        if flow.scale_out.enabled {
            Ok(HashMap::new())
        } else {
            offset_sync::load(&syncs_cluster, &syncs_topic).await
        }
    };
    let exactly_once = produce.exactly_once;
    // Both boxed: the block below holds each twice (as itself, and joined), and inline
    // they made the start-up future too large for a thread's stack in debug builds.
    let restore_progress = Box::pin(restore_progress);
    let engine = Box::pin(Engine::new(
        data_target,
        produce,
        &progress_topic,
        translations.clone(),
        syncs_tx,
        fetcher.clone(),
    ));
    // Exactly-once: the progress is read once the engine's InitProducerId has fenced any
    // earlier owner of the transactional id, which completes its open transaction first
    // (committed or aborted). Read before, a commit landing in between is missed, and the
    // records it committed are written again.
    let progress_and_engine = async {
        if exactly_once {
            let engine = engine.await?;
            Ok((restore_progress.await?, engine))
        } else {
            tokio::try_join!(restore_progress, engine)
        }
    };
    let (((resume, create_progress, taken), engine), written, first_discovery) =
        tokio::try_join!(progress_and_engine, load_syncs, first_discovery)
            .inspect_err(|_| fetch_shutdown.cancel())?;
    let mut engine = engine;
    let (missing_tx, missing) = mpsc::unbounded_channel();
    engine.report_missing_topics(missing_tx);
    // The continuous hand-back ends after the engine, its one sender, writing the last
    // positions: it stops with the offset syncs writer.
    let mut syncs = Tasks::default();
    if flow.takeover.continuous_handback && flow.takeover.offsets_topic.is_some() {
        let (commits_tx, commits) = mpsc::unbounded_channel();
        engine.report_commits(commits_tx);
        syncs.spawn(
            "continuous hand-back",
            migration::keep_handing_back(flow.clone(), target.clone(), commits),
        );
    }
    engine.report_to(reports.metrics.clone(), reports.health.clone());
    // Offset maps as they were: the syncs written so far, bounded by the committed positions.
    // A member of a scale-out group makes them for the partitions it gets, when it gets them.
    *translations.lock().unwrap() = resume
        .iter()
        .filter(|_| !flow.scale_out.enabled)
        .map(|(tp, committed)| (tp.clone(), restored_map(&written, tp, Some(*committed))))
        .collect();
    migration::report_repeats(flow, target, &taken, &translations).await;
    let (commands, commands_rx) = mpsc::unbounded_channel();
    let (stats_tx, stats) = watch::channel(Stats::default());
    let mut fetch = Tasks::default();
    fetch.adopt("fetcher", fetch_task);
    // Alone, the process writes the flow's heartbeats; in a group, the owner of slot 0.
    let (beats, beating) = watch::channel(!flow.scale_out.enabled);
    let (membership, changes) = flow
        .scale_out
        .enabled
        .then(|| Membership::start(flow, target, &mut engine, beats))
        .unzip();
    let engine_shutdown = CancellationToken::new();
    let mut engine_task = Tasks::default();
    let run = engine.run(events_rx, commands_rx, stats_tx, engine_shutdown.clone());
    // Its last stats reach `stats` before it returns.
    engine_task.spawn("produce engine", async move { run.await.map(drop) });
    let syncs_shutdown = CancellationToken::new();
    let syncs_at = (syncs_cluster.clone(), syncs_topic.clone());
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
    let side = Side::start(
        flow,
        (source.clone(), target.clone()),
        translations,
        reports.clone(),
        beating,
    );
    let running = Running {
        fetcher,
        commands,
        stats,
        side,
        fetch,
        fetch_shutdown,
        engine: engine_task,
        engine_shutdown,
        syncs,
        syncs_shutdown,
        syncs_at,
        resume,
        create_progress,
        progress_topic,
        health: reports.health.clone(),
        membership,
        topic_ids: HashMap::new(),
    };
    Ok((
        running,
        Started {
            first_discovery,
            missing,
            updates,
            changes,
        },
    ))
}

/// The flow's MM2 background tasks the configuration enables: heartbeats, and checkpoints
/// with consumer-group offset sync.
fn spawn_side_tasks(
    flow: &FlowConfig,
    (source, target): (&Arc<Cluster>, &Arc<Cluster>),
    translations: &Translations,
    reports: &Reports,
    groups: watch::Receiver<crate::filter::GroupFilter>,
    beats: watch::Receiver<bool>,
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
            heartbeat::run(config, target.clone(), beats, shutdown.clone()),
        );
    }
    if flow.emit_checkpoints.enabled {
        let config = CheckpointConfig {
            source_alias: flow.source.clone(),
            groups,
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
                reports.metrics.clone(),
                shutdown.clone(),
            ),
        );
    }
    tasks
}

/// The control loop of a running flow until `shutdown`: topic discovery and assignment,
/// remote topics deleted on the target created again (as soon as the produce engine finds
/// one missing, not at the next discovery), config and ACL syncs, status lines, and the
/// watch over the flow's tasks. Returns the
/// error that ends the flow early, if any.
async fn control(
    initial: &FlowConfig,
    name: &str,
    source: &Cluster,
    target: &Cluster,
    running: &mut Running,
    started: Started,
    shutdown: &CancellationToken,
) -> Result<(), FlowError> {
    let fail = |source: KafkaError| FlowError::Kafka {
        flow: name.to_string(),
        source,
    };
    let sync_interval = |ms: u64| Duration::from_millis(ms.max(MIN_SYNC_INTERVAL_MS));
    // What a config reload changes live (`Reload::apply`).
    let mut flow = initial.clone();
    let mut known: HashMap<String, i32> = HashMap::new();
    let mut refresh = tokio::time::interval(Duration::from_millis(flow.refresh_topics_interval_ms));
    let mut config_sync = tokio::time::interval(sync_interval(flow.sync_topic_configs.interval_ms));
    let mut acl_sync = tokio::time::interval(sync_interval(flow.sync_topic_acls.interval_ms));
    let mut status = tokio::time::interval(STATUS_INTERVAL);
    // Records acknowledged by the last status line, and when.
    let mut last_status = (std::time::Instant::now(), 0u64);
    refresh.tick().await;
    config_sync.tick().await;
    acl_sync.tick().await;
    status.tick().await;
    let Started {
        first_discovery,
        mut missing,
        mut updates,
        mut changes,
    } = started;
    let mut discovered = Some(first_discovery);
    // Per remote topic whose re-creation failed: not before this instant again.
    let mut recreate_after: HashMap<String, (tokio::time::Instant, Backoff)> = HashMap::new();
    loop {
        match discovered
            .take()
            .map(|found| found.map(|found| running.assign(&flow, found, &mut known)))
        {
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
            // Like the MM2 tasks' topics: a transient refusal is retried, not the end.
            let topic = &running.progress_topic;
            if !await_internal_topic(target, topic, rf, shutdown)
                .await
                .map_err(fail)?
            {
                return Ok(());
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = refresh.tick() => discovered = Some(discover(&flow, source, target, &known).await),
            Ok(()) = updates.changed() => {
                let config = updates.borrow_and_update().clone();
                let Some(new) = config.flows.iter().find(|f| (&f.source, &f.target) == (&flow.source, &flow.target)) else {
                    continue;
                };
                let change = Reload::apply(&mut flow, new);
                if change != Reload::default() {
                    tracing::info!(flow = %name, topics = change.topics, groups = change.groups, refresh_topics_interval = change.refresh, syncs = change.syncs, heartbeats_checkpoints = change.side, "config reloaded: applying the settings that change live");
                }
                if change.topics {
                    for (topic, partitions) in known.extract_if(|t, _| !replicates(&flow, t)) {
                        for p in 0..partitions {
                            let tp = TopicPartition::new(topic.as_str(), p);
                            running.fetcher.forget(tp.clone());
                            let _ = running.commands.send(Command::Unroute(tp));
                        }
                        tracing::info!(flow = %name, topic = %topic, partitions, "no longer replicating: the reloaded topic filter leaves it out (what was written stays; the committed position is kept)");
                    }
                    // New topics start now, not a refresh interval later.
                    discovered = Some(discover(&flow, source, target, &known).await);
                }
                if change.groups {
                    running.side.groups.send_replace(flow.groups.clone());
                }
                if change.refresh {
                    refresh = tokio::time::interval(Duration::from_millis(flow.refresh_topics_interval_ms));
                    refresh.tick().await;
                }
                if change.syncs {
                    config_sync = tokio::time::interval(sync_interval(flow.sync_topic_configs.interval_ms));
                    acl_sync = tokio::time::interval(sync_interval(flow.sync_topic_acls.interval_ms));
                    config_sync.tick().await;
                    acl_sync.tick().await;
                }
                if change.side {
                    if let Some((task, cause)) = running.side.restart(&flow).await {
                        let error = FlowError::Task { flow: name.to_string(), task, cause };
                        running.health.failed(error.to_string());
                        return Err(error);
                    }
                }
            }
            _ = config_sync.tick(), if flow.sync_topic_configs.enabled => {
                let topics: Vec<String> = known.keys().cloned().collect();
                if let Err(e) = sync_configs(&flow, source, target, &topics).await {
                    tracing::warn!(flow = %name, error = %e, "topic config sync failed; retrying at the next interval");
                }
            }
            _ = acl_sync.tick(), if flow.sync_topic_acls.enabled => {
                let topics: Vec<String> = known.keys().cloned().collect();
                if let Err(e) = sync_acls(source, target, &flow.policy, &flow.source, &topics).await {
                    tracing::warn!(flow = %name, error = %e, "topic ACL sync failed; retrying at the next interval");
                }
            }
            Some(remote) = missing.recv() => {
                let mut asked = BTreeSet::from([remote]);
                while let Ok(more) = missing.try_recv() {
                    asked.insert(more);
                }
                let now = tokio::time::Instant::now();
                asked.retain(|t| recreate_after.get(t).is_none_or(|(at, _)| *at <= now));
                if !asked.is_empty() {
                    let failed = match recreate(&flow, source, target, &known, &asked).await {
                        Ok(recreated) => {
                            if !recreated.created.is_empty() && flow.sync_topic_acls.enabled {
                                if let Err(e) = sync_acls(source, target, &flow.policy, &flow.source, &recreated.created).await {
                                    tracing::warn!(flow = %name, error = %e, "topic ACL sync failed; retrying at the next interval");
                                }
                            }
                            recreated.refused
                        }
                        Err(e) => {
                            tracing::warn!(flow = %name, error = %e, "cannot check or re-create remote topics missing on the target; retrying while their partitions are refused");
                            asked.iter().cloned().collect()
                        }
                    };
                    for topic in asked {
                        if failed.contains(&topic) {
                            let (at, backoff) = recreate_after.entry(topic).or_insert_with(|| {
                                (now, Backoff::new(Duration::from_secs(1), Duration::from_secs(60)))
                            });
                            *at = now + backoff.next_delay();
                        } else {
                            recreate_after.remove(&topic);
                        }
                    }
                }
            }
            Some(change) = next_change(&mut changes) => {
                running.regroup(&flow, target, &known, change).await.map_err(fail)?;
            }
            (task, cause) = running.ended() => {
                let error = FlowError::Task { flow: name.to_string(), task, cause };
                running.health.failed(error.to_string());
                return Err(error);
            }
            _ = status.tick() => {
                let s = running.stats.borrow().clone();
                let f = running.fetcher.stats();
                let now = (std::time::Instant::now(), s.records);
                let (rate, eta_s) = pace(last_status, now, s.lag);
                last_status = now;
                tracing::info!(flow = %name, topics = known.len(), records = s.records, batches = s.batches, bytes = s.bytes, lag = s.lag, rate, eta_s, source_truncations = f.truncations, offsets_lost_to_retention = f.offsets_lost_to_retention, recreated_source_partitions = f.recreated_partitions, "replication status");
            }
        }
    }
}

/// The next change of the scale-out group; pending without one.
async fn next_change(changes: &mut Option<mpsc::UnboundedReceiver<Change>>) -> Option<Change> {
    match changes {
        Some(c) => c.recv().await,
        None => std::future::pending().await,
    }
}

impl Running {
    /// The first of the flow's tasks to end, and how.
    async fn ended(&mut self) -> (&'static str, TaskEnd) {
        let membership = async {
            match &mut self.membership {
                Some(m) => m.tasks.ended().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ended = membership => ended,
            ended = self.side.tasks.ended() => ended,
            ended = self.fetch.ended() => ended,
            ended = self.engine.ended() => ended,
            ended = self.syncs.ended() => ended,
        }
    }

    /// The one drain: background tasks are told to stop, then the source reads stop, then
    /// the engine drains its batches in flight and commits, then the offset syncs writer
    /// writes what is queued; the background tasks are waited for last, so that one stuck
    /// on a silent cluster cannot hold the commit. Every task is waited for, whatever one
    /// of them did; the first failure is the result. `None` when the engine had ended
    /// before (so nothing was drained and committed here).
    async fn stop(mut self, name: &str) -> Result<Option<Stats>, (&'static str, TaskEnd)> {
        let drains = !self.engine.set.is_empty();
        self.side.shutdown.cancel();
        // Stop reading the source first, then let the engine drain and commit.
        self.fetch_shutdown.cancel();
        let fetch = self.fetch.join().await;
        self.engine_shutdown.cancel();
        let engine = self.engine.join().await;
        if drains && engine.is_none() {
            let stats = self.stats.borrow().clone();
            tracing::info!(flow = %name, records = stats.records, batches = stats.batches, bytes = stats.bytes, lag = stats.lag, "flow stopped; progress committed");
        }
        self.syncs_shutdown.cancel();
        let syncs = self.syncs.join().await;
        let side = self.side.tasks.join().await;
        // The group is left last: the others take the slots once all is committed.
        let membership = match &mut self.membership {
            Some(m) => {
                m.shutdown.cancel();
                m.tasks.join().await
            }
            None => None,
        };
        match side.or(fetch).or(engine).or(syncs).or(membership) {
            Some(failed) => Err(failed),
            None => Ok(drains.then(|| self.stats.borrow().clone())),
        }
    }
}

/// What one discovery found: the partition count of every source topic the flow replicates,
/// and which of them are new or grew since `known` (their remote twins now exist on the
/// target).
struct Discovered {
    /// Partition count and topic id (nil if the source gives none).
    wanted: BTreeMap<String, (i32, uuid::Uuid)>,
    changed: Vec<String>,
    /// The remote topics this discovery created.
    created: HashSet<String>,
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
    let mut wanted: BTreeMap<String, (i32, uuid::Uuid)> = BTreeMap::new();
    for t in topics
        .iter()
        .filter(|t| t.error_code == 0 && !t.is_internal)
    {
        if replicates(flow, &t.name) {
            wanted.insert(t.name.clone(), (t.partitions.len() as i32, t.id));
        }
    }
    let changed: Vec<String> = wanted
        .iter()
        .filter(|(name, (count, _))| known.get(*name) != Some(count))
        .map(|(name, _)| name.clone())
        .collect();
    if changed.is_empty() {
        return Ok(Discovered {
            wanted,
            changed,
            created: HashSet::new(),
        });
    }
    let configs = if flow.sync_topic_configs.enabled {
        topic_configs(source, &changed).await?
    } else {
        BTreeMap::new()
    };
    let specs: Vec<TopicSpec> = changed
        .iter()
        .map(|name| remote_spec(flow, name, wanted[name].0, &configs))
        .collect();
    // A topic the target refused is left out of this discovery (not routed, not known), so
    // the next one tries again.
    let ensured = ensure_remote_topics(target, &specs).await?;
    let remote = |name: &String| flow.policy.format_remote_topic(&flow.source, name);
    wanted.retain(|name, _| !ensured.refused.contains(&remote(name)));
    let changed = changed
        .into_iter()
        .filter(|name| !ensured.refused.contains(&remote(name)))
        .collect();
    Ok(Discovered {
        wanted,
        changed,
        created: ensured.created,
    })
}

/// The remote twin of source topic `name`, with `partitions` partitions and the replicable
/// part of its `configs` (by source topic; none when config sync is off).
fn remote_spec(
    flow: &FlowConfig,
    name: &str,
    partitions: i32,
    configs: &BTreeMap<String, BTreeMap<String, String>>,
) -> TopicSpec {
    TopicSpec {
        name: flow.policy.format_remote_topic(&flow.source, name),
        partitions,
        replication_factor: flow.replication_factor,
        configs: configs
            .get(name)
            .map(|c| {
                replicable_configs(c, &flow.config_properties_exclude)
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// What one re-creation did.
struct Recreated {
    /// The source topics whose remote twins were created again.
    created: Vec<String>,
    /// The remote topics the target refused to create again.
    refused: HashSet<String>,
}

/// Creates again the remote topics of `asked` (remote names the produce engine found
/// missing) that the target indeed no longer has, while the source still has their source
/// topic: with the source's partition count now and its configs (MM2's
/// `sync.topic.configs`), as a discovery creates them. Topics the flow does not replicate,
/// and those whose source topic is gone too, are left alone.
async fn recreate(
    flow: &FlowConfig,
    source: &Cluster,
    target: &Cluster,
    known: &HashMap<String, i32>,
    asked: &BTreeSet<String>,
) -> Result<Recreated, KafkaError> {
    let mut recreated = Recreated {
        created: Vec::new(),
        refused: HashSet::new(),
    };
    // Remote name -> source name.
    let sources: BTreeMap<String, &String> = known
        .keys()
        .map(|name| (flow.policy.format_remote_topic(&flow.source, name), name))
        .filter(|(remote, _)| asked.contains(remote))
        .collect();
    let remotes: Vec<String> = sources.keys().cloned().collect();
    let missing = missing_topics(target, &remotes).await?;
    if missing.is_empty() {
        return Ok(recreated);
    }
    let names: Vec<String> = missing.iter().map(|r| sources[r].clone()).collect();
    let counts: BTreeMap<String, i32> = source
        .metadata(Some(&names))
        .await?
        .into_iter()
        .filter(|t| t.error_code == 0 && !t.partitions.is_empty())
        .map(|t| (t.name, t.partitions.len() as i32))
        .collect();
    for gone in names.iter().filter(|n| !counts.contains_key(*n)) {
        tracing::info!(topic = %gone, "a remote topic is missing on the target, and its source topic is gone too: not created again");
    }
    let present: Vec<String> = counts.keys().cloned().collect();
    let configs = if flow.sync_topic_configs.enabled && !present.is_empty() {
        topic_configs(source, &present).await?
    } else {
        BTreeMap::new()
    };
    let specs: Vec<TopicSpec> = counts
        .iter()
        .map(|(name, count)| remote_spec(flow, name, *count, &configs))
        .collect();
    if specs.is_empty() {
        return Ok(recreated);
    }
    let results = recreate_remote_topics(target, &specs).await?;
    recreated.refused = results.refused.into_iter().map(|(t, _)| t).collect();
    recreated.created = present
        .into_iter()
        .filter(|name| {
            let remote = flow.policy.format_remote_topic(&flow.source, name);
            !recreated.refused.contains(&remote)
        })
        .collect();
    Ok(recreated)
}

impl Running {
    /// Starts replicating the partitions of `found` not seen before (those of this
    /// process's slots, in a scale-out group), from their committed positions. Returns the
    /// topics that were new or grew.
    fn assign(
        &mut self,
        flow: &FlowConfig,
        found: Discovered,
        known: &mut HashMap<String, i32>,
    ) -> Vec<String> {
        for (name, (count, topic_id)) in &found.wanted {
            self.topic_ids.insert(name.clone(), *topic_id);
            let before = known.get(name).copied().unwrap_or(0);
            if before == *count {
                continue;
            }
            let remote = flow.policy.format_remote_topic(&flow.source, name);
            // Created now though strait had written to it: it was deleted on the target while
            // strait was stopped, and its partitions are new logs.
            let created = found.created.contains(&remote);
            let topic: Arc<str> = Arc::from(name.as_str());
            let mut new_logs = 0;
            for partition in before..*count {
                let tp = TopicPartition::new(topic.clone(), partition);
                if mine(&self.membership, &tp) {
                    new_logs += usize::from(self.route(flow, tp, created));
                }
            }
            if new_logs > 0 {
                tracing::warn!(topic = %name, remote = %remote, partitions = new_logs, "the remote topic strait had written to was missing on the target (deleted there while strait was stopped) and was created again: the records it held are gone, replication goes on from the committed positions and their offset translation starts over");
            }
            tracing::info!(topic = %name, remote = %remote, partitions = *count, from_partition = before, "replicating");
            known.insert(name.clone(), *count);
        }
        found.changed
    }

    /// Starts replicating source partition `tp` from its committed position; `created`:
    /// its remote topic was just created again. Returns whether its target partition is a
    /// new log under a committed position.
    fn route(&mut self, flow: &FlowConfig, tp: TopicPartition, created: bool) -> bool {
        let topic_id = self.topic_ids.get(&*tp.topic).copied().unwrap_or_default();
        let resumed = self.resume.get(&tp).copied();
        // The engine commits the log it reads now; the fetcher compares it with the one the
        // position was taken from.
        let same_log = resumed.is_some_and(|(_, from)| from.topic_id == topic_id);
        let lineage = Lineage {
            topic_id,
            leader_epoch: resumed
                .filter(|_| same_log)
                .map_or(-1, |(_, from)| from.leader_epoch),
            taken_over_at: resumed.map_or(-1, |(_, from)| from.taken_over_at),
        };
        let new_log = created && resumed.is_some_and(|(pos, _)| pos.target_next != 0);
        let remote = flow.policy.format_remote_topic(&flow.source, &tp.topic);
        // A partition back from another process is started by the engine itself.
        let handed = self
            .membership
            .as_mut()
            .is_some_and(|m| m.handed.remove(&tp));
        let slot = self.membership.as_ref().map_or(0, |m| m.slot_of(&tp));
        let _ = self.commands.send(Command::Route(Route {
            slot,
            source: tp.clone(),
            target: TopicPartition::new(remote, tp.partition),
            resume: resumed.map(|(pos, _)| pos),
            lineage,
            new_log,
            origin: resumed.map(|(_, from)| from),
        }));
        if !handed {
            self.fetcher.assign(
                tp,
                resumed.map(|(pos, _)| pos.source_next),
                resumed.map(|(_, from)| from),
                0,
            );
        }
        new_log
    }

    /// Acts on what the scale-out group changed: slots gained start from what their last
    /// owner committed (read again now, with the offset syncs it wrote); slots taken away
    /// are released by the engine, which answers the group member once they are.
    async fn regroup(
        &mut self,
        flow: &FlowConfig,
        target: &Cluster,
        known: &HashMap<String, i32>,
        change: Change,
    ) -> Result<(), KafkaError> {
        let Some(membership) = self.membership.as_mut() else {
            return Ok(());
        };
        let slots_n = membership.slots;
        let in_slots = |slots: &BTreeSet<u32>| -> Vec<TopicPartition> {
            known
                .iter()
                .flat_map(|(t, n)| (0..*n).map(move |p| TopicPartition::new(t.as_str(), p)))
                .filter(|tp| slots.contains(&assignor::slot_of(&tp.topic, tp.partition, slots_n)))
                .collect()
        };
        let metrics = self.side.reports.metrics.clone();
        let (slots, commit, done) = match change {
            Change::Acquired(slots) => {
                // Exactly-once: the slots' earlier owner is fenced before its commits are
                // read, and the slots' partitions are written in their own transactions.
                for (slot, producer) in membership.producers(&self.side.clusters.1, &slots).await? {
                    let _ = self.commands.send(Command::Adopt { slot, producer });
                }
                membership.owned.extend(slots.iter().copied());
                membership.beats.send_replace(membership.owned.contains(&0));
                metrics.scale_out_slots(membership.owned.len());
                let tps = in_slots(&slots);
                tracing::info!(
                    slots = slots.len(),
                    partitions = tps.len(),
                    "scale-out slots acquired"
                );
                if tps.is_empty() {
                    return Ok(());
                }
                let ((fresh, _), written) = tokio::try_join!(
                    committed(target, &self.progress_topic, flow.exactly_once.enabled),
                    offset_sync::load(&self.syncs_at.0, &self.syncs_at.1),
                )?;
                let translations = self.side.translations.clone();
                for tp in tps {
                    if let Some(now) = fresh.get(&tp) {
                        // What the last owner committed, unless this process knows a
                        // position further on in the same log (taken over from MM2).
                        let keep = self.resume.get(&tp).is_some_and(|(pos, from)| {
                            from.topic_id == now.1.topic_id && pos.source_next > now.0.source_next
                        });
                        if !keep {
                            self.resume.insert(tp.clone(), *now);
                        }
                    }
                    let map = restored_map(&written, &tp, self.resume.get(&tp).copied());
                    translations.lock().unwrap().insert(tp.clone(), map);
                    self.route(flow, tp, false);
                }
                return Ok(());
            }
            Change::Revoked { slots, done } => (slots, true, done),
            Change::Lost { slots, done } => (slots, false, done),
        };
        for slot in &slots {
            membership.owned.remove(slot);
        }
        membership.beats.send_replace(membership.owned.contains(&0));
        metrics.scale_out_slots(membership.owned.len());
        let partitions = in_slots(&slots);
        membership.handed.extend(partitions.iter().cloned());
        tracing::info!(
            slots = slots.len(),
            partitions = partitions.len(),
            commit,
            "scale-out slots released"
        );
        let _ = self.commands.send(Command::Release(Release {
            partitions,
            slots: slots.into_iter().collect(),
            commit,
            done,
        }));
        Ok(())
    }
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

/// What a config reload changes in a running flow: the settings that change live.
#[derive(Debug, Default, PartialEq, Eq)]
struct Reload {
    /// `topics`, `topics.exclude`: topics the filter now leaves out stop (what was written
    /// stays, the committed position is kept), new ones start.
    topics: bool,
    /// `groups`, `groups.exclude`: from the checkpoint task's next round.
    groups: bool,
    /// `refresh.topics.interval.seconds`.
    refresh: bool,
    /// `sync.topic.configs.*`, `sync.topic.acls.*`: from now.
    syncs: bool,
    /// `emit.heartbeats.*`, `emit.checkpoints.*`, `sync.group.offsets.*`: the side tasks
    /// start again with them.
    side: bool,
}

impl Reload {
    /// Copies the settings of `new` that change live into `flow`; what changed.
    fn apply(flow: &mut FlowConfig, new: &FlowConfig) -> Reload {
        let change = Reload {
            topics: flow.topics != new.topics,
            groups: flow.groups != new.groups,
            refresh: flow.refresh_topics_interval_ms != new.refresh_topics_interval_ms,
            syncs: (flow.sync_topic_configs, flow.sync_topic_acls)
                != (new.sync_topic_configs, new.sync_topic_acls),
            side: (
                flow.emit_heartbeats,
                flow.emit_checkpoints,
                flow.sync_group_offsets,
            ) != (
                new.emit_heartbeats,
                new.emit_checkpoints,
                new.sync_group_offsets,
            ),
        };
        flow.topics = new.topics.clone();
        flow.groups = new.groups.clone();
        flow.refresh_topics_interval_ms = new.refresh_topics_interval_ms;
        flow.sync_topic_configs = new.sync_topic_configs;
        flow.sync_topic_acls = new.sync_topic_acls;
        flow.emit_heartbeats = new.emit_heartbeats;
        flow.emit_checkpoints = new.emit_checkpoints;
        flow.sync_group_offsets = new.sync_group_offsets;
        change
    }
}

/// What differs between the running config and a reloaded one that only a restart applies:
/// one line per cluster or flow, naming it (empty when a reload applies everything).
pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let aliases = |c: &Config| c.clusters.keys().cloned().collect::<BTreeSet<_>>();
    for alias in aliases(old).union(&aliases(new)) {
        if old.clusters.get(alias) != new.clusters.get(alias) {
            out.push(format!(
                "cluster {alias}: its connection settings changed (or it was added or removed)"
            ));
        }
    }
    if old.metrics_listen != new.metrics_listen {
        out.push("metrics.listen changed".to_string());
    }
    if old.runtime_threads != new.runtime_threads {
        out.push("runtime.threads changed".to_string());
    }
    let key = |f: &FlowConfig| (f.source.clone(), f.target.clone());
    for f in &new.flows {
        match old.flows.iter().find(|o| key(o) == key(f)) {
            None => out.push(format!("flow {}->{}: enabled", f.source, f.target)),
            Some(o) => {
                let mut live = o.clone();
                Reload::apply(&mut live, f);
                // Its default names the topic filter (`<topics>`): the producer keeps the id
                // it registered until a restart, which is no reason to warn when the filter
                // changed with it.
                if o.topics != f.topics {
                    live.fencing_transactional_id = f.fencing_transactional_id.clone();
                }
                let keys = live.differences(f);
                if !keys.is_empty() {
                    out.push(format!(
                        "flow {}->{}: {} changed",
                        f.source,
                        f.target,
                        keys.join(", ")
                    ));
                }
            }
        }
    }
    for o in &old.flows {
        if !new.flows.iter().any(|f| key(f) == key(o)) {
            out.push(format!("flow {}->{}: disabled", o.source, o.target));
        }
    }
    out
}

/// Records per second acknowledged between two status lines (`(when, records so far)`), and
/// the seconds the `lag` takes at that rate: `None` while nothing moves and there is a lag,
/// 0 without one.
fn pace(
    (then, before): (std::time::Instant, u64),
    (now, after): (std::time::Instant, u64),
    lag: i64,
) -> (u64, Option<u64>) {
    let secs = now.saturating_duration_since(then).as_secs_f64();
    let rate = match secs > 0.0 {
        true => after.saturating_sub(before) as f64 / secs,
        false => 0.0,
    };
    let eta = match (lag, rate) {
        (lag, _) if lag <= 0 => Some(0),
        (_, rate) if rate >= 1.0 => Some((lag as f64 / rate).ceil() as u64),
        _ => None,
    };
    (rate.round() as u64, eta)
}

/// Whether the flow copies source topic `topic`: the filter selects it (or it holds
/// heartbeats), it is not internal, and it did not come from the flow's own target (no
/// cycles in A<->B).
pub(crate) fn replicates(flow: &FlowConfig, topic: &str) -> bool {
    // Heartbeats travel whatever the filter says (MM2's heartbeats.replication.enabled).
    (flow.topics.matches(topic) || flow.policy.is_heartbeats_topic(topic))
        && !flow.policy.is_internal_topic(topic)
        && !topic.starts_with("strait-progress.")
        && !flow.policy.is_cycle(topic, &flow.target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::{CreateTopicsResponse, RequestKind, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn parsed(extra: &str) -> Config {
        let text = format!(
            "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9092\nb.bootstrap.servers = 127.0.0.1:9093\n\
             a->b.enabled = true\n{extra}"
        );
        crate::config::parse_properties(&text, "mm2.properties")
            .unwrap()
            .0
    }

    #[test]
    fn a_reload_applies_filters_live_and_names_what_takes_a_restart() {
        let old = parsed("topics = orders\n");
        let live = parsed(
            "topics = orders, payments\ngroups = billing\nrefresh.topics.interval.seconds = 1\n\
             sync.topic.acls.interval.seconds = 60\nemit.checkpoints.interval.seconds = 5\n",
        );
        assert_eq!(restart_only_changes(&old, &live), Vec::<String>::new());
        let mut flow = old.flows[0].clone();
        let change = Reload::apply(&mut flow, &live.flows[0]);
        assert_eq!(
            change,
            Reload {
                topics: true,
                groups: true,
                refresh: true,
                syncs: true,
                side: true,
            }
        );
        assert!(replicates(&flow, "payments") && !replicates(&old.flows[0], "payments"));
        assert_eq!(Reload::apply(&mut flow, &live.flows[0]), Reload::default());

        let restart = parsed("topics = orders\nfetch.max.bytes = 1024\nb->a.enabled = true\nb.bootstrap.servers = 127.0.0.1:9094\n");
        assert_eq!(
            restart_only_changes(&old, &restart),
            [
                "cluster b: its connection settings changed (or it was added or removed)",
                "flow a->b: fetch.max.bytes changed",
                "flow b->a: enabled",
            ]
        );
        // A fencing id set anew is named; one that follows the topic filter (its default)
        // is not.
        let fenced =
            parsed("topics = orders\nfencing.transactional.id = other\nbuffer.bytes = 1048576\n");
        assert_eq!(
            restart_only_changes(&old, &fenced),
            ["flow a->b: fencing.transactional.id, buffer.bytes changed"]
        );
    }

    #[test]
    fn the_status_line_gives_the_rate_and_the_time_the_lag_takes_at_it() {
        let t0 = std::time::Instant::now();
        let t5 = t0 + Duration::from_secs(5);
        assert_eq!(pace((t0, 1_000), (t5, 51_000), 100_000), (10_000, Some(10)));
        assert_eq!(pace((t0, 1_000), (t5, 1_000), 100_000), (0, None));
        assert_eq!(pace((t0, 1_000), (t5, 1_000), 0), (0, Some(0)));
        assert_eq!(pace((t0, 0), (t0, 0), 5), (0, None));
    }

    /// CreateTopics answered with `code` for every topic asked for.
    fn create_topics(request: &RequestKind, code: i16) -> Reply {
        let RequestKind::CreateTopics(request) = request else {
            return Reply::Default;
        };
        let topics = request
            .topics
            .iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string(t.name.to_string())))
                    .with_error_code(code)
                    .with_num_partitions(1)
                    .with_replication_factor(1)
            })
            .collect();
        Reply::Answer(ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(topics),
        ))
    }

    /// `run` as a whole: a flow task that dies (here the offset syncs writer, whose topic
    /// the source refuses for good) ends it with an error naming the task and the cause.
    #[tokio::test]
    async fn a_dead_task_ends_run_with_an_error_naming_it() {
        // TOPIC_AUTHORIZATION_FAILED, which a real broker gives only with ACLs.
        let source = FakeBroker::start(1, &[], |r| create_topics(&r.body, 29)).await;
        let target = FakeBroker::start(2, &[], |r| create_topics(&r.body, 0)).await;
        let text = format!(
            "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\n\
             a->b.enabled = true\nreplication.factor = 1\ninternal.topic.replication.factor = 1\n\
             emit.heartbeats.enabled = false\nemit.checkpoints.enabled = false\n\
             sync.topic.configs.enabled = false\nsync.topic.acls.enabled = false\n\
             request.timeout.ms = 2000\n",
            source.addr, target.addr
        );
        let (config, _) = crate::config::parse_properties(&text, "mm2.properties").unwrap();
        let shutdown = CancellationToken::new();
        let telemetry = Arc::new(Telemetry::default());
        let ended = tokio::time::timeout(
            Duration::from_secs(30),
            run(
                config.clone(),
                telemetry.clone(),
                watch::channel(config).1,
                shutdown,
            ),
        )
        .await;
        let Ok(Err(e)) = ended else {
            panic!("run did not end with an error: {ended:?}");
        };
        let message = e.to_string();
        assert!(
            message.starts_with("flow a->b: the offset syncs writer failed: CreateTopics")
                && message.contains("TopicAuthorizationFailed"),
            "{message}"
        );
        // Liveness and readiness say so, with the reason.
        let (live, ready) = (telemetry.health.live(), telemetry.health.ready());
        assert!(!live.ok && !ready.ok);
        assert!(
            live.body.contains("the offset syncs writer failed"),
            "{}",
            live.body
        );
    }

    /// The progress topic is created once replication runs; a transient refusal then
    /// (NOT_CONTROLLER: the controller moving) is retried, not the end of the flow.
    #[tokio::test]
    async fn a_transient_failure_creating_the_progress_topic_is_retried() {
        let source = FakeBroker::start(1, &[], |r| create_topics(&r.body, 0)).await;
        let mut refused = false;
        let target = FakeBroker::start(2, &[], move |r| {
            // NOT_CONTROLLER the first time, then created.
            let code = if refused { 0 } else { 41 };
            refused |= matches!(r.body, RequestKind::CreateTopics(_));
            create_topics(&r.body, code)
        })
        .await;
        let text = format!(
            "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\n\
             a->b.enabled = true\nreplication.factor = 1\ninternal.topic.replication.factor = 1\n\
             emit.heartbeats.enabled = false\nemit.checkpoints.enabled = false\n\
             sync.topic.configs.enabled = false\nsync.topic.acls.enabled = false\n\
             request.timeout.ms = 2000\n",
            source.addr, target.addr
        );
        let (config, _) = crate::config::parse_properties(&text, "mm2.properties").unwrap();
        let shutdown = CancellationToken::new();
        let updates = watch::channel(config.clone()).1;
        let flows = tokio::spawn(run(config, Arc::default(), updates, shutdown.clone()));
        let created = || target.received_of(kafka_protocol::messages::ApiKey::CreateTopics);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while created().len() < 2 && !flows.is_finished() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no second CreateTopics"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(20), flows).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }

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
