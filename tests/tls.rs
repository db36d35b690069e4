//! TLS against real Apache Kafka `SSL` listeners, with certificates made at test time: strait
//! verifies the brokers' certificates (CA and host) and presents its own where the listener
//! requires one, replicates record for record over both, and ends with exit code 1 and the
//! reason when a handshake cannot succeed. The clusters keep a PLAINTEXT listener for the
//! Java tools that check the result.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::kafka;
use common::strait::{self as st, Strait};
use common::tls::{self, path, Ca, TlsCluster};

struct Setup {
    ca: Ca,
    /// strait's client certificate, signed by `ca`.
    client: std::path::PathBuf,
    /// Server authentication only.
    source: TlsCluster,
    /// `ssl.client.auth = required`.
    target: TlsCluster,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        kafka::fetch();
        let ca = Ca::new("strait-test-ca");
        let client = ca.issue("strait-client", "DNS:strait");
        let (source, target) = std::thread::scope(|s| {
            let source = s.spawn(|| tls::start_cluster("tls-source", &ca, false));
            let target = tls::start_cluster("tls-target", &ca, true);
            (source.join().expect("starting the source cluster"), target)
        });
        Setup {
            ca,
            client,
            source,
            target,
        }
    })
}

/// A flow source->target for `topic` over the SSL listeners (the source's at
/// `source_bootstrap`), strait presenting its client certificate to the target if
/// `client_cert`, with `extra` lines.
fn config(
    s: &Setup,
    topic: &str,
    source_bootstrap: &str,
    client_cert: bool,
    extra: &[&str],
) -> String {
    let mut text = format!(
        "clusters = source, target\n\
         source.bootstrap.servers = {source_bootstrap}\n\
         target.bootstrap.servers = {}\n\
         security.protocol = SSL\n\
         ssl.truststore.location = {}\n\
         source->target.enabled = true\n\
         source->target.topics = {topic}\n\
         replication.factor = 1\n\
         internal.topic.replication.factor = 1\n\
         emit.heartbeats.interval.seconds = 1\n",
        s.target.ssl_bootstrap,
        path(&s.ca.cert()),
    );
    if client_cert {
        text.push_str(&format!(
            "target.ssl.keystore.location = {}\n",
            path(&s.client)
        ));
    }
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[test]
fn replicates_over_tls_to_a_listener_that_requires_a_client_certificate() {
    let s = setup();
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let topic = kafka::unique("tls");
    kafka::create_topic(source, &topic, 3, &[]);
    let produced = kafka::produce(
        source,
        &["--topic", &topic, "--count", "3000", "--compression", "lz4"],
    );
    assert_eq!(produced.produced, 3000);

    let text = config(s, &topic, &s.source.ssl_bootstrap, true, &[]);
    let mut strait = Strait::start(&text, "properties");
    let remote = format!("source.{topic}");
    st::wait_for_records(
        &mut strait,
        target,
        &remote,
        3,
        3000,
        Duration::from_secs(60),
    );
    assert_eq!(
        kafka::values_by_partition(target, &remote),
        kafka::values_by_partition(source, &topic),
        "the target differs from the source"
    );
    // Heartbeats go to the target, offset syncs to the source: both over TLS too.
    strait.wait_until("heartbeats on the target", Duration::from_secs(30), || {
        (!kafka::dump(target, "heartbeats").is_empty()).then_some(())
    });
    let syncs = kafka::dump(source, "mm2-offset-syncs.target.internal");
    assert!(!syncs.is_empty(), "no offset syncs on the source");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// Each handshake that cannot succeed: `run` ends with exit code 1 within the request
/// timeout, and its last words name the broker and say why in words.
#[test]
fn a_handshake_that_cannot_succeed_ends_the_process_with_the_reason() {
    let s = setup();
    let topic = kafka::unique("tls-fail");
    kafka::create_topic(&s.source.cluster, &topic, 1, &[]);
    let other_ca = Ca::new("some-other-ca");
    let source_ssl = s.source.ssl_bootstrap.clone();
    let localhost = source_ssl.replace("127.0.0.1", "localhost");
    let other_trust = format!(
        "source.ssl.truststore.location = {}",
        path(&other_ca.cert())
    );
    let cases = [
        (
            "a CA strait does not trust",
            "source",
            &source_ssl,
            true,
            Some(other_trust.as_str()),
            "not signed by a trusted CA",
        ),
        (
            "a certificate for another host",
            "source",
            &localhost,
            true,
            None,
            "certificate not valid for name",
        ),
        (
            "no client certificate where one is required",
            "target",
            &source_ssl,
            false,
            None,
            "the broker refused strait's client certificate",
        ),
    ];
    for (what, cluster, bootstrap, client_cert, extra, reason) in cases {
        let mut lines = vec!["request.timeout.ms = 10000"];
        lines.extend(extra);
        let text = config(s, &topic, bootstrap, client_cert, &lines);
        let started = Instant::now();
        let mut strait = Strait::start(&text, "properties").allow(&[reason]);
        let status = strait.wait_exit(Duration::from_secs(60));
        let log = strait.log_text();
        assert_eq!(status.code(), Some(1), "{what}: {status}\n{log}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: took {:?}",
            started.elapsed()
        );
        let last = log.lines().last().unwrap_or_default();
        let broker = format!("cluster {cluster}, broker ");
        assert!(
            last.contains(&broker)
                && last.contains("TLS handshake failed")
                && last.contains(reason),
            "{what}: the last line does not give the reason `{reason}`:\n{log}"
        );
    }
}

/// `ssl.endpoint.identification.algorithm =` (empty) accepts a certificate for another host,
/// with a warning; the chain is still checked. `strait check` connects over TLS.
#[test]
fn check_connects_over_tls_and_hostname_verification_can_be_turned_off() {
    let s = setup();
    let localhost = s.source.ssl_bootstrap.replace("127.0.0.1", "localhost");
    let text = config(
        s,
        "none",
        &localhost,
        true,
        &["source.ssl.endpoint.identification.algorithm ="],
    );
    let (_dir, file) = st::config_file("mm2.properties", &text);
    let (code, out) = st::run_cli(&["check", st::arg(&file)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("hostname verification is off"), "{out}");
    assert!(out.contains("cluster source: reachable"), "{out}");
    assert!(out.contains("(SSL, TLSv1_3 TLS13_"), "{out}");
    assert!(out.contains("cluster target: reachable"), "{out}");
}
