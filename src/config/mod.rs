//! Configuration: the typed model every other module reads ([`Config`]) and the two files it
//! comes from.
//!
//! `strait run mm2.properties` reads an unchanged MirrorMaker 2 file (MM2 keys, defaults and
//! precedence); `strait run strait.toml` reads the same model written as TOML, with units in
//! field names. Loading happens in two stages (raw, then validated):
//! 1. [`properties`] and [`toml`] each fill the same raw structs in [`raw`]
//!    ([`RawConfig`](raw::RawConfig), [`RawFlow`](raw::RawFlow),
//!    [`RawCluster`](raw::RawCluster)): values typed but unchecked, each remembering the key and
//!    line it came from. `mm2.properties` keys reach the raw structs only through the key table [`KEYS`];
//!    TOML reaches them through serde with `deny_unknown_fields`.
//! 2. [`validate`] checks the raw structs once, fills in defaults and builds [`Config`].
//!
//! Problems that stop strait are [`ConfigError`]s naming file, line and key. Settings strait
//! accepts but does not act on are [`ConfigWarning`]s, returned as data and logged with
//! `tracing::warn!`: a key is never ignored silently.
//!
//! The model is in `model`, errors and warnings in `error`, the key table in
//! `keys`; this file holds the entry points and re-exports everything under
//! `crate::config`.

mod error;
mod jaas;
mod keys;
mod model;
mod properties;
mod providers;
mod raw;
mod toml;
mod validate;

use std::path::Path;

pub use error::{ConfigError, ConfigWarning, WarningKind};
pub use keys::{keys, KeySpec, Scope, Spelling, Status, KEYS};
pub use model::{
    defaults, ClusterConfig, Config, FlowConfig, Identity, Interval, Location, MetricsAggregation,
    OffsetReset, SaslConfig, SaslCredentials, SaslMechanism, ScaleOut, Secret, Takeover, TlsConfig,
    TlsVersion, TokenSource, TLS_CIPHER_SUITES,
};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
