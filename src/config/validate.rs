//! Validation: the one step from raw structs to the typed [`Config`], for both formats.
//!
//! A flow setting is looked up flow first, then in the source cluster's `<alias>.consumer.*`
//! settings, then in the target cluster's `<alias>.producer.*` settings, then at the top
//! level, then in the defaults. Checks: aliases are valid topic-name words, every enabled
//! flow names two different declared clusters, at least one flow is enabled, regexes compile,
//! numbers are in range, bootstrap servers are `host:port`. Errors name the key as written
//! (`source->target.topics`) or the TOML path (`flows[0].topics`), with the line.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::{ConfigError, ConfigWarning, WarningKind};
use super::model::{
    defaults, ClusterConfig, Config, ExactlyOnce, FlowConfig, Identity, Interval, SaslConfig,
    SaslCredentials, SaslMechanism, ScaleOut, Secret, Takeover, TlsConfig, TlsVersion, TokenSource,
    TLS_CIPHER_SUITES,
};
use super::raw::{Format, Origin, PolicyKind, Pos, RawCluster, RawConfig, RawFlow, Sourced};
use super::toml::line_of;
use crate::filter::{
    full_match_regex, full_match_regexes, GroupFilter, TopicFilter, DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS, DEFAULT_TOPICS_EXCLUDE,
};
use crate::policy::{ReplicationPolicy, DEFAULT_SEPARATOR};

/// Validates `raw` (from `file`) into a [`Config`], appending warnings.
pub(crate) fn validate(
    raw: &RawConfig,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Config, ConfigError> {
    Validator {
        raw,
        file,
        warnings,
    }
    .run()
}

/// Kafka topic-name rules, which MM2 aliases must follow since they become topic names.
fn check_alias(alias: &str) -> Result<(), String> {
    if alias.is_empty() {
        return Err("a cluster alias must not be empty".to_string());
    }
    if alias == "." || alias == ".." || alias.len() > 249 {
        return Err(format!("`{alias}` is not a valid cluster alias"));
    }
    if let Some(c) = alias
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "cluster alias `{alias}` contains `{c}`; use only letters, digits, `.`, `_` and `-`"
        ));
    }
    Ok(())
}

/// A log filter strait can use: tracing's `EnvFilter` syntax (`info`,
/// `warn,strait::fetch=debug`).
pub(crate) fn check_log_level(v: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::try_new(v)
        .map(drop)
        .map_err(|e| format!("`{v}` is not a log filter (`info`, `warn,strait::fetch=debug`): {e}"))
}

/// A listening address: `ip:port` (`0.0.0.0:9404`, `[::]:9404`).
fn parse_listen(v: &str) -> Result<std::net::SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("`{v}` is not ip:port (such as 0.0.0.0:9404)"))
}

/// [`parse_listen`] as a key check.
pub(crate) fn check_listen(v: &str) -> Result<(), String> {
    parse_listen(v).map(drop)
}

/// `host:port` or `[ipv6]:port`, port 1..=65535.
fn check_host_port(s: &str) -> Result<(), String> {
    let malformed = || format!("`{s}` is not host:port");
    if s.contains("://") {
        return Err(format!("`{s}`: write host:port without a scheme"));
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(malformed)?;
        (host, after.strip_prefix(':').ok_or_else(malformed)?)
    } else {
        let (host, port) = s.rsplit_once(':').ok_or_else(malformed)?;
        if host.contains(':') {
            return Err(format!("`{s}`: write IPv6 addresses as [address]:port"));
        }
        (host, port)
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(malformed());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("`{s}`: port must be a number from 1 to 65535")),
    }
}

/// The most Produce requests a partition may have in flight (`produce.max.in.flight`):
/// past 5, more than the broker remembers to recognise a resend (see the key's doc).
const MAX_IN_FLIGHT: i64 = 64;

/// Upper bound of `runtime.threads`.
const MAX_RUNTIME_THREADS: i64 = 64;

/// Upper bound of `produce.connections.per.broker`.
const MAX_CONNECTIONS_PER_BROKER: i64 = 16;

/// The login module of both SCRAM mechanisms.
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// The login callback handlers whose work strait does for OAUTHBEARER (the second is the name
/// before Kafka 3.4).
const OAUTH_LOGIN_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

/// How to turn a JKS store into the PKCS12 store strait reads.
const JKS_CONVERSION: &str = "a JKS store? convert it with `keytool -importkeystore \
    -srckeystore FILE.jks -destkeystore FILE.p12 -deststoretype PKCS12` and point the location \
    at FILE.p12";

/// PEM `text` with each `-----BEGIN …-----` and `-----END …-----` on a line of its own and
/// the base64 between them without spaces: an inline value in `mm2.properties` is written
/// over continued lines, which the format joins into one.
fn pem_lines(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----") {
        let Some(len) = rest[start + 5..].find("-----") else {
            break;
        };
        let marker = &rest[start..start + 5 + len + 5];
        let body: String = rest[..start].split_whitespace().collect();
        for chunk in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str(marker);
        out.push('\n');
        rest = &rest[start + marker.len()..];
    }
    out
}

/// What a truststore or keystore location or value holds.
enum Store {
    Pem(String),
    Pkcs12(Box<p12_keystore::KeyStore>),
}

/// The certificates in PEM `text`, at least one.
fn certificates(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem_lines(text).as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate (-----BEGIN CERTIFICATE-----) in it".to_string());
    }
    Ok(certs)
}

/// The one private key in PEM `text`, unencrypted.
fn private_key(text: &str) -> Result<Secret<PrivateKeyDer<'static>>, String> {
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return Err(
            "the private key is encrypted; strait reads unencrypted keys only: decrypt \
             it with `openssl pkcs8 -in FILE -out KEY.pem` and keep that file readable by \
             strait alone"
                .to_string(),
        );
    }
    PrivateKeyDer::from_pem_slice(pem_lines(text).as_bytes())
        .map(Secret::new)
        .map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key (-----BEGIN PRIVATE KEY-----) in it".to_string()
            }
            other => format!("bad PEM private key: {other}"),
        })
}

/// The useful last line of a `regex` syntax error (`unclosed group`).
fn regex_message(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().last().unwrap_or_default().trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// Where a cluster keeps one of its string settings.
type ClusterField = fn(&RawCluster) -> &Option<Sourced<String>>;

/// A cluster's own setting of a string key, else the top-level default.
fn layered<'r>(
    cluster: &'r RawCluster,
    defaults: &'r RawCluster,
) -> impl Fn(ClusterField) -> Option<&'r Sourced<String>> {
    move |field| field(cluster).as_ref().or(field(defaults).as_ref())
}

/// The layers a flow setting is looked up in, most specific first.
struct Layers<'r>(Vec<&'r RawFlow>);

impl<'r> Layers<'r> {
    fn get<T>(
        &self,
        field: impl Fn(&'r RawFlow) -> &'r Option<Sourced<T>>,
    ) -> Option<&'r Sourced<T>> {
        self.0.iter().find_map(|layer| field(layer).as_ref())
    }
}

struct Validator<'a> {
    raw: &'a RawConfig,
    file: &'a str,
    warnings: &'a mut Vec<ConfigWarning>,
}

impl<'a> Validator<'a> {
    /// Line and key for a message: the key as written, or `path` for TOML values.
    fn place(&self, origin: Option<&Origin>, path: &str) -> (Option<usize>, String) {
        let Some(origin) = origin else {
            return (None, path.to_string());
        };
        let line = match origin.pos {
            Pos::None => None,
            Pos::Line(line) => Some(line),
            Pos::Offset(offset) => Some(line_of(&self.raw.line_starts, offset)),
        };
        let key = if origin.key.is_empty() {
            path.to_string()
        } else {
            origin.key.clone()
        };
        (line, key)
    }

    fn error(&self, origin: Option<&Origin>, path: &str, message: String) -> ConfigError {
        let (line, key) = self.place(origin, path);
        ConfigError::Invalid {
            file: self.file.to_string(),
            line,
            key: Some(key),
            message,
        }
    }

    fn warn(&mut self, origin: Option<&Origin>, path: &str, kind: WarningKind, message: String) {
        let (line, key) = self.place(origin, path);
        self.warnings.push(ConfigWarning {
            file: self.file.to_string(),
            line,
            key,
            kind,
            message,
        });
    }

    fn is_toml(&self) -> bool {
        self.raw.format == Format::Toml
    }

    /// A cluster setting's name for messages: `<alias>.bootstrap.servers` or
    /// `clusters.<alias>.bootstrap_servers`.
    fn cluster_path(&self, alias: &str, property: &str, toml: &str) -> String {
        if self.is_toml() {
            format!("clusters.{alias}.{toml}")
        } else {
            format!("{alias}.{property}")
        }
    }

    fn run(mut self) -> Result<Config, ConfigError> {
        let raw = self.raw;
        if raw.clusters.is_empty() {
            return Err(self.error(
                Some(&raw.clusters_origin),
                "clusters",
                "no cluster is declared".to_string(),
            ));
        }
        for alias in raw.clusters.keys() {
            if let Err(message) = check_alias(alias) {
                let path = format!("clusters.{alias}");
                let origin = (!self.is_toml()).then_some(&raw.clusters_origin);
                return Err(self.error(origin, &path, message));
            }
        }

        let mut flows = Vec::new();
        for (index, flow) in raw.flows.iter().enumerate() {
            if let Some(flow) = self.flow(index, flow)? {
                flows.push(flow);
            }
        }
        if flows.is_empty() {
            return Err(ConfigError::NoFlowEnabled {
                file: self.file.to_string(),
                hint: if self.is_toml() {
                    "add a [[flows]] table with source and target"
                } else {
                    "set A->B.enabled = true"
                },
            });
        }

        let used: BTreeSet<&str> = flows
            .iter()
            .flat_map(|f: &FlowConfig| [f.source.as_str(), f.target.as_str()])
            .collect();
        let mut clusters = std::collections::BTreeMap::new();
        for (alias, cluster) in &raw.clusters {
            let servers = cluster
                .bootstrap_servers
                .as_ref()
                .or(raw.cluster_defaults.bootstrap_servers.as_ref());
            let servers_path = self.cluster_path(alias, "bootstrap.servers", "bootstrap_servers");
            let Some(servers) = servers else {
                if used.contains(alias.as_str()) {
                    return Err(self.error(
                        None,
                        &servers_path,
                        format!("not set, and an enabled flow uses cluster `{alias}`"),
                    ));
                }
                self.warn(
                    None,
                    &servers_path,
                    WarningKind::Semantics,
                    format!("not set; cluster `{alias}` is not used by any enabled flow, ignored"),
                );
                continue;
            };
            if servers.value.is_empty() {
                return Err(self.error(
                    Some(&servers.origin),
                    &servers_path,
                    "lists no broker".to_string(),
                ));
            }
            for server in &servers.value {
                check_host_port(server)
                    .map_err(|message| self.error(Some(&servers.origin), &servers_path, message))?;
            }
            let client_id = cluster
                .client_id
                .as_ref()
                .or(raw.cluster_defaults.client_id.as_ref())
                .map_or_else(|| defaults::CLIENT_ID.to_string(), |s| s.value.clone());
            let timeout = cluster
                .request_timeout_ms
                .as_ref()
                .or(raw.cluster_defaults.request_timeout_ms.as_ref());
            let timeout_path = self.cluster_path(alias, "request.timeout.ms", "request_timeout_ms");
            let request_timeout_ms = self.int(
                timeout,
                &timeout_path,
                defaults::REQUEST_TIMEOUT_MS as i64,
                1,
                i64::MAX,
            )? as u64;
            let send_buffer = cluster
                .send_buffer_bytes
                .as_ref()
                .or(raw.cluster_defaults.send_buffer_bytes.as_ref());
            let send_buffer_path =
                self.cluster_path(alias, "send.buffer.bytes", "send_buffer_bytes");
            let send_buffer_bytes = self.int(
                send_buffer,
                &send_buffer_path,
                defaults::SEND_BUFFER_BYTES,
                -1,
                i64::from(i32::MAX),
            )?;
            clusters.insert(
                alias.clone(),
                ClusterConfig {
                    alias: alias.clone(),
                    bootstrap_servers: servers.value.clone(),
                    client_id,
                    request_timeout_ms,
                    send_buffer_bytes: u32::try_from(send_buffer_bytes).ok(),
                    tls: self.tls(alias, cluster)?,
                    sasl: self.sasl(alias, cluster)?,
                },
            );
        }
        let log_level = match &self.raw.log_level {
            None => "info".to_string(),
            Some(level) => check_log_level(&level.value)
                .map(|()| level.value.clone())
                .map_err(|message| self.error(Some(&level.origin), "log_level", message))?,
        };
        let metrics_listen = match &self.raw.metrics_listen {
            None => None,
            Some(addr) => Some(
                parse_listen(&addr.value)
                    .map_err(|message| self.error(Some(&addr.origin), "metrics_listen", message))?,
            ),
        };
        // TLS is the work that a second thread pays for (the key's doc has the numbers).
        let tls = clusters.values().any(|c| c.tls.is_some());
        let runtime_threads = self.int(
            self.raw.runtime_threads.as_ref(),
            "runtime_threads",
            if tls { 2 } else { 1 },
            1,
            MAX_RUNTIME_THREADS,
        )? as usize;
        Ok(Config {
            clusters,
            flows,
            log_level,
            metrics_listen,
            runtime_threads,
        })
    }

    /// Whether cluster `alias` runs TLS and whether it authenticates with SASL
    /// (`security.protocol`).
    fn protocol(&self, alias: &str, cluster: &RawCluster) -> Result<(bool, bool), ConfigError> {
        let protocol = cluster.security_protocol.as_ref().or(self
            .raw
            .cluster_defaults
            .security_protocol
            .as_ref());
        match protocol.map(|p| p.value.to_ascii_uppercase()).as_deref() {
            None | Some("PLAINTEXT") => Ok((false, false)),
            Some("SSL") => Ok((true, false)),
            Some("SASL_PLAINTEXT") => Ok((false, true)),
            Some("SASL_SSL") => Ok((true, true)),
            Some(other) => Err(self.error(
                protocol.map(|p| &p.origin),
                &self.cluster_path(alias, "security.protocol", "security_protocol"),
                format!(
                    "`{other}` is not a security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or \
                     SASL_SSL"
                ),
            )),
        }
    }

    /// The SASL settings of cluster `alias`: `None` unless `security.protocol` is `SASL_*`.
    /// `sasl.jaas.config` holds a password, so no message quotes it.
    fn sasl(&self, alias: &str, cluster: &RawCluster) -> Result<Option<SaslConfig>, ConfigError> {
        let (_, sasl) = self.protocol(alias, cluster)?;
        if !sasl {
            return Ok(None);
        }
        let defaults = &self.raw.cluster_defaults;
        let pick = layered(cluster, defaults);
        let written = pick(|c| &c.sasl_mechanism);
        let mechanism_path = self.cluster_path(alias, "sasl.mechanism", "sasl_mechanism");
        let (mechanism, module) = match written.map(|m| m.value.trim()).unwrap_or("GSSAPI") {
            "PLAIN" => (
                SaslMechanism::Plain,
                "org.apache.kafka.common.security.plain.PlainLoginModule",
            ),
            "SCRAM-SHA-256" => (SaslMechanism::ScramSha256, SCRAM_MODULE),
            "SCRAM-SHA-512" => (SaslMechanism::ScramSha512, SCRAM_MODULE),
            "OAUTHBEARER" => (SaslMechanism::OAuthBearer, OAUTH_MODULE),
            other => {
                return Err(self.error(
                    written.map(|m| &m.origin),
                    &mechanism_path,
                    format!(
                        "`{other}` is not supported{}: strait speaks PLAIN, SCRAM-SHA-256, \
                         SCRAM-SHA-512 and OAUTHBEARER",
                        if written.is_none() {
                            " (Kafka's default; set sasl.mechanism)"
                        } else {
                            ""
                        }
                    ),
                ))
            }
        };
        let jaas = pick(|c| &c.sasl_jaas_config);
        let jaas_path = self.cluster_path(alias, "sasl.jaas.config", "sasl_jaas_config");
        let Some(jaas) = jaas else {
            return Err(self.error(
                written.map(|m| &m.origin),
                &jaas_path,
                format!(
                    "{} needs sasl.jaas.config with {}",
                    mechanism.name(),
                    match mechanism {
                        SaslMechanism::OAuthBearer =>
                            "the login module ".to_string() + OAUTH_MODULE,
                        _ => "a username and a password".to_string(),
                    }
                ),
            ));
        };
        let invalid = |message: String| self.error(Some(&jaas.origin), &jaas_path, message);
        let mut entry = super::jaas::parse(&jaas.value).map_err(&invalid)?;
        if entry.module != module {
            return Err(invalid(format!(
                "{} needs the login module {module}, not {}",
                mechanism.name(),
                entry.module
            )));
        }
        if mechanism == SaslMechanism::OAuthBearer {
            let credentials = self.oauth(alias, cluster, &mut entry.options, &invalid)?;
            return Ok(Some(SaslConfig {
                mechanism,
                credentials,
            }));
        }
        let mut option = |name: &str| {
            entry
                .options
                .remove(name)
                .ok_or_else(|| invalid(format!("the login module has no `{name}` option")))
        };
        Ok(Some(SaslConfig {
            mechanism,
            credentials: SaslCredentials::Password {
                username: option("username")?,
                password: Secret::new(option("password")?),
            },
        }))
    }

    /// OAUTHBEARER's token source, from the `sasl.oauthbearer.*` keys and the login module's
    /// options (the keys win, as in Kafka 4.1).
    fn oauth(
        &self,
        alias: &str,
        cluster: &RawCluster,
        options: &mut BTreeMap<String, String>,
        invalid: &dyn Fn(String) -> ConfigError,
    ) -> Result<SaslCredentials, ConfigError> {
        let defaults = &self.raw.cluster_defaults;
        let pick = layered(cluster, defaults);
        if let Some(unsecured) = options.keys().find(|k| k.starts_with("unsecuredLogin")) {
            return Err(invalid(format!(
                "`{unsecured}` asks for Kafka's unsecured login, which makes up its own \
                 unsigned token; strait gets tokens from sasl.oauthbearer.token.endpoint.url"
            )));
        }
        let handler_path = self.cluster_path(
            alias,
            "sasl.login.callback.handler.class",
            "sasl_login_callback_handler_class",
        );
        if let Some(handler) = pick(|c| &c.sasl_login_callback_handler_class) {
            if !OAUTH_LOGIN_HANDLERS.contains(&handler.value.trim()) {
                return Err(self.error(
                    Some(&handler.origin),
                    &handler_path,
                    format!(
                        "`{}` cannot run in strait, which runs no Java code; it does what \
                         {} does",
                        handler.value.trim(),
                        OAUTH_LOGIN_HANDLERS[0]
                    ),
                ));
            }
        }
        let url_path = self.cluster_path(
            alias,
            "sasl.oauthbearer.token.endpoint.url",
            "sasl_oauthbearer_token_endpoint_url",
        );
        let Some(url) = pick(|c| &c.sasl_oauthbearer_token_endpoint_url) else {
            return Err(self.error(
                None,
                &url_path,
                "not set: OAUTHBEARER needs a token endpoint (`https://...`) or a token file \
                 (`file:///...`)"
                    .into(),
            ));
        };
        let url_value = url.value.trim();
        let retriever_path = self.cluster_path(
            alias,
            "sasl.oauthbearer.jwt.retriever.class",
            "sasl_oauthbearer_jwt_retriever_class",
        );
        let file = url_value.strip_prefix("file://");
        if let Some(retriever) = pick(|c| &c.sasl_oauthbearer_jwt_retriever_class) {
            let class = retriever.value.trim();
            let short = class.rsplit('.').next().unwrap_or(class);
            let fits = match short {
                "DefaultJwtRetriever" => true,
                "FileJwtRetriever" => file.is_some(),
                "ClientCredentialsJwtRetriever" => file.is_none(),
                _ => false,
            };
            if !fits {
                return Err(self.error(
                    Some(&retriever.origin),
                    &retriever_path,
                    format!(
                        "`{class}` is not what strait does with `{url_value}`: a file:// URL \
                         is read as FileJwtRetriever does, an https:// one asked as \
                         ClientCredentialsJwtRetriever does"
                    ),
                ));
            }
        }
        let extensions = options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("extension_")?.to_string(), v.clone())))
            .collect();
        if let Some(path) = file {
            return Ok(SaslCredentials::Token {
                source: TokenSource::File(path.into()),
                extensions,
            });
        }
        if !(url_value.starts_with("https://") || url_value.starts_with("http://")) {
            return Err(self.error(
                Some(&url.origin),
                &url_path,
                format!("`{url_value}` is neither an https:// nor a file:// URL"),
            ));
        }
        let mut credential =
            |key: fn(&RawCluster) -> &Option<Sourced<String>>, property: &str, option: &str| {
                pick(key)
                    .map(|v| v.value.clone())
                    .or_else(|| options.remove(option))
                    .ok_or_else(|| {
                        self.error(
                            None,
                            &self.cluster_path(alias, property, &property.replace('.', "_")),
                            format!(
                                "not set (nor the login module's `{option}` option): the token \
                             endpoint needs it"
                            ),
                        )
                    })
            };
        let client_id = credential(
            |c| &c.sasl_oauthbearer_client_credentials_client_id,
            "sasl.oauthbearer.client.credentials.client.id",
            "clientId",
        )?;
        let client_secret = credential(
            |c| &c.sasl_oauthbearer_client_credentials_client_secret,
            "sasl.oauthbearer.client.credentials.client.secret",
            "clientSecret",
        )?;
        let scope = pick(|c| &c.sasl_oauthbearer_scope)
            .map(|v| v.value.clone())
            .or_else(|| options.remove("scope"))
            .filter(|s| !s.trim().is_empty());
        Ok(SaslCredentials::Token {
            source: TokenSource::ClientCredentials {
                url: url_value.to_string(),
                client_id,
                client_secret: Secret::new(client_secret),
                scope,
            },
            extensions,
        })
    }

    /// The TLS settings of cluster `alias`: `None` for PLAINTEXT. Reads the PEM files it names
    /// now, so that a missing file or a file that holds no certificate fails at start-up.
    fn tls(&mut self, alias: &str, cluster: &RawCluster) -> Result<Option<TlsConfig>, ConfigError> {
        let defaults = &self.raw.cluster_defaults;
        let pick = layered(cluster, defaults);
        let toml = self.is_toml();
        let path = |property: &str| match toml {
            true => format!("clusters.{alias}.{}", property.replace('.', "_")),
            false => format!("{alias}.{property}"),
        };
        let (tls, _) = self.protocol(alias, cluster)?;
        if !tls {
            return Ok(None);
        }

        for (kind, key) in [
            (pick(|c| &c.ssl_truststore_type), "ssl.truststore.type"),
            (pick(|c| &c.ssl_keystore_type), "ssl.keystore.type"),
        ] {
            if let Some(kind) = kind.filter(|k| {
                !["PEM", "PKCS12", "JKS"].contains(&k.value.to_ascii_uppercase().as_str())
            }) {
                return Err(self.error(
                    Some(&kind.origin),
                    &path(key),
                    format!("`{}` is not a store type: PEM, PKCS12 or JKS", kind.value),
                ));
            }
        }
        let trusted = match self.store(
            pick(|c| &c.ssl_truststore_location),
            pick(|c| &c.ssl_truststore_certificates),
            pick(|c| &c.ssl_truststore_password),
            [
                &path("ssl.truststore.location"),
                &path("ssl.truststore.certificates"),
            ],
        )? {
            None => None,
            Some((Store::Pem(text), origin, key)) => {
                Some(certificates(&text).map_err(|m| self.error(Some(&origin), &key, m))?)
            }
            Some((Store::Pkcs12(store), origin, key)) => {
                let certs: Vec<CertificateDer<'static>> = store
                    .entries()
                    .flat_map(|(_, entry)| match entry {
                        p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => {
                            chain.chain().iter().map(|c| c.as_der().to_vec()).collect()
                        }
                        _ => Vec::new(),
                    })
                    .map(CertificateDer::from)
                    .collect();
                if certs.is_empty() {
                    return Err(self.error(
                        Some(&origin),
                        &key,
                        "no certificate in the store".into(),
                    ));
                }
                Some(certs)
            }
        };

        let location = pick(|c| &c.ssl_keystore_location);
        let chain = pick(|c| &c.ssl_keystore_certificate_chain);
        let key = pick(|c| &c.ssl_keystore_key);
        let identity = match (chain, key) {
            (Some(chain), Some(key)) if location.is_none() => {
                let key_path = path("ssl.keystore.key");
                let chain_path = path("ssl.keystore.certificate.chain");
                Some(Identity {
                    chain: certificates(&chain.value)
                        .map_err(|m| self.error(Some(&chain.origin), &chain_path, m))?,
                    key: private_key(&key.value)
                        .map_err(|m| self.error(Some(&key.origin), &key_path, m))?,
                })
            }
            (None, None) => match self.store(
                location,
                None,
                pick(|c| &c.ssl_keystore_password),
                [&path("ssl.keystore.location"), ""],
            )? {
                None => None,
                Some((Store::Pem(text), origin, key)) => Some(Identity {
                    chain: certificates(&text).map_err(|m| self.error(Some(&origin), &key, m))?,
                    key: private_key(&text).map_err(|m| self.error(Some(&origin), &key, m))?,
                }),
                Some((Store::Pkcs12(store), origin, key)) => {
                    let Some((_, chain)) = store.private_key_chain() else {
                        return Err(self.error(
                            Some(&origin),
                            &key,
                            "no private key in the store".into(),
                        ));
                    };
                    Some(Identity {
                        chain: chain
                            .chain()
                            .iter()
                            .map(|c| CertificateDer::from(c.as_der().to_vec()))
                            .collect(),
                        key: Secret::new(PrivateKeyDer::Pkcs8(chain.key().to_vec().into())),
                    })
                }
            },
            (one, other) => {
                let origin = one.or(other).or(location).map(|s| &s.origin);
                return Err(self.error(
                    origin,
                    &path("ssl.keystore.key"),
                    "set ssl.keystore.certificate.chain and ssl.keystore.key together, or \
                     ssl.keystore.location alone"
                        .to_string(),
                ));
            }
        };
        // A PEM key that parsed is unencrypted, and a PKCS12 key opens with the store's
        // password: this one has nothing to open.
        if let (Some(password), Some(_)) = (pick(|c| &c.ssl_key_password), &identity) {
            self.warn(
                Some(&password.origin),
                &path("ssl.key.password"),
                WarningKind::Semantics,
                "not used: a PEM key must be unencrypted, and a PKCS12 key opens with \
                 ssl.keystore.password"
                    .to_string(),
            );
        }

        let algorithm = pick(|c| &c.ssl_endpoint_identification_algorithm);
        let verify_hostname = match algorithm.map(|a| a.value.trim()) {
            None => true,
            Some(a) if a.eq_ignore_ascii_case("https") => true,
            Some("") => {
                self.warn(
                    algorithm.map(|a| &a.origin),
                    &path("ssl.endpoint.identification.algorithm"),
                    WarningKind::Semantics,
                    "hostname verification is off: any certificate the trusted CAs signed is \
                     accepted for any broker"
                        .to_string(),
                );
                false
            }
            Some(other) => {
                return Err(self.error(
                    algorithm.map(|a| &a.origin),
                    &path("ssl.endpoint.identification.algorithm"),
                    format!(
                        "`{other}` is not an identification algorithm: https, or empty for none"
                    ),
                ))
            }
        };

        let protocols = cluster
            .ssl_enabled_protocols
            .as_ref()
            .or(defaults.ssl_enabled_protocols.as_ref());
        let mut versions = Vec::new();
        for p in protocols.map_or(&[][..], |p| &p.value[..]) {
            versions.push(match p.as_str() {
                "TLSv1.2" => TlsVersion::Tls12,
                "TLSv1.3" => TlsVersion::Tls13,
                other => {
                    return Err(self.error(
                        protocols.map(|p| &p.origin),
                        &path("ssl.enabled.protocols"),
                        format!("`{other}` is not a TLS version strait speaks: TLSv1.2, TLSv1.3"),
                    ))
                }
            });
        }
        if versions.is_empty() {
            versions = vec![TlsVersion::Tls12, TlsVersion::Tls13];
        }
        let suites = cluster
            .ssl_cipher_suites
            .as_ref()
            .or(defaults.ssl_cipher_suites.as_ref());
        let cipher_suites = suites.map_or_else(Vec::new, |s| s.value.clone());
        let lacking: Vec<&str> = cipher_suites
            .iter()
            .map(String::as_str)
            .filter(|s| !TLS_CIPHER_SUITES.contains(s))
            .collect();
        if !lacking.is_empty() {
            return Err(self.error(
                suites.map(|s| &s.origin),
                &path("ssl.cipher.suites"),
                format!(
                    "strait's TLS lacks {}; it has {}",
                    lacking.join(", "),
                    TLS_CIPHER_SUITES.join(", ")
                ),
            ));
        }
        Ok(Some(TlsConfig {
            trusted,
            identity,
            verify_hostname,
            versions,
            cipher_suites,
        }))
    }

    /// A store from a file (`location`: PEM, or PKCS12 opened with `password`) or inline PEM
    /// (`inline`), with where it came from and the key to name in messages; `None` when
    /// neither is set. `names` are the keys of location and inline.
    fn store(
        &self,
        location: Option<&Sourced<String>>,
        inline: Option<&Sourced<String>>,
        password: Option<&Sourced<String>>,
        names: [&str; 2],
    ) -> Result<Option<(Store, Origin, String)>, ConfigError> {
        match (location, inline) {
            (Some(l), Some(_)) => Err(self.error(
                Some(&l.origin),
                names[0],
                format!("set {} or {}, not both", names[0], names[1]),
            )),
            (None, Some(inline)) => Ok(Some((
                Store::Pem(inline.value.clone()),
                inline.origin.clone(),
                names[1].to_string(),
            ))),
            (Some(l), None) => {
                let invalid = |message: String| self.error(Some(&l.origin), names[0], message);
                let bytes = std::fs::read(&l.value)
                    .map_err(|e| invalid(format!("cannot read `{}`: {e}", l.value)))?;
                let text = String::from_utf8_lossy(&bytes);
                let store = if text.contains("-----BEGIN") {
                    Store::Pem(text.into_owned())
                } else {
                    let password = password.map_or("", |p| p.value.as_str());
                    let store =
                        p12_keystore::KeyStore::from_pkcs12(&bytes, password).map_err(|e| {
                            invalid(format!(
                                "`{}` is neither PEM nor a PKCS12 store that the password \
                                 opens ({e}); {JKS_CONVERSION}",
                                l.value
                            ))
                        })?;
                    Store::Pkcs12(Box::new(store))
                };
                Ok(Some((store, l.origin.clone(), names[0].to_string())))
            }
            (None, None) => Ok(None),
        }
    }

    /// An integer setting in `min..=max`.
    fn int(
        &self,
        value: Option<&Sourced<i64>>,
        path: &str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, ConfigError> {
        let Some(value) = value else {
            return Ok(default);
        };
        if (min..=max).contains(&value.value) {
            return Ok(value.value);
        }
        let range = if max == i64::MAX {
            format!("at least {min}")
        } else {
            format!("between {min} and {max}")
        };
        Err(self.error(
            Some(&value.origin),
            path,
            format!("must be {range}, got {}", value.value),
        ))
    }

    /// A replication factor: -1 (broker default) or 1..=32767.
    fn replication_factor(
        &self,
        value: Option<&Sourced<i64>>,
        path: &str,
        default: i16,
    ) -> Result<i16, ConfigError> {
        match value {
            None => Ok(default),
            Some(v) if v.value == -1 || (1..=i16::MAX as i64).contains(&v.value) => {
                Ok(v.value as i16)
            }
            Some(v) => Err(self.error(
                Some(&v.origin),
                path,
                format!(
                    "must be -1 (broker default) or between 1 and 32767, got {}",
                    v.value
                ),
            )),
        }
    }

    /// A list of MM2 regexes, each compiled as a full match.
    fn regexes(
        &self,
        value: Option<&Sourced<Vec<String>>>,
        path: &str,
        default: &[&str],
    ) -> Result<Vec<Regex>, ConfigError> {
        let Some(value) = value else {
            return Ok(full_match_regexes(default).expect("default regexes compile"));
        };
        value
            .value
            .iter()
            .map(|item| {
                full_match_regex(item).map_err(|e| {
                    self.error(
                        Some(&value.origin),
                        path,
                        format!("invalid regex \"{item}\": {}", regex_message(&e)),
                    )
                })
            })
            .collect()
    }

    /// An `<name>_enabled` / `<name>_interval_ms` pair.
    fn interval(
        &self,
        enabled: Option<&Sourced<bool>>,
        interval: Option<&Sourced<i64>>,
        path: &str,
        default: Interval,
    ) -> Result<Interval, ConfigError> {
        let enabled = enabled.map_or(default.enabled, |s| s.value);
        let interval_ms = self.int(
            interval,
            &format!("{path}_interval_ms"),
            default.interval_ms as i64,
            if enabled { 1 } else { 0 },
            i64::MAX,
        )? as u64;
        Ok(Interval {
            enabled,
            interval_ms,
        })
    }

    /// Validates one raw flow; `None` if it is disabled.
    fn flow(&mut self, index: usize, flow: &'a RawFlow) -> Result<Option<FlowConfig>, ConfigError> {
        let raw = self.raw;
        let path = |field: &str| format!("flows[{index}].{field}");
        let (Some(source), Some(target)) = (&flow.source, &flow.target) else {
            let field = if flow.source.is_none() {
                "source"
            } else {
                "target"
            };
            return Err(self.error(
                None,
                &format!("flows[{index}]"),
                format!("missing `{field}`"),
            ));
        };
        let enabled = flow.enabled.as_ref().or(raw.defaults.enabled.as_ref());
        // The flow's own origin: its `enabled` key if any, else its first key.
        let flow_origin = flow.enabled.as_ref().map_or(&source.origin, |e| &e.origin);
        let missing: Vec<&str> = [&source.value, &target.value]
            .into_iter()
            .filter(|alias| !raw.clusters.contains_key(alias.as_str()))
            .map(String::as_str)
            .collect();
        if !enabled.map_or(self.is_toml(), |e| e.value) {
            if let Some(alias) = missing.first() {
                self.warn(
                    Some(&source.origin),
                    &path("source"),
                    WarningKind::Semantics,
                    format!(
                        "settings for {}->{} have no effect: cluster `{alias}` is not declared",
                        source.value, target.value
                    ),
                );
            }
            return Ok(None);
        }
        if source.value == target.value {
            let origin = if self.is_toml() {
                &target.origin
            } else {
                flow_origin
            };
            return Err(self.error(
                Some(origin),
                &path("target"),
                format!("source and target are the same cluster `{}`", source.value),
            ));
        }
        if let Some(alias) = missing.first() {
            let (origin, field) = if *alias == source.value {
                (&source.origin, "source")
            } else {
                (&target.origin, "target")
            };
            let message = if self.is_toml() {
                format!("no cluster `{alias}`: add a [clusters.{alias}] table")
            } else {
                format!("cluster `{alias}` is not listed in `clusters`")
            };
            let origin = if self.is_toml() { origin } else { flow_origin };
            return Err(self.error(Some(origin), &path(field), message));
        }

        let layers = Layers(vec![
            flow,
            &raw.clusters[&source.value].as_source,
            &raw.clusters[&target.value].as_target,
            &raw.defaults,
        ]);

        let topics = TopicFilter {
            include: self.regexes(layers.get(|f| &f.topics), &path("topics"), DEFAULT_TOPICS)?,
            exclude: self.regexes(
                layers.get(|f| &f.topics_exclude),
                &path("topics_exclude"),
                DEFAULT_TOPICS_EXCLUDE,
            )?,
        };
        let groups = GroupFilter {
            include: self.regexes(layers.get(|f| &f.groups), &path("groups"), DEFAULT_GROUPS)?,
            exclude: self.regexes(
                layers.get(|f| &f.groups_exclude),
                &path("groups_exclude"),
                DEFAULT_GROUPS_EXCLUDE,
            )?,
        };

        let kind = layers
            .get(|f| &f.replication_policy)
            .map_or(PolicyKind::Default, |s| s.value);
        let separator = layers.get(|f| &f.replication_policy_separator);
        if let Some(sep) = separator.filter(|s| s.value.is_empty()) {
            return Err(self.error(
                Some(&sep.origin),
                &path("replication_policy_separator"),
                "must not be empty".to_string(),
            ));
        }
        let policy = match kind {
            PolicyKind::Default => ReplicationPolicy::Default {
                separator: separator
                    .map_or(DEFAULT_SEPARATOR, |s| s.value.as_str())
                    .to_string(),
            },
            PolicyKind::Identity => {
                if let Some(sep) = separator.filter(|s| s.value != DEFAULT_SEPARATOR) {
                    self.warn(
                        Some(&sep.origin),
                        &path("replication_policy_separator"),
                        WarningKind::NotImplemented,
                        format!(
                            "with IdentityReplicationPolicy strait names heartbeats and internal \
                             topics with `.`, where MM2 would use `{}`",
                            sep.value
                        ),
                    );
                }
                ReplicationPolicy::Identity
            }
        };
        if let ReplicationPolicy::Default { separator: sep } = &policy {
            for alias in [&source.value, &target.value] {
                if alias.contains(sep.as_str()) {
                    self.warn(
                        Some(flow_origin),
                        &path("source"),
                        WarningKind::Semantics,
                        format!(
                            "cluster alias `{alias}` contains the replication separator `{sep}`: \
                             remote topic names will not parse back to it, so cycle detection \
                             cannot see it"
                        ),
                    );
                }
            }
        }

        let replication_factor = self.replication_factor(
            layers.get(|f| &f.replication_factor),
            &path("replication_factor"),
            defaults::REPLICATION_FACTOR,
        )?;
        let internal_replication_factor = self.replication_factor(
            layers.get(|f| &f.internal_replication_factor),
            &path("internal_replication_factor"),
            defaults::INTERNAL_REPLICATION_FACTOR,
        )?;
        let refresh_topics_interval_ms = self.int(
            layers.get(|f| &f.refresh_topics_interval_ms),
            &path("refresh_topics_interval_ms"),
            defaults::REFRESH_TOPICS_INTERVAL_MS as i64,
            1,
            i64::MAX,
        )? as u64;
        let progress_commit_interval_ms = self.int(
            layers.get(|f| &f.progress_commit_interval_ms),
            &path("progress_commit_interval_ms"),
            defaults::PROGRESS_COMMIT_INTERVAL_MS as i64,
            1,
            i64::MAX,
        )? as u64;
        let shutdown_drain_timeout_ms = self.int(
            layers.get(|f| &f.shutdown_drain_timeout_ms),
            &path("shutdown_drain_timeout_ms"),
            defaults::SHUTDOWN_DRAIN_TIMEOUT_MS as i64,
            0,
            i64::MAX,
        )? as u64;
        let fencing_transactional_id = layers
            .get(|f| &f.fencing_transactional_id)
            .map_or(defaults::FENCING_TRANSACTIONAL_ID, |id| id.value.as_str())
            .replace("<source>", &source.value)
            .replace("<target>", &target.value)
            .replace("<topics>", &topics.fingerprint());
        let fencing_transactional_id =
            (!fencing_transactional_id.is_empty()).then_some(fencing_transactional_id);
        let aliases = |s: &str| {
            s.replace("<source>", &source.value)
                .replace("<target>", &target.value)
        };
        let offsets_topic = aliases(
            layers
                .get(|f| &f.takeover_offsets_topic)
                .map_or(defaults::TAKEOVER_OFFSETS_TOPIC, |t| t.value.as_str()),
        );
        let takeover = Takeover {
            offsets_topic: (!offsets_topic.is_empty()).then_some(offsets_topic),
            connector: aliases(
                layers
                    .get(|f| &f.takeover_connector_name)
                    .map_or(defaults::TAKEOVER_CONNECTOR_NAME, |t| t.value.as_str()),
            ),
            group: Some(aliases(
                layers
                    .get(|f| &f.takeover_group)
                    .map_or(defaults::TAKEOVER_GROUP, |g| g.value.as_str()),
            ))
            .filter(|g| !g.is_empty()),
            wait: layers.get(|f| &f.takeover_wait).is_some_and(|w| w.value),
            continuous_handback: layers
                .get(|f| &f.takeover_handback_continuous)
                .is_some_and(|c| c.value),
        };
        let scale_out = ScaleOut {
            enabled: layers
                .get(|f| &f.scale_out_enabled)
                .is_some_and(|e| e.value),
            group: aliases(
                layers
                    .get(|f| &f.scale_out_group)
                    .map_or(defaults::SCALE_OUT_GROUP, |g| g.value.as_str()),
            ),
            instance_id: layers
                .get(|f| &f.scale_out_instance_id)
                .map(|i| i.value.clone())
                .filter(|i| !i.is_empty()),
            slots: self.int(
                layers.get(|f| &f.scale_out_slots),
                &path("scale_out_slots"),
                defaults::SCALE_OUT_SLOTS as i64,
                1,
                4096,
            )? as u32,
            session_timeout_ms: self.int(
                layers.get(|f| &f.scale_out_session_timeout_ms),
                &path("scale_out_session_timeout_ms"),
                defaults::SCALE_OUT_SESSION_TIMEOUT_MS as i64,
                1000,
                3_600_000,
            )? as u64,
        };
        let exactly_once = ExactlyOnce {
            enabled: layers.get(|f| &f.exactly_once).is_some_and(|e| e.value),
            transaction_interval_ms: self.int(
                layers.get(|f| &f.exactly_once_transaction_interval_ms),
                &path("exactly_once_transaction_interval_ms"),
                defaults::EXACTLY_ONCE_TRANSACTION_INTERVAL_MS as i64,
                10,
                // Well inside the transaction timeout strait registers (60 s).
                30_000,
            )? as u64,
        };
        if let Some(on) = layers.get(|f| &f.exactly_once).filter(|e| e.value) {
            if fencing_transactional_id.is_none() {
                return Err(self.error(
                    Some(&on.origin),
                    &path("exactly_once"),
                    "needs a transactional id: `fencing.transactional.id` is set empty".into(),
                ));
            }
        }
        let offset_reset = layers
            .get(|f| &f.offset_reset)
            .map_or_else(Default::default, |s| s.value);
        let tasks_max = self.int(
            layers.get(|f| &f.tasks_max),
            &path("tasks_max"),
            defaults::TASKS_MAX as i64,
            1,
            u32::MAX as i64,
        )? as u32;

        let emit_heartbeats = self.interval(
            layers.get(|f| &f.emit_heartbeats_enabled),
            layers.get(|f| &f.emit_heartbeats_interval_ms),
            &path("emit_heartbeats"),
            defaults::EMIT_HEARTBEATS,
        )?;
        let emit_checkpoints = self.interval(
            layers.get(|f| &f.emit_checkpoints_enabled),
            layers.get(|f| &f.emit_checkpoints_interval_ms),
            &path("emit_checkpoints"),
            defaults::EMIT_CHECKPOINTS,
        )?;
        let sync_group_offsets = self.interval(
            layers.get(|f| &f.sync_group_offsets_enabled),
            layers.get(|f| &f.sync_group_offsets_interval_ms),
            &path("sync_group_offsets"),
            defaults::SYNC_GROUP_OFFSETS,
        )?;
        let sync_topic_configs = self.interval(
            layers.get(|f| &f.sync_topic_configs_enabled),
            layers.get(|f| &f.sync_topic_configs_interval_ms),
            &path("sync_topic_configs"),
            defaults::SYNC_TOPIC_CONFIGS,
        )?;
        let sync_topic_acls = self.interval(
            layers.get(|f| &f.sync_topic_acls_enabled),
            layers.get(|f| &f.sync_topic_acls_interval_ms),
            &path("sync_topic_acls"),
            defaults::SYNC_TOPIC_ACLS,
        )?;

        let offset_syncs_location = layers
            .get(|f| &f.offset_syncs_location)
            .map_or_else(Default::default, |s| s.value);
        let offset_lag_max = self.int(
            layers.get(|f| &f.offset_lag_max),
            &path("offset_lag_max"),
            defaults::OFFSET_LAG_MAX,
            0,
            i64::MAX,
        )?;
        let config_properties_exclude = self.regexes(
            layers.get(|f| &f.config_properties_exclude),
            &path("config_properties_exclude"),
            defaults::CONFIG_PROPERTIES_EXCLUDE,
        )?;
        let i32_max = i32::MAX as i64;
        let fetch_max_bytes = self.int(
            layers.get(|f| &f.fetch_max_bytes),
            &path("fetch_max_bytes"),
            defaults::FETCH_MAX_BYTES as i64,
            1,
            i32_max,
        )? as i32;
        let fetch_partition_max_bytes = self.int(
            layers.get(|f| &f.fetch_partition_max_bytes),
            &path("fetch_partition_max_bytes"),
            defaults::FETCH_PARTITION_MAX_BYTES as i64,
            1,
            i32_max,
        )? as i32;
        let fetch_max_wait_ms = self.int(
            layers.get(|f| &f.fetch_max_wait_ms),
            &path("fetch_max_wait_ms"),
            defaults::FETCH_MAX_WAIT_MS as i64,
            0,
            i32_max,
        )? as i32;
        // Unset: the engine sizes the window from the round trip.
        let produce_max_in_flight = layers
            .get(|f| &f.produce_max_in_flight)
            .map(|v| self.int(Some(v), &path("produce_max_in_flight"), 0, 1, MAX_IN_FLIGHT))
            .transpose()?
            .map(|n| n as usize);
        let produce_connections_per_broker = self.int(
            layers.get(|f| &f.produce_connections_per_broker),
            &path("produce_connections_per_broker"),
            defaults::PRODUCE_CONNECTIONS_PER_BROKER as i64,
            1,
            MAX_CONNECTIONS_PER_BROKER,
        )? as usize;
        let produce_linger_ms = self.int(
            layers.get(|f| &f.produce_linger_ms),
            &path("produce_linger_ms"),
            defaults::PRODUCE_LINGER_MS as i64,
            0,
            i64::MAX,
        )? as u64;
        let produce_max_request_bytes = self.int(
            layers.get(|f| &f.produce_max_request_bytes),
            &path("produce_max_request_bytes"),
            defaults::PRODUCE_MAX_REQUEST_BYTES as i64,
            1,
            i32_max,
        )? as usize;
        let buffer_bytes = self.int(
            layers.get(|f| &f.buffer_bytes),
            &path("buffer_bytes"),
            defaults::BUFFER_BYTES as i64,
            1024 * 1024,
            i32_max,
        )? as usize;
        let produce_coalesce_bytes = self.int(
            layers.get(|f| &f.produce_coalesce_bytes),
            &path("produce_coalesce_bytes"),
            defaults::PRODUCE_COALESCE_BYTES as i64,
            0,
            i32_max,
        )? as usize;
        let produce_delivery_timeout_ms = self.int(
            layers.get(|f| &f.produce_delivery_timeout_ms),
            &path("produce_delivery_timeout_ms"),
            defaults::PRODUCE_DELIVERY_TIMEOUT_MS as i64,
            1,
            i64::MAX,
        )? as u64;
        let metrics_aggregation = layers
            .get(|f| &f.metrics_aggregation)
            .map_or_else(Default::default, |s| s.value);

        Ok(Some(FlowConfig {
            source: source.value.clone(),
            target: target.value.clone(),
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
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_properties;

    const BASE: &str = "clusters = source, target\n\
                        source.bootstrap.servers = s:9092\n\
                        target.bootstrap.servers = t:9092\n";

    fn err(extra: &str) -> ConfigError {
        parse_properties(&format!("{BASE}{extra}"), "mm2.properties").unwrap_err()
    }

    #[test]
    fn exactly_once_names_what_it_cannot_run_with() {
        let flow = "source->target.enabled = true\n";
        // With scale-out it runs a transaction per slot.
        let both = format!("{BASE}{flow}scale.out.enabled = true\nexactly.once = true\n");
        let (config, _) = parse_properties(&both, "mm2.properties").unwrap();
        let f = &config.flows[0];
        assert!(f.exactly_once.enabled && f.scale_out.enabled);
        let e = err(&format!(
            "{flow}fencing.transactional.id =\nexactly.once.source.support = enabled\n"
        ));
        assert_eq!(e.key(), Some("exactly.once.source.support"));
        assert!(e.to_string().contains("fencing.transactional.id"), "{e}");
        let e = err(&format!("{flow}exactly.once.source.support = on\n"));
        assert!(
            e.to_string().contains("enabled, preparing or disabled"),
            "{e}"
        );
    }

    #[test]
    fn aliases() {
        assert!(check_alias("us-west_1.a").is_ok());
        assert!(check_alias("").is_err());
        assert!(check_alias("..").is_err());
        assert!(check_alias("a b").is_err());
        assert!(check_alias("a>b").is_err());
        assert!(check_alias(&"a".repeat(250)).is_err());
    }

    #[test]
    fn host_ports() {
        for ok in [
            "localhost:9092",
            "10.0.0.1:1",
            "[::1]:9092",
            "broker-1.example.com:65535",
        ] {
            assert!(check_host_port(ok).is_ok(), "{ok}");
        }
        for bad in [
            "localhost",
            ":9092",
            "host:",
            "host:0",
            "host:65536",
            "host:x",
            "::1:9092",
            "PLAINTEXT://host:9092",
            "[::1]9092",
            "a b:1",
        ] {
            assert!(check_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_regex_names_line_key_and_regex() {
        let e = err("source->target.enabled = true\nsource->target.topics = ok, (\n");
        assert_eq!(
            e.to_string(),
            "mm2.properties:5: source->target.topics: invalid regex \"(\": unclosed group"
        );
        let e = err("source->target.enabled = true\ngroups.exclude = [\n");
        assert_eq!((e.line(), e.key()), (Some(5), Some("groups.exclude")));
        let e = err("source->target.enabled = true\nconfig.properties.exclude = a{\n");
        assert_eq!(e.key(), Some("config.properties.exclude"));
    }

    #[test]
    fn no_enabled_flow() {
        let e = err("source->target.topics = .*\n");
        assert_eq!(
            e.to_string(),
            "mm2.properties: no flow enabled: set A->B.enabled = true"
        );
        let e = err("source->target.enabled = false\n");
        assert!(matches!(e, ConfigError::NoFlowEnabled { .. }));
    }

    #[test]
    fn flow_must_name_declared_distinct_clusters() {
        let e = err("source->other.enabled = true\n");
        assert_eq!(
            e.to_string(),
            "mm2.properties:4: source->other.enabled: cluster `other` is not listed in `clusters`"
        );
        let e = err("source->source.enabled = true\n");
        assert_eq!(
            (e.line(), e.key()),
            (Some(4), Some("source->source.enabled"))
        );
    }

    #[test]
    fn disabled_flow_with_unknown_cluster_warns() {
        let (_, warnings) = parse_properties(
            &format!("{BASE}source->target.enabled = true\nsourse->target.topics = x\n"),
            "mm2.properties",
        )
        .unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].line, Some(5));
        assert_eq!(warnings[0].kind, WarningKind::Semantics);
    }

    #[test]
    fn numbers_out_of_range() {
        let cases = [
            ("replication.factor = 0", "replication.factor"),
            ("replication.factor = 40000", "replication.factor"),
            (
                "internal.topic.replication.factor = -2",
                "internal.topic.replication.factor",
            ),
            ("tasks.max = 0", "tasks.max"),
            ("produce.max.in.flight = 65", "produce.max.in.flight"),
            (
                "producer.max.in.flight.requests.per.connection = 0",
                "producer.max.in.flight.requests.per.connection",
            ),
            (
                "emit.heartbeats.interval.seconds = 0",
                "emit.heartbeats.interval.seconds",
            ),
            (
                "refresh.topics.interval.seconds = -1",
                "refresh.topics.interval.seconds",
            ),
            ("offset.lag.max = -1", "offset.lag.max"),
            ("fetch.max.bytes = 3000000000", "fetch.max.bytes"),
            ("fetch.max.wait.ms = -1", "fetch.max.wait.ms"),
            (
                "progress.commit.interval.ms = 0",
                "progress.commit.interval.ms",
            ),
            ("source.request.timeout.ms = 0", "source.request.timeout.ms"),
        ];
        for (line, key) in cases {
            let e = err(&format!("source->target.enabled = true\n{line}\n"));
            assert_eq!((e.line(), e.key()), (Some(5), Some(key)), "{e}");
        }
        // A disabled task may have a zero interval.
        parse_properties(
            &format!(
                "{BASE}source->target.enabled = true\nemit.checkpoints.enabled = false\n\
                 emit.checkpoints.interval.seconds = 0\n"
            ),
            "mm2.properties",
        )
        .unwrap();
    }

    #[test]
    fn bootstrap_servers_checked() {
        let e = err("source->target.enabled = true\nsource.bootstrap.servers = nope\n");
        assert_eq!(e.key(), Some("source.bootstrap.servers"));
        // The later duplicate line is the one that counts.
        assert_eq!(e.line(), Some(5));
        let e = parse_properties(
            "clusters = a, b\na.bootstrap.servers = x:1\na->b.enabled = true\n",
            "mm2.properties",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "mm2.properties: b.bootstrap.servers: not set, and an enabled flow uses cluster `b`"
        );
    }

    #[test]
    fn top_level_bootstrap_servers_apply_to_every_cluster() {
        let (config, _) = parse_properties(
            "clusters = a, b\nbootstrap.servers = x:1\n\
             b.bootstrap.servers = y:2\na->b.enabled = true\n",
            "mm2.properties",
        )
        .unwrap();
        assert_eq!(config.clusters["a"].bootstrap_servers, vec!["x:1"]);
        assert_eq!(config.clusters["b"].bootstrap_servers, vec!["y:2"]);
    }

    #[test]
    fn unused_cluster_without_servers_is_dropped_with_warning() {
        let (config, warnings) = parse_properties(
            "clusters = source, target, spare\n\
             source.bootstrap.servers = s:9092\n\
             target.bootstrap.servers = t:9092\n\
             source->target.enabled = true\n",
            "mm2.properties",
        )
        .unwrap();
        assert!(!config.clusters.contains_key("spare"));
        assert_eq!(warnings[0].key, "spare.bootstrap.servers");
    }

    #[test]
    fn a_log_level_that_is_no_filter_names_its_line() {
        let e = err("source->target.enabled = true\nlog.level = strait=loud\n");
        assert_eq!((e.line(), e.key()), (Some(5), Some("log.level")), "{e}");
        assert!(e.to_string().contains("strait=loud"), "{e}");
        let toml = "log_level = \"strait=loud\"\n[clusters.s]\nbootstrap_servers = [\"s:1\"]\n\
                    [clusters.t]\nbootstrap_servers = [\"t:1\"]\n\
                    [[flows]]\nsource = \"s\"\ntarget = \"t\"\n";
        let e = crate::config::parse_toml(toml, "strait.toml").unwrap_err();
        assert_eq!((e.line(), e.key()), (Some(1), Some("log_level")), "{e}");
    }

    #[test]
    fn invalid_alias() {
        let e = parse_properties("clusters = a b, c\n", "mm2.properties").unwrap_err();
        assert_eq!((e.line(), e.key()), (Some(1), Some("clusters")));
    }

    #[test]
    fn empty_separator_and_alias_with_separator() {
        let e = err("source->target.enabled = true\nreplication.policy.separator =\n");
        assert_eq!(e.key(), Some("replication.policy.separator"));
        let (_, warnings) = parse_properties(
            "clusters = a, b.c\na.bootstrap.servers = x:1\n\
             b.c.bootstrap.servers = y:1\na->b.c.enabled = true\n",
            "mm2.properties",
        )
        .unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0]
            .message
            .contains("`b.c` contains the replication separator"));
    }

    #[test]
    fn identity_with_custom_separator_warns() {
        let (config, warnings) = parse_properties(
            &format!(
                "{BASE}source->target.enabled = true\n\
                 replication.policy.class = \
                 org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n\
                 replication.policy.separator = _\n"
            ),
            "mm2.properties",
        )
        .unwrap();
        assert_eq!(config.flows[0].policy, ReplicationPolicy::Identity);
        assert_eq!(warnings[0].key, "replication.policy.separator");
    }

    #[test]
    fn acl_sync_settings_are_taken_without_warnings() {
        let (config, warnings) = parse_properties(
            &format!(
                "{BASE}source->target.enabled = true\nsync.topic.acls.interval.seconds = 60\n"
            ),
            "mm2.properties",
        )
        .unwrap();
        assert_eq!(config.flows[0].sync_topic_acls.interval_ms, 60_000);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    /// A PEM block whose body is `AAAA` (three zero bytes): enough for the config layer, which
    /// reads PEM structure; whether it is a usable certificate is for rustls to judge.
    const FAKE_CERT: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn ssl(extra: &str) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
        parse_properties(
            &format!(
                "{BASE}source->target.enabled = true\nsource.security.protocol = SSL\n{extra}"
            ),
            "mm2.properties",
        )
    }

    fn tls_of(config: &Config) -> &TlsConfig {
        config.clusters["source"].tls.as_ref().unwrap()
    }

    #[test]
    fn tls_settings_read_pem_from_a_file_or_inline_over_continued_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, format!("{FAKE_CERT}{FAKE_CERT}")).unwrap();
        let (config, warnings) = ssl(&format!(
            "source.ssl.truststore.location = {}\n",
            file.display()
        ))
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let trusted = tls_of(&config).trusted.as_ref().unwrap();
        assert_eq!(trusted.len(), 2);
        assert_eq!(trusted[0].as_ref(), [0, 0, 0]);
        assert!(config.clusters["target"].tls.is_none());

        // As Kafka's docs write PEM in a properties file: one logical line.
        let (config, _) = ssl(
            "source.ssl.truststore.certificates = -----BEGIN CERTIFICATE----- \\\n\
                               \x20   AA \\\n\
                               \x20   AA \\\n\
                               \x20   -----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert_eq!(
            tls_of(&config).trusted.as_ref().unwrap()[0].as_ref(),
            [0, 0, 0]
        );
    }

    #[test]
    fn tls_settings_that_cannot_work_are_errors_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("truststore.jks");
        std::fs::write(&binary, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let encrypted = dir.path().join("key.pem");
        std::fs::write(
            &encrypted,
            format!("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n{FAKE_CERT}"),
        )
        .unwrap();
        let cases = [
            (
                "source.ssl.truststore.location = /nonexistent/ca.pem\n".to_string(),
                "source.ssl.truststore.location: cannot read `/nonexistent/ca.pem`",
            ),
            (
                format!("source.ssl.truststore.location = {}\n", binary.display()),
                "is neither PEM nor a PKCS12 store that the password opens",
            ),
            (
                format!(
                    "source.ssl.truststore.type = BCFKS\nsource.ssl.truststore.location = {}\n",
                    binary.display()
                ),
                "source.ssl.truststore.type: `BCFKS` is not a store type",
            ),
            (
                format!(
                    "source.ssl.truststore.location = {}\nsource.ssl.truststore.certificates = x\n",
                    binary.display()
                ),
                "set source.ssl.truststore.location or source.ssl.truststore.certificates, not both",
            ),
            (
                "source.ssl.truststore.certificates = -----BEGIN PRIVATE KEY----- AAAA -----END PRIVATE KEY-----\n".to_string(),
                "source.ssl.truststore.certificates: no certificate",
            ),
            (
                format!("source.ssl.keystore.location = {}\n", encrypted.display()),
                "source.ssl.keystore.location: the private key is encrypted",
            ),
            (
                format!("source.ssl.keystore.certificate.chain = {FAKE_CERT}"),
                "set ssl.keystore.certificate.chain and ssl.keystore.key together",
            ),
            (
                "source.ssl.cipher.suites = TLS_AES_256_GCM_SHA384, TLS_RSA_WITH_AES_128_CBC_SHA\n"
                    .to_string(),
                "source.ssl.cipher.suites: strait's TLS lacks TLS_RSA_WITH_AES_128_CBC_SHA; it has",
            ),
            (
                "source.ssl.enabled.protocols = TLSv1.2, TLSv1.1\n".to_string(),
                "source.ssl.enabled.protocols: `TLSv1.1` is not a TLS version strait speaks",
            ),
            (
                "source.ssl.endpoint.identification.algorithm = ldap\n".to_string(),
                "`ldap` is not an identification algorithm",
            ),
        ];
        for (extra, expected) in cases {
            let e = ssl(&extra).unwrap_err().to_string();
            assert!(e.contains(expected), "{extra}: {e}");
            assert!(e.starts_with("mm2.properties:"), "{e}");
        }
    }

    #[test]
    fn tls_without_hostname_verification_warns() {
        let (config, warnings) = ssl("source.ssl.endpoint.identification.algorithm =\n").unwrap();
        assert!(!tls_of(&config).verify_hostname);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].kind, WarningKind::Semantics);
        assert!(warnings[0].message.contains("hostname verification is off"));
    }

    #[test]
    fn a_private_key_never_shows_in_debug_output() {
        let key = Secret::new(PrivateKeyDer::from_pem_slice(
            b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n",
        ).unwrap());
        let identity = Identity { chain: vec![], key };
        let text = format!("{identity:?}");
        assert!(
            !text.contains("secret") && !text.contains("115, 101"),
            "{text}"
        );
        assert!(text.contains("redacted"), "{text}");
    }

    fn sasl(lines: &str) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
        parse_properties(
            &format!("{BASE}source->target.enabled = true\n{lines}"),
            "mm2.properties",
        )
    }

    #[test]
    fn sasl_settings_come_from_the_mechanism_and_the_jaas_entry() {
        let (config, warnings) = sasl(
            "security.protocol = SASL_SSL\n\
             sasl.mechanism = SCRAM-SHA-512\n\
             sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username=\"alice\" password=\"pass-WORD-1\";\n\
             target.security.protocol = SASL_PLAINTEXT\n\
             target.sasl.mechanism = PLAIN\n\
             target.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule \
             required username=bob password=pass-WORD-2;\n",
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let (source, target) = (&config.clusters["source"], &config.clusters["target"]);
        let password = |c: &ClusterConfig| match &c.sasl.as_ref().unwrap().credentials {
            SaslCredentials::Password { username, password } => {
                (username.clone(), password.expose().clone())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            source.sasl.as_ref().unwrap().mechanism,
            SaslMechanism::ScramSha512
        );
        assert_eq!(password(source), ("alice".into(), "pass-WORD-1".into()));
        assert!(source.tls.is_some());
        assert_eq!(
            target.sasl.as_ref().unwrap().mechanism,
            SaslMechanism::Plain
        );
        assert_eq!(password(target), ("bob".into(), "pass-WORD-2".into()));
        assert!(target.tls.is_none());
        let debug = format!("{config:?}");
        assert!(!debug.contains("pass-WORD"), "{debug}");
    }

    #[test]
    fn oauthbearer_takes_its_token_source_from_kafka_s_keys_or_the_login_module() {
        let module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
        let (config, _) = sasl(&format!(
            "security.protocol = SASL_SSL\n\
             sasl.mechanism = OAUTHBEARER\n\
             sasl.login.callback.handler.class = \
             org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url = https://idp.example.com/token\n\
             sasl.jaas.config = {module} required clientId=app clientSecret=\"sec-RET\" \
             scope=kafka extension_traceId=7;\n\
             target.sasl.oauthbearer.token.endpoint.url = file:///run/token\n\
             target.sasl.oauthbearer.jwt.retriever.class = \
             org.apache.kafka.common.security.oauthbearer.FileJwtRetriever\n"
        ))
        .unwrap();
        let credentials = |alias: &str| config.clusters[alias].sasl.clone().unwrap().credentials;
        match credentials("source") {
            SaslCredentials::Token {
                source:
                    TokenSource::ClientCredentials {
                        url,
                        client_id,
                        client_secret,
                        scope,
                    },
                extensions,
            } => {
                assert_eq!(url, "https://idp.example.com/token");
                assert_eq!(client_id, "app");
                assert_eq!(client_secret.expose(), "sec-RET");
                assert_eq!(scope.as_deref(), Some("kafka"));
                assert_eq!(extensions["traceId"], "7");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            credentials("target"),
            SaslCredentials::Token {
                source: TokenSource::File("/run/token".into()),
                extensions: [("traceId".to_string(), "7".to_string())].into(),
            }
        );
        assert!(!format!("{config:?}").contains("sec-RET"));
    }

    #[test]
    fn oauthbearer_settings_that_cannot_work_are_errors_naming_the_key() {
        let module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
        let jaas = format!("sasl.jaas.config = {module} required;\n");
        let url = "sasl.oauthbearer.token.endpoint.url = https://idp/token\n";
        let cases = [
            (jaas.clone(), "source.sasl.oauthbearer.token.endpoint.url: not set"),
            (
                format!("{jaas}{url}sasl.oauthbearer.client.credentials.client.id = a\n"),
                "source.sasl.oauthbearer.client.credentials.client.secret: not set (nor the login module's `clientSecret`",
            ),
            (
                format!("{jaas}sasl.oauthbearer.token.endpoint.url = ldap://x\n"),
                "neither an https:// nor a file:// URL",
            ),
            (
                format!("{module} required unsecuredLoginStringClaim_sub=alice;\n")
                    .replace(module, &format!("sasl.jaas.config = {module}")),
                "`unsecuredLoginStringClaim_sub` asks for Kafka's unsecured login",
            ),
            (
                format!("{jaas}{url}sasl.login.callback.handler.class = com.example.MyHandler\n"),
                "sasl.login.callback.handler.class: `com.example.MyHandler` cannot run in strait",
            ),
            (
                format!("{jaas}{url}sasl.oauthbearer.jwt.retriever.class = org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever\n"),
                "sasl.oauthbearer.jwt.retriever.class: `org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever` is not what strait does",
            ),
            (
                "sasl.mechanism = OAUTHBEARER\n".to_string(),
                "OAUTHBEARER needs sasl.jaas.config with the login module",
            ),
        ];
        for (lines, expected) in cases {
            let lines = if lines.contains("sasl.mechanism") {
                lines
            } else {
                format!("sasl.mechanism = OAUTHBEARER\n{lines}")
            };
            let e = sasl(&format!("source.security.protocol = SASL_SSL\n{lines}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{expected}: {e}");
        }
    }

    #[test]
    fn sasl_settings_that_cannot_work_are_errors_that_never_quote_the_password() {
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule";
        let cases = [
            (
                format!("sasl.mechanism = PLAIN\nsasl.jaas.config = {scram} required username=a password=pass-WORD;\n"),
                "mm2.properties:7: sasl.jaas.config: PLAIN needs the login module org.apache.kafka.common.security.plain.PlainLoginModule",
            ),
            (
                format!("sasl.mechanism = SCRAM-SHA-256\nsasl.jaas.config = {scram} required password=pass-WORD;\n"),
                "the login module has no `username` option",
            ),
            (
                format!("sasl.mechanism = SCRAM-SHA-256\nsasl.jaas.config = {scram} required username=a password=\"pass-WORD\n"),
                "a quoted value is not closed",
            ),
            (
                "sasl.mechanism = SCRAM-SHA-256\n".to_string(),
                "SCRAM-SHA-256 needs sasl.jaas.config",
            ),
        ];
        for (lines, expected) in cases {
            let e = sasl(&format!(
                "source.security.protocol = SASL_PLAINTEXT\n{lines}"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(expected), "{e}");
            assert!(!e.contains("pass-WORD"), "{e}");
        }
    }
}
