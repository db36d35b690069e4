//! TLS for broker connections (`security.protocol = SSL`): rustls with graviola's
//! cryptography, which is Rust and assembly with no C toolchain, so the binary stays static.
//! [`Tls`] is built once per cluster from its [`TlsConfig`] and wraps each dialled TCP stream.
//!
//! A failed handshake is [`KafkaError::Tls`], which is not retriable: an unknown CA, a
//! certificate not valid for the host or a refused client certificate do not mend themselves,
//! and retrying them quietly would hide a misconfiguration behind "cannot reach broker".

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::error::KafkaError;
use crate::config::{TlsConfig, TlsVersion};

/// The client side of TLS for one cluster; cheap to clone.
#[derive(Clone)]
pub struct Tls {
    connector: TlsConnector,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// The TLS client `config` describes. Fails on a CPU graviola cannot run on, on a key
    /// that does not fit the certificate or that rustls cannot use, and on CA certificates
    /// that are not certificates.
    pub fn new(config: &TlsConfig) -> Result<Tls, String> {
        check_cpu()?;
        let mut provider = rustls_graviola::default_provider();
        if !config.cipher_suites.is_empty() {
            provider
                .cipher_suites
                .retain(|s| config.cipher_suites.contains(&iana_name(s)));
        }
        let provider = Arc::new(provider);
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = config
            .versions
            .iter()
            .map(|v| match v {
                TlsVersion::Tls12 => &rustls::version::TLS12,
                TlsVersion::Tls13 => &rustls::version::TLS13,
            })
            .collect();
        let mut roots = RootCertStore::empty();
        match &config.trusted {
            Some(certs) => {
                for cert in certs {
                    roots
                        .add(cert.clone())
                        .map_err(|e| format!("a trusted CA certificate is not usable: {e}"))?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(roots.into(), provider.clone())
            .build()
            .map_err(|e| format!("cannot build the certificate verifier: {e}"))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = if config.verify_hostname {
            builder.with_webpki_verifier(verifier)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostname(verifier)))
        };
        let client = match &config.identity {
            Some(identity) => builder
                .with_client_auth_cert(identity.chain.clone(), identity.key.expose().clone_key())
                .map_err(|e| format!("the client certificate and key are not usable: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(client)),
        })
    }

    /// Runs the TLS handshake on `tcp`, dialled to `addr` (`host:port`); the certificate
    /// must be valid for `host` unless hostname verification is off.
    pub async fn handshake(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, KafkaError> {
        let host = host_of(addr);
        let name = ServerName::try_from(host.to_string()).map_err(|e| KafkaError::Tls {
            addr: addr.to_string(),
            reason: format!("`{host}` is not a host name for TLS: {e}"),
        })?;
        self.connector
            .connect(name, tcp)
            .await
            .map_err(|e| match tls_reason(&e) {
                Some(reason) => KafkaError::Tls {
                    addr: addr.to_string(),
                    reason,
                },
                None => KafkaError::Io {
                    addr: addr.to_string(),
                    source: e,
                },
            })
    }
}

/// Whether the listener at `addr` answers a TLS ClientHello with a TLS record (a handshake or
/// an alert), within `timeout`. Asked when a plaintext connection was closed before its first
/// response: a TLS listener does that to anything but TLS, and so does a broker going away.
pub async fn speaks_tls(addr: &str, timeout: Duration) -> bool {
    if check_cpu().is_err() {
        return false;
    }
    let Ok(config) =
        ClientConfig::builder_with_provider(Arc::new(rustls_graviola::default_provider()))
            .with_safe_default_protocol_versions()
    else {
        return false;
    };
    let config = config
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth();
    let Ok(name) = ServerName::try_from(host_of(addr).to_string()) else {
        return false;
    };
    let Ok(mut hello) = rustls::ClientConnection::new(Arc::new(config), name) else {
        return false;
    };
    let mut bytes = Vec::new();
    if hello.write_tls(&mut bytes).is_err() {
        return false;
    }
    let answer = async {
        let mut tcp = TcpStream::connect(addr).await?;
        tcp.write_all(&bytes).await?;
        let mut head = [0u8; 2];
        tcp.read_exact(&mut head).await?;
        Ok::<_, std::io::Error>(head)
    };
    // 22 = handshake, 21 = alert; then the major version of TLS 1.x.
    matches!(
        tokio::time::timeout(timeout, answer).await,
        Ok(Ok([21 | 22, 3]))
    )
}

/// What a TLS failure was, in words, when `e` is one (rather than the connection failing).
pub fn tls_reason(e: &std::io::Error) -> Option<String> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match tls {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the broker's certificate is not signed by a trusted CA (set \
             ssl.truststore.location or ssl.truststore.certificates to the CA that signed it)"
                .to_string()
        }
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::UnknownCA),
        ) => format!(
            "the broker refused strait's client certificate (received fatal alert: {alert:?}); \
             a listener with ssl.client.auth = required needs ssl.keystore.location (or \
             ssl.keystore.certificate.chain and ssl.keystore.key) signed by a CA in the \
             broker's truststore"
        ),
        other => other.to_string(),
    })
}

/// A suite's IANA name, as Java writes it (`TLS_AES_256_GCM_SHA384`; rustls says
/// `TLS13_AES_256_GCM_SHA384` for the TLS 1.3 ones).
fn iana_name(suite: &rustls::SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite()).replacen("TLS13_", "TLS_", 1)
}

/// `host` of `host:port` or `[v6]:port`.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// graviola needs AES-NI, PCLMULQDQ and AVX2 on x86-64 (every server CPU since 2013);
/// without them it would fault, so say so instead.
fn check_cpu() -> Result<(), String> {
    #[cfg(target_arch = "x86_64")]
    {
        let missing: Vec<&str> = [
            ("aes", std::arch::is_x86_feature_detected!("aes")),
            (
                "pclmulqdq",
                std::arch::is_x86_feature_detected!("pclmulqdq"),
            ),
            ("avx", std::arch::is_x86_feature_detected!("avx")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
        ]
        .iter()
        .filter(|(_, has)| !has)
        .map(|(name, _)| *name)
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "TLS needs a CPU with AES-NI, PCLMULQDQ and AVX2; this one lacks {}",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// `ssl.endpoint.identification.algorithm =` (empty): the certificate must still chain to a
/// trusted CA and be in date, but may name another host.
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the configuration accepts are exactly the suites the provider has.
    #[test]
    fn the_configurable_cipher_suites_are_the_provider_s() {
        let mut ours: Vec<String> = rustls_graviola::default_provider()
            .cipher_suites
            .iter()
            .map(iana_name)
            .collect();
        let mut accepted: Vec<String> = crate::config::TLS_CIPHER_SUITES
            .iter()
            .map(|s| s.to_string())
            .collect();
        ours.sort();
        accepted.sort();
        assert_eq!(ours, accepted);
    }

    #[test]
    fn host_of_strips_the_port_and_ipv6_brackets() {
        assert_eq!(host_of("broker-1.example.com:9093"), "broker-1.example.com");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }
}
