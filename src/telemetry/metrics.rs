//! The Prometheus series strait exposes: MirrorMaker 2's own (the names Strimzi's JMX
//! exporter rules give MM2's MBeans, so its dashboard and alerts read strait unchanged) and
//! strait's `strait_` series for what MM2 lacks (an exact lag, partition states, errors).
//!
//! The produce engine owns one [`PartitionMetrics`] per partition: counting an
//! acknowledged batch touches plain fields and atomics the engine alone writes, and the
//! windowed figures (rates, min/max/avg) are published at the engine's commit tick, so a
//! scrape never waits for the data path nor the data path for a scrape.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

use crate::config::MetricsAggregation;
use crate::kafka::TopicPartition;

type IntGauge = Gauge<i64, AtomicI64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// MM2's per-partition tags, in its order: `topic` is the remote (target) topic. With
/// `metrics.aggregation = topic` the partition is `None`, which Prometheus reads as no
/// `partition` label (an empty value).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    source: String,
    target: String,
    topic: String,
    partition: Option<i32>,
}

/// The tags of the Java consumer's per-partition fetch metrics (`topic` with `.` as `_`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsumerLabels {
    clientid: String,
    topic: String,
    partition: Option<i32>,
}

/// MM2's checkpoint tags, in its order.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckpointLabels {
    source: String,
    target: String,
    group: String,
    topic: String,
    partition: Option<i32>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    source: String,
    target: String,
    topic: String,
    partition: Option<i32>,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlowLabels {
    source: String,
    target: String,
}

/// The tags of Kafka client and Connect task metrics, in the quoted form Strimzi's JMX
/// exporter rules give them (its dashboard matches the quotes), plus the flow.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    clientid: String,
    source: String,
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    connector: String,
    task: String,
    source: String,
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    source: String,
    target: String,
    /// The cluster that answered with the error: `source` or `target`.
    side: &'static str,
    code: i16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BrokerLabels {
    source: String,
    target: String,
    /// The broker's cluster: `source` or `target`.
    side: &'static str,
    broker: i32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    source: String,
    target: String,
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkipLabels {
    source: String,
    target: String,
    reason: &'static str,
}

/// A new metric of type `M` in `registry`.
fn register<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// A windowed figure as MM2 exposes it: the last value and the min, max and average over
/// the window, one gauge each (`<name>`, `<name>_min`, `<name>_max`, `<name>_avg`).
struct StatFamilies<L>([Family<L, FloatGauge>; 4]);

impl<
        L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
    > StatFamilies<L>
{
    fn register(registry: &mut Registry, name: &str, help: &str) -> StatFamilies<L> {
        let families: [Family<L, FloatGauge>; 4] = Default::default();
        for (family, (suffix, what)) in families.iter().zip([
            ("", "last value"),
            ("_min", "minimum over the window"),
            ("_max", "maximum over the window"),
            ("_avg", "average over the window"),
        ]) {
            registry.register(
                format!("{name}{suffix}"),
                format!("{help} ({what})"),
                family.clone(),
            );
        }
        StatFamilies(families)
    }

    fn remove(&self, labels: &L) {
        for family in &self.0 {
            family.remove(labels);
        }
    }

    fn get(&self, labels: &L) -> Stat {
        Stat {
            gauges: std::array::from_fn(|i| self.0[i].get_or_create(labels).clone()),
            window: Window::default(),
        }
    }
}

const MM2_SOURCE: &str = "kafka_connect_mirror_mirrorsourceconnector";

/// Every series of the process, registered once; [`Metrics::encode`] is the `/metrics` body.
pub struct Metrics {
    registry: Registry,
    record_count: Family<PartitionLabels, IntGauge>,
    record_rate: Family<PartitionLabels, FloatGauge>,
    byte_count: Family<PartitionLabels, IntGauge>,
    byte_rate: Family<PartitionLabels, FloatGauge>,
    record_age: StatFamilies<PartitionLabels>,
    replication_latency: StatFamilies<PartitionLabels>,
    checkpoint_latency: StatFamilies<CheckpointLabels>,
    consumer_lag: Family<ConsumerLabels, IntGauge>,
    lag_records: Family<PartitionLabels, IntGauge>,
    lag_seconds: Family<PartitionLabels, FloatGauge>,
    state: Family<StateLabels, IntGauge>,
    batches: Family<FlowLabels, Counter>,
    fetched_batches: Family<FlowLabels, Counter>,
    fetched_bytes: Family<FlowLabels, Counter>,
    records: Family<FlowLabels, Counter>,
    bytes: Family<FlowLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    brokers: Family<BrokerLabels, IntGauge>,
    checkpointed: Family<GroupLabels, FloatGauge>,
    last_commit: Family<FlowLabels, FloatGauge>,
    skipped: Family<SkipLabels, IntGauge>,
    buffer_bytes: Family<FlowLabels, IntGauge>,
    scale_out_slots: Family<FlowLabels, IntGauge>,
    connectors: IntGauge,
    tasks: IntGauge,
    incoming: Family<ClientLabels, Counter>,
    outgoing: Family<ClientLabels, Counter>,
    buffer_available: Family<ClientLabels, IntGauge>,
    active_records: Family<TaskLabels, IntGauge>,
    commit_time: Family<TaskLabels, FloatGauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let record_count = register(
            &mut r,
            &format!("{MM2_SOURCE}_record_count"),
            "Records replicated to the target since the process started (MM2's record-count)",
        );
        let record_rate = register(
            &mut r,
            &format!("{MM2_SOURCE}_record_rate"),
            "Records replicated per second over the last 30 to 60 s (MM2's record-rate)",
        );
        let byte_count = register(
            &mut r,
            &format!("{MM2_SOURCE}_byte_count"),
            "Record batch bytes replicated since the process started (MM2's byte-count counts values only)",
        );
        let byte_rate = register(
            &mut r,
            &format!("{MM2_SOURCE}_byte_rate"),
            "Record batch bytes replicated per second over the last 30 to 60 s",
        );
        let consumer_lag = register(
            &mut r,
            "kafka_consumer_fetch_manager_records_lag",
            "Records of the source partition not yet replicated, under MM2's replication consumer's name",
        );
        let lag_records = register(
            &mut r,
            "strait_lag_records",
            "Records of the source partition (to its last stable offset) the target has not acknowledged",
        );
        let lag_seconds = register(
            &mut r,
            "strait_lag_seconds",
            "Age of the oldest fetched record the target has not acknowledged; 0 when caught up",
        );
        let state = register(
            &mut r,
            "strait_partition_state",
            "1 for the partition's state: replicating, paused (the target refuses it for now) or stopped",
        );
        let last_commit = register(
            &mut r,
            "strait_last_commit_timestamp_seconds",
            "When the flow last committed its progress (Unix time)",
        );
        let skipped = register(
            &mut r,
            "strait_skipped_offsets",
            "Source offsets never copied: deleted by retention first, or truncated on the source after they were copied",
        );
        let buffer_bytes = register(
            &mut r,
            "strait_fetch_buffer_bytes",
            "Bytes of fetched batches held for the target (bounded by buffer.bytes)",
        );
        let scale_out_slots = register(
            &mut r,
            "strait_scale_out_slots",
            "Slots of the flow this process replicates, as its scale-out group assigned them",
        );
        let batches = register(
            &mut r,
            "strait_batches",
            "Record batches the target acknowledged",
        );
        let records = register(&mut r, "strait_records", "Records the target acknowledged");
        let fetched_batches = register(
            &mut r,
            "strait_fetched_batches",
            "Record batches fetched from the source",
        );
        let fetched_bytes = register(
            &mut r,
            "strait_fetched_bytes",
            "Record batch bytes fetched from the source",
        );
        let bytes = register(
            &mut r,
            "strait_bytes",
            "Record batch bytes the target acknowledged",
        );
        let errors = register(
            &mut r,
            "strait_errors",
            "Kafka error codes in answers, by cluster side (each is retried or stops its partition)",
        );
        let brokers = register(
            &mut r,
            "strait_broker_connected",
            "1 when the last connection strait dialled to the broker got through (and authenticated), 0 when it failed",
        );
        let checkpointed = register(
            &mut r,
            "strait_checkpoint_timestamp_seconds",
            "When the group's committed offsets were last all translated and checkpointed on the target (Unix time)",
        );
        let connectors = register(
            &mut r,
            "kafka_connect_worker_connector_count",
            "MM2 connectors the flows amount to: a source connector each, and a checkpoint and a heartbeat connector where enabled",
        );
        let tasks = register(
            &mut r,
            "kafka_connect_worker_task_count",
            "MM2 tasks the flows amount to: one per connector",
        );
        let incoming = register(
            &mut r,
            "kafka_consumer_incoming_byte",
            "Record batch bytes fetched from the source",
        );
        let outgoing = register(
            &mut r,
            "kafka_producer_outgoing_byte",
            "Record batch bytes the target acknowledged",
        );
        let buffer_available = register(
            &mut r,
            "kafka_producer_buffer_available_bytes",
            "Free bytes of the flow's fetch buffer (buffer.bytes)",
        );
        let active_records = register(
            &mut r,
            "kafka_connect_source_task_source_record_active_count",
            "Records fetched and not yet acknowledged by the target",
        );
        let commit_time = register(
            &mut r,
            "kafka_connect_connector_task_offset_commit_avg_time_ms",
            "Average time from writing a progress commit to its acknowledgement, over the window, in ms",
        );
        let record_age = StatFamilies::register(
            &mut r,
            &format!("{MM2_SOURCE}_record_age_ms"),
            "Age of a record when fetched from the source, by its timestamp, in ms",
        );
        let replication_latency = StatFamilies::register(
            &mut r,
            &format!("{MM2_SOURCE}_replication_latency_ms"),
            "Time from a record's timestamp to the target's acknowledgement, in ms",
        );
        let checkpoint_latency = StatFamilies::register(
            &mut r,
            "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms",
            "Time from a checkpoint's timestamp to the target's acknowledgement, in ms",
        );
        Metrics {
            checkpoint_latency,
            registry: r,
            record_count,
            record_rate,
            byte_count,
            byte_rate,
            record_age,
            replication_latency,
            consumer_lag,
            lag_records,
            lag_seconds,
            state,
            batches,
            fetched_batches,
            fetched_bytes,
            records,
            bytes,
            errors,
            brokers,
            checkpointed,
            last_commit,
            skipped,
            buffer_bytes,
            scale_out_slots,
            connectors,
            tasks,
            incoming,
            outgoing,
            buffer_available,
            active_records,
            commit_time,
        }
    }

    /// The flows amount to `connectors` MM2 connectors, each with one task.
    pub fn connectors(&self, connectors: usize) {
        self.connectors.set(connectors as i64);
        self.tasks.set(connectors as i64);
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The handles of flow `source->target`.
    pub fn flow(
        self: &Arc<Self>,
        source: &str,
        target: &str,
        aggregation: MetricsAggregation,
    ) -> FlowMetrics {
        let labels = FlowLabels {
            source: source.to_string(),
            target: target.to_string(),
        };
        let client = |clientid: String| ClientLabels {
            clientid,
            source: source.to_string(),
            target: target.to_string(),
        };
        // MM2's client ids: `<source>-><target>|MirrorSourceConnector-0|replication-consumer`
        // and `connector-producer-<connector>-0`.
        let consumer = client(format!(
            "\"{source}->{target}|MirrorSourceConnector-0|replication-consumer\""
        ));
        let producer = client(format!(
            "\"connector-producer-{source}->{target}.MirrorSourceConnector-0\""
        ));
        let task = TaskLabels {
            connector: format!("\"{source}->{target}.MirrorSourceConnector\""),
            task: "0".to_string(),
            source: source.to_string(),
            target: target.to_string(),
        };
        FlowMetrics {
            incoming: self.incoming.get_or_create(&consumer).clone(),
            outgoing: self.outgoing.get_or_create(&producer).clone(),
            buffer_available: self.buffer_available.get_or_create(&producer).clone(),
            active_records: self.active_records.get_or_create(&task).clone(),
            commit_time: self.commit_time.get_or_create(&task).clone(),
            commit_times: Arc::default(),
            checkpoints: Arc::default(),
            series: Arc::default(),
            aggregation,
            batches: self.batches.get_or_create(&labels).clone(),
            fetched_batches: self.fetched_batches.get_or_create(&labels).clone(),
            fetched_bytes: self.fetched_bytes.get_or_create(&labels).clone(),
            records: self.records.get_or_create(&labels).clone(),
            bytes: self.bytes.get_or_create(&labels).clone(),
            last_commit: self.last_commit.get_or_create(&labels).clone(),
            buffer_bytes: self.buffer_bytes.get_or_create(&labels).clone(),
            metrics: self.clone(),
            labels,
        }
    }
}

/// One flow's series, and where its partitions' come from.
#[derive(Clone)]
pub struct FlowMetrics {
    metrics: Arc<Metrics>,
    labels: FlowLabels,
    batches: Counter,
    fetched_batches: Counter,
    fetched_bytes: Counter,
    records: Counter,
    bytes: Counter,
    last_commit: FloatGauge,
    buffer_bytes: IntGauge,
    incoming: Counter,
    outgoing: Counter,
    buffer_available: IntGauge,
    active_records: IntGauge,
    commit_time: FloatGauge,
    commit_times: Arc<Mutex<Window>>,
    checkpoints: Arc<Mutex<HashMap<CheckpointLabels, Stat>>>,
    /// The partitions' series by their labels: one partition each, or every partition of
    /// a topic under `metrics.aggregation = topic`.
    series: Arc<Mutex<HashMap<PartitionLabels, Arc<Mutex<Series>>>>>,
    aggregation: MetricsAggregation,
}

impl FlowMetrics {
    /// The checkpoint of `group` for `partition` was acknowledged `latency_ms` after its
    /// timestamp.
    pub fn checkpointed(&self, group: &str, partition: &TopicPartition, latency_ms: i64) {
        let now = Instant::now();
        let labels = CheckpointLabels {
            source: self.labels.source.clone(),
            target: self.labels.target.clone(),
            group: group.to_string(),
            topic: partition.topic.to_string(),
            partition: self.partition_label(partition.partition),
        };
        let mut all = self.checkpoints.lock().unwrap();
        let stat = all
            .entry(labels)
            .or_insert_with_key(|labels| self.metrics.checkpoint_latency.get(labels));
        stat.record(latency_ms.max(0) as f64, now);
        stat.publish(now);
    }

    /// The `partition` label of partition `partition`'s series: none when they are
    /// aggregated per topic.
    fn partition_label(&self, partition: i32) -> Option<i32> {
        match self.aggregation {
            MetricsAggregation::Partition => Some(partition),
            MetricsAggregation::Topic => None,
        }
    }

    /// The series of source partition `source`, replicated to `target`.
    pub fn partition(&self, source: &TopicPartition, target: &TopicPartition) -> PartitionMetrics {
        let labels = PartitionLabels {
            source: self.labels.source.clone(),
            target: self.labels.target.clone(),
            topic: target.topic.to_string(),
            partition: self.partition_label(target.partition),
        };
        let mut all = self.series.lock().unwrap();
        let series = all
            .entry(labels)
            .or_insert_with_key(|labels| Arc::new(Mutex::new(self.series(labels, source))))
            .clone();
        series
            .lock()
            .unwrap()
            .members
            .insert(source.partition, Member::default());
        PartitionMetrics {
            partition: source.partition,
            series,
            flow: self.clone(),
        }
    }

    /// New series under `labels`, for the partitions of source topic `source.topic`.
    fn series(&self, labels: &PartitionLabels, source: &TopicPartition) -> Series {
        let m = &self.metrics;
        let consumer = ConsumerLabels {
            // MM2's replication consumer: `<source>-><target>|MirrorSourceConnector-<task>|replication-consumer`.
            clientid: format!(
                "{}->{}|MirrorSourceConnector-0|replication-consumer",
                self.labels.source, self.labels.target
            ),
            topic: source.topic.replace('.', "_"),
            partition: self.partition_label(source.partition),
        };
        Series {
            record_count: m.record_count.get_or_create(labels).clone(),
            record_rate: m.record_rate.get_or_create(labels).clone(),
            byte_count: m.byte_count.get_or_create(labels).clone(),
            byte_rate: m.byte_rate.get_or_create(labels).clone(),
            record_age: m.record_age.get(labels),
            replication_latency: m.replication_latency.get(labels),
            lags: None,
            state: None,
            records: Window::default(),
            bytes: Window::default(),
            labels: labels.clone(),
            consumer,
            members: HashMap::new(),
            lag: 0,
            known: 0,
            states: [0; 3],
            pending: BTreeMap::new(),
            shown: 0,
        }
    }

    /// The flow's progress was committed now; writing it took `took`.
    pub fn committed(&self, took: Duration) {
        self.last_commit.set(crate::now_ms() as f64 / 1000.0);
        let now = Instant::now();
        let mut times = self.commit_times.lock().unwrap();
        times.record(took.as_secs_f64() * 1000.0, now);
        let s = times.combined(now);
        self.commit_time.set(s.sum / s.count.max(1) as f64);
    }

    /// The flow holds `bytes` bytes of fetched batches in its buffer of `capacity` bytes,
    /// `records` records of which the target has not acknowledged.
    pub fn buffered(&self, bytes: usize, capacity: usize, records: u64) {
        self.buffer_bytes.set(bytes as i64);
        self.buffer_available
            .set(capacity.saturating_sub(bytes) as i64);
        self.active_records.set(records as i64);
    }

    /// This process replicates `slots` slots of the flow (a member of its scale-out group).
    pub fn scale_out_slots(&self, slots: usize) {
        self.metrics
            .scale_out_slots
            .get_or_create(&self.labels)
            .set(slots as i64);
    }

    /// `batches` record batches of `bytes` bytes were fetched from the source.
    pub fn fetched(&self, batches: usize, bytes: usize) {
        self.incoming.inc_by(bytes as u64);
        self.fetched_batches.inc_by(batches as u64);
        self.fetched_bytes.inc_by(bytes as u64);
    }

    /// `count` answers from the `side` cluster (`"source"` or `"target"`) carried error
    /// `code`.
    pub fn errors(&self, side: &'static str, code: i16, count: u64) {
        self.metrics
            .errors
            .get_or_create(&ErrorLabels {
                source: self.labels.source.clone(),
                target: self.labels.target.clone(),
                side,
                code,
            })
            .inc_by(count);
    }

    /// Whether the last dial of each broker of the `side` cluster got through.
    pub fn brokers(&self, side: &'static str, links: &[(i32, bool)]) {
        for &(broker, connected) in links {
            self.metrics
                .brokers
                .get_or_create(&BrokerLabels {
                    source: self.labels.source.clone(),
                    target: self.labels.target.clone(),
                    side,
                    broker,
                })
                .set(i64::from(connected));
        }
    }

    /// Every offset `group` has committed was translated and is checkpointed on the target
    /// as of now.
    pub fn group_checkpointed(&self, group: &str) {
        self.metrics
            .checkpointed
            .get_or_create(&self.group(group))
            .set(crate::now_ms() as f64 / 1000.0);
    }

    /// The flow no longer checkpoints `group` (gone from the source, or out of the filter):
    /// its series go.
    pub fn forget_group(&self, group: &str) {
        self.metrics.checkpointed.remove(&self.group(group));
        let mut all = self.checkpoints.lock().unwrap();
        all.retain(|labels, _| {
            let keep = labels.group != group;
            if !keep {
                self.metrics.checkpoint_latency.remove(labels);
            }
            keep
        });
    }

    fn group(&self, group: &str) -> GroupLabels {
        GroupLabels {
            source: self.labels.source.clone(),
            target: self.labels.target.clone(),
            group: group.to_string(),
        }
    }

    /// Source offsets the flow could not copy so far: deleted by retention first, and
    /// truncated on the source after they were copied.
    pub fn skipped(&self, retention: u64, truncation: u64) {
        for (reason, n) in [("retention", retention), ("truncation", truncation)] {
            self.metrics
                .skipped
                .get_or_create(&SkipLabels {
                    source: self.labels.source.clone(),
                    target: self.labels.target.clone(),
                    reason,
                })
                .set(n as i64);
        }
    }
}

/// Where a partition stands, as `strait_partition_state` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionState {
    Replicating,
    /// The target refuses the partition for now: fetching waits until it writes it again.
    Paused,
    /// Given up on an error (see the log); a restart resumes it.
    Stopped,
}

impl PartitionState {
    const ALL: [PartitionState; 3] = [
        PartitionState::Replicating,
        PartitionState::Paused,
        PartitionState::Stopped,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            PartitionState::Replicating => "replicating",
            PartitionState::Paused => "paused",
            PartitionState::Stopped => "stopped",
        }
    }
}

fn state_labels(labels: &PartitionLabels, state: &'static str) -> StateLabels {
    StateLabels {
        source: labels.source.clone(),
        target: labels.target.clone(),
        topic: labels.topic.clone(),
        partition: labels.partition,
        state,
    }
}

/// One partition's handle on the series it reports under.
pub struct PartitionMetrics {
    /// The source partition.
    partition: i32,
    series: Arc<Mutex<Series>>,
    flow: FlowMetrics,
}

/// The series of one label set and the windows behind the windowed ones, with what each
/// partition reporting under them contributes: one partition, or a topic's partitions
/// under `metrics.aggregation = topic` (counts and lags add up, rates and windows cover
/// them all, the lag in seconds is the largest, a state counts its partitions).
struct Series {
    record_count: IntGauge,
    record_rate: FloatGauge,
    byte_count: IntGauge,
    byte_rate: FloatGauge,
    record_age: Stat,
    replication_latency: Stat,
    /// The lag series, from the first known lag on: an exporter that showed 0 before it
    /// knew would tell an alert that a partition just routed is caught up.
    lags: Option<Lags>,
    /// The state series, from the first state published on.
    state: Option<[IntGauge; 3]>,
    records: Window,
    bytes: Window,
    labels: PartitionLabels,
    consumer: ConsumerLabels,
    /// What each source partition last published.
    members: HashMap<i32, Member>,
    /// The members' known lags added up.
    lag: i64,
    /// Members whose lag is known.
    known: u32,
    /// Members per state, in [`PartitionState::ALL`]'s order.
    states: [i64; 3],
    /// The oldest record waiting in each lagging member, by timestamp: how many members.
    pending: BTreeMap<i64, u32>,
    /// When the gauges were last set (Unix ms).
    shown: i64,
}

/// A [`Series`]' lags: records (strait's and the Java consumer's names) and seconds.
struct Lags {
    records: IntGauge,
    consumer: IntGauge,
    seconds: FloatGauge,
}

/// What one partition last published into its [`Series`].
#[derive(Default)]
struct Member {
    /// `None`: not known yet.
    lag: Option<i64>,
    state: Option<PartitionState>,
    /// The timestamp of its oldest record fetched and not acknowledged, while it lags.
    pending: Option<i64>,
}

impl Series {
    /// Takes `member`'s contribution out (`add` false) or puts it in.
    fn count(&mut self, member: &Member, add: bool) {
        let sign = if add { 1 } else { -1 };
        if let Some(lag) = member.lag {
            self.lag += sign * lag;
            match add {
                true => self.known += 1,
                false => self.known -= 1,
            }
        }
        if let Some(state) = member.state {
            self.states[state.index()] += sign;
        }
        if let Some(ts) = member.pending {
            let n = self.pending.entry(ts).or_default();
            match add {
                true => *n += 1,
                false => *n -= 1,
            }
            if *n == 0 {
                self.pending.remove(&ts);
            }
        }
    }

    /// Sets the lag and state gauges from the members' contributions.
    fn show(&mut self, m: &Metrics, now_ms: i64) {
        self.shown = now_ms;
        // Once shown, a lag stays (at what the members that remain know).
        if self.known > 0 || self.lags.is_some() {
            let labels = &self.labels;
            let lags = self.lags.get_or_insert_with(|| Lags {
                records: m.lag_records.get_or_create(labels).clone(),
                consumer: m.consumer_lag.get_or_create(&self.consumer).clone(),
                seconds: m.lag_seconds.get_or_create(labels).clone(),
            });
            lags.records.set(self.lag);
            lags.consumer.set(self.lag);
            let seconds = self
                .pending
                .keys()
                .next()
                .map_or(0.0, |ts| (now_ms - ts).max(0) as f64 / 1000.0);
            lags.seconds.set(seconds);
        }
        let labels = &self.labels;
        let state = self.state.get_or_insert_with(|| {
            PartitionState::ALL.map(|s| {
                m.state
                    .get_or_create(&state_labels(labels, s.name()))
                    .clone()
            })
        });
        for (gauge, n) in state.iter().zip(self.states) {
            gauge.set(n);
        }
    }

    /// Takes the series out of `metrics` (a lag frozen at its last value would mislead an
    /// alert).
    fn remove(&self, m: &Metrics) {
        let l = &self.labels;
        m.record_count.remove(l);
        m.record_rate.remove(l);
        m.byte_count.remove(l);
        m.byte_rate.remove(l);
        m.record_age.remove(l);
        m.replication_latency.remove(l);
        m.lag_records.remove(l);
        m.lag_seconds.remove(l);
        m.consumer_lag.remove(&self.consumer);
        for state in PartitionState::ALL {
            m.state.remove(&state_labels(l, state.name()));
        }
    }
}

impl PartitionMetrics {
    /// The flow no longer replicates the partition: its contribution goes, and the series
    /// with it when no other partition reports under them.
    pub fn forget(self) {
        let mut all = self.flow.series.lock().unwrap();
        let mut series = self.series.lock().unwrap();
        if let Some(member) = series.members.remove(&self.partition) {
            series.count(&member, false);
        }
        if series.members.is_empty() {
            series.remove(&self.flow.metrics);
            all.remove(&series.labels);
        } else {
            let shown = series.shown;
            series.show(&self.flow.metrics, shown);
        }
    }

    /// A batch whose newest record has timestamp `max_timestamp` was fetched at `now_ms`.
    pub fn fetched(&mut self, max_timestamp: i64, now_ms: i64, now: Instant) {
        let age = (now_ms - max_timestamp).max(0) as f64;
        self.series.lock().unwrap().record_age.record(age, now);
    }

    /// The target acknowledged a batch of `records` records and `bytes` bytes whose newest
    /// record has timestamp `max_timestamp`.
    pub fn acked(
        &mut self,
        records: u64,
        bytes: u64,
        max_timestamp: i64,
        now_ms: i64,
        now: Instant,
    ) {
        self.flow.batches.inc();
        self.flow.records.inc_by(records);
        self.flow.bytes.inc_by(bytes);
        self.flow.outgoing.inc_by(bytes);
        let latency = (now_ms - max_timestamp).max(0) as f64;
        let mut series = self.series.lock().unwrap();
        series.record_count.inc_by(records as i64);
        series.byte_count.inc_by(bytes as i64);
        series.records.record(records as f64, now);
        series.bytes.record(bytes as f64, now);
        series.replication_latency.record(latency, now);
    }

    /// Publishes the windowed figures, the lag (`None`: not known yet) with the timestamp
    /// of the oldest record fetched and not acknowledged, and the state.
    pub fn publish(
        &mut self,
        lag: Option<i64>,
        oldest_pending: Option<i64>,
        state: PartitionState,
        now_ms: i64,
        now: Instant,
    ) {
        let mut guard = self.series.lock().unwrap();
        let series = &mut *guard;
        let rate = series.records.rate(now);
        series.record_rate.set(rate);
        let rate = series.bytes.rate(now);
        series.byte_rate.set(rate);
        series.record_age.publish(now);
        series.replication_latency.publish(now);
        let old = series.members.remove(&self.partition).unwrap_or_default();
        series.count(&old, false);
        let member = Member {
            lag: lag.or(old.lag),
            state: Some(state),
            pending: match (lag, oldest_pending) {
                (Some(0), _) | (_, None) => None,
                (_, Some(ts)) => Some(ts),
            },
        };
        series.count(&member, true);
        series.members.insert(self.partition, member);
        series.show(&self.flow.metrics, now_ms);
    }
}

/// A windowed figure's gauges (last, min, max, avg) and its window.
struct Stat {
    gauges: [FloatGauge; 4],
    window: Window,
}

impl Stat {
    fn record(&mut self, value: f64, now: Instant) {
        self.gauges[0].set(value);
        self.window.record(value, now);
    }

    /// Sets min, max and avg from the window: NaN when it is empty, as MM2's.
    fn publish(&mut self, now: Instant) {
        let s = self.window.combined(now);
        let (min, max, avg) = match s.count {
            0 => (f64::NAN, f64::NAN, f64::NAN),
            n => (s.min, s.max, s.sum / n as f64),
        };
        self.gauges[1].set(min);
        self.gauges[2].set(max);
        self.gauges[3].set(avg);
    }
}

/// How long one sample of a window lasts; a window is the current sample and the one
/// before (MM2's `metrics.sample.window.ms` 30 s × `metrics.num.samples` 2).
const SAMPLE: Duration = Duration::from_secs(30);

/// Count, sum, min and max of the values recorded in one sample.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Default for Sample {
    fn default() -> Self {
        Sample {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Sample {
    fn merge(self, o: Sample) -> Sample {
        Sample {
            count: self.count + o.count,
            sum: self.sum + o.sum,
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// Values over the last one to two samples, as Kafka's metrics keep them.
#[derive(Default)]
struct Window {
    current: Sample,
    previous: Sample,
    /// When the current sample began (`None`: nothing recorded yet).
    started: Option<Instant>,
    /// When the previous sample began, if it is still part of the window.
    previous_started: Option<Instant>,
}

impl Window {
    fn record(&mut self, value: f64, now: Instant) {
        self.roll(now);
        self.started.get_or_insert(now);
        self.current.count += 1;
        self.current.sum += value;
        self.current.min = self.current.min.min(value);
        self.current.max = self.current.max.max(value);
    }

    /// Moves on to a new sample once the current one is `SAMPLE` old; a sample older than
    /// two is forgotten.
    fn roll(&mut self, now: Instant) {
        let Some(started) = self.started else { return };
        let age = now.saturating_duration_since(started);
        if age < SAMPLE {
            return;
        }
        if age < 2 * SAMPLE {
            self.previous = self.current;
            self.previous_started = Some(started);
        } else {
            self.previous = Sample::default();
            self.previous_started = None;
        }
        self.current = Sample::default();
        self.started = Some(now);
    }

    fn combined(&mut self, now: Instant) -> Sample {
        self.roll(now);
        self.current.merge(self.previous)
    }

    /// The sum of the values per second over the window (at least one second).
    fn rate(&mut self, now: Instant) -> f64 {
        let s = self.combined(now);
        let Some(since) = self.previous_started.or(self.started) else {
            return 0.0;
        };
        s.sum / now.saturating_duration_since(since).as_secs_f64().max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    #[test]
    fn a_partition_reports_under_mm2_names_and_labels() {
        let metrics = Arc::new(Metrics::new());
        let flow = metrics.flow("east", "west", MetricsAggregation::Partition);
        let mut p = flow.partition(&tp("or.ders", 3), &tp("east.or.ders", 3));
        let now = Instant::now();
        p.fetched(1_000, 1_500, now);
        p.acked(10, 700, 1_000, 1_900, now);
        p.publish(
            Some(5),
            Some(1_200),
            PartitionState::Replicating,
            2_200,
            now,
        );
        let text = metrics.encode();
        let labels = r#"{source="east",target="west",topic="east.or.ders",partition="3"}"#;
        for line in [
            format!("kafka_connect_mirror_mirrorsourceconnector_record_count{labels} 10"),
            format!("kafka_connect_mirror_mirrorsourceconnector_byte_count{labels} 700"),
            format!("kafka_connect_mirror_mirrorsourceconnector_record_age_ms{labels} 500.0"),
            format!("kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max{labels} 900.0"),
            format!("strait_lag_records{labels} 5"),
            format!("strait_lag_seconds{labels} 1.0"),
            r#"kafka_consumer_fetch_manager_records_lag{clientid="east->west|MirrorSourceConnector-0|replication-consumer",topic="or_ders",partition="3"} 5"#.to_string(),
            r#"strait_partition_state{source="east",target="west",topic="east.or.ders",partition="3",state="replicating"} 1"#.to_string(),
            r#"strait_records_total{source="east",target="west"} 10"#.to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "no line {line} in\n{text}");
        }
    }

    /// The lines of `text` that start with `name{`.
    fn lines<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let prefix = format!("{name}{{");
        text.lines().filter(|l| l.starts_with(&prefix)).collect()
    }

    #[test]
    fn a_lag_is_shown_once_known_never_as_zero_before() {
        let metrics = Arc::new(Metrics::new());
        let flow = metrics.flow("east", "west", MetricsAggregation::Partition);
        let mut p = flow.partition(&tp("orders", 0), &tp("east.orders", 0));
        let now = Instant::now();
        p.publish(None, None, PartitionState::Replicating, 1_000, now);
        let text = metrics.encode();
        assert!(lines(&text, "strait_lag_records").is_empty(), "{text}");
        assert!(lines(&text, "kafka_consumer_fetch_manager_records_lag").is_empty());
        assert_eq!(lines(&text, "strait_partition_state").len(), 3, "{text}");
        p.publish(Some(0), None, PartitionState::Replicating, 1_000, now);
        let text = metrics.encode();
        assert_eq!(lines(&text, "strait_lag_records").len(), 1, "{text}");
    }

    #[test]
    fn per_topic_series_combine_the_partitions_and_go_with_the_last() {
        let metrics = Arc::new(Metrics::new());
        let flow = metrics.flow("east", "west", MetricsAggregation::Topic);
        let now = Instant::now();
        let mut p0 = flow.partition(&tp("orders", 0), &tp("east.orders", 0));
        let mut p1 = flow.partition(&tp("orders", 1), &tp("east.orders", 1));
        p0.acked(10, 700, 1_000, 1_900, now);
        p1.acked(5, 300, 1_000, 1_400, now);
        p0.publish(
            Some(5),
            Some(1_200),
            PartitionState::Replicating,
            3_200,
            now,
        );
        p1.publish(Some(7), Some(2_200), PartitionState::Stopped, 3_200, now);
        // A second tick: contributions are replaced, not added again.
        p0.publish(
            Some(4),
            Some(1_200),
            PartitionState::Replicating,
            3_200,
            now,
        );
        let text = metrics.encode();
        let labels = r#"{source="east",target="west",topic="east.orders",partition=""}"#;
        for (name, want) in [
            (
                "kafka_connect_mirror_mirrorsourceconnector_record_count",
                "15",
            ),
            (
                "kafka_connect_mirror_mirrorsourceconnector_byte_count",
                "1000",
            ),
            (
                "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max",
                "900.0",
            ),
            (
                "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_min",
                "400.0",
            ),
            ("strait_lag_records", "11"),
            // The oldest record waiting anywhere in the topic.
            ("strait_lag_seconds", "2.0"),
        ] {
            assert_eq!(
                lines(&text, name),
                [format!("{name}{labels} {want}")],
                "{text}"
            );
        }
        let states = lines(&text, "strait_partition_state");
        for (state, n) in [("replicating", 1), ("paused", 0), ("stopped", 1)] {
            let line = format!(
                r#"strait_partition_state{{source="east",target="west",topic="east.orders",partition="",state="{state}"}} {n}"#
            );
            assert!(states.contains(&line.as_str()), "{line} not in {states:?}");
        }
        assert_eq!(
            lines(&text, "kafka_consumer_fetch_manager_records_lag"),
            [
                r#"kafka_consumer_fetch_manager_records_lag{clientid="east->west|MirrorSourceConnector-0|replication-consumer",topic="orders",partition=""} 11"#
            ]
        );
        p1.forget();
        let text = metrics.encode();
        assert_eq!(
            lines(&text, "strait_lag_records"),
            [format!("strait_lag_records{labels} 4")]
        );
        assert_eq!(
            lines(&text, "strait_lag_seconds"),
            [format!("strait_lag_seconds{labels} 2.0")]
        );
        p0.forget();
        let text = metrics.encode();
        assert!(lines(&text, "strait_lag_records").is_empty(), "{text}");
        assert!(lines(&text, "strait_partition_state").is_empty(), "{text}");
    }

    #[test]
    fn a_window_forgets_values_two_samples_old() {
        let start = Instant::now();
        let mut w = Window::default();
        w.record(4.0, start);
        w.record(8.0, start + SAMPLE / 2);
        w.record(2.0, start + SAMPLE + SAMPLE / 2);
        let s = w.combined(start + SAMPLE + SAMPLE / 2);
        assert_eq!((s.count, s.min, s.max), (3, 2.0, 8.0));
        // The first sample ended more than a window ago: only the last value is left.
        let s = w.combined(start + 3 * SAMPLE);
        assert_eq!((s.count, s.min, s.max), (1, 2.0, 2.0));
        assert_eq!(w.combined(start + 5 * SAMPLE).count, 0);
    }

    #[test]
    fn a_rate_is_the_sum_over_the_time_the_window_covers() {
        let start = Instant::now();
        let mut w = Window::default();
        w.record(100.0, start);
        w.record(200.0, start + Duration::from_secs(10));
        assert_eq!(w.rate(start + Duration::from_secs(20)), 15.0);
        assert_eq!(Window::default().rate(start), 0.0);
    }
}
