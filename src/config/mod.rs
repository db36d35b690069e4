//! Configuration: the typed model every other module reads ([`Config`]) and the two files it
//! comes from.
//!
//! `strait run mm2.properties` reads an unchanged MirrorMaker 2 file (MM2 keys, defaults and
//! precedence); `strait run strait.toml` reads the same model written as TOML, with units in
//! field names. Loading happens in two stages (STYLE.md item 6):
//! 1. [`properties`] and [`toml`] each fill the same raw structs ([`RawConfig`], [`RawFlow`],
//!    [`RawCluster`]): values typed but unchecked, each remembering the key and line it came
//!    from. `mm2.properties` keys reach the raw structs only through the key table [`KEYS`];
//!    TOML reaches them through serde with `deny_unknown_fields`.
//! 2. [`validate`] checks the raw structs once, fills in defaults and builds [`Config`].
//!
//! Problems that stop strait are [`ConfigError`]s naming file, line and key. Settings strait
//! accepts but does not act on are [`ConfigWarning`]s, returned as data and logged with
//! `tracing::warn!`: a key is never ignored silently.

mod properties;
mod toml;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Deserializer};

use crate::filter::{GroupFilter, TopicFilter};
use crate::policy::ReplicationPolicy;

// ---------------------------------------------------------------------------------------------
// Typed model
// ---------------------------------------------------------------------------------------------

/// Everything strait needs to run: the clusters and the replication flows between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Clusters by alias: every cluster an enabled flow uses, plus declared clusters that have
    /// bootstrap servers.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Enabled flows, in file order (`mm2.properties`: in the order of `clusters`, source
    /// major). Never empty.
    pub flows: Vec<FlowConfig>,
}

/// How to reach one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster's alias: a non-empty Kafka topic name (`[a-zA-Z0-9._-]`), used in remote
    /// topic names (`<alias>.orders`) and MM2 internal topic names.
    pub alias: String,
    /// Bootstrap brokers as `host:port` (`[v6addr]:port` for IPv6), validated; never empty.
    pub bootstrap_servers: Vec<String>,
    /// Kafka `client.id` on every request to this cluster. Default `"strait"`.
    pub client_id: String,
    /// How long to wait for any response from this cluster, in milliseconds. Default 30000.
    pub request_timeout_ms: u64,
    /// Socket send buffer (`SO_SNDBUF`) of connections to this cluster, in bytes; `None`
    /// leaves the OS default. Default 131072, as Kafka's clients.
    pub send_buffer_bytes: Option<u32>,
}

/// A periodic task that can be turned off (MM2's `<task>.enabled` + `<task>.interval.seconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Whether the task runs at all.
    pub enabled: bool,
    /// Period between runs, in milliseconds (MM2 writes it in seconds). At least 1 when enabled.
    pub interval_ms: u64,
}

/// Where a flow starts reading a source partition that has no committed progress yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OffsetReset {
    /// From the log start offset: replicate everything retained (MM2's behaviour).
    #[default]
    Earliest,
    /// From the log end offset: replicate only records produced from now on.
    Latest,
}

/// Which cluster holds a flow's offset-syncs topic (MM2 `offset-syncs.topic.location`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// `mm2-offset-syncs.<target>.internal` on the source cluster (MM2's default).
    #[default]
    Source,
    /// `mm2-offset-syncs.<source>.internal` on the target cluster.
    Target,
}

/// One enabled `source->target` replication flow and every knob it has.
#[derive(Clone, Debug)]
pub struct FlowConfig {
    /// Alias of the cluster records are read from.
    pub source: String,
    /// Alias of the cluster records are written to; never equal to `source`.
    pub target: String,
    /// Topics to replicate: `topics` (default `.*`) minus `topics.exclude` (default
    /// `.*[\-\.]internal, .*\.replica, __.*`); internal topics never pass.
    pub topics: TopicFilter,
    /// Consumer groups to checkpoint: `groups` (default `.*`) minus `groups.exclude` (default
    /// `console-consumer-.*, connect-.*, __.*`).
    pub groups: GroupFilter,
    /// Remote topic naming: `Default { separator: "." }` unless configured.
    pub policy: ReplicationPolicy,
    /// Replication factor of topics strait creates on the target (MM2 `replication.factor`).
    /// Default 2; -1 means the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Replication factor of strait's own internal topics (offset syncs, checkpoints,
    /// heartbeats, progress). Default 3; -1 means the broker default.
    pub internal_replication_factor: i16,
    /// How often to look for new topics and partitions, in milliseconds. Default 600000
    /// (MM2 `refresh.topics.interval.seconds = 600`).
    pub refresh_topics_interval_ms: u64,
    /// How often replicated source positions are committed, in milliseconds: the bound on
    /// duplicates after a crash. Default 5000.
    pub progress_commit_interval_ms: u64,
    /// Where to start partitions with no committed progress. Default `Earliest`.
    pub offset_reset: OffsetReset,
    /// MM2 `tasks.max`, default 1. strait is not task-based; this is only a parallelism hint.
    pub tasks_max: u32,
    /// Heartbeats into `heartbeats` on the target. Default enabled, every 1000 ms.
    pub emit_heartbeats: Interval,
    /// Checkpoints into `<source>.checkpoints.internal` on the target. Default enabled, every
    /// 60000 ms.
    pub emit_checkpoints: Interval,
    /// Writing translated group offsets into the target's `__consumer_offsets`. Default
    /// disabled, every 60000 ms when enabled.
    pub sync_group_offsets: Interval,
    /// Copying topic configs to remote topics. Default enabled, every 600000 ms.
    pub sync_topic_configs: Interval,
    /// Copying topic ACLs to remote topics (`acl_sync`). Default enabled, every 600000 ms.
    pub sync_topic_acls: Interval,
    /// Which cluster holds the offset-syncs topic. Default `Source`.
    pub offset_syncs_location: Location,
    /// MM2 `offset.lag.max`: how far, in records, a partition may advance before MM2 writes a
    /// new offset sync. Default 100. strait writes a sync at every offset gap, so this only
    /// bounds syncs written for MM2 tools.
    pub offset_lag_max: i64,
    /// Topic config properties never copied to remote topics (anchored regexes). Default: MM2's
    /// list (throttled replicas, `message.timestamp.*`, unclean election, `min.insync.replicas`).
    pub config_properties_exclude: Vec<Regex>,
    /// Fetch request `max_bytes`, in bytes. Default 52428800 (50 MiB).
    pub fetch_max_bytes: i32,
    /// Fetch request per-partition `partition_max_bytes`, in bytes. Default 1048576 (1 MiB).
    pub fetch_partition_max_bytes: i32,
    /// Fetch request `max_wait_ms`, in milliseconds. Default 500.
    pub fetch_max_wait_ms: i32,
    /// Produce requests in flight per target partition, 1..=5 (idempotence keeps order up to
    /// 5). Default 5.
    pub produce_max_in_flight: usize,
    /// How long to wait for more batches before sending a Produce request, in milliseconds.
    /// Default 0.
    pub produce_linger_ms: u64,
    /// Upper bound on one Produce request, in bytes. Default 1048576 (1 MiB).
    pub produce_max_request_bytes: usize,
    /// Bytes of fetched batches the flow holds until the target acknowledges them; a Fetch
    /// response asks for at most a quarter of it. Default 33554432 (32 MiB).
    pub buffer_bytes: usize,
    /// Merge consecutive small uncompressed batches of a partition into target batches of up
    /// to this many bytes (records re-framed); 0 forwards every batch as it is. Default 0.
    pub produce_coalesce_bytes: usize,
}

impl PartialEq for FlowConfig {
    /// Field-by-field equality; regexes compare by pattern text.
    fn eq(&self, other: &Self) -> bool {
        // Destructuring makes a new field a compile error here until it is compared.
        let FlowConfig {
            source,
            target,
            topics,
            groups,
            policy,
            replication_factor,
            internal_replication_factor,
            refresh_topics_interval_ms,
            progress_commit_interval_ms,
            offset_reset,
            tasks_max,
            emit_heartbeats,
            emit_checkpoints,
            sync_group_offsets,
            sync_topic_configs,
            sync_topic_acls,
            offset_syncs_location,
            offset_lag_max,
            config_properties_exclude,
            fetch_max_bytes,
            fetch_partition_max_bytes,
            fetch_max_wait_ms,
            produce_max_in_flight,
            produce_linger_ms,
            produce_max_request_bytes,
            buffer_bytes,
            produce_coalesce_bytes,
        } = self;
        *source == other.source
            && *target == other.target
            && *topics == other.topics
            && *groups == other.groups
            && *policy == other.policy
            && *replication_factor == other.replication_factor
            && *internal_replication_factor == other.internal_replication_factor
            && *refresh_topics_interval_ms == other.refresh_topics_interval_ms
            && *progress_commit_interval_ms == other.progress_commit_interval_ms
            && *offset_reset == other.offset_reset
            && *tasks_max == other.tasks_max
            && *emit_heartbeats == other.emit_heartbeats
            && *emit_checkpoints == other.emit_checkpoints
            && *sync_group_offsets == other.sync_group_offsets
            && *sync_topic_configs == other.sync_topic_configs
            && *sync_topic_acls == other.sync_topic_acls
            && *offset_syncs_location == other.offset_syncs_location
            && *offset_lag_max == other.offset_lag_max
            && config_properties_exclude.len() == other.config_properties_exclude.len()
            && config_properties_exclude
                .iter()
                .zip(&other.config_properties_exclude)
                .all(|(a, b)| a.as_str() == b.as_str())
            && *fetch_max_bytes == other.fetch_max_bytes
            && *fetch_partition_max_bytes == other.fetch_partition_max_bytes
            && *fetch_max_wait_ms == other.fetch_max_wait_ms
            && *produce_max_in_flight == other.produce_max_in_flight
            && *produce_linger_ms == other.produce_linger_ms
            && *produce_max_request_bytes == other.produce_max_request_bytes
            && *buffer_bytes == other.buffer_bytes
            && *produce_coalesce_bytes == other.produce_coalesce_bytes
    }
}

/// Default values, in the units of the typed model. MM2's defaults unless noted.
pub mod defaults {
    use super::Interval;

    /// `client.id` (strait's own default; MM2 uses `<source>-><target>`).
    pub const CLIENT_ID: &str = "strait";
    /// `request.timeout.ms` (Kafka clients' default).
    pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
    /// `send.buffer.bytes` (Kafka clients' default).
    pub const SEND_BUFFER_BYTES: i64 = 131_072;
    /// `replication.factor`.
    pub const REPLICATION_FACTOR: i16 = 2;
    /// `offset-syncs|checkpoints|heartbeats.topic.replication.factor`.
    pub const INTERNAL_REPLICATION_FACTOR: i16 = 3;
    /// `refresh.topics.interval.seconds` = 600.
    pub const REFRESH_TOPICS_INTERVAL_MS: u64 = 600_000;
    /// `progress.commit.interval.ms` (strait; MM2's `offset.flush.interval.ms` is 60000).
    pub const PROGRESS_COMMIT_INTERVAL_MS: u64 = 5_000;
    /// `tasks.max` (Connect's default).
    pub const TASKS_MAX: u32 = 1;
    /// `emit.heartbeats.enabled` / `.interval.seconds` = true / 1.
    pub const EMIT_HEARTBEATS: Interval = Interval {
        enabled: true,
        interval_ms: 1_000,
    };
    /// `emit.checkpoints.enabled` / `.interval.seconds` = true / 60.
    pub const EMIT_CHECKPOINTS: Interval = Interval {
        enabled: true,
        interval_ms: 60_000,
    };
    /// `sync.group.offsets.enabled` / `.interval.seconds` = false / 60.
    pub const SYNC_GROUP_OFFSETS: Interval = Interval {
        enabled: false,
        interval_ms: 60_000,
    };
    /// `sync.topic.configs.enabled` / `.interval.seconds` = true / 600.
    pub const SYNC_TOPIC_CONFIGS: Interval = Interval {
        enabled: true,
        interval_ms: 600_000,
    };
    /// `sync.topic.acls.enabled` / `.interval.seconds` = true / 600.
    pub const SYNC_TOPIC_ACLS: Interval = Interval {
        enabled: true,
        interval_ms: 600_000,
    };
    /// `offset.lag.max`.
    pub const OFFSET_LAG_MAX: i64 = 100;
    /// `config.properties.exclude` (`DefaultConfigPropertyFilter`).
    pub const CONFIG_PROPERTIES_EXCLUDE: &[&str] = &[
        r"follower\.replication\.throttled\.replicas",
        r"leader\.replication\.throttled\.replicas",
        r"message\.timestamp\.difference\.max\.ms",
        r"message\.timestamp\.type",
        r"unclean\.leader\.election\.enable",
        r"min\.insync\.replicas",
    ];
    /// Fetch `max_bytes` (the Java consumer's `fetch.max.bytes`).
    pub const FETCH_MAX_BYTES: i32 = 52_428_800;
    /// Fetch `partition_max_bytes` (the Java consumer's `max.partition.fetch.bytes`).
    pub const FETCH_PARTITION_MAX_BYTES: i32 = 1_048_576;
    /// Fetch `max_wait_ms` (the Java consumer's `fetch.max.wait.ms`).
    pub const FETCH_MAX_WAIT_MS: i32 = 500;
    /// In-flight Produce requests per partition (the Java producer's
    /// `max.in.flight.requests.per.connection`).
    pub const PRODUCE_MAX_IN_FLIGHT: usize = 5;
    /// Produce linger (the Java producer's `linger.ms`; strait keeps 0).
    pub const PRODUCE_LINGER_MS: u64 = 0;
    /// Produce request size bound (the Java producer's `max.request.size`).
    pub const PRODUCE_MAX_REQUEST_BYTES: usize = 1_048_576;
    /// Fetched bytes waiting for the target, per flow (strait's own).
    pub const BUFFER_BYTES: usize = 33_554_432;
    /// Coalescing of small batches: off (strait's own).
    pub const PRODUCE_COALESCE_BYTES: usize = 0;
}

// ---------------------------------------------------------------------------------------------
// Errors and warnings
// ---------------------------------------------------------------------------------------------

fn located(file: &str, line: &Option<usize>, key: &Option<String>, message: &str) -> String {
    let mut out = file.to_string();
    if let Some(line) = line {
        out.push_str(&format!(":{line}"));
    }
    out.push_str(": ");
    if let Some(key) = key {
        out.push_str(key);
        out.push_str(": ");
    }
    out.push_str(message);
    out
}

/// A configuration problem that stops strait. `Display` reads like a compiler message:
/// `mm2.properties:7: source->target.topics: invalid regex "(": unclosed group`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A syntax, type or range error in one place of the file.
    #[error("{}", located(.file, .line, .key, .message))]
    Invalid {
        /// File name as given (or the origin passed to `parse_*`).
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// The key as written (`source->target.topics`) or the TOML path (`flows[0].topics`).
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The file is valid but replicates nothing.
    #[error("{file}: no flow enabled: {hint}")]
    NoFlowEnabled {
        /// File name as given.
        file: String,
        /// How to enable one in this format.
        hint: &'static str,
    },
}

impl ConfigError {
    /// The 1-based line the error points at, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { line, .. } => *line,
            _ => None,
        }
    }

    /// The key the error is about, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => key.as_deref(),
            _ => None,
        }
    }
}

/// Why a setting produced a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarningKind {
    /// strait does not know the key (typo, or a setting of a newer MM2).
    UnknownKey,
    /// A known MM2 setting whose non-default value strait does not act on.
    NotImplemented,
    /// An MM2 name that still works but has a newer spelling.
    Deprecated,
    /// A Kafka Connect worker setting: strait runs no Connect worker.
    Ignored,
    /// The same key twice; the later line wins, as in Java.
    Duplicate,
    /// Valid, but probably not what was meant.
    Semantics,
}

/// A setting strait accepted but wants the operator to look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// File name as given.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key as written, or the TOML path.
    pub key: String,
    /// Category, for tests and for callers that want to escalate some kinds.
    pub kind: WarningKind,
    /// What strait does about it.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = Some(self.key.clone()).filter(|k| !k.is_empty());
        f.write_str(&located(&self.file, &self.line, &key, &self.message))
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

/// Reads and validates a configuration file: TOML if the name ends in `.toml`, otherwise an
/// MM2 `.properties` file. Warnings are logged and also returned.
pub fn load(path: &Path) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
        path: file.clone(),
        source,
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = 1 + good.iter().filter(|&&b| b == b'\n').count();
            return Err(ConfigError::Invalid {
                file,
                line: Some(line),
                key: None,
                message: "the file is not valid UTF-8".to_string(),
            });
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let is_toml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if is_toml {
        parse_toml(text, &file)
    } else {
        parse_properties(text, &file)
    }
}

/// Parses and validates MM2 `mm2.properties` text; `origin` names it in messages.
pub fn parse_properties(
    text: &str,
    origin: &str,
) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
    let (raw, mut warnings) = properties::parse(text, origin)?;
    let config = validate::validate(&raw, origin, &mut warnings)?;
    log_warnings(&warnings);
    Ok((config, warnings))
}

/// Parses and validates strait TOML text; `origin` names it in messages.
pub fn parse_toml(text: &str, origin: &str) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
    let raw = toml::parse(text, origin)?;
    let mut warnings = Vec::new();
    let config = validate::validate(&raw, origin, &mut warnings)?;
    log_warnings(&warnings);
    Ok((config, warnings))
}

fn log_warnings(warnings: &[ConfigWarning]) {
    for w in warnings {
        tracing::warn!(
            file = %w.file,
            line = ?w.line,
            key = %w.key,
            kind = ?w.kind,
            "{}",
            w.message
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Raw structs: what both formats parse into
// ---------------------------------------------------------------------------------------------

/// Where in the file a raw value sits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Pos {
    /// Nowhere (a value strait made up).
    #[default]
    None,
    /// A 1-based line (`mm2.properties`).
    Line(usize),
    /// A byte offset, turned into a line when needed (TOML).
    Offset(usize),
}

/// Where a raw value came from: for messages, and for choosing between spellings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The key as written (`source->target.topics`); empty for TOML, whose messages use the
    /// field path instead.
    pub key: String,
    /// Where the value is.
    pub pos: Pos,
    /// When several spellings of one setting appear in the same scope, the highest rank wins
    /// (strait's name over MM2's over a deprecated MM2 name); equal ranks: the later line.
    pub rank: u8,
}

/// A raw value with its origin.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// TOML values carry their byte span; `toml::Spanned` only works with the TOML deserializer,
/// which is the only serde user of the raw structs.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Sourced<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = ::toml::Spanned::<T>::deserialize(deserializer)?;
        let start = spanned.span().start;
        Ok(Sourced {
            value: spanned.into_inner(),
            origin: Origin {
                key: String::new(),
                pos: Pos::Offset(start),
                rank: u8::MAX,
            },
        })
    }
}

/// Which file format a [`RawConfig`] came from; decides a few defaults and hints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Format {
    #[default]
    Properties,
    Toml,
}

/// Which `ReplicationPolicy` class a flow uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PolicyKind {
    Default,
    Identity,
}

/// The whole file, parsed but not validated. The TOML top level.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawConfig {
    /// Declared clusters by alias (`clusters = a, b` / `[clusters.a]`).
    pub clusters: BTreeMap<String, RawCluster>,
    /// Flows: `[[flows]]`, or one per ordered pair of declared clusters plus any other pair a
    /// `A->B.` key names.
    pub flows: Vec<RawFlow>,
    /// Top-level flow keys (`mm2.properties` only): defaults for every flow.
    #[serde(skip)]
    pub defaults: RawFlow,
    /// Top-level cluster keys (`mm2.properties` only): defaults for every cluster.
    #[serde(skip)]
    pub cluster_defaults: RawCluster,
    /// Where the cluster list was declared (the `clusters` key).
    #[serde(skip)]
    pub clusters_origin: Origin,
    #[serde(skip)]
    pub format: Format,
    /// Byte offset of each line start, to turn TOML spans into line numbers.
    #[serde(skip)]
    pub line_starts: Vec<usize>,
}

/// One cluster, parsed but not validated. A TOML `[clusters.<alias>]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawCluster {
    pub bootstrap_servers: Option<Sourced<Vec<String>>>,
    pub client_id: Option<Sourced<String>>,
    pub request_timeout_ms: Option<Sourced<i64>>,
    pub send_buffer_bytes: Option<Sourced<i64>>,
    /// Flow settings from `<alias>.consumer.*` keys: apply to flows reading this cluster.
    #[serde(skip)]
    pub as_source: RawFlow,
    /// Flow settings from `<alias>.producer.*` keys: apply to flows writing this cluster.
    #[serde(skip)]
    pub as_target: RawFlow,
}

/// One flow's settings, parsed but not validated. A TOML `[[flows]]` table; field names are
/// the TOML names, with units.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub source: Option<Sourced<String>>,
    pub target: Option<Sourced<String>>,
    pub enabled: Option<Sourced<bool>>,
    pub topics: Option<Sourced<Vec<String>>>,
    pub topics_exclude: Option<Sourced<Vec<String>>>,
    pub groups: Option<Sourced<Vec<String>>>,
    pub groups_exclude: Option<Sourced<Vec<String>>>,
    pub replication_policy: Option<Sourced<PolicyKind>>,
    pub replication_policy_separator: Option<Sourced<String>>,
    pub replication_factor: Option<Sourced<i64>>,
    pub internal_replication_factor: Option<Sourced<i64>>,
    pub refresh_topics_interval_ms: Option<Sourced<i64>>,
    pub progress_commit_interval_ms: Option<Sourced<i64>>,
    pub offset_reset: Option<Sourced<OffsetReset>>,
    pub tasks_max: Option<Sourced<i64>>,
    pub emit_heartbeats_enabled: Option<Sourced<bool>>,
    pub emit_heartbeats_interval_ms: Option<Sourced<i64>>,
    pub emit_checkpoints_enabled: Option<Sourced<bool>>,
    pub emit_checkpoints_interval_ms: Option<Sourced<i64>>,
    pub sync_group_offsets_enabled: Option<Sourced<bool>>,
    pub sync_group_offsets_interval_ms: Option<Sourced<i64>>,
    pub sync_topic_configs_enabled: Option<Sourced<bool>>,
    pub sync_topic_configs_interval_ms: Option<Sourced<i64>>,
    pub sync_topic_acls_enabled: Option<Sourced<bool>>,
    pub sync_topic_acls_interval_ms: Option<Sourced<i64>>,
    pub offset_syncs_location: Option<Sourced<Location>>,
    pub offset_lag_max: Option<Sourced<i64>>,
    pub config_properties_exclude: Option<Sourced<Vec<String>>>,
    pub fetch_max_bytes: Option<Sourced<i64>>,
    pub fetch_partition_max_bytes: Option<Sourced<i64>>,
    pub fetch_max_wait_ms: Option<Sourced<i64>>,
    pub produce_max_in_flight: Option<Sourced<i64>>,
    pub produce_linger_ms: Option<Sourced<i64>>,
    pub produce_max_request_bytes: Option<Sourced<i64>>,
    pub buffer_bytes: Option<Sourced<i64>>,
    pub produce_coalesce_bytes: Option<Sourced<i64>>,
}

// ---------------------------------------------------------------------------------------------
// The key table
// ---------------------------------------------------------------------------------------------

/// Where an `mm2.properties` key is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Top level only (`clusters`).
    Global,
    /// `<alias>.<key>`; at top level, a default for every cluster.
    Cluster,
    /// `A->B.<key>`; at top level, a default for every flow.
    Flow,
    /// `<alias>.<key>`: a flow setting for flows whose *source* is `<alias>` (MM2 client
    /// keys such as `<alias>.consumer.auto.offset.reset`).
    SourceCluster,
    /// `<alias>.<key>`: a flow setting for flows whose *target* is `<alias>`
    /// (`<alias>.producer.linger.ms`).
    TargetCluster,
}

/// What strait does with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Honoured.
    Implemented,
    /// Accepted and kept, used only as a hint (`tasks.max`).
    Hint,
    /// Kept in the model but not acted on yet; a non-default value is a warning.
    NotYet,
    /// Accepted for compatibility and not acted on; a non-default value is a warning.
    Unsupported,
    /// Honoured, with a warning naming the current key.
    Deprecated(&'static str),
}

/// Whose name a key is: when strait's name and an MM2 name for the same setting are both
/// written in one scope, strait's wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// A strait key (`progress.commit.interval.ms`).
    Strait,
    /// A MirrorMaker 2 / Kafka client key.
    Mm2,
}

type FlowSetter = fn(&mut RawFlow, &str, Origin) -> Result<(), String>;
type ClusterSetter = fn(&mut RawCluster, &str, Origin) -> Result<(), String>;

/// How a key's value reaches the raw structs.
#[derive(Clone, Copy)]
pub(crate) enum Setter {
    /// Read by the parser itself (`clusters`).
    Parser,
    /// Not stored; the value is only type-checked.
    Check(fn(&str) -> Result<(), String>),
    /// Stored into a [`RawCluster`].
    Cluster(ClusterSetter),
    /// Stored into a [`RawFlow`].
    Flow(FlowSetter),
}

/// One `mm2.properties` key: the single source of truth for its name, TOML counterpart,
/// default, documentation and how it is stored.
pub struct KeySpec {
    /// The key, relative to its prefix (`topics` is written `topics` or `A->B.topics`).
    pub name: &'static str,
    /// Where the key is written.
    pub scope: Scope,
    /// The TOML field holding the same setting, if any (in `[[flows]]` or
    /// `[clusters.<alias>]`).
    pub toml: Option<&'static str>,
    /// What strait does with it.
    pub status: Status,
    /// Whose name it is.
    pub spelling: Spelling,
    /// The default value (empty: required, or none). This is the value after `.properties`
    /// unescaping: in the file, each backslash is written twice.
    pub default: &'static str,
    /// One-line meaning, with units.
    pub doc: &'static str,
    pub(crate) set: Setter,
}

impl KeySpec {
    const fn new(name: &'static str, scope: Scope, default: &'static str, set: Setter) -> Self {
        KeySpec {
            name,
            scope,
            toml: None,
            status: Status::Implemented,
            spelling: Spelling::Mm2,
            default,
            doc: "",
            set,
        }
    }
    const fn toml(mut self, field: &'static str) -> Self {
        self.toml = Some(field);
        self
    }
    const fn status(mut self, status: Status) -> Self {
        self.status = status;
        self
    }
    const fn strait(mut self) -> Self {
        self.spelling = Spelling::Strait;
        self
    }
    const fn doc(mut self, doc: &'static str) -> Self {
        self.doc = doc;
        self
    }

    /// Precedence among spellings of one setting in one scope.
    pub(crate) fn rank(&self) -> u8 {
        match (self.status, self.spelling) {
            (Status::Deprecated(_), _) => 0,
            (_, Spelling::Mm2) => 1,
            (_, Spelling::Strait) => 2,
        }
    }
}

/// The key a property is looked up under.
pub(crate) fn find_key(scope: Scope, name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.scope == scope && k.name == name)
}

/// All keys strait knows in `mm2.properties`.
pub fn keys() -> &'static [KeySpec] {
    KEYS
}

// Value parsers shared by the setters. Values arrive trimmed, as Kafka's ConfigDef trims them.

/// Kafka `Type.BOOLEAN`: `true`/`false`, any case.
pub(crate) fn parse_bool(v: &str) -> Result<bool, String> {
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(format!("expected true or false, got `{v}`"))
    }
}

/// Kafka `Type.INT/LONG/SHORT`: a decimal integer; ranges are checked in validation.
pub(crate) fn parse_int(v: &str) -> Result<i64, String> {
    v.parse::<i64>()
        .map_err(|_| format!("expected an integer, got `{v}`"))
}

/// A whole number of seconds, stored in milliseconds.
fn parse_seconds_as_ms(v: &str) -> Result<i64, String> {
    parse_int(v)?
        .checked_mul(1000)
        .ok_or_else(|| format!("`{v}` seconds is too large"))
}

/// Kafka `Type.LIST`: comma-separated, items trimmed; empty items dropped (an empty list
/// means "nothing", as in MM2).
pub(crate) fn parse_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_list_ok(v: &str) -> Result<Vec<String>, String> {
    Ok(parse_list(v))
}

fn parse_string(v: &str) -> Result<String, String> {
    Ok(v.to_string())
}

const DEFAULT_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy";
const IDENTITY_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy";

fn parse_policy_class(v: &str) -> Result<PolicyKind, String> {
    match v {
        DEFAULT_POLICY_CLASS | "DefaultReplicationPolicy" => Ok(PolicyKind::Default),
        IDENTITY_POLICY_CLASS | "IdentityReplicationPolicy" => Ok(PolicyKind::Identity),
        _ => Err(format!(
            "unsupported replication policy `{v}`: strait implements {DEFAULT_POLICY_CLASS} and \
             {IDENTITY_POLICY_CLASS}"
        )),
    }
}

fn parse_offset_reset(v: &str) -> Result<OffsetReset, String> {
    match v.to_ascii_lowercase().as_str() {
        "earliest" => Ok(OffsetReset::Earliest),
        "latest" => Ok(OffsetReset::Latest),
        _ => Err(format!(
            "unsupported offset reset `{v}`: strait implements earliest and latest"
        )),
    }
}

/// MM2 validates `offset-syncs.topic.location` case-sensitively.
fn parse_location(v: &str) -> Result<Location, String> {
    match v {
        "source" => Ok(Location::Source),
        "target" => Ok(Location::Target),
        _ => Err(format!("expected source or target, got `{v}`")),
    }
}

/// Stores `value` unless the slot already holds a higher-ranked spelling.
fn put<T>(slot: &mut Option<Sourced<T>>, value: T, origin: Origin) {
    if slot
        .as_ref()
        .is_some_and(|old| old.origin.rank > origin.rank)
    {
        return;
    }
    *slot = Some(Sourced { value, origin });
}

/// MM2 has three internal-topic replication factors, strait one: among the MM2 keys the
/// largest wins, so no internal topic gets less durability than asked for.
fn put_max(slot: &mut Option<Sourced<i64>>, value: i64, origin: Origin) {
    if let Some(old) = slot {
        if old.origin.rank > origin.rank || (old.origin.rank == origin.rank && old.value > value) {
            return;
        }
    }
    *slot = Some(Sourced { value, origin });
}

macro_rules! flow {
    ($field:ident, $parse:expr) => {
        Setter::Flow(|f, v, o| {
            put(&mut f.$field, ($parse)(v)?, o);
            Ok(())
        })
    };
}

macro_rules! cluster {
    ($field:ident, $parse:expr) => {
        Setter::Cluster(|c, v, o| {
            put(&mut c.$field, ($parse)(v)?, o);
            Ok(())
        })
    };
}

const INTERNAL_RF: Setter = Setter::Flow(|f, v, o| {
    put_max(&mut f.internal_replication_factor, parse_int(v)?, o);
    Ok(())
});
const CHECK_BOOL: Setter = Setter::Check(|v| parse_bool(v).map(|_| ()));
const CHECK_INT: Setter = Setter::Check(|v| parse_int(v).map(|_| ()));
const CHECK_ANY: Setter = Setter::Check(|_| Ok(()));

use Scope::{Cluster, Flow, Global, SourceCluster, TargetCluster};

/// `topics.exclude` default as written in the key table (see [`crate::filter`]).
const TOPICS_EXCLUDE_TEXT: &str = r".*[\-\.]internal, .*\.replica, __.*";
/// `groups.exclude` default as written in the key table.
const GROUPS_EXCLUDE_TEXT: &str = "console-consumer-.*, connect-.*, __.*";
/// `config.properties.exclude` default as written in the key table.
const CONFIG_PROPERTIES_EXCLUDE_TEXT: &str = "follower\\.replication\\.throttled\\.replicas, \
    leader\\.replication\\.throttled\\.replicas, message\\.timestamp\\.difference\\.max\\.ms, \
    message\\.timestamp\\.type, unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas";

/// Every key strait knows. Lookup is by `(scope, name)`; see `docs/configuration.md`.
pub static KEYS: &[KeySpec] = &[
    // --- top level ---
    KeySpec::new("clusters", Global, "", Setter::Parser).doc(
        "Comma-separated cluster aliases (required). Each alias needs \
             `<alias>.bootstrap.servers`.",
    ),
    KeySpec::new("config.providers", Global, "", CHECK_ANY)
        .status(Status::Unsupported)
        .doc(
            "Connect config providers for `${provider:path:key}` values; strait does not \
             substitute them.",
        ),
    KeySpec::new(
        "dedicated.mode.enable.internal.rest",
        Global,
        "false",
        CHECK_BOOL,
    )
    .status(Status::Unsupported)
    .doc("MM2's internal REST server for multi-node clusters; strait has none."),
    // --- clusters ---
    KeySpec::new(
        "bootstrap.servers",
        Cluster,
        "",
        cluster!(bootstrap_servers, parse_list_ok),
    )
    .toml("bootstrap_servers")
    .doc(
        "Comma-separated `host:port` list to bootstrap from (required for clusters an \
             enabled flow uses).",
    ),
    KeySpec::new(
        "client.id",
        Cluster,
        "strait",
        cluster!(client_id, parse_string),
    )
    .toml("client_id")
    .doc("Kafka `client.id` sent on every request to this cluster."),
    KeySpec::new(
        "request.timeout.ms",
        Cluster,
        "30000",
        cluster!(request_timeout_ms, parse_int),
    )
    .toml("request_timeout_ms")
    .doc("How long to wait for a response from this cluster, in milliseconds."),
    KeySpec::new(
        "send.buffer.bytes",
        Cluster,
        "131072",
        cluster!(send_buffer_bytes, parse_int),
    )
    .toml("send_buffer_bytes")
    .doc(
        "Socket send buffer of connections to this cluster, in bytes; -1 for the OS \
             default (autotuned). Kafka clients' default: smaller bursts into a broker's \
             fixed receive buffer drop fewer packets, each a possible 200-ms retransmission \
             stall. Raise it, or -1, for a distant target.",
    ),
    KeySpec::new("security.protocol", Cluster, "PLAINTEXT", CHECK_ANY)
        .status(Status::Unsupported)
        .doc(
            "Kafka security protocol; strait connects with PLAINTEXT only (TLS/SASL not \
             implemented).",
        ),
    // --- flows: what to replicate ---
    KeySpec::new("enabled", Flow, "false", flow!(enabled, parse_bool))
        .toml("enabled")
        .doc(
            "Whether the flow runs (`A->B.enabled`). In TOML a `[[flows]]` entry is enabled \
             unless it says `enabled = false`.",
        ),
    KeySpec::new("topics", Flow, ".*", flow!(topics, parse_list_ok))
        .toml("topics")
        .doc(
            "Comma-separated regexes of topics to replicate, each matched against the whole \
             name.",
        ),
    KeySpec::new(
        "topics.exclude",
        Flow,
        TOPICS_EXCLUDE_TEXT,
        flow!(topics_exclude, parse_list_ok),
    )
    .toml("topics_exclude")
    .doc("Comma-separated regexes of topics not to replicate; wins over `topics`."),
    KeySpec::new(
        "topics.blacklist",
        Flow,
        TOPICS_EXCLUDE_TEXT,
        flow!(topics_exclude, parse_list_ok),
    )
    .toml("topics_exclude")
    .status(Status::Deprecated("topics.exclude"))
    .doc(
        "Old name of `topics.exclude` (removed in Kafka 4.0); `topics.exclude` wins if \
             both are set.",
    ),
    KeySpec::new("groups", Flow, ".*", flow!(groups, parse_list_ok))
        .toml("groups")
        .doc(
            "Comma-separated regexes of consumer groups to checkpoint, each matched against \
             the whole name.",
        ),
    KeySpec::new(
        "groups.exclude",
        Flow,
        GROUPS_EXCLUDE_TEXT,
        flow!(groups_exclude, parse_list_ok),
    )
    .toml("groups_exclude")
    .doc("Comma-separated regexes of groups not to checkpoint; wins over `groups`."),
    KeySpec::new(
        "groups.blacklist",
        Flow,
        GROUPS_EXCLUDE_TEXT,
        flow!(groups_exclude, parse_list_ok),
    )
    .toml("groups_exclude")
    .status(Status::Deprecated("groups.exclude"))
    .doc(
        "Old name of `groups.exclude` (removed in Kafka 4.0); `groups.exclude` wins if \
             both are set.",
    ),
    // --- flows: naming ---
    KeySpec::new(
        "replication.policy.class",
        Flow,
        DEFAULT_POLICY_CLASS,
        flow!(replication_policy, parse_policy_class),
    )
    .toml("replication_policy")
    .doc(
        "`...DefaultReplicationPolicy` (remote topic `<source>.<topic>`) or \
             `...IdentityReplicationPolicy` (same name; no cycle detection). TOML: \
             `\"default\"` or `\"identity\"`.",
    ),
    KeySpec::new(
        "replication.policy.separator",
        Flow,
        ".",
        flow!(replication_policy_separator, parse_string),
    )
    .toml("replication_policy_separator")
    .doc(
        "Separator between source alias and topic in remote names, also used in \
             checkpoints and offset-syncs topic names.",
    ),
    KeySpec::new(
        "replication.policy.internal.topic.separator.enabled",
        Flow,
        "true",
        CHECK_BOOL,
    )
    .status(Status::Unsupported)
    .doc(
        "`false` makes MM2 use `.` in internal topic names despite a custom separator; \
             strait always uses the separator.",
    ),
    // --- flows: topic creation ---
    KeySpec::new(
        "replication.factor",
        Flow,
        "2",
        flow!(replication_factor, parse_int),
    )
    .toml("replication_factor")
    .doc("Replication factor of remote topics strait creates; -1 for the broker default."),
    KeySpec::new(
        "internal.topic.replication.factor",
        Flow,
        "3",
        flow!(internal_replication_factor, parse_int),
    )
    .toml("internal_replication_factor")
    .strait()
    .doc(
        "Replication factor of strait's internal topics (offset syncs, checkpoints, \
             heartbeats, progress); -1 for the broker default.",
    ),
    KeySpec::new(
        "offset-syncs.topic.replication.factor",
        Flow,
        "3",
        INTERNAL_RF,
    )
    .toml("internal_replication_factor")
    .doc(
        "MM2 name for the offset-syncs topic's replication factor. strait has one \
             internal factor: the largest of the three MM2 keys, unless \
             `internal.topic.replication.factor` is set.",
    ),
    KeySpec::new(
        "checkpoints.topic.replication.factor",
        Flow,
        "3",
        INTERNAL_RF,
    )
    .toml("internal_replication_factor")
    .doc(
        "MM2 name for the checkpoints topic's replication factor; see \
             `offset-syncs.topic.replication.factor`.",
    ),
    KeySpec::new(
        "heartbeats.topic.replication.factor",
        Flow,
        "3",
        INTERNAL_RF,
    )
    .toml("internal_replication_factor")
    .doc(
        "MM2 name for the heartbeats topic's replication factor; see \
             `offset-syncs.topic.replication.factor`.",
    ),
    // --- flows: periodic tasks ---
    KeySpec::new("refresh.topics.enabled", Flow, "true", CHECK_BOOL)
        .status(Status::Unsupported)
        .doc("Whether to look for new topics and partitions; strait always does."),
    KeySpec::new(
        "refresh.topics.interval.seconds",
        Flow,
        "600",
        flow!(refresh_topics_interval_ms, parse_seconds_as_ms),
    )
    .toml("refresh_topics_interval_ms")
    .doc("How often to look for new topics and partitions, in seconds (TOML: milliseconds)."),
    KeySpec::new("refresh.groups.enabled", Flow, "true", CHECK_BOOL)
        .status(Status::Unsupported)
        .doc("Whether to look for new consumer groups; strait lists groups at every checkpoint."),
    KeySpec::new("refresh.groups.interval.seconds", Flow, "600", CHECK_INT)
        .status(Status::Unsupported)
        .doc(
            "How often MM2 looks for new consumer groups, in seconds; strait lists groups \
             at every checkpoint.",
        ),
    KeySpec::new(
        "emit.heartbeats.enabled",
        Flow,
        "true",
        flow!(emit_heartbeats_enabled, parse_bool),
    )
    .toml("emit_heartbeats_enabled")
    .doc("Whether to write heartbeats to the target's `heartbeats` topic."),
    KeySpec::new(
        "emit.heartbeats.interval.seconds",
        Flow,
        "1",
        flow!(emit_heartbeats_interval_ms, parse_seconds_as_ms),
    )
    .toml("emit_heartbeats_interval_ms")
    .doc("Heartbeat period, in seconds (TOML: milliseconds)."),
    KeySpec::new(
        "emit.checkpoints.enabled",
        Flow,
        "true",
        flow!(emit_checkpoints_enabled, parse_bool),
    )
    .toml("emit_checkpoints_enabled")
    .doc(
        "Whether to write consumer group checkpoints to `<source>.checkpoints.internal` \
             on the target.",
    ),
    KeySpec::new(
        "emit.checkpoints.interval.seconds",
        Flow,
        "60",
        flow!(emit_checkpoints_interval_ms, parse_seconds_as_ms),
    )
    .toml("emit_checkpoints_interval_ms")
    .doc("Checkpoint period, in seconds (TOML: milliseconds)."),
    KeySpec::new(
        "sync.group.offsets.enabled",
        Flow,
        "false",
        flow!(sync_group_offsets_enabled, parse_bool),
    )
    .toml("sync_group_offsets_enabled")
    .doc(
        "Whether to commit translated offsets for groups that are empty on the target, \
             only moving them forward.",
    ),
    KeySpec::new(
        "sync.group.offsets.interval.seconds",
        Flow,
        "60",
        flow!(sync_group_offsets_interval_ms, parse_seconds_as_ms),
    )
    .toml("sync_group_offsets_interval_ms")
    .doc("Group offset sync period, in seconds (TOML: milliseconds)."),
    KeySpec::new(
        "sync.topic.configs.enabled",
        Flow,
        "true",
        flow!(sync_topic_configs_enabled, parse_bool),
    )
    .toml("sync_topic_configs_enabled")
    .doc("Whether to copy topic configs to remote topics."),
    KeySpec::new(
        "sync.topic.configs.interval.seconds",
        Flow,
        "600",
        flow!(sync_topic_configs_interval_ms, parse_seconds_as_ms),
    )
    .toml("sync_topic_configs_interval_ms")
    .doc("Topic config sync period, in seconds (TOML: milliseconds)."),
    KeySpec::new(
        "sync.topic.acls.enabled",
        Flow,
        "true",
        flow!(sync_topic_acls_enabled, parse_bool),
    )
    .toml("sync_topic_acls_enabled")
    .status(Status::Implemented)
    .doc(
        "Whether to copy the literal topic ACLs of replicated topics to their remote topics \
             (ALLOW WRITE never, ALLOW ALL as ALLOW READ, DENY as is; only missing ones are \
             created, none removed; skipped on clusters without an authorizer).",
    ),
    KeySpec::new(
        "sync.topic.acls.interval.seconds",
        Flow,
        "600",
        flow!(sync_topic_acls_interval_ms, parse_seconds_as_ms),
    )
    .toml("sync_topic_acls_interval_ms")
    .status(Status::Implemented)
    .doc("Topic ACL sync period, in seconds (TOML: milliseconds)."),
    KeySpec::new("emit.offset-syncs.enabled", Flow, "true", CHECK_BOOL)
        .status(Status::Unsupported)
        .doc("Whether to write offset syncs; strait always writes them (checkpoints need them)."),
    KeySpec::new("heartbeats.replication.enabled", Flow, "true", CHECK_BOOL)
        .status(Status::Unsupported)
        .doc(
            "Whether heartbeats topics are replicated even when `topics` leaves them out; \
             strait always replicates them.",
        ),
    // --- flows: offsets ---
    KeySpec::new(
        "offset-syncs.topic.location",
        Flow,
        "source",
        flow!(offset_syncs_location, parse_location),
    )
    .toml("offset_syncs_location")
    .doc("Cluster holding the offset-syncs topic: `source` or `target`."),
    KeySpec::new(
        "offset.lag.max",
        Flow,
        "100",
        flow!(offset_lag_max, parse_int),
    )
    .toml("offset_lag_max")
    .doc(
        "Records a partition may advance before MM2 writes a new offset sync; strait \
             also writes one at every offset gap.",
    ),
    KeySpec::new(
        "progress.commit.interval.ms",
        Flow,
        "5000",
        flow!(progress_commit_interval_ms, parse_int),
    )
    .toml("progress_commit_interval_ms")
    .strait()
    .doc(
        "How often replicated positions are committed, in milliseconds: bounds \
             duplicates after a crash.",
    ),
    KeySpec::new(
        "offset.flush.interval.ms",
        Flow,
        "5000",
        flow!(progress_commit_interval_ms, parse_int),
    )
    .toml("progress_commit_interval_ms")
    .doc(
        "Connect's offset commit period (MM2 default 60000), read as \
             `progress.commit.interval.ms`, which wins if both are set.",
    ),
    KeySpec::new(
        "offset.flush.interval.ms",
        TargetCluster,
        "5000",
        flow!(progress_commit_interval_ms, parse_int),
    )
    .toml("progress_commit_interval_ms")
    .doc(
        "`<target>.offset.flush.interval.ms`, where MM2 reads it (the Connect worker of \
             flows into `<target>`).",
    ),
    KeySpec::new(
        "offset.reset",
        Flow,
        "earliest",
        flow!(offset_reset, parse_offset_reset),
    )
    .toml("offset_reset")
    .strait()
    .doc("Where partitions without committed progress start: `earliest` or `latest`."),
    KeySpec::new(
        "consumer.auto.offset.reset",
        Flow,
        "earliest",
        flow!(offset_reset, parse_offset_reset),
    )
    .toml("offset_reset")
    .doc("MM2 consumer name of `offset.reset` (`A->B.consumer.auto.offset.reset`)."),
    KeySpec::new(
        "source.consumer.auto.offset.reset",
        Flow,
        "earliest",
        flow!(offset_reset, parse_offset_reset),
    )
    .toml("offset_reset")
    .doc("MM2 source-consumer name of `offset.reset`."),
    KeySpec::new(
        "consumer.auto.offset.reset",
        SourceCluster,
        "earliest",
        flow!(offset_reset, parse_offset_reset),
    )
    .toml("offset_reset")
    .doc("`<source>.consumer.auto.offset.reset`: `offset.reset` for flows reading `<source>`."),
    KeySpec::new("tasks.max", Flow, "1", flow!(tasks_max, parse_int))
        .toml("tasks_max")
        .status(Status::Hint)
        .doc(
            "Connect task count; strait is not task-based and uses it only as a parallelism \
             hint.",
        ),
    // --- flows: topic configs ---
    KeySpec::new(
        "config.properties.exclude",
        Flow,
        CONFIG_PROPERTIES_EXCLUDE_TEXT,
        flow!(config_properties_exclude, parse_list_ok),
    )
    .toml("config_properties_exclude")
    .doc("Comma-separated regexes of topic config names never copied to remote topics."),
    KeySpec::new(
        "config.properties.blacklist",
        Flow,
        CONFIG_PROPERTIES_EXCLUDE_TEXT,
        flow!(config_properties_exclude, parse_list_ok),
    )
    .toml("config_properties_exclude")
    .status(Status::Deprecated("config.properties.exclude"))
    .doc("Old name of `config.properties.exclude` (removed in Kafka 4.0)."),
    KeySpec::new("use.defaults.from", Flow, "target", CHECK_ANY)
        .status(Status::Unsupported)
        .doc(
            "Whose defaults apply to synced topic configs; strait leaves defaulted configs \
             to the target.",
        ),
    // --- flows: fetching ---
    KeySpec::new(
        "fetch.max.bytes",
        Flow,
        "52428800",
        flow!(fetch_max_bytes, parse_int),
    )
    .toml("fetch_max_bytes")
    .strait()
    .doc("Fetch response size bound, in bytes."),
    KeySpec::new(
        "consumer.fetch.max.bytes",
        Flow,
        "52428800",
        flow!(fetch_max_bytes, parse_int),
    )
    .toml("fetch_max_bytes")
    .doc("MM2 consumer name of `fetch.max.bytes`."),
    KeySpec::new(
        "source.consumer.fetch.max.bytes",
        Flow,
        "52428800",
        flow!(fetch_max_bytes, parse_int),
    )
    .toml("fetch_max_bytes")
    .doc("MM2 source-consumer name of `fetch.max.bytes`."),
    KeySpec::new(
        "consumer.fetch.max.bytes",
        SourceCluster,
        "52428800",
        flow!(fetch_max_bytes, parse_int),
    )
    .toml("fetch_max_bytes")
    .doc(
        "`<source>.consumer.fetch.max.bytes`: `fetch.max.bytes` for flows reading \
             `<source>`.",
    ),
    KeySpec::new(
        "fetch.partition.max.bytes",
        Flow,
        "1048576",
        flow!(fetch_partition_max_bytes, parse_int),
    )
    .toml("fetch_partition_max_bytes")
    .strait()
    .doc(
        "Per-partition fetch size bound, in bytes (a larger first batch is still \
             returned, KIP-74).",
    ),
    KeySpec::new(
        "consumer.max.partition.fetch.bytes",
        Flow,
        "1048576",
        flow!(fetch_partition_max_bytes, parse_int),
    )
    .toml("fetch_partition_max_bytes")
    .doc("MM2 consumer name of `fetch.partition.max.bytes`."),
    KeySpec::new(
        "source.consumer.max.partition.fetch.bytes",
        Flow,
        "1048576",
        flow!(fetch_partition_max_bytes, parse_int),
    )
    .toml("fetch_partition_max_bytes")
    .doc("MM2 source-consumer name of `fetch.partition.max.bytes`."),
    KeySpec::new(
        "consumer.max.partition.fetch.bytes",
        SourceCluster,
        "1048576",
        flow!(fetch_partition_max_bytes, parse_int),
    )
    .toml("fetch_partition_max_bytes")
    .doc("`<source>.consumer.max.partition.fetch.bytes`: for flows reading `<source>`."),
    KeySpec::new(
        "fetch.max.wait.ms",
        Flow,
        "500",
        flow!(fetch_max_wait_ms, parse_int),
    )
    .toml("fetch_max_wait_ms")
    .strait()
    .doc("How long the source broker may hold a Fetch waiting for data, in milliseconds."),
    KeySpec::new(
        "consumer.fetch.max.wait.ms",
        Flow,
        "500",
        flow!(fetch_max_wait_ms, parse_int),
    )
    .toml("fetch_max_wait_ms")
    .doc("MM2 consumer name of `fetch.max.wait.ms`."),
    KeySpec::new(
        "source.consumer.fetch.max.wait.ms",
        Flow,
        "500",
        flow!(fetch_max_wait_ms, parse_int),
    )
    .toml("fetch_max_wait_ms")
    .doc("MM2 source-consumer name of `fetch.max.wait.ms`."),
    KeySpec::new(
        "consumer.fetch.max.wait.ms",
        SourceCluster,
        "500",
        flow!(fetch_max_wait_ms, parse_int),
    )
    .toml("fetch_max_wait_ms")
    .doc("`<source>.consumer.fetch.max.wait.ms`: for flows reading `<source>`."),
    // --- flows: producing ---
    KeySpec::new(
        "produce.max.in.flight",
        Flow,
        "5",
        flow!(produce_max_in_flight, parse_int),
    )
    .toml("produce_max_in_flight")
    .strait()
    .doc("Produce requests in flight per target partition, 1 to 5."),
    KeySpec::new(
        "producer.max.in.flight.requests.per.connection",
        Flow,
        "5",
        flow!(produce_max_in_flight, parse_int),
    )
    .toml("produce_max_in_flight")
    .doc("MM2 producer name of `produce.max.in.flight`."),
    KeySpec::new(
        "producer.max.in.flight.requests.per.connection",
        TargetCluster,
        "5",
        flow!(produce_max_in_flight, parse_int),
    )
    .toml("produce_max_in_flight")
    .doc(
        "`<target>.producer.max.in.flight.requests.per.connection`: for flows writing \
             `<target>`.",
    ),
    KeySpec::new(
        "produce.linger.ms",
        Flow,
        "0",
        flow!(produce_linger_ms, parse_int),
    )
    .toml("produce_linger_ms")
    .strait()
    .status(Status::NotYet)
    .doc(
        "How long to wait for more batches before sending a Produce request, in \
             milliseconds. Not acted on yet: strait sends as soon as the target has room \
             (under a backlog, `produce.coalesce.bytes` merges what waits).",
    ),
    KeySpec::new(
        "producer.linger.ms",
        Flow,
        "0",
        flow!(produce_linger_ms, parse_int),
    )
    .toml("produce_linger_ms")
    .status(Status::NotYet)
    .doc("MM2 producer name of `produce.linger.ms`."),
    KeySpec::new(
        "producer.linger.ms",
        TargetCluster,
        "0",
        flow!(produce_linger_ms, parse_int),
    )
    .toml("produce_linger_ms")
    .status(Status::NotYet)
    .doc("`<target>.producer.linger.ms`: for flows writing `<target>`."),
    KeySpec::new(
        "produce.max.request.bytes",
        Flow,
        "1048576",
        flow!(produce_max_request_bytes, parse_int),
    )
    .toml("produce_max_request_bytes")
    .strait()
    .doc("Upper bound on one Produce request, in bytes."),
    KeySpec::new(
        "producer.max.request.size",
        Flow,
        "1048576",
        flow!(produce_max_request_bytes, parse_int),
    )
    .toml("produce_max_request_bytes")
    .doc("MM2 producer name of `produce.max.request.bytes`."),
    KeySpec::new(
        "producer.max.request.size",
        TargetCluster,
        "1048576",
        flow!(produce_max_request_bytes, parse_int),
    )
    .toml("produce_max_request_bytes")
    .doc("`<target>.producer.max.request.size`: for flows writing `<target>`."),
    KeySpec::new(
        "buffer.bytes",
        Flow,
        "33554432",
        flow!(buffer_bytes, parse_int),
    )
    .toml("buffer_bytes")
    .strait()
    .doc(
        "Bytes of fetched batches a flow holds until the target acknowledges them: with \
             the Fetch response being read, what bounds its memory. A Fetch response asks \
             for at most a quarter of it (and at most `fetch.max.bytes`).",
    ),
    KeySpec::new(
        "produce.coalesce.bytes",
        Flow,
        "0",
        flow!(produce_coalesce_bytes, parse_int),
    )
    .toml("produce_coalesce_bytes")
    .strait()
    .doc(
        "Merge consecutive small uncompressed batches of a partition (each at most 1/16 of \
             this), while they wait for the target, into batches of up to this many bytes: \
             fewer, larger batches for a source written in tiny ones. Records are re-framed \
             (new offset and timestamp deltas), their keys, values and headers kept byte for \
             byte; compressed, transactional and compacted batches always go as they are. 0 \
             forwards every batch as it is.",
    ),
    // --- flows: MM2 plumbing strait replaces ---
    KeySpec::new(
        "topic.filter.class",
        Flow,
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
        CHECK_ANY,
    )
    .status(Status::Unsupported)
    .doc(
        "Custom topic filter class; strait implements the default (`topics`, \
             `topics.exclude`).",
    ),
    KeySpec::new(
        "group.filter.class",
        Flow,
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
        CHECK_ANY,
    )
    .status(Status::Unsupported)
    .doc(
        "Custom group filter class; strait implements the default (`groups`, \
             `groups.exclude`).",
    ),
    KeySpec::new(
        "config.property.filter.class",
        Flow,
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        CHECK_ANY,
    )
    .status(Status::Unsupported)
    .doc(
        "Custom topic config filter class; strait implements the default \
             (`config.properties.exclude`).",
    ),
    KeySpec::new(
        "forwarding.admin.class",
        Flow,
        "org.apache.kafka.clients.admin.ForwardingAdmin",
        CHECK_ANY,
    )
    .status(Status::Unsupported)
    .doc("Custom admin client for topic/ACL management; strait talks to the brokers itself."),
    KeySpec::new("consumer.poll.timeout.ms", Flow, "1000", CHECK_INT)
        .status(Status::Unsupported)
        .doc(
            "MM2 consumer poll timeout, in milliseconds; strait's fetch wait is \
             `fetch.max.wait.ms`.",
        ),
    KeySpec::new("admin.timeout.ms", Flow, "60000", CHECK_INT)
        .status(Status::Unsupported)
        .doc(
            "MM2 admin task timeout, in milliseconds; strait uses each cluster's \
             `request.timeout.ms`.",
        ),
    KeySpec::new(
        "use.incremental.alter.configs",
        Flow,
        "requested",
        CHECK_ANY,
    )
    .status(Status::Unsupported)
    .doc("Removed in Kafka 4.0; strait always uses IncrementalAlterConfigs."),
    KeySpec::new("add.source.alias.to.metrics", Flow, "false", CHECK_BOOL)
        .status(Status::Unsupported)
        .doc("Removed in Kafka 4.0; strait's metrics always carry source and target."),
];

#[cfg(test)]
mod tests {
    use super::*;

    const PROPS_BASE: &str = "clusters = source, target\n\
                              source.bootstrap.servers = s:9092\n\
                              target.bootstrap.servers = t:9092\n\
                              source->target.enabled = true\n";

    /// The `mm2.properties` line that sets `name` in `scope` for flow `source->target`.
    fn property_line(scope: Scope, name: &str, value: &str) -> String {
        match scope {
            Global => format!("{name} = {value}\n"),
            Cluster | SourceCluster => format!("source.{name} = {value}\n"),
            TargetCluster => format!("target.{name} = {value}\n"),
            // `enabled` is already set for source->target: exercise the other direction.
            Flow if name == "enabled" => format!("target->source.{name} = {value}\n"),
            Flow => format!("source->target.{name} = {value}\n"),
        }
    }

    fn props(scope: Scope, name: &str, value: &str) -> (Config, Vec<ConfigWarning>) {
        let text = format!("{PROPS_BASE}{}", property_line(scope, name, value));
        parse_properties(&text, "mm2.properties")
            .unwrap_or_else(|e| panic!("{name} = {value}: {e}"))
    }

    /// The same flow in TOML, with `snippet` in the source cluster or the flow table.
    fn toml_text(scope: Scope, snippet: &str) -> String {
        let (cluster, flow) = match scope {
            Cluster => (snippet, ""),
            _ => ("", snippet),
        };
        let servers = if cluster.contains("bootstrap_servers") {
            ""
        } else {
            "bootstrap_servers = [\"s:9092\"]\n"
        };
        format!(
            "[clusters.source]\n{servers}{cluster}\n\
             [clusters.target]\nbootstrap_servers = [\"t:9092\"]\n\
             [[flows]]\nsource = \"source\"\ntarget = \"target\"\n{flow}\n"
        )
    }

    fn f0(c: &Config) -> &FlowConfig {
        &c.flows[0]
    }

    fn patterns(res: &[Regex]) -> Vec<&str> {
        res.iter().map(Regex::as_str).collect()
    }

    fn warned(w: &[ConfigWarning], kind: WarningKind) -> bool {
        w.iter().any(|w| w.kind == kind)
    }

    type Check = fn(&Config, &[ConfigWarning]) -> bool;

    /// One test case per key: a non-default value, its TOML spelling (if TOML has the
    /// setting), and what the typed config must show.
    struct Case {
        scope: Scope,
        name: &'static str,
        value: &'static str,
        toml: Option<&'static str>,
        check: Check,
    }

    macro_rules! case {
        ($scope:expr, $name:literal, $value:literal, $toml:expr, $check:expr) => {
            Case {
                scope: $scope,
                name: $name,
                value: $value,
                toml: $toml,
                check: $check,
            }
        };
    }

    const NI: WarningKind = WarningKind::NotImplemented;
    const DEP: WarningKind = WarningKind::Deprecated;

    fn cases() -> Vec<Case> {
        vec![
            case!(Global, "clusters", "source, target, spare", None, |c, w| {
                !c.clusters.contains_key("spare")
                    && w.iter().any(|w| w.key == "spare.bootstrap.servers")
            }),
            case!(Global, "config.providers", "file", None, |_, w| warned(
                w, NI
            )),
            case!(
                Global,
                "dedicated.mode.enable.internal.rest",
                "true",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Cluster,
                "bootstrap.servers",
                "h1:1, [::1]:2",
                Some(r#"bootstrap_servers = ["h1:1", "[::1]:2"]"#),
                |c, _| { c.clusters["source"].bootstrap_servers == ["h1:1", "[::1]:2"] }
            ),
            case!(
                Cluster,
                "client.id",
                "me",
                Some(r#"client_id = "me""#),
                |c, _| c.clusters["source"].client_id == "me"
            ),
            case!(
                Cluster,
                "request.timeout.ms",
                "1234",
                Some("request_timeout_ms = 1234"),
                |c, _| {
                    c.clusters["source"].request_timeout_ms == 1234
                        && c.clusters["target"].request_timeout_ms == 30_000
                }
            ),
            case!(
                Cluster,
                "send.buffer.bytes",
                "-1",
                Some("send_buffer_bytes = -1"),
                |c, _| {
                    c.clusters["source"].send_buffer_bytes.is_none()
                        && c.clusters["target"].send_buffer_bytes == Some(131_072)
                }
            ),
            case!(Cluster, "security.protocol", "SSL", None, |_, w| warned(
                w, NI
            )),
            case!(Flow, "enabled", "true", None, |c, _| c.flows.len() == 2
                && c.flows[1].source == "target"),
            case!(
                Flow,
                "topics",
                "a, b.*",
                Some(r#"topics = ["a", "b.*"]"#),
                |c, _| { patterns(&f0(c).topics.include) == ["^(?:a)$", "^(?:b.*)$"] }
            ),
            case!(
                Flow,
                "topics.exclude",
                "x",
                Some(r#"topics_exclude = ["x"]"#),
                |c, _| patterns(&f0(c).topics.exclude) == ["^(?:x)$"]
            ),
            case!(
                Flow,
                "topics.blacklist",
                "x",
                Some(r#"topics_exclude = ["x"]"#),
                |c, w| { patterns(&f0(c).topics.exclude) == ["^(?:x)$"] && warned(w, DEP) }
            ),
            case!(
                Flow,
                "groups",
                "g1, g2",
                Some(r#"groups = ["g1", "g2"]"#),
                |c, _| f0(c).groups.include.len() == 2
            ),
            case!(
                Flow,
                "groups.exclude",
                "",
                Some("groups_exclude = []"),
                |c, _| f0(c).groups.exclude.is_empty()
            ),
            case!(
                Flow,
                "groups.blacklist",
                "",
                Some("groups_exclude = []"),
                |c, w| f0(c).groups.exclude.is_empty() && warned(w, DEP)
            ),
            case!(
                Flow,
                "replication.policy.class",
                "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                Some(r#"replication_policy = "identity""#),
                |c, _| { f0(c).policy == ReplicationPolicy::Identity }
            ),
            case!(
                Flow,
                "replication.policy.separator",
                "_",
                Some(r#"replication_policy_separator = "_""#),
                |c, _| {
                    f0(c).policy
                        == ReplicationPolicy::Default {
                            separator: "_".into(),
                        }
                }
            ),
            case!(
                Flow,
                "replication.policy.internal.topic.separator.enabled",
                "false",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "replication.factor",
                "-1",
                Some("replication_factor = -1"),
                |c, _| f0(c).replication_factor == -1
            ),
            case!(
                Flow,
                "internal.topic.replication.factor",
                "1",
                Some("internal_replication_factor = 1"),
                |c, _| f0(c).internal_replication_factor == 1
            ),
            case!(
                Flow,
                "offset-syncs.topic.replication.factor",
                "5",
                Some("internal_replication_factor = 5"),
                |c, _| f0(c).internal_replication_factor == 5
            ),
            case!(
                Flow,
                "checkpoints.topic.replication.factor",
                "4",
                Some("internal_replication_factor = 4"),
                |c, _| f0(c).internal_replication_factor == 4
            ),
            case!(
                Flow,
                "heartbeats.topic.replication.factor",
                "1",
                Some("internal_replication_factor = 1"),
                |c, _| f0(c).internal_replication_factor == 1
            ),
            case!(
                Flow,
                "refresh.topics.enabled",
                "false",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "refresh.topics.interval.seconds",
                "30",
                Some("refresh_topics_interval_ms = 30000"),
                |c, _| f0(c).refresh_topics_interval_ms == 30_000
            ),
            case!(
                Flow,
                "refresh.groups.enabled",
                "false",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "refresh.groups.interval.seconds",
                "60",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "emit.heartbeats.enabled",
                "false",
                Some("emit_heartbeats_enabled = false"),
                |c, _| !f0(c).emit_heartbeats.enabled
            ),
            case!(
                Flow,
                "emit.heartbeats.interval.seconds",
                "5",
                Some("emit_heartbeats_interval_ms = 5000"),
                |c, _| f0(c).emit_heartbeats.interval_ms == 5_000
            ),
            case!(
                Flow,
                "emit.checkpoints.enabled",
                "false",
                Some("emit_checkpoints_enabled = false"),
                |c, _| !f0(c).emit_checkpoints.enabled
            ),
            case!(
                Flow,
                "emit.checkpoints.interval.seconds",
                "10",
                Some("emit_checkpoints_interval_ms = 10000"),
                |c, _| f0(c).emit_checkpoints.interval_ms == 10_000
            ),
            case!(
                Flow,
                "sync.group.offsets.enabled",
                "true",
                Some("sync_group_offsets_enabled = true"),
                |c, w| f0(c).sync_group_offsets.enabled && w.is_empty()
            ),
            case!(
                Flow,
                "sync.group.offsets.interval.seconds",
                "15",
                Some("sync_group_offsets_interval_ms = 15000"),
                |c, w| f0(c).sync_group_offsets.interval_ms == 15_000 && w.is_empty()
            ),
            case!(
                Flow,
                "sync.topic.configs.enabled",
                "false",
                Some("sync_topic_configs_enabled = false"),
                |c, _| !f0(c).sync_topic_configs.enabled
            ),
            case!(
                Flow,
                "sync.topic.configs.interval.seconds",
                "120",
                Some("sync_topic_configs_interval_ms = 120000"),
                |c, _| f0(c).sync_topic_configs.interval_ms == 120_000
            ),
            case!(
                Flow,
                "sync.topic.acls.enabled",
                "false",
                Some("sync_topic_acls_enabled = false"),
                |c, _| !f0(c).sync_topic_acls.enabled
            ),
            case!(
                Flow,
                "sync.topic.acls.interval.seconds",
                "60",
                Some("sync_topic_acls_interval_ms = 60000"),
                |c, _| f0(c).sync_topic_acls.interval_ms == 60_000
            ),
            case!(Flow, "emit.offset-syncs.enabled", "false", None, |_, w| {
                warned(w, NI)
            }),
            case!(
                Flow,
                "heartbeats.replication.enabled",
                "false",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "offset-syncs.topic.location",
                "target",
                Some(r#"offset_syncs_location = "target""#),
                |c, _| f0(c).offset_syncs_location == Location::Target
            ),
            case!(
                Flow,
                "offset.lag.max",
                "0",
                Some("offset_lag_max = 0"),
                |c, _| f0(c).offset_lag_max == 0
            ),
            case!(
                Flow,
                "progress.commit.interval.ms",
                "250",
                Some("progress_commit_interval_ms = 250"),
                |c, _| f0(c).progress_commit_interval_ms == 250
            ),
            case!(
                Flow,
                "offset.flush.interval.ms",
                "60000",
                Some("progress_commit_interval_ms = 60000"),
                |c, _| f0(c).progress_commit_interval_ms == 60_000
            ),
            case!(
                TargetCluster,
                "offset.flush.interval.ms",
                "1000",
                Some("progress_commit_interval_ms = 1000"),
                |c, _| f0(c).progress_commit_interval_ms == 1_000
            ),
            case!(
                Flow,
                "offset.reset",
                "latest",
                Some(r#"offset_reset = "latest""#),
                |c, _| f0(c).offset_reset == OffsetReset::Latest
            ),
            case!(
                Flow,
                "consumer.auto.offset.reset",
                "latest",
                Some(r#"offset_reset = "latest""#),
                |c, _| f0(c).offset_reset == OffsetReset::Latest
            ),
            case!(
                Flow,
                "source.consumer.auto.offset.reset",
                "latest",
                Some(r#"offset_reset = "latest""#),
                |c, _| f0(c).offset_reset == OffsetReset::Latest
            ),
            case!(
                SourceCluster,
                "consumer.auto.offset.reset",
                "LATEST",
                Some(r#"offset_reset = "latest""#),
                |c, _| f0(c).offset_reset == OffsetReset::Latest
            ),
            case!(Flow, "tasks.max", "8", Some("tasks_max = 8"), |c, w| f0(c)
                .tasks_max
                == 8
                && w.is_empty()),
            case!(
                Flow,
                "config.properties.exclude",
                "a, b",
                Some(r#"config_properties_exclude = ["a", "b"]"#),
                |c, _| { patterns(&f0(c).config_properties_exclude) == ["^(?:a)$", "^(?:b)$"] }
            ),
            case!(
                Flow,
                "config.properties.blacklist",
                "a",
                Some(r#"config_properties_exclude = ["a"]"#),
                |c, w| { f0(c).config_properties_exclude.len() == 1 && warned(w, DEP) }
            ),
            case!(Flow, "use.defaults.from", "source", None, |_, w| warned(
                w, NI
            )),
            case!(
                Flow,
                "fetch.max.bytes",
                "1000",
                Some("fetch_max_bytes = 1000"),
                |c, _| f0(c).fetch_max_bytes == 1000
            ),
            case!(
                Flow,
                "consumer.fetch.max.bytes",
                "1001",
                Some("fetch_max_bytes = 1001"),
                |c, _| f0(c).fetch_max_bytes == 1001
            ),
            case!(
                Flow,
                "source.consumer.fetch.max.bytes",
                "1002",
                Some("fetch_max_bytes = 1002"),
                |c, _| f0(c).fetch_max_bytes == 1002
            ),
            case!(
                SourceCluster,
                "consumer.fetch.max.bytes",
                "1003",
                Some("fetch_max_bytes = 1003"),
                |c, _| f0(c).fetch_max_bytes == 1003
            ),
            case!(
                Flow,
                "fetch.partition.max.bytes",
                "2000",
                Some("fetch_partition_max_bytes = 2000"),
                |c, _| f0(c).fetch_partition_max_bytes == 2000
            ),
            case!(
                Flow,
                "consumer.max.partition.fetch.bytes",
                "2001",
                Some("fetch_partition_max_bytes = 2001"),
                |c, _| f0(c).fetch_partition_max_bytes == 2001
            ),
            case!(
                Flow,
                "source.consumer.max.partition.fetch.bytes",
                "2002",
                Some("fetch_partition_max_bytes = 2002"),
                |c, _| f0(c).fetch_partition_max_bytes == 2002
            ),
            case!(
                SourceCluster,
                "consumer.max.partition.fetch.bytes",
                "2003",
                Some("fetch_partition_max_bytes = 2003"),
                |c, _| f0(c).fetch_partition_max_bytes == 2003
            ),
            case!(
                Flow,
                "fetch.max.wait.ms",
                "10",
                Some("fetch_max_wait_ms = 10"),
                |c, _| f0(c).fetch_max_wait_ms == 10
            ),
            case!(
                Flow,
                "consumer.fetch.max.wait.ms",
                "11",
                Some("fetch_max_wait_ms = 11"),
                |c, _| f0(c).fetch_max_wait_ms == 11
            ),
            case!(
                Flow,
                "source.consumer.fetch.max.wait.ms",
                "12",
                Some("fetch_max_wait_ms = 12"),
                |c, _| f0(c).fetch_max_wait_ms == 12
            ),
            case!(
                SourceCluster,
                "consumer.fetch.max.wait.ms",
                "13",
                Some("fetch_max_wait_ms = 13"),
                |c, _| f0(c).fetch_max_wait_ms == 13
            ),
            case!(
                Flow,
                "produce.max.in.flight",
                "1",
                Some("produce_max_in_flight = 1"),
                |c, _| f0(c).produce_max_in_flight == 1
            ),
            case!(
                Flow,
                "producer.max.in.flight.requests.per.connection",
                "2",
                Some("produce_max_in_flight = 2"),
                |c, _| f0(c).produce_max_in_flight == 2
            ),
            case!(
                TargetCluster,
                "producer.max.in.flight.requests.per.connection",
                "3",
                Some("produce_max_in_flight = 3"),
                |c, _| f0(c).produce_max_in_flight == 3
            ),
            case!(
                Flow,
                "produce.linger.ms",
                "5",
                Some("produce_linger_ms = 5"),
                |c, _| f0(c).produce_linger_ms == 5
            ),
            case!(
                Flow,
                "producer.linger.ms",
                "6",
                Some("produce_linger_ms = 6"),
                |c, _| f0(c).produce_linger_ms == 6
            ),
            case!(
                TargetCluster,
                "producer.linger.ms",
                "7",
                Some("produce_linger_ms = 7"),
                |c, _| f0(c).produce_linger_ms == 7
            ),
            case!(
                Flow,
                "produce.max.request.bytes",
                "100",
                Some("produce_max_request_bytes = 100"),
                |c, _| f0(c).produce_max_request_bytes == 100
            ),
            case!(
                Flow,
                "producer.max.request.size",
                "101",
                Some("produce_max_request_bytes = 101"),
                |c, _| f0(c).produce_max_request_bytes == 101
            ),
            case!(
                TargetCluster,
                "producer.max.request.size",
                "102",
                Some("produce_max_request_bytes = 102"),
                |c, _| f0(c).produce_max_request_bytes == 102
            ),
            case!(
                Flow,
                "buffer.bytes",
                "8388608",
                Some("buffer_bytes = 8388608"),
                |c, _| f0(c).buffer_bytes == 8_388_608
            ),
            case!(
                Flow,
                "produce.coalesce.bytes",
                "262144",
                Some("produce_coalesce_bytes = 262144"),
                |c, _| f0(c).produce_coalesce_bytes == 262_144
            ),
            case!(
                Flow,
                "topic.filter.class",
                "com.example.Filter",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "group.filter.class",
                "com.example.Filter",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "config.property.filter.class",
                "com.example.Filter",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "forwarding.admin.class",
                "com.example.Admin",
                None,
                |_, w| warned(w, NI)
            ),
            case!(
                Flow,
                "consumer.poll.timeout.ms",
                "500",
                None,
                |_, w| warned(w, NI)
            ),
            case!(Flow, "admin.timeout.ms", "1", None, |_, w| warned(w, NI)),
            case!(
                Flow,
                "use.incremental.alter.configs",
                "never",
                None,
                |_, w| warned(w, NI)
            ),
            case!(Flow, "add.source.alias.to.metrics", "true", None, |_, w| {
                warned(w, NI)
            }),
        ]
    }

    #[test]
    fn every_key_has_exactly_one_case() {
        let cases = cases();
        for spec in KEYS {
            let n = cases
                .iter()
                .filter(|c| c.scope == spec.scope && c.name == spec.name)
                .count();
            assert_eq!(n, 1, "{:?} {}: {n} cases", spec.scope, spec.name);
        }
        for case in &cases {
            assert!(
                find_key(case.scope, case.name).is_some(),
                "case for unknown key {}",
                case.name
            );
        }
        // A key is listed once per scope.
        for (i, a) in KEYS.iter().enumerate() {
            for b in &KEYS[i + 1..] {
                assert!(
                    !(a.scope == b.scope && a.name == b.name),
                    "{} twice",
                    a.name
                );
            }
        }
    }

    #[test]
    fn each_key_sets_its_setting() {
        for case in cases() {
            let (config, warnings) = props(case.scope, case.name, case.value);
            assert!(
                (case.check)(&config, &warnings),
                "{} = {}: {config:#?} {warnings:#?}",
                case.name,
                case.value
            );
        }
    }

    #[test]
    fn each_key_matches_its_toml_field() {
        for case in cases() {
            let spec = find_key(case.scope, case.name).unwrap();
            let Some(snippet) = case.toml else {
                assert!(
                    spec.toml.is_none() || spec.name == "enabled",
                    "{} has TOML field {:?} but no TOML case",
                    spec.name,
                    spec.toml
                );
                continue;
            };
            let field = spec.toml.expect("a TOML case needs a TOML field");
            assert!(snippet.starts_with(field), "{}: {snippet}", spec.name);
            let (from_props, _) = props(case.scope, case.name, case.value);
            let (from_toml, _) = parse_toml(&toml_text(case.scope, snippet), "strait.toml")
                .unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            assert_eq!(from_props, from_toml, "{}", spec.name);
        }
    }

    #[test]
    fn documented_defaults_are_the_defaults() {
        let (baseline, _) = parse_properties(PROPS_BASE, "mm2.properties").unwrap();
        for spec in KEYS {
            if spec.default.is_empty() || matches!(spec.set, Setter::Parser) {
                continue;
            }
            // `default` is the value; in a .properties file a backslash is written doubled.
            let written = spec.default.replace('\\', "\\\\");
            let (config, warnings) = props(spec.scope, spec.name, &written);
            assert_eq!(config, baseline, "{} = {}", spec.name, spec.default);
            assert!(
                !warned(&warnings, NI),
                "{} = {} warns: {warnings:?}",
                spec.name,
                spec.default
            );
        }
    }

    fn status_text(status: Status) -> String {
        match status {
            Status::Implemented => "implemented".to_string(),
            Status::Hint => "implemented (hint only)".to_string(),
            Status::NotYet => "accepted-with-warning (not implemented yet)".to_string(),
            Status::Unsupported => "accepted-with-warning (unless default)".to_string(),
            Status::Deprecated(instead) => format!("implemented, deprecated: use `{instead}`"),
        }
    }

    /// The key reference table in `docs/configuration.md`, generated from [`KEYS`].
    fn reference_table() -> String {
        let mut out = String::from(
            "| `mm2.properties` key | Written as | TOML field | Default | Status | Meaning |\n\
             |---|---|---|---|---|---|\n",
        );
        for spec in KEYS {
            let written = match spec.scope {
                Global => "top level",
                Cluster => "`<alias>.` or top level",
                Flow => "`A->B.` or top level",
                SourceCluster => "`<source>.`",
                TargetCluster => "`<target>.`",
            };
            let toml = match (spec.toml, spec.scope) {
                (Some(field), Cluster) => format!("`clusters.<alias>.{field}`"),
                (Some(field), _) => format!("`flows[].{field}`"),
                (None, Global) if spec.name == "clusters" => "`[clusters.<alias>]`".to_string(),
                (None, _) => "—".to_string(),
            };
            let default = if spec.default.is_empty() {
                "—".to_string()
            } else {
                format!("`{}`", spec.default)
            };
            out.push_str(&format!(
                "| `{}` | {written} | {toml} | {default} | {} | {} |\n",
                spec.name,
                status_text(spec.status),
                spec.doc
            ));
        }
        out
    }

    #[test]
    fn docs_list_every_key() {
        let docs = include_str!("../../docs/configuration.md");
        let begin = "<!-- keys:begin (generated from src/config/mod.rs KEYS) -->\n";
        let end = "<!-- keys:end -->";
        let start = docs.find(begin).expect("begin marker") + begin.len();
        let stop = docs.find(end).expect("end marker");
        let expected = reference_table();
        assert!(
            docs[start..stop] == expected,
            "docs/configuration.md is out of date; the table should read:\n{expected}"
        );
    }

    #[test]
    fn example_properties_and_toml_give_the_same_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/config");
        let (from_props, warnings) = load(&dir.join("mm2-minimal.properties")).unwrap();
        assert!(warnings.is_empty(), "{warnings:#?}");
        let (from_toml, warnings) = load(&dir.join("minimal.toml")).unwrap();
        assert!(warnings.is_empty(), "{warnings:#?}");
        assert_eq!(from_props, from_toml);

        assert_eq!(from_props.flows.len(), 1);
        let flow = &from_props.flows[0];
        assert_eq!(
            (flow.source.as_str(), flow.target.as_str()),
            ("source", "target")
        );
        assert_eq!(flow.replication_factor, 1);
        assert_eq!(flow.tasks_max, 4);
        assert_eq!(
            flow.sync_group_offsets,
            Interval {
                enabled: true,
                interval_ms: 60_000
            }
        );
        assert_eq!(flow.internal_replication_factor, 3);
        assert!(flow.topics.matches("orders") && !flow.topics.matches("__consumer_offsets"));
        assert_eq!(
            from_props.clusters["target"].bootstrap_servers,
            ["target-broker:9092"]
        );
    }

    #[test]
    fn load_reports_io_and_encoding_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.properties");
        let err = load(&missing).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }));
        assert!(err.to_string().starts_with("cannot read "));
        let bad = dir.path().join("bad.properties");
        std::fs::write(&bad, b"clusters = a\n\xff = 1\n").unwrap();
        assert_eq!(load(&bad).unwrap_err().line(), Some(2));
        // The extension picks the format: this TOML text is not valid properties syntax
        // for strait (no `clusters`), and vice versa.
        let toml_path = dir.path().join("x.TOML");
        std::fs::write(&toml_path, "[clusters.a]\nbootstrap_servers = [\"a:1\"]\n").unwrap();
        assert!(matches!(
            load(&toml_path).unwrap_err(),
            ConfigError::NoFlowEnabled { .. }
        ));
    }

    #[test]
    fn warnings_display_file_line_key() {
        let w = ConfigWarning {
            file: "mm2.properties".into(),
            line: Some(3),
            key: "x".into(),
            kind: WarningKind::UnknownKey,
            message: "unknown key, ignored".into(),
        };
        assert_eq!(w.to_string(), "mm2.properties:3: x: unknown key, ignored");
    }
}
