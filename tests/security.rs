//! TLS and SASL against real Apache Kafka listeners (`SSL`, `SASL_SSL`, `SASL_PLAINTEXT`),
//! with certificates made at test time and users made with Kafka's own ConfigCommand: strait
//! verifies the brokers' certificates (CA and host), presents its own where the listener
//! requires one, authenticates with PLAIN and SCRAM, replicates record for record, never
//! prints a secret, and ends with exit code 1 and the reason when a handshake or an
//! authentication cannot succeed. The clusters keep a PLAINTEXT listener for the Java tools
//! that check the result.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::kafka;
use common::secured::{self, path, Ca, SecuredCluster, PLAIN_USER, SCRAM_USER};
use common::strait::{self as st, Strait};

struct Setup {
    ca: Ca,
    /// strait's client certificate, signed by `ca`.
    client: std::path::PathBuf,
    /// Server authentication only.
    source: SecuredCluster,
    /// `ssl.client.auth = required`.
    target: SecuredCluster,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        kafka::fetch();
        let ca = Ca::new("strait-test-ca");
        let client = ca.issue("strait-client", "DNS:strait");
        let (source, target) = std::thread::scope(|s| {
            let source = s.spawn(|| secured::start_cluster("secured-source", &ca, false));
            let target = secured::start_cluster("secured-target", &ca, true);
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
        s.target.ssl,
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

/// Replicates 3,000 records of a new topic from the source (at `source_bootstrap`, with
/// `extra` lines) to the target's mTLS listener, compares them record for record, and checks
/// that heartbeats (to the target) and offset syncs (to the source) were written too.
/// Returns strait's log.
fn replicate(s: &Setup, source_bootstrap: &str, extra: &[&str]) -> String {
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let topic = kafka::unique("secured");
    kafka::create_topic(source, &topic, 3, &[]);
    let produced = kafka::produce(
        source,
        &["--topic", &topic, "--count", "3000", "--compression", "lz4"],
    );
    assert_eq!(produced.produced, 3000);

    let text = config(s, &topic, source_bootstrap, true, extra);
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
    strait.wait_until("heartbeats on the target", Duration::from_secs(30), || {
        (!kafka::dump(target, "heartbeats").is_empty()).then_some(())
    });
    let syncs = kafka::dump(source, "mm2-offset-syncs.target.internal");
    assert!(!syncs.is_empty(), "no offset syncs on the source");
    assert!(strait.terminate().success(), "{}", strait.log_text());
    strait.log_text()
}

#[test]
fn replicates_over_tls_to_a_listener_that_requires_a_client_certificate() {
    let s = setup();
    replicate(s, &s.source.ssl, &[]);
}

/// Both clusters enforce ACLs, and strait logs in as a user that is no super user. With the
/// ACLs MM2 needs (docs/security.md lists them), strait replicates and syncs the group, and
/// skips a group it may list but not read; with READ on a source topic withheld, or WRITE on
/// a remote topic denied, strait says what it lacks: the operation and the resource.
#[test]
fn with_the_acls_mm2_needs_strait_works_and_a_missing_one_is_named() {
    let s = setup();
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let (user, password) = secured::MIRROR_USER;
    let principal = format!("User:{user}");
    let topic = kafka::unique("acl");
    let group = kafka::unique("acl-group");
    kafka::create_topic(source, &topic, 2, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "1000"]);
    assert_eq!(kafka::consume(source, &topic, &group, 300).len(), 300);
    // A group the user may list (DESCRIBE on the cluster) but not read: it is skipped, with
    // one warning, and the others are checkpointed all the same.
    let hidden = kafka::unique("acl-hidden");
    assert_eq!(kafka::consume(source, &topic, &hidden, 100).len(), 100);

    let grant = |c, resource, name: &str, prefixed, ops: &[&str]| {
        secured::grant(c, &principal, resource, name, prefixed, ops)
    };
    // The source: read the topics and the groups' offsets, describe ACLs, keep offset syncs.
    grant(
        source,
        "--topic",
        &topic,
        false,
        &["Read", "Describe", "DescribeConfigs"],
    );
    grant(source, "--group", &group, false, &["Describe"]);
    grant(source, "--cluster", "", false, &["Describe"]);
    grant(
        source,
        "--topic",
        "mm2-offset-syncs.target.internal",
        false,
        &["Create", "Describe", "Read", "Write"],
    );
    // The target: the remote topics and checkpoints (`source.`), heartbeats, strait's
    // progress, the group's offsets, ACL sync, and the fencing transactional id.
    let all_topic_ops = [
        "Create",
        "Describe",
        "Read",
        "Write",
        "Alter",
        "AlterConfigs",
        "DescribeConfigs",
    ];
    grant(target, "--topic", "source.", true, &all_topic_ops);
    grant(
        target,
        "--topic",
        "heartbeats",
        false,
        &["Create", "Describe", "Read", "Write"],
    );
    grant(
        target,
        "--topic",
        "strait-progress.source.internal",
        false,
        &["Create", "Describe", "Read", "Write"],
    );
    grant(target, "--group", &group, false, &["Read", "Describe"]);
    grant(target, "--cluster", "", false, &["Describe", "Alter"]);
    grant(
        target,
        "--transactional-id",
        "strait-source->target-",
        true,
        &["Write", "Describe"],
    );

    let jaas = format!(
        "sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
         required username=\"{user}\" password=\"{password}\";"
    );
    let lines = [
        "source.security.protocol = SASL_SSL",
        "target.security.protocol = SASL_SSL",
        "sasl.mechanism = SCRAM-SHA-512",
        &jaas,
        "emit.checkpoints.interval.seconds = 1",
        "sync.group.offsets.enabled = true",
        "sync.group.offsets.interval.seconds = 1",
    ];
    let acl_config = |topics: &str| {
        config(s, topics, &s.source.sasl_ssl, false, &lines).replace(
            &format!("target.bootstrap.servers = {}", s.target.ssl),
            &format!("target.bootstrap.servers = {}", s.target.sasl_ssl),
        )
    };
    let mut strait = Strait::start(&acl_config(&topic), "properties").allow(&["group skipped"]);
    let remote = format!("source.{topic}");
    st::wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        1000,
        Duration::from_secs(60),
    );
    strait.wait_until(
        "the group's offsets synced to the target",
        Duration::from_secs(60),
        || {
            let synced: i64 = kafka::committed_offsets(target, &group)
                .iter()
                .map(|(_, _, o)| o)
                .sum();
            (synced == 300).then_some(())
        },
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let log = strait.log_text();
    let skipped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("group skipped"))
        .collect();
    let about_hidden: Vec<&&str> = skipped.iter().filter(|l| l.contains(&hidden)).collect();
    assert_eq!(about_hidden.len(), 1, "one warning about {hidden}:\n{log}");
    assert!(
        about_hidden[0].contains("do not allow strait's principal DESCRIBE on the group"),
        "{}",
        about_hidden[0]
    );

    // One ACL missing at a time: READ on a source topic (DESCRIBE only), WRITE on a remote
    // topic (denied). strait stops the partition and says which ACL is missing where.
    let unreadable = kafka::unique("acl-noread");
    let unwritable = kafka::unique("acl-nowrite");
    for t in [&unreadable, &unwritable] {
        kafka::create_topic(source, t, 1, &[]);
        kafka::produce(source, &["--topic", t, "--count", "10"]);
    }
    grant(
        source,
        "--topic",
        &unreadable,
        false,
        &["Describe", "DescribeConfigs"],
    );
    grant(
        source,
        "--topic",
        &unwritable,
        false,
        &["Read", "Describe", "DescribeConfigs"],
    );
    secured::deny(
        target,
        &principal,
        "--topic",
        &format!("source.{unwritable}"),
        &["Write"],
    );
    for (t, expected) in [
        (&unreadable, format!("Fetch for {unreadable}-0")),
        (&unwritable, format!("Produce for source.{unwritable}-0")),
    ] {
        let operation = if t == &unreadable { "READ" } else { "WRITE" };
        let mut strait = Strait::start(&acl_config(t), "properties")
            .allow(&["partition stopped", "group skipped"]);
        let line = strait.wait_for_log_line(Duration::from_secs(60), |l| {
            l.contains("partition stopped") && l.contains(&expected)
        });
        assert!(
            line.contains(&format!(
                "Kafka error TopicAuthorizationFailed (29): the broker's ACLs do not allow \
                 strait's principal {operation} on the topic"
            )),
            "{line}"
        );
    }
}

/// MM2's client library reads what strait wrote over a secured connection too: a group that
/// read 400 records on the source is translated by `RemoteClusterUtils.translateOffsets`
/// over the target's mutual-TLS listener, from the checkpoints strait wrote over TLS.
#[test]
fn remote_cluster_utils_translates_offsets_over_mutual_tls() {
    let s = setup();
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let topic = kafka::unique("tls-translate");
    let group = kafka::unique("tls-group");
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "1000"]);
    assert_eq!(kafka::consume(source, &topic, &group, 400).len(), 400);

    let text = config(
        s,
        &topic,
        &s.source.ssl,
        true,
        &["emit.checkpoints.interval.seconds = 1"],
    );
    let mut strait = Strait::start(&text, "properties");
    let remote = format!("source.{topic}");
    st::wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        1000,
        Duration::from_secs(60),
    );
    let tls = [
        "security.protocol=SSL".to_string(),
        "ssl.truststore.type=PEM".to_string(),
        format!("ssl.truststore.location={}", path(&s.ca.cert())),
        "ssl.keystore.type=PEM".to_string(),
        format!("ssl.keystore.location={}", path(&s.client)),
    ];
    let mm2_client = |cmd: &[&str]| {
        let mut args = cmd.to_vec();
        args.extend(["--bootstrap", s.target.ssl.as_str()]);
        for p in &tls {
            args.extend(["--property", p.as_str()]);
        }
        let out = kafka::tool("Mm2Client", &args);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let expected = format!("{remote}\t0\t400");
    let translate = [
        "translate",
        "--source-alias",
        "source",
        "--group",
        group.as_str(),
    ];
    strait.wait_until(
        "RemoteClusterUtils to translate the group's offset over TLS",
        Duration::from_secs(60),
        || {
            mm2_client(&translate)
                .lines()
                .any(|l| l == expected)
                .then_some(())
        },
    );
    let heartbeats = mm2_client(&["heartbeats"]);
    assert!(
        heartbeats.lines().any(|l| l == "heartbeats"),
        "RemoteClusterUtils.heartbeatTopics over TLS: {heartbeats}"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// SASL_SSL with SCRAM-SHA-512 on the source, mutual TLS on the target; strait logs at debug
/// level and never prints the password.
#[test]
fn replicates_from_sasl_ssl_with_scram_to_mutual_tls_without_printing_the_password() {
    let s = setup();
    let (user, password) = SCRAM_USER;
    let jaas = format!(
        "source.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
         required username=\"{user}\" password=\"{password}\";"
    );
    let log = replicate(
        s,
        &s.source.sasl_ssl,
        &[
            "source.security.protocol = SASL_SSL",
            "source.sasl.mechanism = SCRAM-SHA-512",
            &jaas,
        ],
    );
    assert!(log.contains("DEBUG"), "strait did not log at debug level");
    assert!(
        !log.contains(password),
        "the password is in the log:\n{log}"
    );
}

/// KIP-368: the source's SCRAM-SHA-256 sessions on SASL_SSL last `REAUTH_MS` (3 s), and the
/// broker closes a connection that sends a request after its session ended. strait
/// re-authenticates each connection before then, on the connection itself: over 15 s of
/// replication no connection is lost (no WARN line), and every record arrives.
#[test]
fn sasl_sessions_are_renewed_on_their_connection_before_the_broker_ends_them() {
    let s = setup();
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let (user, password) = SCRAM_USER;
    let topic = kafka::unique("reauth");
    kafka::create_topic(source, &topic, 2, &[]);
    let jaas = format!(
        "source.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
         required username=\"{user}\" password=\"{password}\";"
    );
    let text = config(
        s,
        &topic,
        &s.source.sasl_ssl,
        true,
        &[
            "source.security.protocol = SASL_SSL",
            "source.sasl.mechanism = SCRAM-SHA-256",
            &jaas,
        ],
    );
    let mut strait = Strait::start(&text, "properties");
    let remote = format!("source.{topic}");
    let started = Instant::now();
    let mut expected = 0;
    for round in 0..4 {
        let produced = kafka::produce(source, &["--topic", &topic, "--count", "500"]);
        expected += produced.produced as i64;
        st::wait_for_records(
            &mut strait,
            target,
            &remote,
            2,
            expected,
            Duration::from_secs(60),
        );
        if round < 3 {
            std::thread::sleep(Duration::from_secs(3));
        }
    }
    assert!(started.elapsed() > Duration::from_millis(4 * secured::REAUTH_MS));
    assert_eq!(
        kafka::values_by_partition(target, &remote),
        kafka::values_by_partition(source, &topic),
        "the target differs from the source"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let log = strait.log_text();
    let renewed = log.matches("re-authenticated").count();
    assert!(renewed >= 3, "{renewed} re-authentications:\n{log}");
    assert!(!log.contains(password), "the password is in the log");
}

/// The OAUTHBEARER lines of a flow's source: tokens from `url`, as Kafka 4.1's clients are
/// configured for the client credentials grant.
fn oauth_lines(url: &str, client: (&str, &str)) -> Vec<String> {
    vec![
        "source.security.protocol = SASL_SSL".into(),
        "source.sasl.mechanism = OAUTHBEARER".into(),
        "source.sasl.jaas.config = \
         org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            .into(),
        "source.sasl.login.callback.handler.class = \
         org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            .into(),
        format!("source.sasl.oauthbearer.token.endpoint.url = {url}"),
        format!(
            "source.sasl.oauthbearer.client.credentials.client.id = {}",
            client.0
        ),
        format!(
            "source.sasl.oauthbearer.client.credentials.client.secret = {}",
            client.1
        ),
        "source.sasl.oauthbearer.scope = kafka".into(),
    ]
}

const OAUTH_CLIENT: (&str, &str) = ("strait-app", "client-Secret-5");

/// OAUTHBEARER with the client credentials grant: strait asks the token endpoint (over HTTPS,
/// trusted through the cluster's truststore) for a token and replicates with it; sessions
/// end after `REAUTH_MS`, so connections re-authenticate, and tokens living 8 s are renewed
/// when 80 % of their life has passed, not once per connection. The secret is never printed.
#[test]
fn replicates_from_sasl_ssl_with_oauthbearer_tokens_from_a_token_endpoint() {
    let s = setup();
    let endpoint = secured::TokenEndpoint::start(&s.ca, OAUTH_CLIENT, "kafka", 8);
    let lines = oauth_lines(&endpoint.url, OAUTH_CLIENT);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let started = Instant::now();
    let log = replicate(s, &s.source.sasl_ssl, &lines);
    let took = started.elapsed().as_secs_f64();
    assert!(log.contains("got an OAUTHBEARER token"), "{log}");
    let renewed = log.matches("SASL session re-authenticated").count();
    let issued = endpoint.issued();
    // One token, then one each time 80 % of the last one's 8 s have passed.
    let most = 1 + (took / 6.4).ceil() as usize;
    assert!(
        (1..=most).contains(&issued),
        "{issued} tokens in {took:.1} s ({renewed} re-authentications), at most {most} \
         expected\n{log}"
    );
    assert!(
        !log.contains(OAUTH_CLIENT.1),
        "the client secret is in the log"
    );
}

/// OAUTHBEARER from a token file (`file://`, Kafka's FileJwtRetriever): `strait check`
/// authenticates with it. A token the endpoint will not give, an expired token and one the
/// broker refuses each end `run` with exit code 1, naming the reason.
#[test]
fn oauthbearer_tokens_from_a_file_work_and_bad_tokens_end_the_process_with_the_reason() {
    let s = setup();
    let endpoint = secured::TokenEndpoint::start(&s.ca, OAUTH_CLIENT, "kafka", 60);
    let dir = tempfile::tempdir().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token_file = |name: &str, claims: String| {
        let file = dir.path().join(name);
        std::fs::write(&file, secured::unsigned_token(&claims)).unwrap();
        format!("file://{}", path(&file))
    };
    let good = token_file("good", format!(r#"{{"sub":"filed","exp":{}}}"#, now + 600));
    let text = config(
        s,
        "none",
        &s.source.sasl_ssl,
        true,
        &{
            let mut lines = oauth_lines(&good, OAUTH_CLIENT);
            lines.truncate(5);
            lines
        }
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    let (_dir, file) = st::config_file("mm2.properties", &text);
    let (code, out) = st::run_cli(&["check", st::arg(&file)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("cluster source: reachable"), "{out}");
    assert!(
        out.contains(", SASL OAUTHBEARER authenticated with a bearer token)"),
        "{out}"
    );

    let topic = kafka::unique("oauth-fail");
    kafka::create_topic(&s.source.cluster, &topic, 1, &[]);
    let expired = token_file(
        "expired",
        format!(r#"{{"sub":"filed","exp":{}}}"#, now - 60),
    );
    let subjectless = token_file("subjectless", format!(r#"{{"exp":{}}}"#, now + 600));
    let cases = [
        (
            "a wrong client secret",
            oauth_lines(&endpoint.url, (OAUTH_CLIENT.0, "not-the-Secret")),
            "the token endpoint answered HTTP 401",
        ),
        (
            "an expired token",
            oauth_lines(&expired, OAUTH_CLIENT),
            "the token expired",
        ),
        (
            "a token the broker refuses",
            oauth_lines(&subjectless, OAUTH_CLIENT),
            "SASL_AUTHENTICATION_FAILED",
        ),
    ];
    for (what, lines, reason) in cases {
        let mut lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        lines.push("request.timeout.ms = 10000");
        let text = config(s, &topic, &s.source.sasl_ssl, true, &lines);
        let mut strait =
            Strait::start(&text, "properties").allow(&["SASL OAUTHBEARER authentication failed"]);
        let status = strait.wait_exit(Duration::from_secs(60));
        let log = strait.log_text();
        assert_eq!(status.code(), Some(1), "{what}: {status}\n{log}");
        let last = log.lines().last().unwrap_or_default();
        assert!(
            last.contains("SASL OAUTHBEARER authentication failed") && last.contains(reason),
            "{what}: the last line does not give the reason `{reason}`:\n{log}"
        );
        assert!(
            !log.contains("not-the-Secret"),
            "{what}: the secret is in the log"
        );
    }
}

/// `strait check` authenticates with PLAIN and with SCRAM-SHA-256 over SASL_PLAINTEXT, the
/// password kept out of the file by Kafka's FileConfigProvider.
#[test]
fn check_authenticates_with_plain_and_scram_sha_256() {
    let s = setup();
    let module = |m: &str| format!("org.apache.kafka.common.security.{m}");
    for (mechanism, module, (user, password)) in [
        ("PLAIN", module("plain.PlainLoginModule"), PLAIN_USER),
        (
            "SCRAM-SHA-256",
            module("scram.ScramLoginModule"),
            SCRAM_USER,
        ),
    ] {
        let (_secrets_dir, secrets) =
            st::config_file("secrets.properties", &format!("password = {password}\n"));
        let mechanism_line = format!("source.sasl.mechanism = {mechanism}");
        let jaas = format!(
            "source.sasl.jaas.config = {module} required username=\"{user}\" \
             password=\"${{file:{}:password}}\";",
            st::arg(&secrets)
        );
        let extra = [
            "config.providers = file",
            "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
            "source.security.protocol = SASL_PLAINTEXT",
            &mechanism_line,
            &jaas,
        ];
        let text = config(s, "none", &s.source.sasl_plaintext, true, &extra);
        let (_dir, file) = st::config_file("mm2.properties", &text);
        let (code, out) = st::run_cli(&["--log-level", "debug", "check", st::arg(&file)]);
        assert_eq!(code, 0, "{mechanism}: {out}");
        assert!(
            out.contains("cluster source: reachable"),
            "{mechanism}: {out}"
        );
        assert!(
            out.contains(&format!(
                "(SASL_PLAINTEXT, SASL {mechanism} authenticated as {user})"
            )),
            "{mechanism}: {out}"
        );
        assert!(
            !out.contains(password),
            "{mechanism}: the password is printed:\n{out}"
        );
    }
}

/// Each handshake or authentication that cannot succeed, and a security.protocol the
/// listener does not speak: `run` ends with exit code 1 within the request timeout, and its
/// last words name the cluster and the broker and say why in words (and never the password).
#[test]
fn a_handshake_or_login_that_cannot_succeed_ends_the_process_with_the_reason() {
    let s = setup();
    let topic = kafka::unique("tls-fail");
    kafka::create_topic(&s.source.cluster, &topic, 1, &[]);
    let other_ca = Ca::new("some-other-ca");
    let source_ssl = s.source.ssl.clone();
    let localhost = source_ssl.replace("127.0.0.1", "localhost");
    let other_trust = format!(
        "source.ssl.truststore.location = {}",
        path(&other_ca.cert())
    );
    let (user, password) = SCRAM_USER;
    let scram = |mechanism: &str, password: &str| {
        vec![
            "source.security.protocol = SASL_PLAINTEXT".to_string(),
            format!("source.sasl.mechanism = {mechanism}"),
            format!(
                "source.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
                 required username=\"{user}\" password=\"{password}\";"
            ),
        ]
    };
    let tls = "TLS handshake failed";
    let cases = [
        (
            "a CA strait does not trust",
            "source",
            &source_ssl,
            true,
            vec![other_trust],
            tls,
            "not signed by a trusted CA",
        ),
        (
            "a certificate for another host",
            "source",
            &localhost,
            true,
            vec![],
            tls,
            "certificate not valid for name",
        ),
        (
            "no client certificate where one is required",
            "target",
            &source_ssl,
            false,
            vec![],
            tls,
            "the broker refused strait's client certificate",
        ),
        (
            "plaintext to a TLS listener",
            "source",
            &source_ssl,
            true,
            vec!["source.security.protocol = PLAINTEXT".to_string()],
            "the listener speaks TLS",
            "set it to SSL or SASL_SSL",
        ),
        (
            "TLS to a plaintext listener",
            "source",
            &s.source.cluster.bootstrap,
            true,
            vec![],
            "the listener does not speak TLS",
            "SASL_PLAINTEXT",
        ),
        (
            "no SASL to a SASL_PLAINTEXT listener",
            "source",
            &s.source.sasl_plaintext,
            true,
            vec!["source.security.protocol = PLAINTEXT".to_string()],
            "the listener requires SASL (it enables PLAIN, SCRAM-SHA-256)",
            "set it to SASL_PLAINTEXT",
        ),
        (
            "TLS without SASL to a SASL_SSL listener",
            "source",
            &s.source.sasl_ssl,
            true,
            vec![],
            "the listener requires SASL",
            "sasl.jaas.config",
        ),
        (
            "a wrong password",
            "source",
            &s.source.sasl_plaintext,
            true,
            scram("SCRAM-SHA-256", "not-the-Password"),
            "SASL SCRAM-SHA-256 authentication failed",
            "SASL_AUTHENTICATION_FAILED",
        ),
        (
            "a mechanism the listener does not enable",
            "source",
            &s.source.sasl_plaintext,
            true,
            scram("SCRAM-SHA-512", password),
            "SASL SCRAM-SHA-512 authentication failed",
            "UNSUPPORTED_SASL_MECHANISM",
        ),
    ];
    for (what, cluster, bootstrap, client_cert, extra, failure, reason) in cases {
        let mut lines = vec!["request.timeout.ms = 10000"];
        lines.extend(extra.iter().map(String::as_str));
        let text = config(s, &topic, bootstrap, client_cert, &lines);
        let started = Instant::now();
        let mut strait = Strait::start(&text, "properties").allow(&[failure]);
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
            last.contains(&broker) && last.contains(failure) && last.contains(reason),
            "{what}: the last line does not give the reason `{reason}`:\n{log}"
        );
        assert!(
            !log.contains(password),
            "{what}: the password is in the log"
        );
    }
}

/// `ssl.endpoint.identification.algorithm =` (empty) accepts a certificate for another host,
/// with a warning; the chain is still checked. `strait check` connects over TLS and shows the
/// version and suite: the ones `ssl.enabled.protocols` and `ssl.cipher.suites` allow.
#[test]
fn check_connects_over_tls_and_hostname_verification_can_be_turned_off() {
    let s = setup();
    let localhost = s.source.ssl.replace("127.0.0.1", "localhost");
    let text = config(
        s,
        "none",
        &localhost,
        true,
        &[
            "source.ssl.endpoint.identification.algorithm =",
            "source.ssl.enabled.protocols = TLSv1.2",
            "source.ssl.cipher.suites = TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ],
    );
    let (_dir, file) = st::config_file("mm2.properties", &text);
    let (code, out) = st::run_cli(&["check", st::arg(&file)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("hostname verification is off"), "{out}");
    assert!(out.contains("cluster source: reachable"), "{out}");
    // The source as configured, the target as rustls prefers.
    assert!(
        out.contains("(SSL, TLSv1_2 TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
        "{out}"
    );
    assert!(out.contains("(SSL, TLSv1_3 TLS13_"), "{out}");
    assert!(out.contains("cluster target: reachable"), "{out}");
}

/// One `mm2.properties` with SASL_SSL (SCRAM-SHA-512) on the source and mutual TLS on the
/// target runs Apache Kafka's MirrorMaker 2 (connect-mirror 4.1.1) and strait unchanged: each
/// replicates a topic of its own with it, record for record. (Its aliases are its own: while
/// MM2 runs flow `east->west`, strait refuses that flow, not the other tests'.)
#[test]
fn one_secured_properties_file_runs_mirror_maker_2_and_strait_unchanged() {
    let s = setup();
    let (source, target) = (&s.source.cluster, &s.target.cluster);
    let (user, password) = SCRAM_USER;
    let prefix = kafka::unique("same-file");
    let ca_cert = s.ca.cert();
    let (ca, client) = (path(&ca_cert), path(&s.client));
    let file = format!(
        "clusters = east, west
east.bootstrap.servers = {}
west.bootstrap.servers = {}
east.security.protocol = SASL_SSL
east.sasl.mechanism = SCRAM-SHA-512
east.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username=\"{user}\" password=\"{password}\";
east.ssl.truststore.type = PEM
east.ssl.truststore.location = {ca}
west.security.protocol = SSL
west.ssl.truststore.type = PEM
west.ssl.truststore.location = {ca}
west.ssl.keystore.type = PEM
west.ssl.keystore.location = {client}
east->west.enabled = true
east->west.topics = {prefix}-.*
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
config.storage.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
refresh.topics.interval.seconds = 1
plugin.discovery = service_load
east.plugin.discovery = service_load
west.plugin.discovery = service_load
",
        s.source.sasl_ssl, s.target.ssl
    );
    let produce = |topic: &str| {
        kafka::create_topic(source, topic, 2, &[]);
        kafka::produce(source, &["--topic", topic, "--count", "500"]);
    };

    let by_mm2 = format!("{prefix}-mm2");
    produce(&by_mm2);
    let mut mm2 = kafka::Mm2::start(&file);
    let remote = format!("east.{by_mm2}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while kafka::end_offsets(target, &remote)
        .iter()
        .map(|&(_, o)| o)
        .sum::<i64>()
        < 500
    {
        mm2.assert_running();
        assert!(
            Instant::now() < deadline,
            "MM2 did not replicate:\n{}",
            mm2.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        kafka::values_by_partition(target, &remote),
        kafka::values_by_partition(source, &by_mm2)
    );
    mm2.stop();

    let by_strait = format!("{prefix}-strait");
    produce(&by_strait);
    // MM2's Connect worker keys have no meaning for strait: it names them in warnings.
    let worker_keys = ["storage.replication.factor", "plugin.discovery"];
    let mut strait = Strait::start(&file, "properties").allow(&worker_keys);
    let remote = format!("east.{by_strait}");
    st::wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        500,
        Duration::from_secs(60),
    );
    assert_eq!(
        kafka::values_by_partition(target, &remote),
        kafka::values_by_partition(source, &by_strait)
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// Java shops keep their certificates in PKCS12 stores: a truststore made by keytool and a
/// keystore made by openssl, each with its password, work as they are; a wrong password and
/// a store in the old JKS format are exit 2 naming the key, the JKS one with the keytool
/// command that converts it.
#[test]
fn pkcs12_stores_work_as_they_are_and_jks_ones_say_how_to_convert() {
    let s = setup();
    let truststore = s.ca.java_truststore("PKCS12", "trust-Pass-3");
    let keystore = s.ca.pkcs12_keystore(&s.client, "key-Pass-4");
    let jks = s.ca.java_truststore("JKS", "trust-Pass-3");
    let run = |truststore: &std::path::Path, password: &str| {
        let extra = [
            "ssl.truststore.type = PKCS12".to_string(),
            format!("ssl.truststore.location = {}", path(truststore)),
            format!("ssl.truststore.password = {password}"),
            "target.ssl.keystore.type = PKCS12".to_string(),
            format!("target.ssl.keystore.location = {}", path(&keystore)),
            "target.ssl.keystore.password = key-Pass-4".to_string(),
        ];
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        // The PEM truststore and keystore of `config` are replaced by these.
        let text = config(s, "none", &s.source.ssl, false, &extra).replace(
            &format!("ssl.truststore.location = {}\n", path(&s.ca.cert())),
            "",
        );
        let (_dir, file) = st::config_file("mm2.properties", &text);
        st::run_cli(&["check", st::arg(&file)])
    };
    let (code, out) = run(&truststore, "trust-Pass-3");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("cluster target: reachable"), "{out}");

    let (code, out) = run(&truststore, "wrong");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("ssl.truststore.location") && out.contains("neither PEM nor a PKCS12"),
        "{out}"
    );
    let (code, out) = run(&jks, "trust-Pass-3");
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("keytool -importkeystore"), "{out}");
    assert!(
        !out.contains("trust-Pass-3") && !out.contains("key-Pass-4"),
        "{out}"
    );
}
