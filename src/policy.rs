//! `ReplicationPolicy`: how remote topics are named and recognised, the strait version of
//! MirrorMaker 2's `DefaultReplicationPolicy` and `IdentityReplicationPolicy`
//! (`connect-mirror-client`, Kafka 4.x).
//!
//! The names computed here must be byte-identical to MM2's, because MM2 tooling
//! (`RemoteClusterUtils`, `MirrorClient`, dashboards) finds strait's heartbeats, checkpoints
//! and offset syncs by name. A few MM2 behaviours worth knowing:
//! * `topic_source` splits on the separator the way Java's `String.split` does (trailing
//!   empty parts dropped), so `"a."` is not remote but `".a"` has source `""`.
//! * With a custom separator, the checkpoints and offset-syncs topic names use that separator
//!   too (MM2's `replication.policy.internal.topic.separator.enabled` defaults to true):
//!   `mm2-offset-syncs_B_internal` for separator `_`.
//! * `IdentityReplicationPolicy` keeps topic names, except for anything whose name *ends
//!   with* `heartbeats` (`looksLikeHeartbeat`), which it prefixes like the default policy so
//!   heartbeats still count hops. It cannot detect cycles.

/// MM2's fixed heartbeats topic name (`ReplicationPolicy.heartbeatsTopic()`).
pub const HEARTBEATS_TOPIC: &str = "heartbeats";
/// MM2's default `replication.policy.separator`.
pub const DEFAULT_SEPARATOR: &str = ".";

/// How a flow names topics on the target cluster (MM2 `replication.policy.class`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationPolicy {
    /// `DefaultReplicationPolicy`: the remote topic is `<source alias><separator><topic>`.
    Default {
        /// `replication.policy.separator`, `"."` by default; never empty.
        separator: String,
    },
    /// `IdentityReplicationPolicy`: the remote topic keeps its name (heartbeats excepted).
    /// Uses the default separator `.` for heartbeats and internal topic names.
    Identity,
}

impl Default for ReplicationPolicy {
    fn default() -> Self {
        ReplicationPolicy::Default {
            separator: DEFAULT_SEPARATOR.to_string(),
        }
    }
}

/// Java's `String.split(Pattern.quote(sep))`: split, then drop trailing empty strings.
fn java_split<'a>(topic: &'a str, separator: &str) -> Vec<&'a str> {
    let mut parts: Vec<&str> = topic.split(separator).collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

impl ReplicationPolicy {
    /// The separator used in remote topic names and MM2 internal topic names.
    pub fn separator(&self) -> &str {
        match self {
            ReplicationPolicy::Default { separator } => separator,
            ReplicationPolicy::Identity => DEFAULT_SEPARATOR,
        }
    }

    /// `DefaultReplicationPolicy.formatRemoteTopic`, shared by both variants.
    fn default_format(&self, source_alias: &str, topic: &str) -> String {
        format!("{source_alias}{}{topic}", self.separator())
    }

    /// `DefaultReplicationPolicy.topicSource`: the part before the first separator, if the
    /// name has at least two non-trailing parts.
    fn default_topic_source(&self, topic: &str) -> Option<String> {
        let parts = java_split(topic, self.separator());
        if parts.len() < 2 {
            None
        } else {
            Some(parts[0].to_string())
        }
    }

    /// `DefaultReplicationPolicy.upstreamTopic`: the name after `<source><separator>`.
    fn default_upstream_topic(&self, topic: &str) -> Option<String> {
        let source = self.default_topic_source(topic)?;
        Some(topic[source.len() + self.separator().len()..].to_string())
    }

    /// `IdentityReplicationPolicy.looksLikeHeartbeat`: note this is a suffix test, so
    /// `app-heartbeats` counts as a heartbeats topic too.
    fn looks_like_heartbeat(&self, topic: &str) -> bool {
        topic.ends_with(self.heartbeats_topic())
    }

    /// The name of `topic` from cluster `source_alias` on the target cluster
    /// (`formatRemoteTopic`). Default: `source.orders`; Identity: `orders` (but
    /// `source.heartbeats` for heartbeats).
    pub fn format_remote_topic(&self, source_alias: &str, topic: &str) -> String {
        match self {
            ReplicationPolicy::Default { .. } => self.default_format(source_alias, topic),
            ReplicationPolicy::Identity if self.looks_like_heartbeat(topic) => {
                self.default_format(source_alias, topic)
            }
            ReplicationPolicy::Identity => topic.to_string(),
        }
    }

    /// The cluster a remote topic came from (`topicSource`), `None` if the name does not say.
    /// Identity returns `None` except for heartbeats (MM2 would return its configured
    /// `source.cluster.alias`, which never changes cycle detection).
    pub fn topic_source(&self, topic: &str) -> Option<String> {
        match self {
            ReplicationPolicy::Identity if !self.looks_like_heartbeat(topic) => None,
            _ => self.default_topic_source(topic),
        }
    }

    /// The topic's name one hop upstream (`upstreamTopic`): `orders` for `source.orders`,
    /// `b.orders` for `a.b.orders`; `None` if not a remote topic. Identity returns the topic
    /// itself (any topic may be remote), except for heartbeats.
    pub fn upstream_topic(&self, topic: &str) -> Option<String> {
        match self {
            ReplicationPolicy::Identity if !self.looks_like_heartbeat(topic) => {
                Some(topic.to_string())
            }
            _ => self.default_upstream_topic(topic),
        }
    }

    /// The name of the topic where it was first produced, following every hop
    /// (`originalTopic`); the topic itself if it is not remote.
    pub fn original_topic(&self, topic: &str) -> String {
        let mut current = topic.to_string();
        loop {
            match self.upstream_topic(&current) {
                Some(upstream) if upstream != current => current = upstream,
                _ => return current,
            }
        }
    }

    /// The heartbeats topic name, `heartbeats` (`heartbeatsTopic`).
    pub fn heartbeats_topic(&self) -> &'static str {
        HEARTBEATS_TOPIC
    }

    /// True for `heartbeats` and its remote copies such as `a.b.heartbeats`
    /// (`isHeartbeatsTopic`: the original topic is `heartbeats`).
    pub fn is_heartbeats_topic(&self, topic: &str) -> bool {
        self.original_topic(topic) == self.heartbeats_topic()
    }

    /// The suffix of MM2 internal topics: `<sep>internal`.
    fn internal_suffix(&self) -> String {
        format!("{}internal", self.separator())
    }

    /// The suffix of checkpoints topics: `<sep>checkpoints<sep>internal`.
    fn checkpoints_suffix(&self) -> String {
        format!("{}checkpoints{}", self.separator(), self.internal_suffix())
    }

    /// The checkpoints topic for groups of cluster `cluster_alias`, written on the target:
    /// `<alias>.checkpoints.internal` (`checkpointsTopic`).
    pub fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        format!("{cluster_alias}{}", self.checkpoints_suffix())
    }

    /// True for names ending in `.checkpoints.internal` (`isCheckpointsTopic`).
    pub fn is_checkpoints_topic(&self, topic: &str) -> bool {
        topic.ends_with(&self.checkpoints_suffix())
    }

    /// The offset-syncs topic naming cluster `cluster_alias`:
    /// `mm2-offset-syncs.<alias>.internal` (`offsetSyncsTopic`). With the default
    /// `offset-syncs.topic.location = source`, it lives on the source and names the *target*.
    pub fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        format!(
            "mm2-offset-syncs{}{cluster_alias}{}",
            self.separator(),
            self.internal_suffix()
        )
    }

    /// True for names ending in `.internal` (`isMM2InternalTopic`).
    pub fn is_mm2_internal_topic(&self, topic: &str) -> bool {
        topic.ends_with(&self.internal_suffix())
    }

    /// Topics that are never replicated (`isInternalTopic`): MM2 internal topics, Kafka's own
    /// (`__*`, `.*`) and Connect's default ones (`*-internal`, `*.internal`).
    pub fn is_internal_topic(&self, topic: &str) -> bool {
        self.is_mm2_internal_topic(topic)
            || topic.starts_with("__")
            || topic.starts_with('.')
            || topic.ends_with("-internal")
            || topic.ends_with(".internal")
    }

    /// True if `topic` (a source-cluster name) already came from `target_alias` at some hop,
    /// so replicating it to `target_alias` would close a cycle (`MirrorSourceConnector.isCycle`).
    /// Always false for Identity, which cannot tell.
    pub fn is_cycle(&self, topic: &str, target_alias: &str) -> bool {
        let mut current = topic.to_string();
        loop {
            let Some(source) = self.topic_source(&current) else {
                return false;
            };
            if source == target_alias {
                return true;
            }
            match self.upstream_topic(&current) {
                Some(upstream) if upstream != current => current = upstream,
                _ => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dflt() -> ReplicationPolicy {
        ReplicationPolicy::default()
    }

    fn sep(s: &str) -> ReplicationPolicy {
        ReplicationPolicy::Default {
            separator: s.to_string(),
        }
    }

    #[test]
    fn format_remote_topic() {
        assert_eq!(
            dflt().format_remote_topic("source", "orders"),
            "source.orders"
        );
        assert_eq!(dflt().format_remote_topic("a", "b.orders"), "a.b.orders");
        assert_eq!(sep("__").format_remote_topic("us-west", "t"), "us-west__t");
        let id = ReplicationPolicy::Identity;
        assert_eq!(id.format_remote_topic("source", "orders"), "orders");
        assert_eq!(
            id.format_remote_topic("source", "heartbeats"),
            "source.heartbeats"
        );
        assert_eq!(
            id.format_remote_topic("b", "a.heartbeats"),
            "b.a.heartbeats"
        );
        // looksLikeHeartbeat is a suffix test.
        assert_eq!(
            id.format_remote_topic("s", "app-heartbeats"),
            "s.app-heartbeats"
        );
    }

    #[test]
    fn topic_source() {
        let p = dflt();
        assert_eq!(p.topic_source("source.orders").as_deref(), Some("source"));
        assert_eq!(p.topic_source("a.b.orders").as_deref(), Some("a"));
        assert_eq!(p.topic_source("orders"), None);
        assert_eq!(p.topic_source(""), None);
        // Java's split drops trailing empty parts but keeps a leading one.
        assert_eq!(p.topic_source("a."), None);
        assert_eq!(p.topic_source("a.."), None);
        assert_eq!(p.topic_source(".a").as_deref(), Some(""));
        assert_eq!(p.topic_source("a..b").as_deref(), Some("a"));
        assert_eq!(sep("_").topic_source("us_orders").as_deref(), Some("us"));
        assert_eq!(sep("_").topic_source("us.orders"), None);
        let id = ReplicationPolicy::Identity;
        assert_eq!(id.topic_source("source.orders"), None);
        assert_eq!(
            id.topic_source("source.heartbeats").as_deref(),
            Some("source")
        );
    }

    #[test]
    fn upstream_topic() {
        let p = dflt();
        assert_eq!(p.upstream_topic("source.orders").as_deref(), Some("orders"));
        assert_eq!(p.upstream_topic("a.b.orders").as_deref(), Some("b.orders"));
        assert_eq!(p.upstream_topic("orders"), None);
        assert_eq!(p.upstream_topic(".a").as_deref(), Some("a"));
        assert_eq!(sep("::").upstream_topic("x::y::z").as_deref(), Some("y::z"));
        let id = ReplicationPolicy::Identity;
        assert_eq!(id.upstream_topic("orders").as_deref(), Some("orders"));
        assert_eq!(
            id.upstream_topic("a.heartbeats").as_deref(),
            Some("heartbeats")
        );
        assert_eq!(id.upstream_topic("heartbeats"), None);
    }

    #[test]
    fn original_topic() {
        let p = dflt();
        assert_eq!(p.original_topic("a.b.orders"), "orders");
        assert_eq!(p.original_topic("orders"), "orders");
        let id = ReplicationPolicy::Identity;
        assert_eq!(id.original_topic("a.b.orders"), "a.b.orders");
        assert_eq!(id.original_topic("a.b.heartbeats"), "heartbeats");
    }

    #[test]
    fn heartbeats_topic() {
        assert_eq!(dflt().heartbeats_topic(), "heartbeats");
        assert!(dflt().is_heartbeats_topic("heartbeats"));
        assert!(dflt().is_heartbeats_topic("a.heartbeats"));
        assert!(dflt().is_heartbeats_topic("a.b.heartbeats"));
        assert!(!dflt().is_heartbeats_topic("a.heartbeats.x"));
        assert!(!dflt().is_heartbeats_topic("app-heartbeats"));
        assert!(ReplicationPolicy::Identity.is_heartbeats_topic("b.a.heartbeats"));
    }

    #[test]
    fn checkpoints_topic() {
        assert_eq!(
            dflt().checkpoints_topic("source"),
            "source.checkpoints.internal"
        );
        assert_eq!(
            sep("_").checkpoints_topic("source"),
            "source_checkpoints_internal"
        );
        assert_eq!(
            ReplicationPolicy::Identity.checkpoints_topic("source"),
            "source.checkpoints.internal"
        );
        assert!(dflt().is_checkpoints_topic("source.checkpoints.internal"));
        assert!(!dflt().is_checkpoints_topic("source.checkpoints"));
    }

    #[test]
    fn offset_syncs_topic() {
        assert_eq!(
            dflt().offset_syncs_topic("target"),
            "mm2-offset-syncs.target.internal"
        );
        assert_eq!(
            sep("-").offset_syncs_topic("target"),
            "mm2-offset-syncs-target-internal"
        );
    }

    #[test]
    fn is_internal_topic() {
        let p = dflt();
        for t in [
            "__consumer_offsets",
            ".hidden",
            "mm2-offset-syncs.target.internal",
            "source.checkpoints.internal",
            "mm2-configs.source.internal",
            "connect-offsets-internal",
        ] {
            assert!(p.is_internal_topic(t), "{t}");
        }
        for t in [
            "orders",
            "heartbeats",
            "source.heartbeats",
            "orders.replica",
        ] {
            assert!(!p.is_internal_topic(t), "{t}");
        }
        assert!(p.is_mm2_internal_topic("x.internal"));
        assert!(!p.is_mm2_internal_topic("x-internal"));
        // With a custom separator, MM2 internal names use it, and the `.internal` rule stays.
        assert!(sep("_").is_internal_topic("mm2-offset-syncs_t_internal"));
        assert!(sep("_").is_internal_topic("a.internal"));
    }

    #[test]
    fn is_cycle() {
        let p = dflt();
        assert!(!p.is_cycle("orders", "target"));
        assert!(!p.is_cycle("source.orders", "target"));
        assert!(p.is_cycle("target.orders", "target"));
        assert!(p.is_cycle("a.target.orders", "target"));
        assert!(!p.is_cycle("a.b.orders", "target"));
        assert!(p.is_cycle("target.heartbeats", "target"));
        // Identity cannot detect cycles (except through heartbeats names).
        let id = ReplicationPolicy::Identity;
        assert!(!id.is_cycle("target.orders", "target"));
        assert!(id.is_cycle("target.heartbeats", "target"));
    }

    proptest! {
        #[test]
        fn remote_name_round_trips(
            alias in "[a-z][a-z0-9-]{0,10}",
            topic in "[a-zA-Z0-9][a-zA-Z0-9._-]{0,30}",
        ) {
            let p = dflt();
            let remote = p.format_remote_topic(&alias, &topic);
            prop_assert_eq!(p.topic_source(&remote), Some(alias.clone()));
            prop_assert_eq!(p.upstream_topic(&remote), Some(topic.clone()));
            prop_assert!(p.is_cycle(&remote, &alias));
        }

        #[test]
        fn methods_never_panic(topic in ".{0,40}", s in "[._:-]{1,3}") {
            let p = sep(&s);
            let _ = p.topic_source(&topic);
            let _ = p.upstream_topic(&topic);
            let _ = p.original_topic(&topic);
            let _ = p.is_cycle(&topic, "x");
            let _ = ReplicationPolicy::Identity.original_topic(&topic);
        }
    }
}
