//! The raw structs both formats parse into ([`RawConfig`], [`RawCluster`], [`RawFlow`]):
//! values typed but not yet checked, each [`Sourced`] with the key and position it came from,
//! so that validation can name the file, line and key of a problem.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::model::{Location, MetricsAggregation, OffsetReset};

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
    /// `log.level` / `log_level`.
    pub log_level: Option<Sourced<String>>,
    /// `metrics.listen` / `metrics_listen`.
    pub metrics_listen: Option<Sourced<String>>,
    /// `runtime.threads` / `runtime_threads`.
    pub runtime_threads: Option<Sourced<i64>>,
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
    pub security_protocol: Option<Sourced<String>>,
    pub ssl_truststore_location: Option<Sourced<String>>,
    pub ssl_truststore_type: Option<Sourced<String>>,
    pub ssl_truststore_certificates: Option<Sourced<String>>,
    pub ssl_truststore_password: Option<Sourced<String>>,
    pub ssl_keystore_location: Option<Sourced<String>>,
    pub ssl_keystore_type: Option<Sourced<String>>,
    pub ssl_keystore_password: Option<Sourced<String>>,
    pub ssl_keystore_certificate_chain: Option<Sourced<String>>,
    pub ssl_keystore_key: Option<Sourced<String>>,
    pub ssl_key_password: Option<Sourced<String>>,
    pub ssl_endpoint_identification_algorithm: Option<Sourced<String>>,
    pub ssl_enabled_protocols: Option<Sourced<Vec<String>>>,
    pub ssl_cipher_suites: Option<Sourced<Vec<String>>>,
    pub sasl_mechanism: Option<Sourced<String>>,
    /// Holds a password: never printed (messages about it name the key only).
    pub sasl_jaas_config: Option<Sourced<String>>,
    pub sasl_login_callback_handler_class: Option<Sourced<String>>,
    pub sasl_oauthbearer_jwt_retriever_class: Option<Sourced<String>>,
    pub sasl_oauthbearer_token_endpoint_url: Option<Sourced<String>>,
    pub sasl_oauthbearer_client_credentials_client_id: Option<Sourced<String>>,
    /// A secret: never printed.
    pub sasl_oauthbearer_client_credentials_client_secret: Option<Sourced<String>>,
    pub sasl_oauthbearer_scope: Option<Sourced<String>>,
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
    pub shutdown_drain_timeout_ms: Option<Sourced<i64>>,
    pub fencing_transactional_id: Option<Sourced<String>>,
    pub takeover_offsets_topic: Option<Sourced<String>>,
    pub takeover_connector_name: Option<Sourced<String>>,
    pub takeover_wait: Option<Sourced<bool>>,
    pub takeover_group: Option<Sourced<String>>,
    pub takeover_handback_continuous: Option<Sourced<bool>>,
    pub scale_out_enabled: Option<Sourced<bool>>,
    pub scale_out_group: Option<Sourced<String>>,
    pub scale_out_instance_id: Option<Sourced<String>>,
    pub scale_out_slots: Option<Sourced<i64>>,
    pub scale_out_session_timeout_ms: Option<Sourced<i64>>,
    pub exactly_once: Option<Sourced<bool>>,
    pub exactly_once_transaction_interval_ms: Option<Sourced<i64>>,
    pub offset_reset: Option<Sourced<OffsetReset>>,
    pub metrics_aggregation: Option<Sourced<MetricsAggregation>>,
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
    pub produce_connections_per_broker: Option<Sourced<i64>>,
    pub produce_linger_ms: Option<Sourced<i64>>,
    pub produce_max_request_bytes: Option<Sourced<i64>>,
    pub buffer_bytes: Option<Sourced<i64>>,
    pub produce_coalesce_bytes: Option<Sourced<i64>>,
    pub produce_delivery_timeout_ms: Option<Sourced<i64>>,
}
