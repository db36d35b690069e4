//! The `mm2.properties` key table [`KEYS`]: for every key strait knows, its scope, TOML
//! counterpart, default, status, documentation and the setter that stores its value into the
//! raw structs, plus the value parsers those setters share. The key reference table in
//! `docs/configuration.md` is generated from it (and checked by its tests).

use super::model::{Location, MetricsAggregation, OffsetReset};
use super::raw::{Origin, PolicyKind, RawCluster, RawFlow, Sourced};

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

/// Connect's `exactly.once.source.support`: `enabled`, or `preparing`/`disabled` (off).
fn parse_exactly_once_support(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "enabled" => Ok(true),
        "preparing" | "disabled" => Ok(false),
        _ => Err(format!(
            "expected enabled, preparing or disabled, got `{v}`"
        )),
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

fn parse_metrics_aggregation(v: &str) -> Result<MetricsAggregation, String> {
    match v.to_ascii_lowercase().as_str() {
        "partition" => Ok(MetricsAggregation::Partition),
        "topic" => Ok(MetricsAggregation::Topic),
        _ => Err(format!(
            "unsupported metrics aggregation `{v}`: strait reports per `partition` or per `topic`"
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
    KeySpec::new("config.providers", Global, "", Setter::Parser).doc(
        "Names of config providers (`file, env, directory`), each with \
             `config.providers.<name>.class` = Kafka's FileConfigProvider, EnvVarConfigProvider \
             or DirectoryConfigProvider; `${<name>:[<path>:]<key>}` in any value is replaced \
             by what it finds (`mm2.properties` only).",
    ),
    KeySpec::new(
        "log.level",
        Global,
        "info",
        Setter::Check(super::validate::check_log_level),
    )
    .toml("log_level")
    .strait()
    .doc(
        "What strait logs: a level (`error`, `warn`, `info`, `debug`, `trace`) or a \
             tracing filter (`info,strait::fetch=debug`). A SIGHUP applies a new value at \
             once. `--log-level` or the `STRAIT_LOG` variable, when given, win over it.",
    ),
    KeySpec::new(
        "metrics.listen",
        Global,
        "",
        Setter::Check(super::validate::check_listen),
    )
    .toml("metrics_listen")
    .strait()
    .doc(
        "Serve `/metrics` (Prometheus), `/healthz` and `/readyz` over HTTP on this address \
             (`0.0.0.0:9404`); off unless set. `strait run --metrics-listen` wins over it.",
    ),
    KeySpec::new("runtime.threads", Global, "", CHECK_INT)
        .toml("runtime_threads")
        .strait()
        .doc(
            "Threads strait runs its work on, 1 to 64; by default 1, or 2 when a cluster is \
             reached over TLS. With 1 every connection and engine shares one thread (decoding \
             fetched data runs beside it, on threads of its own): a forwarder waits far more \
             than it computes, and one thread spares the wake-ups and hand-offs between \
             threads, about a sixth less CPU at the same rate. TLS encrypts and decrypts on \
             the connections, and a second thread moved 12-15 % more over TLS at the same CPU \
             per byte (docs/benchmarks.md). More for many busy flows.",
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
    KeySpec::new(
        "security.protocol",
        Cluster,
        "PLAINTEXT",
        cluster!(security_protocol, parse_string),
    )
    .toml("security_protocol")
    .doc(
        "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT (SASL without TLS) or SASL_SSL (SASL inside \
             TLS).",
    ),
    KeySpec::new(
        "ssl.truststore.location",
        Cluster,
        "",
        cluster!(ssl_truststore_location, parse_string),
    )
    .toml("ssl_truststore_location")
    .doc(
        "PEM file or PKCS12 store of the CA certificates a broker's certificate must chain \
             to. Neither this nor `ssl.truststore.certificates`: the public CA roots built \
             into strait.",
    ),
    KeySpec::new(
        "ssl.truststore.type",
        Cluster,
        "JKS",
        cluster!(ssl_truststore_type, parse_string),
    )
    .toml("ssl_truststore_type")
    .doc(
        "PEM, PKCS12 or JKS. strait goes by the file's content: PEM, or PKCS12 (which Java's \
             JKS type reads too); a store in the old JKS format is an error that gives the \
             keytool command converting it to PKCS12.",
    ),
    KeySpec::new(
        "ssl.truststore.password",
        Cluster,
        "",
        cluster!(ssl_truststore_password, parse_string),
    )
    .toml("ssl_truststore_password")
    .doc("Password of a PKCS12 truststore; not used for PEM. Never printed."),
    KeySpec::new(
        "ssl.truststore.certificates",
        Cluster,
        "",
        cluster!(ssl_truststore_certificates, parse_string),
    )
    .toml("ssl_truststore_certificates")
    .doc("The trusted CA certificates inline, in PEM."),
    KeySpec::new(
        "ssl.keystore.location",
        Cluster,
        "",
        cluster!(ssl_keystore_location, parse_string),
    )
    .toml("ssl_keystore_location")
    .doc(
        "PEM file with strait's private key (PKCS#8, PKCS#1 or SEC1) and certificate chain, \
             or a PKCS12 store, for listeners that require client certificates (mutual TLS).",
    ),
    KeySpec::new(
        "ssl.keystore.type",
        Cluster,
        "JKS",
        cluster!(ssl_keystore_type, parse_string),
    )
    .toml("ssl_keystore_type")
    .doc("PEM, PKCS12 or JKS, as `ssl.truststore.type`."),
    KeySpec::new(
        "ssl.keystore.password",
        Cluster,
        "",
        cluster!(ssl_keystore_password, parse_string),
    )
    .toml("ssl_keystore_password")
    .doc("Password of a PKCS12 keystore (its key opens with it too); not used for PEM."),
    KeySpec::new(
        "ssl.keystore.certificate.chain",
        Cluster,
        "",
        cluster!(ssl_keystore_certificate_chain, parse_string),
    )
    .toml("ssl_keystore_certificate_chain")
    .doc("strait's certificate chain inline, in PEM, leaf first (with `ssl.keystore.key`)."),
    KeySpec::new(
        "ssl.keystore.key",
        Cluster,
        "",
        cluster!(ssl_keystore_key, parse_string),
    )
    .toml("ssl_keystore_key")
    .doc("strait's private key inline, in PEM (with `ssl.keystore.certificate.chain`)."),
    KeySpec::new(
        "ssl.key.password",
        Cluster,
        "",
        cluster!(ssl_key_password, parse_string),
    )
    .toml("ssl_key_password")
    .doc(
        "Password of an encrypted private key. strait reads unencrypted keys only: an \
             encrypted one is an error that says how to decrypt it.",
    ),
    KeySpec::new(
        "ssl.endpoint.identification.algorithm",
        Cluster,
        "https",
        cluster!(ssl_endpoint_identification_algorithm, parse_string),
    )
    .toml("ssl_endpoint_identification_algorithm")
    .doc(
        "`https`: a broker's certificate must be valid for the host strait dialled. Empty: \
             any host (the chain is still checked), with a warning.",
    ),
    KeySpec::new(
        "ssl.enabled.protocols",
        Cluster,
        "TLSv1.2, TLSv1.3",
        cluster!(ssl_enabled_protocols, parse_list_ok),
    )
    .toml("ssl_enabled_protocols")
    .doc("Comma-separated TLS versions strait offers: TLSv1.2 and/or TLSv1.3."),
    KeySpec::new(
        "ssl.cipher.suites",
        Cluster,
        "",
        cluster!(ssl_cipher_suites, parse_list_ok),
    )
    .toml("ssl_cipher_suites")
    .doc(
        "Comma-separated cipher suites strait offers, by IANA name; empty: all it has \
             (AES-GCM and ChaCha20-Poly1305 with ECDHE). A suite it lacks (CBC, RSA key \
             exchange) is an error naming it.",
    ),
    KeySpec::new(
        "sasl.mechanism",
        Cluster,
        "GSSAPI",
        cluster!(sasl_mechanism, parse_string),
    )
    .toml("sasl_mechanism")
    .doc(
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER. GSSAPI (Kafka's default) is \
             refused: strait does not speak Kerberos.",
    ),
    KeySpec::new(
        "sasl.jaas.config",
        Cluster,
        "",
        cluster!(sasl_jaas_config, parse_string),
    )
    .toml("sasl_jaas_config")
    .doc(
        "The login module and its options, as Kafka reads them: `...PlainLoginModule \
             required username=\"u\" password=\"p\";` for PLAIN, `...ScramLoginModule ...` \
             for SCRAM, `...OAuthBearerLoginModule required;` for OAUTHBEARER (its \
             `clientId`, `clientSecret`, `scope` and `extension_<name>` options are read). \
             Never printed.",
    ),
    KeySpec::new(
        "sasl.oauthbearer.token.endpoint.url",
        Cluster,
        "",
        cluster!(sasl_oauthbearer_token_endpoint_url, parse_string),
    )
    .toml("sasl_oauthbearer_token_endpoint_url")
    .doc(
        "OAUTHBEARER: where tokens come from. `https://...`: the OAuth client credentials \
             grant against this token endpoint (trusting the cluster's `ssl.truststore`, or \
             the built-in public roots); `file:///path`: a file holding the token, read again \
             at each login. A token is renewed when 80 % of its life has passed.",
    ),
    KeySpec::new(
        "sasl.oauthbearer.client.credentials.client.id",
        Cluster,
        "",
        cluster!(sasl_oauthbearer_client_credentials_client_id, parse_string),
    )
    .toml("sasl_oauthbearer_client_credentials_client_id")
    .doc("OAUTHBEARER: the client id for the token endpoint (or the login module's `clientId`)."),
    KeySpec::new(
        "sasl.oauthbearer.client.credentials.client.secret",
        Cluster,
        "",
        cluster!(
            sasl_oauthbearer_client_credentials_client_secret,
            parse_string
        ),
    )
    .toml("sasl_oauthbearer_client_credentials_client_secret")
    .doc(
        "OAUTHBEARER: the client secret for the token endpoint (or the login module's \
             `clientSecret`). Never printed.",
    ),
    KeySpec::new(
        "sasl.oauthbearer.scope",
        Cluster,
        "",
        cluster!(sasl_oauthbearer_scope, parse_string),
    )
    .toml("sasl_oauthbearer_scope")
    .doc("OAUTHBEARER: the scope asked of the token endpoint (or the login module's `scope`)."),
    KeySpec::new(
        "sasl.login.callback.handler.class",
        Cluster,
        "",
        cluster!(sasl_login_callback_handler_class, parse_string),
    )
    .toml("sasl_login_callback_handler_class")
    .doc(
        "Accepted as Kafka's clients need it for OAUTHBEARER: \
             `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler`. \
             Any other class is an error: strait cannot run Java code.",
    ),
    KeySpec::new(
        "sasl.oauthbearer.jwt.retriever.class",
        Cluster,
        "",
        cluster!(sasl_oauthbearer_jwt_retriever_class, parse_string),
    )
    .toml("sasl_oauthbearer_jwt_retriever_class")
    .doc(
        "Accepted when it names what `sasl.oauthbearer.token.endpoint.url` does \
             (`...ClientCredentialsJwtRetriever`, `...FileJwtRetriever`, \
             `...DefaultJwtRetriever`); the JWT bearer grant is an error.",
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
             duplicates after a crash. A position is committed once the offset syncs it \
             depends on are written, too.",
    ),
    KeySpec::new(
        "shutdown.drain.timeout.ms",
        Flow,
        "30000",
        flow!(shutdown_drain_timeout_ms, parse_int),
    )
    .toml("shutdown_drain_timeout_ms")
    .strait()
    .doc(
        "How long a stopping flow waits for the target to acknowledge the batches in \
             flight before it commits what was acknowledged (and whose offset syncs are \
             written: it waits up to half of it for them), in milliseconds; the rest is \
             fetched again on the next start.",
    ),
    KeySpec::new(
        "fencing.transactional.id",
        Flow,
        "strait-<source>-><target>-<topics>",
        flow!(fencing_transactional_id, parse_string),
    )
    .toml("fencing_transactional_id")
    .strait()
    .doc(
        "The transactional id strait's producer registers on the target (no transaction \
             is begun with it): a second strait process on the same flow and topic filter \
             fences the first, which stops with an error instead of writing everything \
             twice. `<source>` and `<target>` stand for the aliases, `<topics>` for 8 hex \
             digits that identify the flow's `topics` and `topics.exclude` (processes that \
             split the topics between them do not fence each other); empty turns fencing off.",
    ),
    KeySpec::new(
        "takeover.offsets.topic",
        Flow,
        "mm2-offsets.<source>.internal",
        flow!(takeover_offsets_topic, parse_string),
    )
    .toml("takeover_offsets_topic")
    .strait()
    .doc(
        "Kafka Connect's offsets topic on the target where MirrorMaker 2 keeps the \
             flow's source positions: on a first start strait resumes each partition after \
             the last offset MM2 committed there (no re-copy), and `strait handback` writes \
             strait's positions into it for MM2. `<source>`/`<target>` stand for the \
             aliases; empty turns take-over off. Strimzi names it in the resource.",
    ),
    KeySpec::new(
        "takeover.connector.name",
        Flow,
        "MirrorSourceConnector",
        flow!(takeover_connector_name, parse_string),
    )
    .toml("takeover_connector_name")
    .strait()
    .doc(
        "The connector name MM2's positions are keyed under in its offsets topic: \
             `MirrorSourceConnector` in dedicated mode, \
             `<source>-><target>.MirrorSourceConnector` under Strimzi.",
    ),
    KeySpec::new(
        "takeover.group",
        Flow,
        "<source>-mm2",
        flow!(takeover_group, parse_string),
    )
    .toml("takeover_group")
    .strait()
    .doc(
        "The Kafka Connect group on the target MM2 runs the flow in: while it has members \
             strait does not start the flow (see `takeover.wait`) and `strait handback` \
             refuses. `<source>-mm2` in dedicated mode; under Strimzi the resource's \
             `group.id`. Empty: no check.",
    ),
    KeySpec::new(
        "takeover.wait",
        Flow,
        "false",
        flow!(takeover_wait, parse_bool),
    )
    .toml("takeover_wait")
    .strait()
    .doc(
        "While MM2 still runs the flow (its Connect group `<source>-mm2` on the target \
             has members) strait refuses to start; true: it waits until MM2 is gone, then \
             takes over (`strait run --takeover`).",
    ),
    KeySpec::new(
        "exactly.once",
        Flow,
        "false",
        flow!(exactly_once, parse_bool),
    )
    .toml("exactly_once")
    .strait()
    .doc(
        "Exactly-once: each transaction interval's records and the progress records of \
             the positions they reach go to the target in one transaction under \
             `fencing.transactional.id` (with scale-out, one per slot under \
             `<fencing.transactional.id>-slot-<n>`), so that a read_committed reader of the \
             target sees every source record once, across crashes and restarts. Each \
             transaction takes one target offset per partition written (its commit marker). \
             See docs/scaling.md.",
    ),
    KeySpec::new(
        "exactly.once.source.support",
        Flow,
        "disabled",
        flow!(exactly_once, parse_exactly_once_support),
    )
    .toml("exactly_once")
    .doc(
        "MirrorMaker 2's worker switch, read as `exactly.once`: `enabled` turns it on, \
             `preparing` and `disabled` leave it off; `exactly.once` wins if both are set.",
    ),
    KeySpec::new(
        "exactly.once.source.support",
        TargetCluster,
        "disabled",
        flow!(exactly_once, parse_exactly_once_support),
    )
    .toml("exactly_once")
    .doc(
        "`<target>.exactly.once.source.support`, where MM2 reads it (the Connect worker of \
             flows into `<target>`).",
    ),
    KeySpec::new(
        "exactly.once.transaction.interval.ms",
        Flow,
        "500",
        flow!(exactly_once_transaction_interval_ms, parse_int),
    )
    .toml("exactly_once_transaction_interval_ms")
    .strait()
    .doc(
        "How often the open transaction is committed in exactly-once mode, in \
             milliseconds (10..30000): a read_committed reader of the target sees a record \
             up to this much later; progress is committed with every transaction \
             (`progress.commit.interval.ms` is not used).",
    ),
    KeySpec::new(
        "scale.out.enabled",
        Flow,
        "false",
        flow!(scale_out_enabled, parse_bool),
    )
    .toml("scale_out_enabled")
    .strait()
    .doc(
        "Share the flow with every other strait process started with it: they join one \
             group on the target (`scale.out.group`) and Kafka's group coordinator splits \
             the flow's slots among them; a process that dies or stops hands its slots to \
             the others. Off: this process replicates the whole flow, and \
             `fencing.transactional.id` keeps a second one from writing too. See \
             docs/scaling.md.",
    ),
    KeySpec::new(
        "scale.out.group",
        Flow,
        "strait-<source>-><target>",
        flow!(scale_out_group, parse_string),
    )
    .toml("scale_out_group")
    .strait()
    .doc(
        "The group id the flow's processes join on the target (protocol type `strait`); \
             `<source>`/`<target>` stand for the aliases.",
    ),
    KeySpec::new(
        "scale.out.instance.id",
        Flow,
        "",
        flow!(scale_out_instance_id, parse_string),
    )
    .toml("scale_out_instance_id")
    .strait()
    .doc(
        "Kafka's `group.instance.id` (static membership): a process restarted with the \
             same id within the session timeout gets its slots back with no rebalance (a \
             StatefulSet's pod name). Unique per process; empty: dynamic membership.",
    ),
    KeySpec::new(
        "scale.out.slots",
        Flow,
        "64",
        flow!(scale_out_slots, parse_int),
    )
    .toml("scale_out_slots")
    .strait()
    .doc(
        "The fixed number of work units (1-4096) the flow's partitions fall into (a \
             partition's slot never changes as topics and partitions are added): at most \
             this many processes get work. Equal on every process of the group.",
    ),
    KeySpec::new(
        "scale.out.session.timeout.ms",
        Flow,
        "10000",
        flow!(scale_out_session_timeout_ms, parse_int),
    )
    .toml("scale_out_session_timeout_ms")
    .strait()
    .doc(
        "How long the group waits for a silent process before giving its slots to the \
             others (within the brokers' `group.min.session.timeout.ms` and \
             `group.max.session.timeout.ms`); a process that cannot reach the group \
             coordinator for two thirds of it stops its slots itself.",
    ),
    KeySpec::new(
        "takeover.handback.continuous",
        Flow,
        "false",
        flow!(takeover_handback_continuous, parse_bool),
    )
    .toml("takeover_handback_continuous")
    .strait()
    .doc(
        "Keep MM2's offsets topic at strait's committed positions while strait runs (as \
             `strait handback` writes them, at most once per progress commit interval), so \
             that a rollback to MM2 needs no extra step.",
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
        "",
        flow!(produce_max_in_flight, parse_int),
    )
    .toml("produce_max_in_flight")
    .strait()
    .doc(
        "Produce requests in flight per target partition (and at least per target broker), \
             1 to 64. Unset (the default), strait sizes it from the shortest recent round trip \
             to each target broker: one request per 3 ms of it, at least 5 (a near broker) and \
             at most 64 (a round trip of 100 ms gets 34). The broker recognises a resend among \
             a producer's last 5 batches; past 5, a resend it no longer recognises makes \
             strait read the target partition back to learn which batches it holds, so none \
             is written twice either way. Set, it is that many whatever the round trip.",
    ),
    KeySpec::new(
        "produce.connections.per.broker",
        Flow,
        "2",
        flow!(produce_connections_per_broker, parse_int),
    )
    .toml("produce_connections_per_broker")
    .strait()
    .doc(
        "Connections to each target broker, 1 to 16. A broker serves the requests of one \
             connection one at a time, so over a single connection it appends to one partition \
             after another; with several it appends to the partitions of each at once. A \
             partition's requests all go over the same connection, so their order is kept. The \
             Java producer keeps one (MM2 gets more from its tasks, each a producer of its \
             own).",
    ),
    KeySpec::new(
        "producer.max.in.flight.requests.per.connection",
        Flow,
        "",
        flow!(produce_max_in_flight, parse_int),
    )
    .toml("produce_max_in_flight")
    .doc("MM2 producer name of `produce.max.in.flight`."),
    KeySpec::new(
        "producer.max.in.flight.requests.per.connection",
        TargetCluster,
        "",
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
        "produce.delivery.timeout.ms",
        Flow,
        "120000",
        flow!(produce_delivery_timeout_ms, parse_int),
    )
    .toml("produce_delivery_timeout_ms")
    .strait()
    .doc(
        "How long a batch the target keeps refusing with a retriable error (NOT_ENOUGH_REPLICAS, \
             CORRUPT_MESSAGE, UNKNOWN_SERVER_ERROR, ...) is resent, from its first send, in \
             milliseconds; then its partition stops with an error naming the partition, the \
             error code and the source offset. Nothing is lost: a restart resumes there.",
    ),
    KeySpec::new(
        "producer.delivery.timeout.ms",
        Flow,
        "120000",
        flow!(produce_delivery_timeout_ms, parse_int),
    )
    .toml("produce_delivery_timeout_ms")
    .doc("MM2 producer name of `produce.delivery.timeout.ms`."),
    KeySpec::new(
        "producer.delivery.timeout.ms",
        TargetCluster,
        "120000",
        flow!(produce_delivery_timeout_ms, parse_int),
    )
    .toml("produce_delivery_timeout_ms")
    .doc("`<target>.producer.delivery.timeout.ms`: for flows writing `<target>`."),
    KeySpec::new(
        "metrics.aggregation",
        Flow,
        "partition",
        flow!(metrics_aggregation, parse_metrics_aggregation),
    )
    .toml("metrics_aggregation")
    .strait()
    .doc(
        "What the flow's per-partition series (MM2's source connector series, \
             `kafka_consumer_fetch_manager_records_lag`, `strait_lag_*`, \
             `strait_partition_state`, checkpoint latencies) are reported per: `partition` \
             (as MM2), or `topic` (no `partition` label; counts and lags add up, rates and \
             windows cover every partition, the lag in seconds is the largest, a state counts \
             its partitions), which bounds the series of flows with thousands of partitions.",
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
mod tests;
