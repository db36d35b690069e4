//! OAUTHBEARER tokens (KIP-255, KIP-768): read from a file or asked of an OAuth 2 token
//! endpoint with the client credentials grant (RFC 6749 section 4.4), over a small HTTP/1.1
//! client of its own (TLS by [`Tls`], as for brokers). One [`Tokens`] serves every connection
//! to a cluster: a token is reused until 80 % of its life has passed (Kafka's
//! `sasl.login.refresh.window.factor`), so renewing sessions does not hammer the endpoint.
//!
//! A refusal by the endpoint (HTTP 4xx) or a token strait cannot use is
//! [`KafkaError::Auth`], not retried; an endpoint that cannot be reached or fails (HTTP 5xx)
//! is an I/O error, retried like an unreachable broker.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::error::KafkaError;
use super::tls::Tls;
use crate::config::{TlsConfig, TlsVersion, TokenSource};

/// The share of a token's life after which strait asks for a new one.
const REFRESH_FACTOR: f64 = 0.8;
/// The most of a token endpoint's answer strait reads.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The tokens of one cluster's connections.
pub(super) struct Tokens {
    source: TokenSource,
    /// The cluster's TLS (its truststore), used for an `https://` endpoint; `None`: the
    /// public roots built in.
    tls: Option<Tls>,
    timeout: Duration,
    cached: Mutex<Option<Token>>,
}

struct Token {
    jwt: String,
    renew_at: Instant,
}

impl Tokens {
    pub(super) fn new(source: TokenSource, tls: Option<Tls>, timeout: Duration) -> Tokens {
        Tokens {
            source,
            tls,
            timeout,
            cached: Mutex::new(None),
        }
    }

    /// Where tokens come from, for messages (never a secret).
    pub(super) fn origin(&self) -> &str {
        match &self.source {
            TokenSource::File(path) => path.to_str().unwrap_or("the token file"),
            TokenSource::ClientCredentials { url, .. } => url,
        }
    }

    /// A token with at least a fifth of its life ahead of it.
    pub(super) async fn token(&self) -> Result<String, KafkaError> {
        let mut cached = self.cached.lock().await;
        if let Some(t) = cached.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(t.jwt.clone());
        }
        let jwt = self.fetch().await?;
        let expires = expiry(&jwt).map_err(|reason| self.refused(reason))?;
        let now = SystemTime::now();
        let life = expires.duration_since(now).map_err(|_| {
            self.refused(format!(
                "the token expired {} s ago",
                now.duration_since(expires).unwrap_or_default().as_secs()
            ))
        })?;
        *cached = Some(Token {
            jwt: jwt.clone(),
            renew_at: Instant::now() + life.mul_f64(REFRESH_FACTOR),
        });
        tracing::debug!(
            from = self.origin(),
            expires_in_s = life.as_secs(),
            "got an OAUTHBEARER token"
        );
        Ok(jwt)
    }

    async fn fetch(&self) -> Result<String, KafkaError> {
        match &self.source {
            TokenSource::File(path) => {
                // A small local file: read in place.
                let text = std::fs::read_to_string(path)
                    .map_err(|e| self.refused(format!("cannot read the token file: {e}")))?;
                Ok(text.trim().to_string())
            }
            TokenSource::ClientCredentials {
                url,
                client_id,
                client_secret,
                scope,
            } => {
                let basic = BASE64.encode(format!("{client_id}:{}", client_secret.expose()));
                let mut body = "grant_type=client_credentials".to_string();
                if let Some(scope) = scope {
                    body.push_str("&scope=");
                    body.push_str(&form_encode(scope));
                }
                let (status, answer) = tokio::time::timeout(
                    self.timeout,
                    self.post(url, &format!("Basic {basic}"), &body),
                )
                .await
                .map_err(|_| self.unreachable(format!("no answer within {:?}", self.timeout)))??;
                let text = String::from_utf8_lossy(&answer);
                match status {
                    200..=299 => access_token(&text).map_err(|reason| self.refused(reason)),
                    400..=499 => Err(self.refused(format!(
                        "the token endpoint answered HTTP {status}: {}",
                        excerpt(&text)
                    ))),
                    _ => Err(self.unreachable(format!(
                        "the token endpoint answered HTTP {status}: {}",
                        excerpt(&text)
                    ))),
                }
            }
        }
    }

    /// POSTs the form `body` to `url` with the header `Authorization: <authorization>`, and
    /// returns the status and the body of the answer.
    async fn post(
        &self,
        url: &str,
        authorization: &str,
        body: &str,
    ) -> Result<(u16, Vec<u8>), KafkaError> {
        let url = Url::parse(url).map_err(|reason| self.refused(reason))?;
        let tcp = TcpStream::connect(&url.authority)
            .await
            .map_err(|e| self.unreachable(e.to_string()))?;
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nAuthorization: {authorization}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nAccept: application/json\r\n\
             User-Agent: strait/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            url.path,
            url.host,
            env!("CARGO_PKG_VERSION"),
            body.len(),
        );
        let answer = if url.tls {
            let tls = match &self.tls {
                Some(tls) => tls.clone(),
                None => public_roots().map_err(|reason| self.refused(reason))?,
            };
            exchange(tls.handshake(&url.authority, tcp).await?, &request).await
        } else {
            exchange(tcp, &request).await
        };
        let answer = answer.map_err(|e| self.unreachable(e.to_string()))?;
        parse_response(&answer).map_err(|reason| self.unreachable(reason))
    }

    fn refused(&self, reason: String) -> KafkaError {
        KafkaError::Auth {
            addr: self.origin().to_string(),
            mechanism: "OAUTHBEARER",
            reason,
        }
    }

    fn unreachable(&self, reason: String) -> KafkaError {
        KafkaError::Io {
            addr: self.origin().to_string(),
            source: std::io::Error::other(reason),
        }
    }
}

/// TLS trusting the public CA roots built in, for an `https://` endpoint of a cluster that
/// has no TLS of its own.
fn public_roots() -> Result<Tls, String> {
    Tls::new(&TlsConfig {
        trusted: None,
        identity: None,
        verify_hostname: true,
        versions: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        cipher_suites: Vec::new(),
    })
}

/// Writes `request` and reads the answer until the server closes (`Connection: close`).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // A server that closes without TLS close_notify has still said everything.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(answer);
        }
        if answer.len() + n > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::other("the answer is over 1 MiB"));
        }
        answer.extend_from_slice(&chunk[..n]);
    }
}

/// An `http://` or `https://` URL, split as the request needs it.
#[derive(Debug, PartialEq)]
struct Url {
    tls: bool,
    /// `host:port`, the port filled in.
    authority: String,
    /// The `Host` header: the host as written, with its port if one was written.
    host: String,
    /// The path and query, `/` if none.
    path: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("`{url}` is not an http:// or https:// URL"));
        };
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if host.is_empty() || host.contains('@') {
            return Err(format!("`{url}` has no host, or has user information"));
        }
        let has_port = match host.rfind(':') {
            Some(i) => !host[i..].contains(']'),
            None => false,
        };
        let authority = match has_port {
            true => host.to_string(),
            false => format!("{host}:{}", if tls { 443 } else { 80 }),
        };
        Ok(Url {
            tls,
            authority,
            host: host.to_string(),
            path: path.to_string(),
        })
    }
}

/// The status and body of an HTTP/1.1 answer (`Content-Length`, chunked, or up to the end).
fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the token endpoint's answer is not HTTP")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.strip_prefix("HTTP/1."))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or("the token endpoint's answer has no HTTP status line")?;
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let body = &raw[end + 4..];
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        return Ok((status, dechunk(body)?));
    }
    let body = match header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        Some(len) if len <= body.len() => &body[..len],
        Some(_) => return Err("the token endpoint's answer is cut short".into()),
        None => body,
    };
    Ok((status, body.to_vec()))
}

/// The body of a chunked answer.
fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let cut = || "a chunked answer is cut short or malformed".to_string();
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").ok_or_else(cut)?;
        let size = std::str::from_utf8(&raw[..line_end]).map_err(|_| cut())?;
        let size = size.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| cut())?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if raw.len() < size + 2 {
            return Err(cut());
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// The `access_token` of a token endpoint's JSON answer.
fn access_token(json: &str) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|_| "the token endpoint's answer is not JSON".to_string())?;
    value
        .get("access_token")
        .and_then(|t| t.as_str())
        .map(str::to_string)
        .ok_or_else(|| "the token endpoint's answer has no `access_token`".into())
}

/// When the JWT `jwt` expires (its `exp` claim). Its signature is the broker's to check.
fn expiry(jwt: &str) -> Result<SystemTime, String> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [_, payload, _] = parts.as_slice() else {
        return Err("the token is not a JWT (three dot-separated parts)".into());
    };
    let payload = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "the token's payload is not base64url".to_string())?;
    let claims: serde_json::Value = serde_json::from_slice(&payload)
        .map_err(|_| "the token's payload is not JSON".to_string())?;
    let exp = claims
        .get("exp")
        .and_then(|e| e.as_f64())
        .filter(|e| e.is_finite() && *e >= 0.0)
        .ok_or("the token has no `exp` claim")?;
    Ok(UNIX_EPOCH + Duration::from_secs_f64(exp.min(1e11)))
}

/// `application/x-www-form-urlencoded` encoding of `value`.
fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The start of an endpoint's error answer, for a message.
fn excerpt(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_what_the_request_needs() {
        assert_eq!(
            Url::parse("https://idp.example.com/oauth2/token?x=1").unwrap(),
            Url {
                tls: true,
                authority: "idp.example.com:443".into(),
                host: "idp.example.com".into(),
                path: "/oauth2/token?x=1".into(),
            }
        );
        let u = Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (u.authority.as_str(), u.path.as_str()),
            ("127.0.0.1:8080", "/")
        );
        assert_eq!(
            Url::parse("https://[::1]/t").unwrap().authority,
            "[::1]:443"
        );
        assert!(Url::parse("ftp://x/").is_err());
        assert!(Url::parse("https://user:pw@x/").is_err());
    }

    #[test]
    fn answers_are_read_with_a_length_chunked_or_to_the_end() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}{}extra";
        assert_eq!(parse_response(plain).unwrap(), (200, b"{}{}".to_vec()));
        let chunked =
            b"HTTP/1.1 401 Unauthorized\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (401, b"abcde".to_vec()));
        let to_end = b"HTTP/1.0 500 Oops\r\n\r\nbody";
        assert_eq!(parse_response(to_end).unwrap(), (500, b"body".to_vec()));
        for bad in [
            &b"nonsense"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        ] {
            assert!(
                parse_response(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_token_s_expiry_is_its_exp_claim() {
        let jwt = |claims: &str| {
            format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
                URL_SAFE_NO_PAD.encode(claims)
            )
        };
        assert_eq!(
            expiry(&jwt(r#"{"sub":"a","exp":1700000000}"#)).unwrap(),
            UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        assert!(expiry(&jwt(r#"{"sub":"a"}"#))
            .unwrap_err()
            .contains("no `exp`"));
        assert!(expiry("abc").unwrap_err().contains("not a JWT"));
        assert!(expiry("a.!!!.c").unwrap_err().contains("base64url"));
    }

    #[test]
    fn form_values_and_tokens_are_encoded_as_endpoints_expect() {
        assert_eq!(form_encode("kafka produce/x"), "kafka+produce%2Fx");
        assert_eq!(
            access_token(r#"{"access_token":"t.u.v","expires_in":60}"#).unwrap(),
            "t.u.v"
        );
        assert!(access_token(r#"{"error":"invalid_client"}"#).is_err());
        assert!(access_token("<html>").is_err());
    }
}
