//! Certificates made at test time with the `openssl` command (no private key is checked in),
//! and clusters with `SSL`, `SASL_SSL` and `SASL_PLAINTEXT` listeners, users and all.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::{Duration, Instant};

use super::kafka::{free_port, free_port_pair, tool, Cluster};

/// A certificate authority in a temporary directory, and what it issues.
pub struct Ca {
    dir: tempfile::TempDir,
    name: String,
}

impl Ca {
    /// A new self-signed CA called `name`.
    pub fn new(name: &str) -> Ca {
        let ca = Ca {
            dir: tempfile::tempdir().unwrap(),
            name: name.to_string(),
        };
        let subject = format!("/CN={name}");
        ca.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &subject,
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        ca
    }

    /// The CA's certificate (PEM): what a truststore holds.
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A key and a certificate for `cn`, signed by this CA and valid for `san` (e.g.
    /// `IP:127.0.0.1`), in one PEM file (unencrypted PKCS#8 key, then the certificate): what
    /// Kafka's `ssl.keystore.type = PEM` and strait's `ssl.keystore.location` read.
    pub fn issue(&self, cn: &str, san: &str) -> PathBuf {
        let (key, csr, crt, ext) = (
            format!("{cn}.key"),
            format!("{cn}.csr"),
            format!("{cn}.crt"),
            format!("{cn}.ext"),
        );
        std::fs::write(
            self.dir.path().join(&ext),
            format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=critical,digitalSignature,keyEncipherment\n\
                 extendedKeyUsage=serverAuth,clientAuth\n"
            ),
        )
        .unwrap();
        let subject = format!("/CN={cn}");
        self.openssl(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", &subject, "-keyout", &key, "-out",
            &csr,
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &crt,
        ]);
        let pem = self.dir.path().join(format!("{cn}.pem"));
        let text = std::fs::read_to_string(self.dir.path().join(&key)).unwrap()
            + &std::fs::read_to_string(self.dir.path().join(&crt)).unwrap();
        std::fs::write(&pem, text).unwrap();
        pem
    }

    /// `pem` (a key and its certificate, from [`Ca::issue`]) as a PKCS12 keystore made by
    /// `openssl pkcs12 -export`, protected by `password`.
    pub fn pkcs12_keystore(&self, pem: &Path, password: &str) -> PathBuf {
        let out = pem.with_extension("p12");
        let pass = format!("pass:{password}");
        self.openssl(&[
            "pkcs12",
            "-export",
            "-in",
            path(pem),
            "-out",
            path(&out),
            "-passout",
            &pass,
        ]);
        out
    }

    /// This CA's certificate in a truststore of `store_type` (`PKCS12` or `JKS`) made by the
    /// JDK's keytool, protected by `password`.
    pub fn java_truststore(&self, store_type: &str, password: &str) -> PathBuf {
        let out = self
            .dir
            .path()
            .join(format!("truststore.{}", store_type.to_lowercase()));
        let cert = self.cert();
        let args = [
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            path(&cert),
            "-keystore",
            path(&out),
            "-storetype",
            store_type,
            "-storepass",
            password,
        ];
        let done = Command::new("keytool")
            .args(args)
            .output()
            .expect("running keytool");
        assert!(
            done.status.success(),
            "keytool {args:?}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        out
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("running openssl");
        assert!(
            out.status.success(),
            "CA {}: openssl {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A cluster with secured listeners besides its PLAINTEXT one (which the Java tools use).
pub struct SecuredCluster {
    pub cluster: Cluster,
    /// `127.0.0.1:<port>` of the `SSL` listener.
    pub ssl: String,
    /// `127.0.0.1:<port>` of the `SASL_SSL` listener: PLAIN, SCRAM-SHA-256 (sessions of
    /// [`REAUTH_MS`]), -512 and OAUTHBEARER (unsigned tokens; sessions of at most
    /// [`REAUTH_MS`]).
    pub sasl_ssl: String,
    /// `127.0.0.1:<port>` of the `SASL_PLAINTEXT` listener: PLAIN and SCRAM-SHA-256 only.
    pub sasl_plaintext: String,
}

/// How long a SCRAM-SHA-256 or OAUTHBEARER session on the `SASL_SSL` listener lasts before
/// the client must re-authenticate (`connections.max.reauth.ms`); other mechanisms and
/// listeners never expire.
pub const REAUTH_MS: u64 = 3000;

/// The PLAIN user every secured cluster knows, and its password.
pub const PLAIN_USER: (&str, &str) = ("plainuser", "plain-Secret-1");
/// The SCRAM user (SHA-256 and SHA-512), and its password.
pub const SCRAM_USER: (&str, &str) = ("scramuser", "scram-Secret-2");
/// A SCRAM user that is no super user: it may do only what ACLs allow.
pub const MIRROR_USER: (&str, &str) = ("mirror", "mirror-Secret-6");
/// The principals that may do anything: the PLAINTEXT listener's (the Java tools'), the
/// client certificate's, and the users and token subjects the other tests log in as.
const SUPER_USERS: &str = "User:ANONYMOUS;User:CN=strait-client;User:scramuser;\
                           User:plainuser;User:strait-app;User:filed";

/// Starts cluster `name` whose TLS listeners present a certificate of `ca` for
/// `IP:127.0.0.1`; with `client_auth`, its `SSL` listener requires a client certificate
/// signed by `ca`. ACLs are enforced for all but the super users. The SCRAM users exist once
/// this returns.
pub fn start_cluster(name: &str, ca: &Ca, client_auth: bool) -> SecuredCluster {
    let port = free_port_pair();
    let (ssl, sasl_ssl, sasl_plaintext) = (free_port(), free_port(), free_port());
    let keystore = ca.issue(&format!("{name}-broker"), "IP:127.0.0.1");
    let mut settings = vec![
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{},\
             SSL://127.0.0.1:{ssl},SASL_SSL://127.0.0.1:{sasl_ssl},\
             SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}",
            port + 1
        ),
        format!(
            "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl},\
             SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}"
        ),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,\
         SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
            .into(),
        "ssl.keystore.type=PEM".into(),
        format!("ssl.keystore.location={}", path(&keystore)),
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", path(&ca.cert())),
        format!(
            "listener.name.ssl.ssl.client.auth={}",
            if client_auth { "required" } else { "none" }
        ),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER".into(),
        // ACLs are enforced: MIRROR_USER gets only what a test grants it.
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
        format!("super.users={SUPER_USERS}"),
        // OAUTHBEARER with Kafka's unsecured validator (the default when no server callback
        // handler is set): it checks a token's `sub` and `exp`, not a signature.
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=\
         org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         unsecuredLoginStringClaim_sub=\"broker\";"
            .into(),
        format!("listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms={REAUTH_MS}"),
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256".into(),
        // KIP-368: SCRAM-SHA-256 sessions on the SASL_SSL listener last 3 s; a client that
        // sends a request after that has its connection closed.
        format!("listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms={REAUTH_MS}"),
    ];
    let (plain_user, plain_password) = PLAIN_USER;
    for listener in ["sasl_ssl", "sasl_plaintext"] {
        settings.push(format!(
            "listener.name.{listener}.plain.sasl.jaas.config=\
             org.apache.kafka.common.security.plain.PlainLoginModule required \
             user_{plain_user}=\"{plain_password}\";"
        ));
        for scram in ["scram-sha-256", "scram-sha-512"] {
            settings.push(format!(
                "listener.name.{listener}.{scram}.sasl.jaas.config=\
                 org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ));
        }
    }
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_on(name, port, &settings);
    add_scram_user(&cluster, SCRAM_USER);
    add_scram_user(&cluster, MIRROR_USER);
    SecuredCluster {
        cluster,
        ssl: format!("127.0.0.1:{ssl}"),
        sasl_ssl: format!("127.0.0.1:{sasl_ssl}"),
        sasl_plaintext: format!("127.0.0.1:{sasl_plaintext}"),
    }
}

/// Creates a SCRAM user with Kafka's own ConfigCommand and waits until the broker lists both
/// of its credentials.
fn add_scram_user(c: &Cluster, (user, password): (&str, &str)) {
    let base = [
        "--bootstrap-server",
        c.bootstrap.as_str(),
        "--entity-type",
        "users",
        "--entity-name",
        user,
    ];
    // One mechanism per request: the broker refuses a user's credentials altered twice in one.
    for credential in [
        format!("SCRAM-SHA-256=[iterations=8192,password={password}]"),
        format!("SCRAM-SHA-512=[password={password}]"),
    ] {
        let alter = ["--alter", "--add-config", credential.as_str()];
        tool("kafka.admin.ConfigCommand", &[&base[..], &alter].concat());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = tool(
            "kafka.admin.ConfigCommand",
            &[&base[..], &["--describe"]].concat(),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("SCRAM-SHA-256") && text.contains("SCRAM-SHA-512") {
            return;
        }
        assert!(Instant::now() < deadline, "SCRAM user not listed: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("temp dir path is UTF-8")
}

/// An OAuth token endpoint (`token_endpoint.py`) over HTTPS with a certificate of the test
/// CA, handing out unsigned tokens that live `lifetime_s` to one client.
pub struct TokenEndpoint {
    child: std::process::Child,
    /// `https://127.0.0.1:<port>/token`.
    pub url: String,
    issued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl TokenEndpoint {
    pub fn start(ca: &Ca, client: (&str, &str), scope: &str, lifetime_s: u32) -> TokenEndpoint {
        use std::io::BufRead;
        let cert = ca.issue("token-endpoint", "IP:127.0.0.1");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/common/token_endpoint.py"
        );
        let mut child = Command::new("python3")
            .args([script, path(&cert), client.0, client.1, scope])
            .arg(lifetime_s.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting the token endpoint (python3)");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let port = lines
            .next()
            .and_then(Result::ok)
            .expect("the token endpoint printed no port");
        let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = issued.clone();
        std::thread::spawn(move || {
            for _ in lines.map_while(Result::ok) {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        TokenEndpoint {
            child,
            url: format!("https://127.0.0.1:{}/token", port.trim()),
            issued,
        }
    }

    /// How many tokens it has handed out.
    pub fn issued(&self) -> usize {
        self.issued.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for TokenEndpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An unsigned JWT as Kafka's unsecured validator takes it, with `claims` (JSON).
pub fn unsigned_token(claims: &str) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(claims))
}

/// Grants `principal` (`User:mirror`) the operations on one resource with Kafka's own
/// AclCommand: `resource` is AclCommand's selector (`--topic`, `--group`, `--cluster`,
/// `--transactional-id`), `name` its value (ignored for `--cluster`), matched as a prefix if
/// `prefixed`.
pub fn grant(
    c: &Cluster,
    principal: &str,
    resource: &str,
    name: &str,
    prefixed: bool,
    operations: &[&str],
) {
    acl(
        c,
        "--allow-principal",
        principal,
        resource,
        name,
        prefixed,
        operations,
    );
}

/// Like [`grant`], a DENY: it wins over any ALLOW.
pub fn deny(c: &Cluster, principal: &str, resource: &str, name: &str, operations: &[&str]) {
    acl(
        c,
        "--deny-principal",
        principal,
        resource,
        name,
        false,
        operations,
    );
}

fn acl(
    c: &Cluster,
    permission: &str,
    principal: &str,
    resource: &str,
    name: &str,
    prefixed: bool,
    operations: &[&str],
) {
    let mut args = vec![
        "--bootstrap-server",
        c.bootstrap.as_str(),
        "--add",
        permission,
        principal,
        resource,
    ];
    if resource != "--cluster" {
        args.push(name);
    }
    if prefixed {
        args.extend(["--resource-pattern-type", "prefixed"]);
    }
    for op in operations {
        args.extend(["--operation", op]);
    }
    let out = tool("org.apache.kafka.tools.AclCommand", &args);
    assert!(
        out.status.success(),
        "AclCommand {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
