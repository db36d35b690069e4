//! Certificates made at test time with the `openssl` command (no private key is checked in),
//! and clusters with an `SSL` listener that presents them.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::kafka::{free_port, free_port_pair, Cluster};

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

/// A cluster with an `SSL` listener besides its PLAINTEXT one (which the Java tools use).
pub struct TlsCluster {
    pub cluster: Cluster,
    /// `127.0.0.1:<port>` of the SSL listener.
    pub ssl_bootstrap: String,
}

/// Starts cluster `name` whose SSL listener presents a certificate of `ca` for
/// `IP:127.0.0.1`; with `client_auth`, it requires a client certificate signed by `ca`.
pub fn start_cluster(name: &str, ca: &Ca, client_auth: bool) -> TlsCluster {
    let port = free_port_pair();
    let ssl = free_port();
    let keystore = ca.issue(&format!("{name}-broker"), "IP:127.0.0.1");
    let settings = [
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{},SSL://127.0.0.1:{ssl}",
            port + 1
        ),
        format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl}"),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL".into(),
        "ssl.keystore.type=PEM".into(),
        format!("ssl.keystore.location={}", path(&keystore)),
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", path(&ca.cert())),
        format!(
            "ssl.client.auth={}",
            if client_auth { "required" } else { "none" }
        ),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    TlsCluster {
        cluster: Cluster::start_on(name, port, &settings),
        ssl_bootstrap: format!("127.0.0.1:{ssl}"),
    }
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("temp dir path is UTF-8")
}
