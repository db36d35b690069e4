//! What loading a configuration reports: [`ConfigError`], a problem that stops strait, and
//! [`ConfigWarning`] (with its [`WarningKind`]), a setting strait accepts but wants the operator
//! to look at. Both display as `file:line: key: message`.

use std::fmt;

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

#[cfg(test)]
mod tests {
    use super::*;

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
