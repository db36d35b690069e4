//! One test case per key in [`KEYS`], read both from `mm2.properties` and from TOML, and the
//! generation of the key reference table in `docs/configuration.md`.

use regex::Regex;

use super::*;
use crate::config::{
    parse_properties, parse_toml, Config, ConfigWarning, FlowConfig, TlsVersion, WarningKind,
};
use crate::policy::ReplicationPolicy;

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
    parse_properties(&text, "mm2.properties").unwrap_or_else(|e| panic!("{name} = {value}: {e}"))
}

/// The same flow in TOML, with `snippet` at top level, in the source cluster or in the
/// flow table.
fn toml_text(scope: Scope, snippet: &str) -> String {
    let (top, cluster, flow) = match scope {
        Global => (snippet, "", ""),
        Cluster => ("", snippet, ""),
        _ => ("", "", snippet),
    };
    let servers = if cluster.contains("bootstrap_servers") {
        ""
    } else {
        "bootstrap_servers = [\"s:9092\"]\n"
    };
    format!(
        "{top}\n[clusters.source]\n{servers}{cluster}\n\
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

/// Both clusters PLAINTEXT, without warnings.
fn plaintext(c: &Config, w: &[ConfigWarning]) -> bool {
    w.is_empty() && c.clusters.values().all(|c| c.tls.is_none())
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
        // Its effect: config::providers.
        case!(Global, "config.providers", "", None, |_, w| w.is_empty()),
        case!(
            Global,
            "log.level",
            "warn,strait::fetch=debug",
            Some(r#"log_level = "warn,strait::fetch=debug""#),
            |c, w| c.log_level == "warn,strait::fetch=debug" && w.is_empty()
        ),
        case!(
            Global,
            "metrics.listen",
            "127.0.0.1:9404",
            Some(r#"metrics_listen = "127.0.0.1:9404""#),
            |c, w| c.metrics_listen == Some(([127, 0, 0, 1], 9404).into()) && w.is_empty()
        ),
        case!(
            Global,
            "runtime.threads",
            "4",
            Some("runtime_threads = 4"),
            |c, w| c.runtime_threads == 4 && w.is_empty()
        ),
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
        case!(
            Cluster,
            "security.protocol",
            "ssl",
            Some(r#"security_protocol = "ssl""#),
            |c, w| {
                let tls = c.clusters["source"].tls.as_ref();
                w.is_empty()
                    && c.clusters["target"].tls.is_none()
                    && tls.is_some_and(|t| {
                        t.trusted.is_none()
                            && t.identity.is_none()
                            && t.verify_hostname
                            && t.versions == [TlsVersion::Tls12, TlsVersion::Tls13]
                            && t.cipher_suites.is_empty()
                    })
            }
        ),
        // Without `security.protocol = SSL` the TLS keys are read and have no effect, as in
        // Kafka's clients (their effect: `tls_settings_*` in config::validate).
        case!(
            Cluster,
            "ssl.truststore.location",
            "/ca.pem",
            Some(r#"ssl_truststore_location = "/ca.pem""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.truststore.type",
            "PKCS12",
            Some(r#"ssl_truststore_type = "PKCS12""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.truststore.password",
            "x",
            Some(r#"ssl_truststore_password = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.keystore.password",
            "x",
            Some(r#"ssl_keystore_password = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.truststore.certificates",
            "x",
            Some(r#"ssl_truststore_certificates = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.keystore.location",
            "/k.pem",
            Some(r#"ssl_keystore_location = "/k.pem""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.keystore.type",
            "JKS",
            Some(r#"ssl_keystore_type = "JKS""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.keystore.certificate.chain",
            "x",
            Some(r#"ssl_keystore_certificate_chain = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.keystore.key",
            "x",
            Some(r#"ssl_keystore_key = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.key.password",
            "x",
            Some(r#"ssl_key_password = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.endpoint.identification.algorithm",
            "",
            Some(r#"ssl_endpoint_identification_algorithm = """#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.mechanism",
            "PLAIN",
            Some(r#"sasl_mechanism = "PLAIN""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.jaas.config",
            "x",
            Some(r#"sasl_jaas_config = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.oauthbearer.token.endpoint.url",
            "https://idp/token",
            Some(r#"sasl_oauthbearer_token_endpoint_url = "https://idp/token""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.oauthbearer.client.credentials.client.id",
            "app",
            Some(r#"sasl_oauthbearer_client_credentials_client_id = "app""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.oauthbearer.client.credentials.client.secret",
            "s",
            Some(r#"sasl_oauthbearer_client_credentials_client_secret = "s""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.oauthbearer.scope",
            "kafka",
            Some(r#"sasl_oauthbearer_scope = "kafka""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.login.callback.handler.class",
            "x",
            Some(r#"sasl_login_callback_handler_class = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "sasl.oauthbearer.jwt.retriever.class",
            "x",
            Some(r#"sasl_oauthbearer_jwt_retriever_class = "x""#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.cipher.suites",
            "TLS_AES_256_GCM_SHA384",
            Some(r#"ssl_cipher_suites = ["TLS_AES_256_GCM_SHA384"]"#),
            plaintext
        ),
        case!(
            Cluster,
            "ssl.enabled.protocols",
            "TLSv1.3",
            Some(r#"ssl_enabled_protocols = ["TLSv1.3"]"#),
            plaintext
        ),
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
            "shutdown.drain.timeout.ms",
            "2500",
            Some("shutdown_drain_timeout_ms = 2500"),
            |c, _| f0(c).shutdown_drain_timeout_ms == 2_500
        ),
        case!(
            Flow,
            "fencing.transactional.id",
            "dr-<source>-to-<target>",
            Some("fencing_transactional_id = \"dr-<source>-to-<target>\""),
            |c, _| f0(c).fencing_transactional_id.as_deref() == Some("dr-source-to-target")
        ),
        case!(
            Flow,
            "takeover.offsets.topic",
            "mm2-<source>-offsets",
            Some("takeover_offsets_topic = \"mm2-<source>-offsets\""),
            |c, _| f0(c).takeover.offsets_topic.as_deref() == Some("mm2-source-offsets")
        ),
        case!(
            Flow,
            "takeover.connector.name",
            "<source>-><target>.MirrorSourceConnector",
            Some("takeover_connector_name = \"<source>-><target>.MirrorSourceConnector\""),
            |c, _| f0(c).takeover.connector == "source->target.MirrorSourceConnector"
        ),
        case!(
            Flow,
            "takeover.handback.continuous",
            "true",
            Some("takeover_handback_continuous = true"),
            |c, _| f0(c).takeover.continuous_handback
        ),
        case!(
            Flow,
            "takeover.group",
            "mirrormaker2-cluster",
            Some("takeover_group = \"mirrormaker2-cluster\""),
            |c, _| f0(c).takeover.group.as_deref() == Some("mirrormaker2-cluster")
        ),
        case!(
            Flow,
            "scale.out.enabled",
            "true",
            Some("scale_out_enabled = true"),
            |c, _| f0(c).scale_out.enabled && f0(c).scale_out.group == "strait-source->target"
        ),
        case!(
            Flow,
            "scale.out.group",
            "g-<source>",
            Some("scale_out_group = \"g-<source>\""),
            |c, _| f0(c).scale_out.group == "g-source" && !f0(c).scale_out.enabled
        ),
        case!(
            Flow,
            "scale.out.instance.id",
            "pod-0",
            Some("scale_out_instance_id = \"pod-0\""),
            |c, _| f0(c).scale_out.instance_id.as_deref() == Some("pod-0")
        ),
        case!(
            Flow,
            "scale.out.slots",
            "16",
            Some("scale_out_slots = 16"),
            |c, _| f0(c).scale_out.slots == 16
        ),
        case!(
            Flow,
            "scale.out.session.timeout.ms",
            "6000",
            Some("scale_out_session_timeout_ms = 6000"),
            |c, _| f0(c).scale_out.session_timeout_ms == 6000
        ),
        case!(
            Flow,
            "exactly.once",
            "true",
            Some("exactly_once = true"),
            |c, _| f0(c).exactly_once.enabled && f0(c).exactly_once.transaction_interval_ms == 500
        ),
        case!(
            Flow,
            "exactly.once.source.support",
            "enabled",
            Some("exactly_once = true"),
            |c, _| f0(c).exactly_once.enabled
        ),
        case!(
            TargetCluster,
            "exactly.once.source.support",
            "enabled",
            Some("exactly_once = true"),
            |c, _| f0(c).exactly_once.enabled
        ),
        case!(
            Flow,
            "exactly.once.transaction.interval.ms",
            "200",
            Some("exactly_once_transaction_interval_ms = 200"),
            |c, _| f0(c).exactly_once.transaction_interval_ms == 200 && !f0(c).exactly_once.enabled
        ),
        case!(
            Flow,
            "takeover.wait",
            "true",
            Some("takeover_wait = true"),
            |c, _| f0(c).takeover.wait
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
            "metrics.aggregation",
            "Topic",
            Some(r#"metrics_aggregation = "topic""#),
            |c, _| f0(c).metrics_aggregation == MetricsAggregation::Topic
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
            |c, _| f0(c).produce_max_in_flight == Some(1)
        ),
        case!(
            Flow,
            "producer.max.in.flight.requests.per.connection",
            "2",
            Some("produce_max_in_flight = 2"),
            |c, _| f0(c).produce_max_in_flight == Some(2)
        ),
        case!(
            TargetCluster,
            "producer.max.in.flight.requests.per.connection",
            "3",
            Some("produce_max_in_flight = 3"),
            |c, _| f0(c).produce_max_in_flight == Some(3)
        ),
        case!(
            Flow,
            "produce.delivery.timeout.ms",
            "1000",
            Some("produce_delivery_timeout_ms = 1000"),
            |c, _| f0(c).produce_delivery_timeout_ms == 1_000
        ),
        case!(
            Flow,
            "producer.delivery.timeout.ms",
            "2000",
            Some("produce_delivery_timeout_ms = 2000"),
            |c, _| f0(c).produce_delivery_timeout_ms == 2_000
        ),
        case!(
            TargetCluster,
            "producer.delivery.timeout.ms",
            "3000",
            Some("produce_delivery_timeout_ms = 3000"),
            |c, _| f0(c).produce_delivery_timeout_ms == 3_000
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
            "produce.connections.per.broker",
            "4",
            Some("produce_connections_per_broker = 4"),
            |c, _| f0(c).produce_connections_per_broker == 4
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

/// A protocol Kafka does not have, or a SASL mechanism strait does not speak (GSSAPI is
/// Kafka's default), is a configuration error naming the key (and so the cluster).
#[test]
fn a_security_protocol_or_mechanism_strait_does_not_speak_is_an_error() {
    for (lines, key, words) in [
        (
            "target.security.protocol = TLS\n",
            "target.security.protocol",
            "`TLS`",
        ),
        (
            "target.security.protocol = SASL_SSL\n",
            "target.sasl.mechanism",
            "GSSAPI",
        ),
        (
            "target.security.protocol = SASL_PLAINTEXT\ntarget.sasl.mechanism = OAUTHBEARER\n",
            "target.sasl.mechanism",
            "OAUTHBEARER",
        ),
    ] {
        let text = format!("{PROPS_BASE}{lines}");
        let e = parse_properties(&text, "mm2.properties")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("mm2.properties:")
                && e.contains(&format!("{key}: "))
                && e.contains(words),
            "{e}"
        );
    }
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
            (Some(field), Global) => format!("`{field}`"),
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
    let docs = include_str!("../../../docs/configuration.md");
    let begin = "<!-- keys:begin (generated from src/config/keys.rs KEYS) -->\n";
    let end = "<!-- keys:end -->";
    let start = docs.find(begin).expect("begin marker") + begin.len();
    let stop = docs.find(end).expect("end marker");
    let expected = reference_table();
    assert!(
        docs[start..stop] == expected,
        "docs/configuration.md is out of date; the table should read:\n{expected}"
    );
}

/// `runtime.threads`: one thread unless a cluster is reached over TLS (whose encryption a
/// second thread pays for); a value outside 1..=64 is refused at its line.
#[test]
fn runtime_threads_default_to_one_or_two_with_tls_and_are_bounded() {
    let (plain, _) = parse_properties(PROPS_BASE, "mm2.properties").unwrap();
    assert_eq!(plain.runtime_threads, 1);
    let tls = format!("{PROPS_BASE}source.security.protocol = SSL\n");
    let (config, _) = parse_properties(&tls, "mm2.properties").unwrap();
    assert_eq!(config.runtime_threads, 2);
    let (config, _) =
        parse_properties(&format!("{tls}runtime.threads = 1\n"), "mm2.properties").unwrap();
    assert_eq!(config.runtime_threads, 1, "an explicit value wins");
    let e = parse_properties(
        &format!("{PROPS_BASE}runtime.threads = 0\n"),
        "mm2.properties",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("mm2.properties:5:") && e.contains("between 1 and 64, got 0"),
        "{e}"
    );
}
