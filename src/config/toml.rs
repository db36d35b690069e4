//! `strait.toml`: the same model as `mm2.properties`, written as TOML with units in field
//! names. serde reads it straight into the raw structs with `deny_unknown_fields`, so an
//! unknown or misspelt key is an error naming the key and line. Every `[[flows]]` field is
//! optional and defaults as in `mm2.properties`; a `[[flows]]` entry is enabled unless it says
//! `enabled = false`.
//!
//! ```toml
//! [clusters.source]
//! bootstrap_servers = ["127.0.0.1:9092"]
//! [clusters.target]
//! bootstrap_servers = ["127.0.0.1:9093"]
//! [[flows]]
//! source = "source"
//! target = "target"
//! topics = [".*"]
//! replication_factor = 1
//! ```

use super::error::ConfigError;
use super::raw::{Format, RawConfig};

/// Byte offsets where each line starts.
pub(crate) fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The 1-based line holding byte `offset`.
pub(crate) fn line_of(starts: &[usize], offset: usize) -> usize {
    starts.partition_point(|&start| start <= offset).max(1)
}

/// The key a serde message is about (`unknown field `topicz``, `missing field `source``).
fn key_in_message(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let mentions_field =
        message.starts_with("unknown field") || message.starts_with("missing field");
    mentions_field.then(|| message[start..start + len].to_string())
}

/// Parses strait TOML text into the raw structs (not yet validated).
pub(crate) fn parse(text: &str, file: &str) -> Result<RawConfig, ConfigError> {
    let starts = line_starts(text);
    let mut raw: RawConfig = ::toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        ConfigError::Invalid {
            file: file.to_string(),
            line: e.span().map(|span| line_of(&starts, span.start)),
            key: key_in_message(&message),
            message,
        }
    })?;
    raw.format = Format::Toml;
    raw.line_starts = starts;
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_toml, OffsetReset};
    use crate::policy::ReplicationPolicy;

    const BASE: &str = r#"[clusters.source]
bootstrap_servers = ["127.0.0.1:9092"]
[clusters.target]
bootstrap_servers = ["127.0.0.1:9093"]
"#;

    /// `BASE` plus one source->target flow ending with `extra` (the flow starts on line 5).
    fn with_flow(extra: &str) -> String {
        format!("{BASE}[[flows]]\nsource = \"source\"\ntarget = \"target\"\n{extra}")
    }

    #[test]
    fn lines_from_offsets() {
        let starts = line_starts("a\nbc\n\nd");
        assert_eq!(starts, vec![0, 2, 5, 6]);
        assert_eq!(line_of(&starts, 0), 1);
        assert_eq!(line_of(&starts, 1), 1);
        assert_eq!(line_of(&starts, 2), 2);
        assert_eq!(line_of(&starts, 5), 3);
        assert_eq!(line_of(&starts, 6), 4);
        assert_eq!(line_of(&starts, 60), 4);
    }

    #[test]
    fn minimal_flow_gets_defaults() {
        let text = with_flow("");
        let (config, warnings) = parse_toml(&text, "strait.toml").unwrap();
        assert!(warnings.is_empty());
        let flow = &config.flows[0];
        assert_eq!(flow.replication_factor, 2);
        assert_eq!(flow.progress_commit_interval_ms, 5000);
        assert_eq!(flow.offset_reset, OffsetReset::Earliest);
        assert_eq!(flow.policy, ReplicationPolicy::default());
        assert_eq!(config.clusters["source"].client_id, "strait");
    }

    #[test]
    fn every_field_can_be_set() {
        let text = format!(
            r#"{BASE}
[[flows]]
source = "source"
target = "target"
enabled = true
topics = ["a.*"]
topics_exclude = []
groups = ["g"]
groups_exclude = []
replication_policy = "identity"
replication_policy_separator = "."
replication_factor = -1
internal_replication_factor = 1
refresh_topics_interval_ms = 1000
progress_commit_interval_ms = 200
offset_reset = "latest"
tasks_max = 8
emit_heartbeats_enabled = false
emit_heartbeats_interval_ms = 5
emit_checkpoints_enabled = false
emit_checkpoints_interval_ms = 6
sync_group_offsets_enabled = true
sync_group_offsets_interval_ms = 7
sync_topic_configs_enabled = false
sync_topic_configs_interval_ms = 8
sync_topic_acls_enabled = true
sync_topic_acls_interval_ms = 600000
offset_syncs_location = "target"
offset_lag_max = 0
config_properties_exclude = ["x"]
fetch_max_bytes = 1
fetch_partition_max_bytes = 2
fetch_max_wait_ms = 3
produce_max_in_flight = 1
produce_linger_ms = 4
produce_max_request_bytes = 5
"#
        );
        let (config, warnings) = parse_toml(&text, "strait.toml").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let f = &config.flows[0];
        assert_eq!(f.policy, ReplicationPolicy::Identity);
        assert_eq!(f.replication_factor, -1);
        assert_eq!(f.offset_reset, OffsetReset::Latest);
        assert_eq!(f.tasks_max, 8);
        assert!(!f.emit_heartbeats.enabled);
        assert_eq!(f.emit_heartbeats.interval_ms, 5);
        assert!(f.sync_group_offsets.enabled);
        assert_eq!(f.produce_max_request_bytes, 5);
        assert!(f.topics.matches("abc") && !f.topics.matches("b"));
    }

    #[test]
    fn unknown_key_is_an_error_naming_key_and_line() {
        let text = with_flow("topicz = []\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!(err.key(), Some("topicz"));
        assert_eq!(err.line(), Some(8));
        assert!(
            err.to_string()
                .starts_with("strait.toml:8: topicz: unknown field `topicz`"),
            "{err}"
        );
        let err = parse_toml("[clusters.a]\nbootstrap = [\"x:1\"]\n", "strait.toml").unwrap_err();
        assert_eq!((err.key(), err.line()), (Some("bootstrap"), Some(2)));
        let err = parse_toml("flow = 1\n", "strait.toml").unwrap_err();
        assert_eq!(err.key(), Some("flow"));
    }

    #[test]
    fn type_errors_name_the_line() {
        let text = with_flow("replication_factor = \"1\"\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!(err.line(), Some(8), "{err}");
        let text = with_flow("offset_reset = \"none\"\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!(err.line(), Some(8), "{err}");
        let err = parse_toml("[clusters\n", "strait.toml").unwrap_err();
        assert_eq!(err.line(), Some(1), "{err}");
    }

    #[test]
    fn validation_errors_use_field_paths() {
        let text = with_flow("topics = [\"ok\", \"(\"]\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!(err.key(), Some("flows[0].topics"));
        assert_eq!(err.line(), Some(8));
        assert!(err.to_string().contains(r#"invalid regex "(""#), "{err}");
    }

    #[test]
    fn disabled_flows_are_dropped_and_none_left_is_an_error() {
        let text = with_flow("enabled = false\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert!(
            err.to_string().starts_with("strait.toml: no flow enabled"),
            "{err}"
        );
    }

    #[test]
    fn flows_must_name_declared_distinct_clusters() {
        let text = format!("{BASE}[[flows]]\nsource = \"source\"\ntarget = \"tgt\"\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "strait.toml:7: flows[0].target: no cluster `tgt`: add a [clusters.tgt] table"
        );
        let text = format!("{BASE}[[flows]]\nsource = \"source\"\ntarget = \"source\"\n");
        let err = parse_toml(&text, "strait.toml").unwrap_err();
        assert_eq!((err.key(), err.line()), (Some("flows[0].target"), Some(7)));
        let err = parse_toml(
            &format!("{BASE}[[flows]]\nsource = \"source\"\n"),
            "strait.toml",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "strait.toml: flows[0]: missing `target`");
        let err = parse_toml("", "strait.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "strait.toml: clusters: no cluster is declared"
        );
    }

    #[test]
    fn acl_sync_settings_are_taken_without_warnings() {
        let text = with_flow("sync_topic_acls_enabled = false\n");
        let (config, warnings) = parse_toml(&text, "strait.toml").unwrap();
        assert!(!config.flows[0].sync_topic_acls.enabled);
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
