//! A fault-injecting TCP proxy between strait and real brokers: Shopify's Toxiproxy
//! (`scripts/toxiproxy.sh` builds and caches it), driven through its HTTP API.
//!
//! [`start_cluster`] starts a single-node cluster with one more listener, `PROXIED`, that
//! advertises the proxy's address: a client bootstrapping through [`Proxy::addr`] is told to
//! connect to the proxy again, so every byte strait exchanges with the broker crosses it. The
//! cluster's own `bootstrap` stays direct, for the Java tools and the broker itself, so that a
//! fault meant for strait neither blinds the checks nor breaks the broker. Faults are
//! [`Toxic`]s (latency, bandwidth, resets, blackholes) and [`Proxy::set_enabled`] (an outage:
//! the proxy closes every connection and refuses new ones).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::kafka::{free_port, free_port_pair, Cluster};

/// A running `toxiproxy-server` on a loopback port, stopped on drop.
pub struct Toxiproxy {
    child: Child,
    api: String,
}

impl Toxiproxy {
    /// Builds the server if it is not cached yet, starts it (it stops when this process
    /// exits, dropped or not) and waits for its API.
    pub fn start() -> Toxiproxy {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/toxiproxy.sh");
        let port = free_port().to_string();
        let child = Command::new("bash")
            .arg(&script)
            .args(["run", &port])
            .env("STRAIT_TOXIPROXY_WATCH_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        let mut t = Toxiproxy {
            child,
            api: format!("127.0.0.1:{port}"),
        };
        // The first run builds the server (`go install`).
        let deadline = Instant::now() + Duration::from_secs(300);
        while request(&t.api, "GET", "/version", "").is_err() {
            if let Some(status) = t.child.try_wait().unwrap() {
                panic!("toxiproxy.sh run exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "toxiproxy-server API not up");
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    /// A new proxy `name` on a free loopback port, forwarding to `upstream`.
    pub fn proxy(&self, name: &str, upstream: &str) -> Proxy {
        let proxy = Proxy {
            api: self.api.clone(),
            name: name.to_string(),
            addr: format!("127.0.0.1:{}", free_port()),
        };
        let body = format!(
            r#"{{"name":"{name}","listen":"{}","upstream":"{upstream}","enabled":true}}"#,
            proxy.addr
        );
        call(&self.api, "POST", "/proxies", &body);
        proxy
    }
}

impl Drop for Toxiproxy {
    /// SIGTERM: the script stops the server on it.
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

/// One proxy of a [`Toxiproxy`].
pub struct Proxy {
    api: String,
    name: String,
    addr: String,
}

/// Which way a toxic acts: on what the client sends (`Upstream`) or what it receives.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Upstream,
    Downstream,
}

/// A fault, as Toxiproxy's toxic types call them.
#[derive(Debug, Clone, Copy)]
pub enum Toxic {
    /// Delays every chunk by `ms` ± `jitter_ms`.
    Latency { ms: u64, jitter_ms: u64 },
    /// Caps the rate at `kb_per_s` KB/s.
    Bandwidth { kb_per_s: u64 },
    /// Resets (TCP RST) every connection `after_ms` after the toxic sees it: with traffic
    /// flowing, that is in the middle of requests.
    ResetPeer { after_ms: u64 },
    /// A half-open blackhole: nothing gets through and the connection stays open (until
    /// `close_after_ms`, never if 0).
    Timeout { close_after_ms: u64 },
}

impl Proxy {
    /// `host:port` to give strait as the bootstrap address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Disabled, the proxy closes its connections and refuses new ones: an outage.
    pub fn set_enabled(&self, enabled: bool) {
        let path = format!("/proxies/{}", self.name);
        call(
            &self.api,
            "POST",
            &path,
            &format!(r#"{{"enabled":{enabled}}}"#),
        );
    }

    /// Adds `toxic` as `name` on every connection, current and new, in direction `stream`.
    pub fn add(&self, name: &str, stream: Stream, toxic: Toxic) {
        let (kind, attributes) = match toxic {
            Toxic::Latency { ms, jitter_ms } => (
                "latency",
                format!(r#"{{"latency":{ms},"jitter":{jitter_ms}}}"#),
            ),
            Toxic::Bandwidth { kb_per_s } => ("bandwidth", format!(r#"{{"rate":{kb_per_s}}}"#)),
            Toxic::ResetPeer { after_ms } => ("reset_peer", format!(r#"{{"timeout":{after_ms}}}"#)),
            Toxic::Timeout { close_after_ms } => {
                ("timeout", format!(r#"{{"timeout":{close_after_ms}}}"#))
            }
        };
        let stream = match stream {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        };
        let body = format!(
            r#"{{"name":"{name}","type":"{kind}","stream":"{stream}","toxicity":1.0,"attributes":{attributes}}}"#
        );
        call(
            &self.api,
            "POST",
            &format!("/proxies/{}/toxics", self.name),
            &body,
        );
    }

    /// Removes the toxic `name`.
    pub fn remove(&self, name: &str) {
        let path = format!("/proxies/{}/toxics/{name}", self.name);
        call(&self.api, "DELETE", &path, "");
    }
}

/// Starts cluster `name` (extra broker settings `extra`) with a `PROXIED` listener behind a
/// new proxy of `toxiproxy`; strait bootstraps from the proxy's [`Proxy::addr`].
pub fn start_cluster(toxiproxy: &Toxiproxy, name: &str, extra: &[&str]) -> (Cluster, Proxy) {
    let port = free_port_pair();
    let proxied = free_port();
    let proxy = toxiproxy.proxy(name, &format!("127.0.0.1:{proxied}"));
    let listeners = format!(
        "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{},PROXIED://127.0.0.1:{proxied}",
        port + 1
    );
    let advertised = format!(
        "advertised.listeners=PLAINTEXT://127.0.0.1:{port},PROXIED://{}",
        proxy.addr
    );
    let mut settings = vec![
        listeners.as_str(),
        advertised.as_str(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT",
    ];
    settings.extend_from_slice(extra);
    (Cluster::start_on(name, port, &settings), proxy)
}

/// An API call that must succeed (2xx); panics with Toxiproxy's answer otherwise.
fn call(api: &str, method: &str, path: &str, body: &str) {
    match request(api, method, path, body) {
        Ok((200..=299, _)) => {}
        Ok((status, text)) => panic!("toxiproxy {method} {path} {body}: {status} {text}"),
        Err(e) => panic!("toxiproxy {method} {path}: {e}"),
    }
}

/// One HTTP/1.1 request on a new connection (`Connection: close`): the status and the body
/// text (chunked or not: only shown in failure messages).
fn request(api: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(api)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {api}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad HTTP response: {text:?}")))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_string()))
}

/// A source and a target cluster, each behind its own proxy, and the config of a flow
/// `a->b` between them through the proxies.
pub struct Pair {
    pub source: Cluster,
    pub target: Cluster,
    pub source_proxy: Proxy,
    pub target_proxy: Proxy,
    _toxiproxy: Toxiproxy,
}

impl Pair {
    /// Starts Toxiproxy and both clusters (`<prefix>-source`, `<prefix>-target`, in parallel).
    pub fn start(prefix: &str) -> Pair {
        let toxiproxy = Toxiproxy::start();
        let (source, target) = (format!("{prefix}-source"), format!("{prefix}-target"));
        let ((source, source_proxy), (target, target_proxy)) = std::thread::scope(|s| {
            let source = s.spawn(|| start_cluster(&toxiproxy, &source, &[]));
            let target = start_cluster(&toxiproxy, &target, &[]);
            (source.join().unwrap(), target)
        });
        Pair {
            source,
            target,
            source_proxy,
            target_proxy,
            _toxiproxy: toxiproxy,
        }
    }

    /// An `mm2.properties` text for the flow `a->b` of `topics` through the proxies, with a
    /// request timeout of `request_timeout_ms` on both sides, plus the `extra` lines.
    pub fn mm2_properties(&self, topics: &str, request_timeout_ms: u64, extra: &[&str]) -> String {
        let mut text = format!(
            "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\n\
             a->b.enabled = true\na->b.topics = {topics}\nreplication.factor = 1\n\
             internal.topic.replication.factor = 1\n\
             a.request.timeout.ms = {request_timeout_ms}\nb.request.timeout.ms = {request_timeout_ms}\n",
            self.source_proxy.addr(),
            self.target_proxy.addr()
        );
        for line in extra {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}
