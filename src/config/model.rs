//! The typed, validated model every other module reads: [`Config`] with its clusters
//! ([`ClusterConfig`]) and flows ([`FlowConfig`]), the small value types and enums they use
//! ([`Interval`], [`OffsetReset`], [`Location`]) and the [`defaults`] in the model's units.
//! Only [`validate`](super::validate) builds it.

use std::collections::BTreeMap;

use regex::Regex;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use crate::filter::{GroupFilter, TopicFilter};
use crate::policy::ReplicationPolicy;

/// Everything strait needs to run: the clusters and the replication flows between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Clusters by alias: every cluster an enabled flow uses, plus declared clusters that have
    /// bootstrap servers.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Enabled flows, in file order (`mm2.properties`: in the order of `clusters`, source
    /// major). Never empty.
    pub flows: Vec<FlowConfig>,
    /// The log filter (`log.level`, tracing `EnvFilter` syntax), checked. Default `info`.
    pub log_level: String,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (`metrics.listen`); `None`: not
    /// served.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Threads the runtime runs tasks on (`runtime.threads`): 1, the default, runs them all
    /// on one.
    pub runtime_threads: usize,
}

impl Config {
    /// The flows that write to one of `targets` (MM2's `--clusters A B`, how one process per
    /// data centre drives only the flows into it); all of them when `targets` is empty. An
    /// alias the file does not declare, or none of whose flows is enabled, is an error.
    pub fn writing_to(mut self, targets: &[String]) -> Result<Config, String> {
        if targets.is_empty() {
            return Ok(self);
        }
        if let Some(unknown) = targets.iter().find(|t| !self.clusters.contains_key(*t)) {
            let known: Vec<&str> = self.clusters.keys().map(String::as_str).collect();
            return Err(format!(
                "--clusters {unknown}: no such cluster in the config file (it has {})",
                known.join(", ")
            ));
        }
        self.flows.retain(|f| targets.contains(&f.target));
        if self.flows.is_empty() {
            return Err(format!(
                "--clusters {}: no enabled flow writes to {}",
                targets.join(" "),
                if targets.len() == 1 {
                    "it"
                } else {
                    "any of them"
                }
            ));
        }
        Ok(self)
    }
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
    /// TLS for every connection to this cluster (`security.protocol = SSL`); `None`:
    /// PLAINTEXT.
    pub tls: Option<TlsConfig>,
    /// SASL authentication of every connection to this cluster (`security.protocol =
    /// SASL_PLAINTEXT` or `SASL_SSL`); `None`: none.
    pub sasl: Option<SaslConfig>,
}

/// Who strait authenticates as, and how (`sasl.mechanism`, `sasl.jaas.config`, and for
/// OAUTHBEARER the `sasl.oauthbearer.*` keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub credentials: SaslCredentials,
}

/// What strait proves its identity with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslCredentials {
    /// PLAIN and SCRAM: a user name and its password.
    Password {
        username: String,
        password: Secret<String>,
    },
    /// OAUTHBEARER: a bearer token, and the SASL extensions sent with it (the login
    /// module's `extension_<name>` options).
    Token {
        source: TokenSource,
        extensions: BTreeMap<String, String>,
    },
}

/// Where OAUTHBEARER tokens come from (`sasl.oauthbearer.token.endpoint.url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `file://<path>`: the file holds the token (a JWT), read again whenever strait needs one.
    File(std::path::PathBuf),
    /// `https://...` (or `http://`): the OAuth 2 client credentials grant (RFC 6749 4.4).
    ClientCredentials {
        url: String,
        client_id: String,
        client_secret: Secret<String>,
        /// `sasl.oauthbearer.scope`; `None`: no scope parameter.
        scope: Option<String>,
    },
}

/// A SASL mechanism strait speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    /// The mechanism's name on the wire and in `sasl.mechanism`.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// How connections to a cluster are encrypted and whom they trust (MM2's `ssl.*` keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// CA certificates a broker's certificate must chain to; `None`: the public CA roots
    /// built into strait (so a `FROM scratch` image needs no certificate files).
    pub trusted: Option<Vec<CertificateDer<'static>>>,
    /// strait's own certificate chain and key, for listeners with `ssl.client.auth =
    /// required`.
    pub identity: Option<Identity>,
    /// Whether a broker's certificate must be valid for the host strait dialled
    /// (`ssl.endpoint.identification.algorithm = https`, the default).
    pub verify_hostname: bool,
    /// The TLS versions strait offers (`ssl.enabled.protocols`), never empty.
    pub versions: Vec<TlsVersion>,
    /// The cipher suites strait offers, by IANA name, each one of [`TLS_CIPHER_SUITES`]
    /// (`ssl.cipher.suites`); empty: all of them.
    pub cipher_suites: Vec<String>,
}

/// The cipher suites strait's TLS has, by IANA name (as Java and `ssl.cipher.suites` write
/// them): AEAD with forward secrecy only.
pub const TLS_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_256_GCM_SHA384",
    "TLS_AES_128_GCM_SHA256",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// A TLS version strait can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// strait's client certificate (leaf first) and its private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Secret<PrivateKeyDer<'static>>,
}

/// A value that must never be printed: its `Debug` says only that it is there. There is no
/// `Display`; code that needs the value asks [`Secret::expose`].
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Self {
        Secret(value)
    }

    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

impl Clone for Secret<PrivateKeyDer<'static>> {
    fn clone(&self) -> Self {
        Secret(self.0.clone_key())
    }
}

impl PartialEq for Secret<PrivateKeyDer<'static>> {
    fn eq(&self, other: &Self) -> bool {
        self.0.secret_der() == other.0.secret_der()
    }
}

impl Eq for Secret<PrivateKeyDer<'static>> {}

impl Clone for Secret<String> {
    fn clone(&self) -> Self {
        Secret(self.0.clone())
    }
}

impl PartialEq for Secret<String> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Secret<String> {}

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

/// What a flow's per-partition series are reported per (`metrics.aggregation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsAggregation {
    /// A series per partition, as MM2's.
    #[default]
    Partition,
    /// A series per topic, the partitions' figures combined: bounds the series of flows
    /// with many partitions.
    Topic,
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

/// Where MirrorMaker 2 keeps a flow's source positions (Kafka Connect's offsets topic on the
/// target, see `mm2::source_offsets`), and whether to wait for MM2 to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The offsets topic; `None` (set empty): take-over off.
    pub offsets_topic: Option<String>,
    /// The connector name the positions are keyed under.
    pub connector: String,
    /// The Connect group MM2 runs the flow in, on the target; `None` (set empty): no check.
    pub group: Option<String>,
    /// Wait while MM2 runs the flow instead of refusing to start.
    pub wait: bool,
    /// Keep the offsets topic at strait's committed positions while it runs.
    pub continuous_handback: bool,
}

/// Scale-out: the processes of a flow share its work through a group on the target
/// (`crate::group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleOut {
    /// Off: this process replicates the whole flow alone.
    pub enabled: bool,
    /// The group's id (`<source>` and `<target>` replaced by the aliases).
    pub group: String,
    /// `group.instance.id` (static membership); `None`: dynamic.
    pub instance_id: Option<String>,
    /// The fixed number of work units the flow's partitions are split into.
    pub slots: u32,
    pub session_timeout_ms: u64,
}

/// Exactly-once: each commit interval's records and the progress records of the positions
/// they reach go to the target in one transaction (`crate::produce::transaction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactlyOnce {
    /// `exactly.once`, or MM2's `exactly.once.source.support = enabled`.
    pub enabled: bool,
    /// How often the open transaction is committed, in milliseconds: how much later than
    /// at-least-once a read_committed reader of the target sees a record, at most.
    pub transaction_interval_ms: u64,
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
    /// How long a stopping flow waits for the target to acknowledge its batches in flight
    /// before it commits what was acknowledged (the rest is fetched again on the next
    /// start), in milliseconds. Default 30000.
    pub shutdown_drain_timeout_ms: u64,
    /// The transactional id that fences other writers of this flow
    /// (`fencing.transactional.id`, `<source>` and `<target>` replaced by the aliases,
    /// `<topics>` by `TopicFilter::fingerprint`); `None` when set empty. Default
    /// `strait-<source>-><target>-<topics>`.
    pub fencing_transactional_id: Option<String>,
    /// Taking the flow over from MirrorMaker 2, and handing it back.
    pub takeover: Takeover,
    /// Sharing the flow with other processes (`scale.out.*`).
    pub scale_out: ScaleOut,
    /// Exactly-once mode (`exactly.once.*`).
    pub exactly_once: ExactlyOnce,
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
    /// Produce requests in flight per target partition, 1..=64 (idempotence keeps order at
    /// any depth; past 5 the target log tells which resends it holds). Default (`None`):
    /// sized from the round trip to each target broker, 5 near, up to 64 far.
    pub produce_max_in_flight: Option<usize>,
    /// Connections to each target broker, 1..=16: a broker serves one connection's requests
    /// one at a time, so several let it append to several partitions at once. Default 2.
    pub produce_connections_per_broker: usize,
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
    /// How long a batch the target keeps refusing with a retriable error is resent before
    /// its partition is stopped, in milliseconds. Default 120000 (the Java producer's
    /// `delivery.timeout.ms`).
    pub produce_delivery_timeout_ms: u64,
    /// Per partition or per topic series. Default `Partition`.
    pub metrics_aggregation: MetricsAggregation,
}

impl PartialEq for FlowConfig {
    /// Field-by-field equality; regexes compare by pattern text.
    fn eq(&self, other: &Self) -> bool {
        self.differences(other).is_empty()
    }
}

impl FlowConfig {
    /// The settings that differ between `self` and `other`, by their key (the
    /// `mm2.properties` name, or `source`/`target`).
    pub fn differences(&self, other: &FlowConfig) -> Vec<&'static str> {
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
            shutdown_drain_timeout_ms,
            fencing_transactional_id,
            takeover,
            scale_out,
            exactly_once,
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
            produce_connections_per_broker,
            produce_linger_ms,
            produce_max_request_bytes,
            buffer_bytes,
            produce_coalesce_bytes,
            produce_delivery_timeout_ms,
            metrics_aggregation,
        } = self;
        let patterns = |r: &[Regex]| r.iter().map(|r| r.as_str().to_string()).collect::<Vec<_>>();
        [
            ("source", *source == other.source),
            ("target", *target == other.target),
            ("topics", *topics == other.topics),
            ("groups", *groups == other.groups),
            ("replication.policy.*", *policy == other.policy),
            (
                "replication.factor",
                *replication_factor == other.replication_factor,
            ),
            (
                "internal.topic.replication.factor",
                *internal_replication_factor == other.internal_replication_factor,
            ),
            (
                "refresh.topics.interval.seconds",
                *refresh_topics_interval_ms == other.refresh_topics_interval_ms,
            ),
            (
                "progress.commit.interval.ms",
                *progress_commit_interval_ms == other.progress_commit_interval_ms,
            ),
            (
                "shutdown.drain.timeout.ms",
                *shutdown_drain_timeout_ms == other.shutdown_drain_timeout_ms,
            ),
            (
                "fencing.transactional.id",
                *fencing_transactional_id == other.fencing_transactional_id,
            ),
            ("takeover.*", *takeover == other.takeover),
            ("scale.out.*", *scale_out == other.scale_out),
            ("exactly.once.*", *exactly_once == other.exactly_once),
            ("offset.reset", *offset_reset == other.offset_reset),
            ("tasks.max", *tasks_max == other.tasks_max),
            (
                "emit.heartbeats.*",
                *emit_heartbeats == other.emit_heartbeats,
            ),
            (
                "emit.checkpoints.*",
                *emit_checkpoints == other.emit_checkpoints,
            ),
            (
                "sync.group.offsets.*",
                *sync_group_offsets == other.sync_group_offsets,
            ),
            (
                "sync.topic.configs.*",
                *sync_topic_configs == other.sync_topic_configs,
            ),
            (
                "sync.topic.acls.*",
                *sync_topic_acls == other.sync_topic_acls,
            ),
            (
                "offset-syncs.topic.location",
                *offset_syncs_location == other.offset_syncs_location,
            ),
            ("offset.lag.max", *offset_lag_max == other.offset_lag_max),
            (
                "config.properties.exclude",
                patterns(config_properties_exclude) == patterns(&other.config_properties_exclude),
            ),
            ("fetch.max.bytes", *fetch_max_bytes == other.fetch_max_bytes),
            (
                "fetch.partition.max.bytes",
                *fetch_partition_max_bytes == other.fetch_partition_max_bytes,
            ),
            (
                "fetch.max.wait.ms",
                *fetch_max_wait_ms == other.fetch_max_wait_ms,
            ),
            (
                "produce.max.in.flight",
                *produce_max_in_flight == other.produce_max_in_flight,
            ),
            (
                "produce.connections.per.broker",
                *produce_connections_per_broker == other.produce_connections_per_broker,
            ),
            (
                "produce.linger.ms",
                *produce_linger_ms == other.produce_linger_ms,
            ),
            (
                "produce.max.request.bytes",
                *produce_max_request_bytes == other.produce_max_request_bytes,
            ),
            ("buffer.bytes", *buffer_bytes == other.buffer_bytes),
            (
                "produce.coalesce.bytes",
                *produce_coalesce_bytes == other.produce_coalesce_bytes,
            ),
            (
                "produce.delivery.timeout.ms",
                *produce_delivery_timeout_ms == other.produce_delivery_timeout_ms,
            ),
            (
                "metrics.aggregation",
                *metrics_aggregation == other.metrics_aggregation,
            ),
        ]
        .into_iter()
        .filter(|(_, same)| !same)
        .map(|(key, _)| key)
        .collect()
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
    /// `shutdown.drain.timeout.ms` (strait).
    pub const SHUTDOWN_DRAIN_TIMEOUT_MS: u64 = 30_000;
    /// `fencing.transactional.id` (strait), with the flow's aliases and topic filter put in.
    pub const FENCING_TRANSACTIONAL_ID: &str = "strait-<source>-><target>-<topics>";
    /// `takeover.offsets.topic`: MM2's offsets topic in dedicated mode.
    pub const TAKEOVER_OFFSETS_TOPIC: &str = "mm2-offsets.<source>.internal";
    /// `takeover.group`: MM2's Connect group in dedicated mode.
    pub const TAKEOVER_GROUP: &str = "<source>-mm2";
    /// `takeover.connector.name`: MM2's source connector in dedicated mode.
    pub const TAKEOVER_CONNECTOR_NAME: &str = "MirrorSourceConnector";
    /// `scale.out.group`.
    pub const SCALE_OUT_GROUP: &str = "strait-<source>-><target>";
    /// `scale.out.slots`.
    pub const SCALE_OUT_SLOTS: u32 = 64;
    /// `scale.out.session.timeout.ms`.
    pub const SCALE_OUT_SESSION_TIMEOUT_MS: u64 = 10_000;
    /// `exactly.once.transaction.interval.ms`.
    pub const EXACTLY_ONCE_TRANSACTION_INTERVAL_MS: u64 = 500;
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
    /// Connections per target broker (strait's own; the Java producer keeps one).
    pub const PRODUCE_CONNECTIONS_PER_BROKER: usize = 2;
    /// Produce linger (the Java producer's `linger.ms`; strait keeps 0).
    pub const PRODUCE_LINGER_MS: u64 = 0;
    /// Produce request size bound (the Java producer's `max.request.size`).
    pub const PRODUCE_MAX_REQUEST_BYTES: usize = 1_048_576;
    /// Fetched bytes waiting for the target, per flow (strait's own).
    pub const BUFFER_BYTES: usize = 33_554_432;
    /// Coalescing of small batches: off (strait's own).
    pub const PRODUCE_COALESCE_BYTES: usize = 0;
    /// How long a refused batch is resent (the Java producer's `delivery.timeout.ms`).
    pub const PRODUCE_DELIVERY_TIMEOUT_MS: u64 = 120_000;
}
