//! `mm2.properties`: Java `.properties` syntax read into the raw structs through the key
//! table, with MirrorMaker 2's key layout (`MirrorMakerConfig`):
//!
//! * `clusters = a, b` declares the aliases; `<alias>.<key>` configures one cluster;
//! * `A->B.<key>` configures one flow and overrides the top-level `<key>` for it;
//! * any other top-level key is a default for every flow (or every cluster, for client keys
//!   such as `bootstrap.servers`, which MM2 also applies to every cluster).
//!
//! The lexer follows `java.util.Properties.load`: `key=value`, `key: value`, `key value`,
//! `#`/`!` comments, a trailing odd backslash continues the line, `\t \n \r \f \uXXXX` and
//! `\<any>` escapes. Values are trimmed (Kafka's `ConfigDef` trims them). If a key appears
//! twice the later line wins, as in Java, with a warning. Unknown keys are warnings naming
//! key and line, never errors: MM2 files carry Connect and client keys strait has no use for.

use std::collections::HashMap;

use super::error::{ConfigError, ConfigWarning, WarningKind};
use super::keys::{find_key, parse_int, parse_list, KeySpec, Scope, Setter, Status};
use super::providers;
use super::raw::{Format, Origin, Pos, RawCluster, RawConfig, RawFlow, Sourced};

/// One `key=value` pair after unescaping, with the line its logical line starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// A lexical error: the 1-based line and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LexError {
    pub line: usize,
    pub message: String,
}

/// `Properties.load` whitespace.
fn is_ws(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\x0c'
}

/// Natural lines, split on `\n`, `\r\n` or `\r`.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(i) => {
                lines.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                lines.push(rest);
                break;
            }
        }
    }
    lines
}

/// True if the line ends in an odd number of backslashes: the last one continues the line.
fn continues(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Resolves `Properties` escapes in a key or value.
fn unescape(raw: &[char], line: usize) -> Result<String, LexError> {
    let mut units: Vec<u16> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        i += 1;
        if c != '\\' {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
            continue;
        }
        let Some(&next) = raw.get(i) else {
            break; // A lone trailing backslash disappears, as in Java.
        };
        i += 1;
        let decoded = match next {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\x0c',
            'u' => {
                let hex: String = raw.iter().skip(i).take(4).collect();
                let unit = (hex.len() == 4 && hex.chars().all(|c| c.is_ascii_hexdigit()))
                    .then(|| u16::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| LexError {
                        line,
                        message: format!("malformed \\uxxxx escape `\\u{hex}`"),
                    })?;
                i += 4;
                units.push(unit);
                continue;
            }
            other => other,
        };
        let mut buf = [0u16; 2];
        units.extend_from_slice(decoded.encode_utf16(&mut buf));
    }
    String::from_utf16(&units).map_err(|_| LexError {
        line,
        message: "\\u escapes form an unpaired UTF-16 surrogate".to_string(),
    })
}

/// Splits a logical line into key and value the way `Properties.load` does: the key ends at
/// the first unescaped `=`, `:` or whitespace; then whitespace and at most one `=`/`:` are
/// skipped.
fn split_key_value(logical: &str, line: usize) -> Result<Entry, LexError> {
    let chars: Vec<char> = logical.chars().collect();
    let n = chars.len();
    let mut key_len = 0;
    let mut value_start = n;
    let mut has_separator = false;
    let mut backslash = false;
    while key_len < n {
        let c = chars[key_len];
        if !backslash && (c == '=' || c == ':') {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if !backslash && is_ws(c) {
            value_start = key_len + 1;
            break;
        }
        backslash = c == '\\' && !backslash;
        key_len += 1;
    }
    while value_start < n {
        let c = chars[value_start];
        if !is_ws(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    Ok(Entry {
        key: unescape(&chars[..key_len], line)?,
        value: unescape(&chars[value_start.min(n)..], line)?,
        line,
    })
}

/// Reads `.properties` text into entries, in file order (duplicates kept).
pub(crate) fn lex(text: &str) -> Result<Vec<Entry>, LexError> {
    let lines = natural_lines(text);
    let mut entries = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i + 1;
        let first = lines[i].trim_start_matches(is_ws);
        i += 1;
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut current = first;
        loop {
            if !continues(current) {
                logical.push_str(current);
                break;
            }
            logical.push_str(&current[..current.len() - 1]);
            match lines.get(i) {
                Some(next) => {
                    current = next.trim_start_matches(is_ws);
                    i += 1;
                }
                None => break,
            }
        }
        entries.push(split_key_value(&logical, line_no)?);
    }
    Ok(entries)
}

/// Connect worker settings MM2 copies into its Connect workers (`MirrorMakerConfig
/// .workerConfig`) or its internal REST server; strait runs neither.
const WORKER_PREFIXES: &[&str] = &[
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter",
    "value.converter",
    "header.converter",
    "task.",
    "worker.",
    "listeners",
    "admin.listeners",
    "rest.",
    "plugin.path",
    "group.id",
    "offset.flush.timeout.ms",
];

/// Kafka client settings (MM2 passes them to its producers, consumers and admin clients).
const CLIENT_PREFIXES: &[&str] = &[
    "consumer.",
    "producer.",
    "admin.",
    "source.consumer.",
    "source.producer.",
    "source.admin.",
    "target.consumer.",
    "target.producer.",
    "target.admin.",
    "source.cluster.",
    "target.cluster.",
];

/// Where a key's value goes.
enum Dest<'a> {
    None,
    Cluster(&'a mut RawCluster),
    Flow(&'a mut RawFlow),
}

/// Normalised value for "is this the default?": items trimmed, case folded.
fn same_value(value: &str, default: &str) -> bool {
    let norm = |s: &str| parse_list(s).join(",").to_ascii_lowercase();
    norm(value) == norm(default)
}

struct Parser<'a> {
    file: &'a str,
    warnings: Vec<ConfigWarning>,
}

impl Parser<'_> {
    fn warn(&mut self, e: &Entry, kind: WarningKind, message: String) {
        self.warnings.push(ConfigWarning {
            file: self.file.to_string(),
            line: Some(e.line),
            key: e.key.clone(),
            kind,
            message,
        });
    }

    fn invalid(&self, e: &Entry, message: String) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            line: Some(e.line),
            key: Some(e.key.clone()),
            message,
        }
    }

    /// Applies one entry through its key spec: status warnings, then the setter.
    fn apply(&mut self, spec: &KeySpec, dest: Dest<'_>, e: &Entry) -> Result<(), ConfigError> {
        self.apply_ranked(spec, dest, e, spec.rank())
    }

    /// [`Parser::apply`] with the precedence `rank` instead of the key's own.
    fn apply_ranked(
        &mut self,
        spec: &KeySpec,
        dest: Dest<'_>,
        e: &Entry,
        rank: u8,
    ) -> Result<(), ConfigError> {
        let value = e.value.trim();
        match spec.status {
            Status::Deprecated(instead) => self.warn(
                e,
                WarningKind::Deprecated,
                format!("deprecated MM2 name (removed in Kafka 4.0); use `{instead}`"),
            ),
            Status::Unsupported if !same_value(value, spec.default) => self.warn(
                e,
                WarningKind::NotImplemented,
                format!(
                    "not implemented by strait: only MM2's default `{}` is supported, so this \
                     setting has no effect",
                    spec.default
                ),
            ),
            _ => {}
        }
        let origin = Origin {
            key: e.key.clone(),
            pos: Pos::Line(e.line),
            rank,
        };
        let result = match (spec.set, dest) {
            (Setter::Parser, _) => Ok(()),
            (Setter::Check(check), _) => check(value),
            (Setter::Cluster(set), Dest::Cluster(cluster)) => set(cluster, value, origin),
            (Setter::Flow(set), Dest::Flow(flow)) => set(flow, value, origin),
            _ => unreachable!("key table scope and setter disagree for {}", spec.name),
        };
        result.map_err(|message| self.invalid(e, message))
    }

    /// Warning for a key no table entry matched; `scope` says where it was written.
    fn unknown(&mut self, e: &Entry, rest: &str, scope: Scope) {
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| rest.starts_with(p));
        let (kind, message) = if rest.starts_with("sasl.") {
            (
                WarningKind::NotImplemented,
                "SASL setting not implemented by strait; it has no effect".to_string(),
            )
        } else if rest.starts_with("ssl.") {
            (
                WarningKind::NotImplemented,
                "TLS setting not implemented by strait; it has no effect".to_string(),
            )
        } else if let Some(spec) = role_security_key(rest).filter(|_| scope != Scope::Cluster) {
            let role = &rest[..rest.len() - spec.name.len()];
            let message = if scope == Scope::Global {
                // MirrorMakerConfig hands its clients `<alias>.` settings and top-level
                // client keys without a role; a top-level role prefix reaches none of them.
                format!(
                    "MM2 passes no top-level `{role}` setting to its clients either, so it has \
                     no effect; set `<alias>.{rest}` for one cluster, or `{}` for every cluster",
                    spec.name
                )
            } else {
                format!(
                    "strait connects to a cluster one way for every flow, so a flow's \
                     security setting has no effect; set `<alias>.{rest}` on the cluster"
                )
            };
            (WarningKind::Ignored, message)
        } else if starts(CLIENT_PREFIXES) {
            (
                WarningKind::NotImplemented,
                "Kafka client setting not implemented by strait; it has no effect".to_string(),
            )
        } else if scope == Scope::Global && starts(WORKER_PREFIXES) {
            (
                WarningKind::Ignored,
                "Kafka Connect worker setting; strait runs no Connect worker, so it has no effect"
                    .to_string(),
            )
        } else if scope == Scope::Cluster {
            (
                WarningKind::UnknownKey,
                format!(
                    "unknown cluster setting `{rest}`, ignored (flow settings go at the top \
                     level or after `A->B.`)"
                ),
            )
        } else {
            (WarningKind::UnknownKey, "unknown key, ignored".to_string())
        };
        self.warn(e, kind, message);
    }
}

/// MM2's client roles: `<alias>.consumer.`, `.producer.` and `.admin.` settings override
/// `<alias>.` ones for that client.
const ROLES: &[&str] = &["consumer.", "producer.", "admin."];

/// Precedence of a role's security setting: above any spelling of the cluster's own key.
const ROLE_RANK: u8 = 3;

/// The cluster key of a security setting written for one client role
/// (`consumer.ssl.truststore.location`); `None` for anything else.
fn role_security_key(setting: &str) -> Option<&'static KeySpec> {
    let role = ROLES.iter().find(|r| setting.starts_with(*r))?;
    let key = &setting[role.len()..];
    let security =
        key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.");
    find_key(Scope::Cluster, key).filter(|_| security)
}

/// The alias `key` starts with (followed by `.`); the longest one if several do.
fn alias_prefix<'k>(key: &'k str, aliases: &[String]) -> Option<(&'k str, &'k str)> {
    aliases
        .iter()
        .filter(|a| key.len() > a.len() + 1 && key.starts_with(a.as_str()))
        .filter(|a| key.as_bytes()[a.len()] == b'.')
        .max_by_key(|a| a.len())
        .map(|a| (&key[..a.len()], &key[a.len() + 1..]))
}

/// Splits `A->B.key` into `(A, B, key)`. `B` is the longest declared alias that fits, or the
/// text up to the first `.`.
fn flow_key<'k>(key: &'k str, aliases: &[String]) -> Option<(&'k str, &'k str, &'k str)> {
    let (source, rest) = key.split_once("->")?;
    let (target, setting) = alias_prefix(rest, aliases).or_else(|| rest.split_once('.'))?;
    Some((source, target, setting))
}

/// Parses `mm2.properties` text into the raw structs (not yet validated).
pub(crate) fn parse(
    text: &str,
    file: &str,
) -> Result<(RawConfig, Vec<ConfigWarning>), ConfigError> {
    let mut entries = lex(text).map_err(|e| ConfigError::Invalid {
        file: file.to_string(),
        line: Some(e.line),
        key: None,
        message: e.message,
    })?;
    let mut p = Parser {
        file,
        warnings: Vec::new(),
    };
    let params =
        providers::resolve(&mut entries, |name| std::env::var(name).ok()).map_err(|e| {
            ConfigError::Invalid {
                file: file.to_string(),
                line: Some(e.line),
                key: Some(e.key),
                message: e.message,
            }
        })?;
    for param in &params {
        p.warn(
            param,
            WarningKind::NotImplemented,
            "config provider parameter not implemented by strait (no allowed.paths or \
             allowlist.pattern checks); it has no effect"
                .to_string(),
        );
    }

    // Java's Properties keeps the last value of a key.
    let mut last_line: HashMap<&str, usize> = HashMap::new();
    for e in &entries {
        if let Some(previous) = last_line.insert(&e.key, e.line) {
            p.warn(
                e,
                WarningKind::Duplicate,
                format!("set again (first on line {previous}); this later value wins"),
            );
        }
    }
    let entries: Vec<&Entry> = entries
        .iter()
        .filter(|e| last_line.get(e.key.as_str()) == Some(&e.line))
        .collect();

    let mut raw = RawConfig {
        format: Format::Properties,
        ..RawConfig::default()
    };

    // `clusters` first: every other key is read relative to the aliases.
    let Some(clusters) = entries.iter().find(|e| e.key == "clusters") else {
        return Err(ConfigError::Invalid {
            file: file.to_string(),
            line: None,
            key: Some("clusters".to_string()),
            message: "missing required setting: list the cluster aliases, e.g. \
                      `clusters = source, target`"
                .to_string(),
        });
    };
    let mut aliases: Vec<String> = Vec::new();
    for alias in parse_list(&clusters.value) {
        if aliases.contains(&alias) {
            p.warn(
                clusters,
                WarningKind::Duplicate,
                format!("cluster `{alias}` is listed twice"),
            );
        } else {
            aliases.push(alias);
        }
    }
    raw.clusters_origin = Origin {
        key: clusters.key.clone(),
        pos: Pos::Line(clusters.line),
        rank: 1,
    };
    // Process settings: checked by their key specs like any other key, validated from here.
    let top_level = |key: &str| {
        entries.iter().find(|e| e.key == key).map(|e| Sourced {
            value: e.value.trim().to_string(),
            origin: Origin {
                key: e.key.clone(),
                pos: Pos::Line(e.line),
                rank: 1,
            },
        })
    };
    raw.log_level = top_level("log.level");
    raw.metrics_listen = top_level("metrics.listen");
    // Checked as an integer with the other keys above.
    raw.runtime_threads = top_level("runtime.threads").and_then(|s| {
        let value = parse_int(&s.value).ok()?;
        Some(Sourced {
            value,
            origin: s.origin,
        })
    });
    for alias in &aliases {
        raw.clusters.insert(alias.clone(), RawCluster::default());
    }

    let mut flows: Vec<RawFlow> = Vec::new();
    let mut flow_index: HashMap<(String, String), usize> = HashMap::new();
    // Security settings written for one client role: (alias, key) -> the entry.
    let mut role_settings: HashMap<(String, &str), &Entry> = HashMap::new();
    for e in entries {
        let key = e.key.as_str();
        if key == "clusters" {
            continue;
        }
        if let Some((source, target, setting)) = flow_key(key, &aliases) {
            let index = *flow_index
                .entry((source.to_string(), target.to_string()))
                .or_insert_with(|| {
                    let origin = Origin {
                        key: e.key.clone(),
                        pos: Pos::Line(e.line),
                        rank: 1,
                    };
                    flows.push(RawFlow {
                        source: Some(Sourced {
                            value: source.to_string(),
                            origin: origin.clone(),
                        }),
                        target: Some(Sourced {
                            value: target.to_string(),
                            origin,
                        }),
                        ..RawFlow::default()
                    });
                    flows.len() - 1
                });
            match find_key(Scope::Flow, setting) {
                Some(spec) => p.apply(spec, Dest::Flow(&mut flows[index]), e)?,
                None => p.unknown(e, setting, Scope::Flow),
            }
        } else if let Some((alias, setting)) = alias_prefix(key, &aliases) {
            let cluster = raw.clusters.get_mut(alias).expect("declared alias");
            if let Some(spec) = role_security_key(setting) {
                // MM2 lets each client of a cluster connect its own way; strait has one set
                // of connections per cluster, so a role's security setting is the cluster's,
                // and roles that disagree cannot all be honoured.
                let seen = role_settings
                    .entry((alias.to_string(), spec.name))
                    .or_insert(e);
                if seen.value.trim() != e.value.trim() {
                    return Err(p.invalid(
                        e,
                        format!(
                            "differs from `{}` (line {}): strait has one set of connections \
                             per cluster, shared by what MM2 splits into consumer, producer \
                             and admin clients; give them the same value, or set \
                             `{alias}.{}` once",
                            seen.key, seen.line, spec.name
                        ),
                    ));
                }
                p.apply_ranked(spec, Dest::Cluster(cluster), e, ROLE_RANK)?;
            } else if let Some(spec) = find_key(Scope::Cluster, setting) {
                p.apply(spec, Dest::Cluster(cluster), e)?;
            } else if let Some(spec) = find_key(Scope::SourceCluster, setting) {
                p.apply(spec, Dest::Flow(&mut cluster.as_source), e)?;
            } else if let Some(spec) = find_key(Scope::TargetCluster, setting) {
                p.apply(spec, Dest::Flow(&mut cluster.as_target), e)?;
            } else if let Some(spec) = find_key(Scope::Global, key) {
                // An alias that is also the first word of a top-level key (`emit`, `topics`):
                // the top-level meaning wins when the cluster one is unknown.
                p.apply(spec, Dest::None, e)?;
            } else if let Some(spec) = find_key(Scope::Flow, key) {
                p.apply(spec, Dest::Flow(&mut raw.defaults), e)?;
            } else {
                p.unknown(e, setting, Scope::Cluster);
            }
        } else if let Some(spec) = find_key(Scope::Global, key) {
            p.apply(spec, Dest::None, e)?;
        } else if let Some(spec) = find_key(Scope::Flow, key) {
            if key == "enabled" {
                p.warn(
                    e,
                    WarningKind::Semantics,
                    "a top-level `enabled` applies to every ordered pair of clusters, as in MM2; \
                     use `A->B.enabled` to enable one flow"
                        .to_string(),
                );
            }
            p.apply(spec, Dest::Flow(&mut raw.defaults), e)?;
        } else if let Some(spec) = find_key(Scope::Cluster, key) {
            p.apply(spec, Dest::Cluster(&mut raw.cluster_defaults), e)?;
        } else {
            p.unknown(e, key, Scope::Global);
        }
    }

    // One flow per ordered pair of declared clusters, in `clusters` order, so that top-level
    // settings (even `enabled`) reach pairs no `A->B.` key mentions; then the other pairs.
    let mut ordered = Vec::new();
    for source in &aliases {
        for target in aliases.iter().filter(|t| *t != source) {
            let flow = match flow_index.remove(&(source.clone(), target.clone())) {
                Some(i) => std::mem::take(&mut flows[i]),
                None => RawFlow {
                    source: Some(Sourced {
                        value: source.clone(),
                        origin: raw.clusters_origin.clone(),
                    }),
                    target: Some(Sourced {
                        value: target.clone(),
                        origin: raw.clusters_origin.clone(),
                    }),
                    ..RawFlow::default()
                },
            };
            ordered.push(flow);
        }
    }
    let mut rest: Vec<usize> = flow_index.into_values().collect();
    rest.sort_unstable();
    ordered.extend(rest.into_iter().map(|i| std::mem::take(&mut flows[i])));
    raw.flows = ordered;
    Ok((raw, p.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_properties, OffsetReset, WarningKind};
    use proptest::prelude::*;

    fn kv(text: &str) -> Vec<(String, String, usize)> {
        lex(text)
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value, e.line))
            .collect()
    }

    fn one(key: &str, value: &str, line: usize) -> (String, String, usize) {
        (key.to_string(), value.to_string(), line)
    }

    /// MM2's `<alias>.consumer.` / `.producer.` / `.admin.` security settings: the cluster's,
    /// over `<alias>.` and top-level ones; roles that disagree are an error naming both lines.
    #[test]
    fn security_settings_of_client_roles_are_the_cluster_s_unless_they_disagree() {
        let base = "clusters = source, target\n\
                    source.bootstrap.servers = 127.0.0.1:9092\n\
                    target.bootstrap.servers = 127.0.0.1:9093\n\
                    source->target.enabled = true\n\
                    ssl.endpoint.identification.algorithm = https\n";
        let (config, warnings) = parse_properties(
            &format!(
                "{base}source.consumer.security.protocol = SSL\n\
                 source.producer.security.protocol = SSL\n\
                 source.admin.security.protocol = SSL\n\
                 source.ssl.endpoint.identification.algorithm = https\n\
                 source.consumer.ssl.endpoint.identification.algorithm =\n\
                 source.producer.ssl.endpoint.identification.algorithm =\n"
            ),
            "mm2.properties",
        )
        .unwrap();
        let tls = config.clusters["source"]
            .tls
            .as_ref()
            .expect("TLS from the roles");
        assert!(
            !tls.verify_hostname,
            "the roles' setting wins over `source.`"
        );
        assert!(config.clusters["target"].tls.is_none());
        assert!(
            warnings.iter().all(|w| !w.key.contains(".consumer.")),
            "{warnings:?}"
        );
        let e = parse_properties(
            &format!(
                "{base}source.consumer.security.protocol = SSL\n\
                 source.producer.security.protocol = SASL_SSL\n"
            ),
            "mm2.properties",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "mm2.properties:7: source.producer.security.protocol: differs from \
                           `source.consumer.security.protocol` (line 6)"
            ),
            "{e}"
        );
    }

    /// MM2 hands its clients no top-level `consumer.`/`producer.`/`admin.` security setting
    /// (MirrorMakerConfig.clusterProps); strait ignores them too, and says what to write.
    #[test]
    fn security_settings_of_roles_outside_a_cluster_are_ignored_with_the_key_to_use() {
        let (config, warnings) = parse_properties(
            "clusters = source, target\n\
             source.bootstrap.servers = 127.0.0.1:9092\n\
             target.bootstrap.servers = 127.0.0.1:9093\n\
             source->target.enabled = true\n\
             consumer.security.protocol = SSL\n\
             admin.ssl.truststore.location = /etc/ca.pem\n\
             source->target.producer.sasl.mechanism = PLAIN\n",
            "mm2.properties",
        )
        .unwrap();
        assert!(config.clusters.values().all(|c| c.tls.is_none()));
        let said: Vec<(&str, WarningKind, &str)> = warnings
            .iter()
            .map(|w| (w.key.as_str(), w.kind, w.message.as_str()))
            .collect();
        assert_eq!(
            said,
            vec![
                (
                    "consumer.security.protocol",
                    WarningKind::Ignored,
                    "MM2 passes no top-level `consumer.` setting to its clients either, so it \
                     has no effect; set `<alias>.consumer.security.protocol` for one cluster, \
                     or `security.protocol` for every cluster"
                ),
                (
                    "admin.ssl.truststore.location",
                    WarningKind::Ignored,
                    "MM2 passes no top-level `admin.` setting to its clients either, so it has \
                     no effect; set `<alias>.admin.ssl.truststore.location` for one cluster, \
                     or `ssl.truststore.location` for every cluster"
                ),
                (
                    "source->target.producer.sasl.mechanism",
                    WarningKind::Ignored,
                    "strait connects to a cluster one way for every flow, so a flow's security \
                     setting has no effect; set `<alias>.producer.sasl.mechanism` on the cluster"
                ),
            ]
        );
    }

    #[test]
    fn separators() {
        assert_eq!(kv("a=1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("a = 1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("a:1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("a : 1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("a 1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("a\t1"), vec![one("a", "1", 1)]);
        assert_eq!(kv("   a   =   1"), vec![one("a", "1", 1)]);
        // Only one separator is skipped; the rest is value.
        assert_eq!(kv("a==1"), vec![one("a", "=1", 1)]);
        assert_eq!(kv("a = = 1"), vec![one("a", "= 1", 1)]);
        assert_eq!(kv("a:=1"), vec![one("a", "=1", 1)]);
        // A key alone has an empty value.
        assert_eq!(kv("a"), vec![one("a", "", 1)]);
        assert_eq!(kv("a="), vec![one("a", "", 1)]);
        // Trailing whitespace stays in the raw value (trimmed later, as ConfigDef does).
        assert_eq!(kv("a = 1  "), vec![one("a", "1  ", 1)]);
    }

    #[test]
    fn comments_and_blank_lines() {
        let text =
            "# comment\n! also comment\n\n   # indented comment\na=1\n  \t\nb=2 # not a comment";
        assert_eq!(
            kv(text),
            vec![one("a", "1", 5), one("b", "2 # not a comment", 7)]
        );
    }

    #[test]
    fn line_endings() {
        assert_eq!(
            kv("a=1\r\nb=2\rc=3\n"),
            vec![one("a", "1", 1), one("b", "2", 2), one("c", "3", 3)]
        );
    }

    #[test]
    fn continuation_lines() {
        let text = "topics = a, \\\n    b, \\\n    c\nnext = 1";
        assert_eq!(
            kv(text),
            vec![one("topics", "a, b, c", 1), one("next", "1", 4)]
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            kv("a = x\\\\\nb = 2"),
            vec![one("a", "x\\", 1), one("b", "2", 2)]
        );
        // A continuation line is never a comment.
        assert_eq!(kv("a = 1\\\n# 2"), vec![one("a", "1# 2", 1)]);
        // A comment line does not continue.
        assert_eq!(kv("# x \\\na = 1"), vec![one("a", "1", 2)]);
        // Continuation at end of file.
        assert_eq!(kv("a = 1\\"), vec![one("a", "1", 1)]);
        // Continuation into an empty line ends the value.
        assert_eq!(
            kv("a = 1\\\n\nb = 2"),
            vec![one("a", "1", 1), one("b", "2", 3)]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(kv(r"a = x\ty"), vec![one("a", "x\ty", 1)]);
        assert_eq!(kv(r"a = x\ny"), vec![one("a", "x\ny", 1)]);
        assert_eq!(kv(r"a = \u0041\u00e9"), vec![one("a", "Aé", 1)]);
        assert_eq!(kv(r"a = \uD83D\uDE00"), vec![one("a", "😀", 1)]);
        assert_eq!(kv(r"a = C:\\dir"), vec![one("a", "C:\\dir", 1)]);
        assert_eq!(kv(r"a = \q"), vec![one("a", "q", 1)]);
        // Escaped separators and spaces belong to the key.
        assert_eq!(kv(r"a\=b = 1"), vec![one("a=b", "1", 1)]);
        assert_eq!(kv(r"a\:b:1"), vec![one("a:b", "1", 1)]);
        assert_eq!(kv(r"a\ b 1"), vec![one("a b", "1", 1)]);
        // Regex escapes in MM2 lists need doubled backslashes, as in Java.
        assert_eq!(kv(r"x = .*\\.replica"), vec![one("x", r".*\.replica", 1)]);
    }

    #[test]
    fn malformed_unicode_escape_names_the_line() {
        let err = lex("a = 1\nb = \\u12").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("malformed"), "{}", err.message);
        assert_eq!(lex(r"a = \uZZZZ").unwrap_err().line, 1);
        assert!(lex(r"a = \uD800").is_err());
    }

    const BASE: &str = "clusters = source, target\n\
                        source.bootstrap.servers = s:9092\n\
                        target.bootstrap.servers = t:9092\n";

    fn parse_ok(extra: &str) -> (crate::config::Config, Vec<ConfigWarning>) {
        parse_properties(&format!("{BASE}{extra}"), "mm2.properties").unwrap()
    }

    #[test]
    fn flow_key_overrides_top_level_key() {
        let (config, _) = parse_ok(
            "source->target.enabled = true\n\
             target->source.enabled = true\n\
             replication.factor = 3\n\
             source->target.replication.factor = 1\n",
        );
        assert_eq!(config.flows.len(), 2);
        assert_eq!(config.flows[0].source, "source");
        assert_eq!(config.flows[0].replication_factor, 1);
        assert_eq!(config.flows[1].source, "target");
        assert_eq!(config.flows[1].replication_factor, 3);
    }

    #[test]
    fn flow_key_wins_whatever_the_line_order() {
        let (config, _) = parse_ok(
            "source->target.replication.factor = 1\n\
             source->target.enabled = true\n\
             replication.factor = 3\n",
        );
        assert_eq!(config.flows[0].replication_factor, 1);
    }

    #[test]
    fn cluster_client_keys_apply_by_side() {
        let (config, warnings) = parse_ok(
            "source->target.enabled = true\n\
             target->source.enabled = true\n\
             source.consumer.auto.offset.reset = latest\n\
             target.producer.linger.ms = 7\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let st = &config.flows[0];
        let ts = &config.flows[1];
        assert_eq!(
            (st.source.as_str(), st.offset_reset),
            ("source", OffsetReset::Latest)
        );
        assert_eq!(ts.offset_reset, OffsetReset::Earliest);
        assert_eq!(st.produce_linger_ms, 7);
        assert_eq!(ts.produce_linger_ms, 0);
    }

    #[test]
    fn precedence_flow_over_cluster_over_top_level() {
        let (config, _) = parse_ok(
            "source->target.enabled = true\n\
             fetch.max.wait.ms = 100\n\
             source.consumer.fetch.max.wait.ms = 200\n\
             source->target.consumer.fetch.max.wait.ms = 300\n",
        );
        assert_eq!(config.flows[0].fetch_max_wait_ms, 300);
        let (config, _) = parse_ok(
            "source->target.enabled = true\n\
             fetch.max.wait.ms = 100\n\
             source.consumer.fetch.max.wait.ms = 200\n",
        );
        assert_eq!(config.flows[0].fetch_max_wait_ms, 200);
    }

    #[test]
    fn strait_name_beats_mm2_name_in_one_scope() {
        // Either order: progress.commit.interval.ms wins over offset.flush.interval.ms.
        for text in [
            "progress.commit.interval.ms = 1000\noffset.flush.interval.ms = 60000\n",
            "offset.flush.interval.ms = 60000\nprogress.commit.interval.ms = 1000\n",
        ] {
            let (config, _) = parse_ok(&format!("source->target.enabled = true\n{text}"));
            assert_eq!(config.flows[0].progress_commit_interval_ms, 1000);
        }
    }

    #[test]
    fn exclude_beats_deprecated_blacklist() {
        let (config, warnings) = parse_ok(
            "source->target.enabled = true\n\
             topics.exclude = a\n\
             topics.blacklist = b\n",
        );
        assert_eq!(config.flows[0].topics.exclude[0].as_str(), "^(?:a)$");
        let w = warnings
            .iter()
            .find(|w| w.key == "topics.blacklist")
            .unwrap();
        assert_eq!((w.kind, w.line), (WarningKind::Deprecated, Some(6)));
    }

    #[test]
    fn internal_replication_factor_takes_largest_mm2_key_unless_strait_key_set() {
        let (config, _) = parse_ok(
            "source->target.enabled = true\n\
             heartbeats.topic.replication.factor = 1\n\
             checkpoints.topic.replication.factor = 2\n\
             offset-syncs.topic.replication.factor = 1\n",
        );
        assert_eq!(config.flows[0].internal_replication_factor, 2);
        let (config, _) = parse_ok(
            "source->target.enabled = true\n\
             internal.topic.replication.factor = 1\n\
             checkpoints.topic.replication.factor = 2\n",
        );
        assert_eq!(config.flows[0].internal_replication_factor, 1);
    }

    #[test]
    fn unknown_keys_warn_with_key_and_line() {
        let (_, warnings) = parse_ok(
            "source->target.enabled = true\n\
             topicz = x\n\
             source->target.topicz = y\n\
             source.bogus = z\n",
        );
        let keys: Vec<(&str, Option<usize>, WarningKind)> = warnings
            .iter()
            .map(|w| (w.key.as_str(), w.line, w.kind))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("topicz", Some(5), WarningKind::UnknownKey),
                ("source->target.topicz", Some(6), WarningKind::UnknownKey),
                ("source.bogus", Some(7), WarningKind::UnknownKey),
            ]
        );
        assert!(warnings[0]
            .to_string()
            .starts_with("mm2.properties:5: topicz: "));
    }

    #[test]
    fn client_and_worker_keys_warn_by_kind() {
        let (_, warnings) = parse_ok(
            "source->target.enabled = true\n\
             source.security.protocol = SSL\n\
             source.ssl.keymanager.algorithm = SunX509\n\
             target.producer.acks = all\n\
             source->target.producer.compression.type = lz4\n\
             key.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n\
             source.security.protocol = PLAINTEXT\n",
        );
        let kinds: Vec<(&str, WarningKind)> =
            warnings.iter().map(|w| (w.key.as_str(), w.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                // Duplicate key, then the later PLAINTEXT (the default) warns no further.
                ("source.security.protocol", WarningKind::Duplicate),
                (
                    "source.ssl.keymanager.algorithm",
                    WarningKind::NotImplemented
                ),
                ("target.producer.acks", WarningKind::NotImplemented),
                (
                    "source->target.producer.compression.type",
                    WarningKind::NotImplemented
                ),
                ("key.converter", WarningKind::Ignored),
            ]
        );
    }

    #[test]
    fn unsupported_keys_warn_only_when_not_default() {
        let (_, warnings) = parse_ok(
            "source->target.enabled = true\n\
             refresh.topics.enabled = TRUE\n\
             source->target.emit.offset-syncs.enabled = false\n",
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].key, "source->target.emit.offset-syncs.enabled");
        assert_eq!(warnings[0].kind, WarningKind::NotImplemented);
    }

    #[test]
    fn top_level_enabled_enables_every_pair() {
        let (config, warnings) = parse_ok("enabled = true\n");
        assert_eq!(config.flows.len(), 2);
        assert_eq!(warnings[0].kind, WarningKind::Semantics);
    }

    #[test]
    fn aliases_with_dots_use_the_longest_match() {
        let text = "clusters = us, us.west\n\
                    us.bootstrap.servers = a:1\n\
                    us.west.bootstrap.servers = b:1\n\
                    us->us.west.enabled = true\n\
                    us->us.west.topics = x\n";
        let (config, _) = parse_properties(text, "mm2.properties").unwrap();
        assert_eq!(config.clusters["us.west"].bootstrap_servers, vec!["b:1"]);
        assert_eq!(config.flows[0].target, "us.west");
        assert_eq!(config.flows[0].topics.include[0].as_str(), "^(?:x)$");
    }

    #[test]
    fn duplicate_keys_last_wins_with_warning() {
        let (config, warnings) = parse_ok(
            "source->target.enabled = true\n\
             replication.factor = 1\n\
             replication.factor = 3\n",
        );
        assert_eq!(config.flows[0].replication_factor, 3);
        assert_eq!(warnings[0].kind, WarningKind::Duplicate);
        assert_eq!(warnings[0].line, Some(6));
    }

    #[test]
    fn type_errors_name_key_and_line() {
        let err = parse_properties(
            &format!("{BASE}source->target.enabled = yes\n"),
            "mm2.properties",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "mm2.properties:4: source->target.enabled: expected true or false, got `yes`"
        );
        let err = parse_properties(
            &format!("{BASE}source->target.enabled = true\nsource->target.tasks.max = four\n"),
            "mm2.properties",
        )
        .unwrap_err();
        assert_eq!(
            (err.line(), err.key()),
            (Some(5), Some("source->target.tasks.max"))
        );
        let err = parse_properties(
            &format!("{BASE}replication.policy.class = com.example.MyPolicy\n"),
            "mm2.properties",
        )
        .unwrap_err();
        assert_eq!(
            (err.line(), err.key()),
            (Some(4), Some("replication.policy.class"))
        );
    }

    #[test]
    fn missing_clusters_is_an_error() {
        let err = parse_properties("a.bootstrap.servers = x:1\n", "mm2.properties").unwrap_err();
        assert_eq!(err.key(), Some("clusters"));
        assert!(err.to_string().contains("missing required setting"));
    }

    proptest! {
        #[test]
        fn lexer_never_panics(text in "[ -~\t\r\n\\\\]{0,200}") {
            let _ = lex(&text);
            let _ = parse_properties(&text, "fuzz.properties");
        }

        #[test]
        fn plain_pairs_round_trip(key in "[a-z][a-z.>-]{0,20}", value in "[a-zA-Z0-9.,*]{0,20}") {
            let entries = lex(&format!("{key} = {value}\n")).unwrap();
            prop_assert_eq!(entries, vec![Entry { key, value, line: 1 }]);
        }
    }
}
