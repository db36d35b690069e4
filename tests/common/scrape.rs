//! Scrapes a running strait's `--metrics-listen` address through `scrape.py`, which parses
//! `/metrics` with the Prometheus project's Python client (`prometheus_client`, installed
//! once into the cache directory with pip, pinned).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

const PROMETHEUS_CLIENT: &str = "prometheus_client==0.26.0";

/// One sample: its name, labels and value (`None`: NaN).
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: Option<f64>,
}

impl Sample {
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

/// The samples of `http://ADDR/metrics`.
pub fn metrics(addr: &str) -> Vec<Sample> {
    let out = run("metrics", &format!("http://{addr}/metrics"));
    assert_eq!(out["status"], 200, "{out}");
    out["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Sample {
            name: s[0].as_str().unwrap().to_string(),
            labels: serde_json::from_value(s[1].clone()).unwrap(),
            value: s[2].as_f64(),
        })
        .collect()
}

/// The status and JSON body of `http://ADDR/PATH` (`/healthz`, `/readyz`).
pub fn probe(addr: &str, path: &str) -> (u64, serde_json::Value) {
    let out = run("probe", &format!("http://{addr}{path}"));
    (out["status"].as_u64().unwrap(), out["body"].clone())
}

fn run(mode: &str, url: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/scrape.py");
    let out = Command::new("python3")
        .args([script, mode, url])
        .env("PYTHONPATH", python_path())
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "scrape.py {mode} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Where `prometheus_client` is installed (once: into a temporary directory, then renamed).
fn python_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let cache = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join(".cache/strait");
        let dir = cache.join(PROMETHEUS_CLIENT.replace("==", "-"));
        if dir.join("prometheus_client").is_dir() {
            return dir;
        }
        let tmp = cache.join(format!(
            "{}.tmp{}",
            PROMETHEUS_CLIENT.replace("==", "-"),
            std::process::id()
        ));
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
            ])
            .arg(&tmp)
            .arg(PROMETHEUS_CLIENT)
            .status()
            .expect("running pip");
        assert!(status.success(), "pip install {PROMETHEUS_CLIENT} failed");
        if std::fs::rename(&tmp, &dir).is_err() {
            // Another test binary installed it meanwhile.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        dir
    })
}
