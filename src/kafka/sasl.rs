//! SASL authentication of a broker connection (`security.protocol = SASL_PLAINTEXT` or
//! `SASL_SSL`), as Kafka's clients do it: after ApiVersions, SaslHandshake names the
//! mechanism and SaslAuthenticate carries its messages. PLAIN (RFC 4616), SCRAM-SHA-256 /
//! SCRAM-SHA-512 (RFC 5802, RFC 7677) and OAUTHBEARER (RFC 7628, with tokens from
//! [`oauth`](super::oauth)).
//!
//! A refusal is [`KafkaError::Auth`], which is not retried: a wrong password or a mechanism
//! the broker does not enable does not mend itself.
//!
//! The broker may give the session a lifetime (KIP-368, `connections.max.reauth.ms`, or a
//! token's expiry): it closes a connection that sends a request after it ends. The same
//! exchange, run again on the live connection, renews the session
//! ([`Connection`] does that in time).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, FixedOutputReset};
use hmac::{Mac, SimpleHmac};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rand::distr::{Alphanumeric, SampleString};

use super::connection::Connection;
use super::error::KafkaError;
use super::oauth::Tokens;
use super::tls::Tls;
use crate::config::{SaslConfig, SaslCredentials, SaslMechanism};

/// How the connections to one cluster authenticate: the settings, and for OAUTHBEARER the
/// tokens they share.
pub struct Login {
    config: SaslConfig,
    tokens: Option<Tokens>,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({})", self.config.mechanism.name())
    }
}

impl Login {
    /// `tls` is the cluster's: an `https://` token endpoint is trusted as its brokers are.
    pub fn new(config: SaslConfig, tls: Option<Tls>, timeout: Duration) -> Login {
        let tokens = match &config.credentials {
            SaslCredentials::Token { source, .. } => {
                Some(Tokens::new(source.clone(), tls, timeout))
            }
            SaslCredentials::Password { .. } => None,
        };
        Login { config, tokens }
    }
}

/// Authenticates `conn` (ApiVersions done) as `login` says, on the connection's
/// authentication lane; returns the session's lifetime if the broker limits it.
pub(super) async fn authenticate(
    conn: &Connection,
    login: &Login,
) -> Result<Option<Duration>, KafkaError> {
    let sasl = &login.config;
    let refused = |reason: String| KafkaError::Auth {
        addr: conn.addr().to_string(),
        mechanism: sasl.mechanism.name(),
        reason,
    };
    let mechanism = sasl.mechanism.name();
    let handshake = conn
        .send_auth(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
        )
        .await?;
    match handshake.error_code {
        0 => {}
        33 => {
            let enabled: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(format!(
                "the broker does not enable {mechanism} on this listener (UNSUPPORTED_SASL_MECHANISM); it enables {}",
                enabled.join(", ")
            )));
        }
        code => KafkaError::check("SaslHandshake", || conn.addr().to_string(), code)?,
    }
    // The last SaslAuthenticate response carries the session's lifetime (0: unlimited).
    let lifetime = &AtomicI64::new(0);
    let exchange = |bytes: Vec<u8>| async move {
        let response = conn
            .send_auth(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)))
            .await?;
        lifetime.store(response.session_lifetime_ms, Ordering::Relaxed);
        if response.error_code != 0 {
            let message = response
                .error_message
                .as_deref()
                .unwrap_or_default()
                .to_string();
            let name = match response.error_code {
                58 => "SASL_AUTHENTICATION_FAILED".to_string(),
                code => format!("Kafka error {code}"),
            };
            return Err(refused(format!("{name}: {message}")));
        }
        Ok(response.auth_bytes.to_vec())
    };
    match (&sasl.credentials, login.tokens.as_ref()) {
        (SaslCredentials::Password { username, password }, _) => match sasl.mechanism {
            SaslMechanism::Plain => {
                exchange(plain(username, password.expose())).await?;
            }
            SaslMechanism::ScramSha256 => {
                scram::<sha2::Sha256, _, _>(username, password.expose(), exchange, refused).await?
            }
            SaslMechanism::ScramSha512 => {
                scram::<sha2::Sha512, _, _>(username, password.expose(), exchange, refused).await?
            }
            SaslMechanism::OAuthBearer => {
                return Err(refused("OAUTHBEARER takes a token, not a password".into()))
            }
        },
        (SaslCredentials::Token { extensions, .. }, Some(tokens)) => {
            let token = tokens.token().await?;
            let answer = exchange(bearer(&token, extensions)).await?;
            if !answer.is_empty() {
                // RFC 7628 3.2.3: the broker explains a refusal in JSON, the client
                // acknowledges with %x01, and then the broker fails the exchange.
                let explained = String::from_utf8_lossy(&answer).into_owned();
                return Err(match exchange(vec![1]).await {
                    Err(KafkaError::Auth { reason, .. }) => {
                        refused(format!("{reason} (the broker says {explained})"))
                    }
                    Err(other) => other,
                    Ok(_) => refused(format!("the broker refused the token: {explained}")),
                });
            }
        }
        (SaslCredentials::Token { .. }, None) => {
            return Err(refused("no token source".into()));
        }
    }
    Ok(u64::try_from(lifetime.load(Ordering::Relaxed))
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis))
}

/// OAUTHBEARER's client message (RFC 7628 3.1): no channel binding, no authorization id, the
/// bearer token, then the SASL extensions (KIP-342), sorted by name.
fn bearer(token: &str, extensions: &std::collections::BTreeMap<String, String>) -> Vec<u8> {
    let mut out = format!("n,,\x01auth=Bearer {token}\x01");
    for (name, value) in extensions {
        out.push_str(&format!("{name}={value}\x01"));
    }
    out.push('\x01');
    out.into_bytes()
}

/// PLAIN's one message: no authorization id, the user name, the password.
fn plain(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + username.len() + password.len());
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

/// The SCRAM exchange with hash `D`: client-first, server-first, client-final (with the
/// proof), server-final (whose signature proves the broker knows the password too).
async fn scram<D, F, Fut>(
    username: &str,
    password: &str,
    exchange: F,
    refused: impl Fn(String) -> KafkaError,
) -> Result<(), KafkaError>
where
    D: Digest + BlockSizeUser + FixedOutputReset + Clone,
    F: Fn(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, KafkaError>>,
{
    let client = ScramClient::new(username, &Alphanumeric.sample_string(&mut rand::rng(), 24));
    let server_first = exchange(client.first().into_bytes()).await?;
    let server_first = String::from_utf8(server_first)
        .map_err(|_| refused("the server-first SCRAM message is not UTF-8".into()))?;
    let (client_final, expected) = client
        .finish::<D>(password, &server_first)
        .map_err(&refused)?;
    let server_final = exchange(client_final.into_bytes()).await?;
    let server_final = String::from_utf8_lossy(&server_final);
    match server_final.strip_prefix("v=") {
        Some(v) if v == expected => Ok(()),
        Some(_) => Err(refused(
            "the broker's SCRAM signature is wrong: it does not know the password".into(),
        )),
        None => Err(refused(format!(
            "the broker ended SCRAM with `{server_final}`"
        ))),
    }
}

/// The client side of one SCRAM exchange (RFC 5802 section 3), without channel binding.
struct ScramClient {
    /// `n=<user>,r=<nonce>`.
    first_bare: String,
    nonce: String,
}

impl ScramClient {
    fn new(username: &str, nonce: &str) -> Self {
        let user = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            first_bare: format!("n={user},r={nonce}"),
            nonce: nonce.to_string(),
        }
    }

    /// The client-first message.
    fn first(&self) -> String {
        format!("n,,{}", self.first_bare)
    }

    /// The client-final message for `server_first`, and the server signature (base64) the
    /// server-final message must carry.
    fn finish<D>(&self, password: &str, server_first: &str) -> Result<(String, String), String>
    where
        D: Digest + BlockSizeUser + FixedOutputReset + Clone,
    {
        let field = |name: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("the server-first SCRAM message lacks `{name}`"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the broker's SCRAM nonce does not extend strait's".into());
        }
        let salt = BASE64
            .decode(field("s=")?)
            .map_err(|_| "the SCRAM salt is not base64".to_string())?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| "the SCRAM iteration count is not a number".to_string())?;
        if !(1..=1_000_000).contains(&iterations) {
            return Err(format!(
                "the SCRAM iteration count {iterations} is out of range"
            ));
        }
        let salted = hi::<D>(password.as_bytes(), &salt, iterations);
        let client_key = hmac::<D>(&salted, b"Client Key");
        let stored_key = D::digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = hmac::<D>(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::<D>(&salted, b"Server Key");
        let server_signature = hmac::<D>(&server_key, auth_message.as_bytes());
        Ok((
            format!("{without_proof},p={}", BASE64.encode(proof)),
            BASE64.encode(server_signature),
        ))
    }
}

fn hmac<D: Digest + BlockSizeUser + FixedOutputReset + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <SimpleHmac<D> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `Hi()` of RFC 5802: PBKDF2 with HMAC-`D`, one block.
fn hi<D: Digest + BlockSizeUser + FixedOutputReset + Clone>(
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut u = hmac::<D>(password, &[salt, &1u32.to_be_bytes()].concat());
    let mut out = u.clone();
    for _ in 1..iterations {
        u = hmac::<D>(password, &u);
        out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, message for message.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let client = ScramClient::new("user", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(client.first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let (client_final, server_signature) = client
            .finish::<sha2::Sha256>("pencil", server_first)
            .unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            server_signature,
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    /// RFC 5802's example with SHA-1 checks `hi` and `hmac` over another digest size.
    #[test]
    fn scram_sha_1_matches_rfc_5802() {
        let client = ScramClient::new("user", "fyko+d2lbbFgONRv9qkxdawL");
        let server_first = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";
        let (client_final, server_signature) =
            client.finish::<sha1::Sha1>("pencil", server_first).unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        );
        assert_eq!(server_signature, "rmF9pqV8S7suAoZWja4dJRkFsKQ=");
    }

    #[test]
    fn a_server_first_message_that_cannot_be_right_is_refused() {
        let client = ScramClient::new("a=b,c", "abc");
        assert_eq!(client.first(), "n,,n=a=3Db=2Cc,r=abc");
        for bad in [
            "r=xyz,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abc,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abcd,s=***,i=4096",
            "r=abcd,s=QSXCR+Q6sek8bf92,i=0",
            "r=abcd,s=QSXCR+Q6sek8bf92",
        ] {
            assert!(client.finish::<sha2::Sha256>("pw", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn oauthbearer_sends_the_token_and_the_extensions_between_separators() {
        let mut extensions = std::collections::BTreeMap::new();
        assert_eq!(
            bearer("h.p.s", &extensions),
            b"n,,\x01auth=Bearer h.p.s\x01\x01"
        );
        extensions.insert("traceId".to_string(), "123".to_string());
        extensions.insert("logicalCluster".to_string(), "lkc-1".to_string());
        assert_eq!(
            bearer("t", &extensions),
            b"n,,\x01auth=Bearer t\x01logicalCluster=lkc-1\x01traceId=123\x01\x01"
        );
    }

    #[test]
    fn plain_is_user_and_password_after_an_empty_authorization_id() {
        assert_eq!(plain("alice", "pw"), b"\0alice\0pw");
    }
}
