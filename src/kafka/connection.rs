//! One TCP connection (TLS inside it, if the cluster asks for it) to one broker, shared by every task that talks to that broker.
//! Requests are pipelined: a writer task sends frames in the order they were queued, one
//! reader task reads responses and hands each to its waiter by correlation id (rskafka's
//! `Messenger`). Any I/O or framing failure poisons the connection: every waiter, present and
//! future, gets the error, and the owner (`Cluster`) dials a new one.
//!
//! SASL messages take a lane of their own to the writer. When the broker gives the session a
//! lifetime (KIP-368), a renewal task holds the request lane shortly before the session ends,
//! runs the SASL exchange again on the authentication lane, and releases the requests queued
//! meanwhile: the broker closes a connection whose session ended when a request arrives,
//! and renewing in place keeps pipelined requests in order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Request, StrBytes, VersionRange};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::buffer_pool;
use super::codec::{self, MAX_FRAME_BYTES};
use super::error::KafkaError;
use super::sasl;
use super::segments::Segments;
use super::tls::{self, Tls};

type Waiter = oneshot::Sender<Result<Bytes, KafkaError>>;

#[derive(Default)]
struct Pending {
    waiters: HashMap<i32, Waiter>,
    /// Set once the connection is unusable; every later request fails with it.
    poisoned: Option<String>,
}

impl Pending {
    fn poison(&mut self, addr: &str, reason: &str) {
        if self.poisoned.is_none() {
            self.poisoned = Some(reason.to_string());
        }
        for (_, w) in self.waiters.drain() {
            let _ = w.send(Err(KafkaError::Disconnected {
                addr: addr.to_string(),
                reason: reason.to_string(),
            }));
        }
    }
}

/// What the SASL lane tells the writer.
enum Auth {
    /// Write no more requests until [`Auth::Release`].
    Hold,
    /// A SASL frame, written at once.
    Frame(Segments),
    Release,
}

/// Which lane to the writer a frame takes.
#[derive(Clone, Copy)]
enum Lane {
    Requests,
    Auth,
}

struct Inner {
    addr: String,
    client_id: StrBytes,
    timeout: Duration,
    next_correlation: AtomicI32,
    pending: Arc<Mutex<Pending>>,
    outbox: mpsc::UnboundedSender<Segments>,
    auth: mpsc::UnboundedSender<Auth>,
    /// The TLS version and cipher suite (`TLSv1_3 TLS13_AES_256_GCM_SHA384`); `None`:
    /// PLAINTEXT.
    tls: Option<String>,
    /// Broker-side version ranges by API key, from ApiVersions.
    versions: std::sync::OnceLock<HashMap<i16, VersionRange>>,
    /// The cluster's finalized feature levels (`transaction.version`, ...), from ApiVersions
    /// v3+: the highest level of each the cluster has switched on.
    features: OnceLock<HashMap<String, i16>>,
    tasks: [JoinHandle<()>; 2],
    /// Renews the SASL session before the broker ends it, if the broker limits it.
    renewal: OnceLock<JoinHandle<()>>,
    /// How a connection without SASL was dialled, until its first request after ApiVersions
    /// is answered: a SASL listener hangs up on that request, and the dial asks it why.
    unproven: Mutex<Option<Dial>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for t in self.tasks.iter().chain(self.renewal.get()) {
            t.abort();
        }
    }
}

/// A cheap handle (`Clone`) on one broker connection.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connection({})", self.inner.addr)
    }
}

/// How long setting up a TCP connection may take, whatever the request timeout (the Java
/// clients' `socket.connection.setup.timeout.ms`): an address that drops SYNs fails in
/// seconds, not after a request timeout that may be minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to set up a connection to the brokers of one cluster.
#[derive(Clone, Debug, Default)]
pub struct Dial {
    /// The socket's send buffer (`SO_SNDBUF`); `None` leaves the operating system's default
    /// (autotuned).
    pub send_buffer: Option<u32>,
    /// TLS inside the connection; `None`: PLAINTEXT.
    pub tls: Option<Tls>,
    /// SASL authentication once API versions are known; `None`: none.
    pub sasl: Option<Arc<sasl::Login>>,
}

/// A TCP connection to `addr` (`host:port`), trying each address it resolves to in turn.
async fn tcp(addr: &str, send_buffer: Option<u32>) -> std::io::Result<TcpStream> {
    let mut last = None;
    for ip in tokio::net::lookup_host(addr).await? {
        let socket = if ip.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if let Some(bytes) = send_buffer {
            socket.set_send_buffer_size(bytes)?;
        }
        match socket.connect(ip).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "resolves to no address")
    }))
}

impl Connection {
    /// Dials `addr` (within `timeout`, at most `CONNECT_TIMEOUT`), runs the TLS handshake if
    /// `dial` asks for TLS (within `timeout`), starts the reader and writer tasks, negotiates
    /// API versions and authenticates if `dial` asks for SASL (each request within
    /// `timeout`).
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        dial: &Dial,
    ) -> Result<Self, KafkaError> {
        let io_err = |source| KafkaError::Io {
            addr: addr.to_string(),
            source,
        };
        let connect_timeout = timeout.min(CONNECT_TIMEOUT);
        let stream = tokio::time::timeout(connect_timeout, tcp(addr, dial.send_buffer))
            .await
            .map_err(|_| KafkaError::Timeout {
                addr: addr.to_string(),
                api: "connect",
                timeout_ms: connect_timeout.as_millis() as u64,
            })?
            .map_err(io_err)?;
        stream.set_nodelay(true).map_err(io_err)?;
        let pending = Arc::new(Mutex::new(Pending::default()));
        let (outbox, rx) = mpsc::unbounded_channel::<Segments>();
        let (auth, auth_rx) = mpsc::unbounded_channel::<Auth>();
        let lanes = (rx, auth_rx);
        let (tasks, negotiated) = match &dial.tls {
            None => {
                let (read, write) = stream.into_split();
                (spawn_io(addr, read, write, &pending, lanes), None)
            }
            Some(tls) => {
                let stream = match tokio::time::timeout(timeout, tls.handshake(addr, stream)).await
                {
                    Err(_) => {
                        return Err(KafkaError::Timeout {
                            addr: addr.to_string(),
                            api: "TLS handshake",
                            timeout_ms: timeout.as_millis() as u64,
                        })
                    }
                    // A plaintext listener takes a ClientHello for an oversized request and
                    // hangs up; one that answers plaintext Kafka is such a listener.
                    Ok(Err(KafkaError::Io { source, .. }))
                        if source.kind() == std::io::ErrorKind::UnexpectedEof
                            && answers_plaintext(addr, client_id, timeout).await =>
                    {
                        return Err(KafkaError::Listener {
                            addr: addr.to_string(),
                            reason: "the listener does not speak TLS (it answers plaintext Kafka \
                                     requests): security.protocol = SSL or SASL_SSL needs an SSL \
                                     or SASL_SSL listener; for this one it is PLAINTEXT or \
                                     SASL_PLAINTEXT"
                                .into(),
                        });
                    }
                    Ok(handshake) => handshake?,
                };
                let session = stream.get_ref().1;
                let negotiated = format!(
                    "{:?} {:?}",
                    session
                        .protocol_version()
                        .unwrap_or(rustls::ProtocolVersion::Unknown(0)),
                    session
                        .negotiated_cipher_suite()
                        .map(|s| s.suite())
                        .unwrap_or(rustls::CipherSuite::Unknown(0)),
                );
                let (read, write) = tokio::io::split(stream);
                (
                    spawn_io(addr, read, write, &pending, lanes),
                    Some(negotiated),
                )
            }
        };
        let inner = Arc::new(Inner {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            timeout,
            next_correlation: AtomicI32::new(1),
            pending,
            outbox,
            auth,
            tls: negotiated,
            versions: OnceLock::new(),
            features: OnceLock::new(),
            tasks,
            renewal: OnceLock::new(),
            unproven: Mutex::new(None),
        });
        // TLS 1.3 finishes the handshake before the broker has checked strait's certificate:
        // a refusal arrives as an alert on the first read.
        let (versions, features) = match negotiate(&inner).await {
            Ok(negotiated) => negotiated,
            Err(KafkaError::Disconnected { addr, reason }) if reason.starts_with(TLS_FAILURE) => {
                return Err(KafkaError::Tls {
                    addr,
                    reason: reason[TLS_FAILURE.len()..].to_string(),
                });
            }
            // A TLS listener hangs up on plaintext at once.
            Err(e @ KafkaError::Disconnected { .. })
                if dial.tls.is_none() && tls::speaks_tls(addr, connect_timeout).await =>
            {
                tracing::debug!(broker = addr, error = %e, "the listener answers TLS");
                return Err(KafkaError::Listener {
                    addr: addr.to_string(),
                    reason: "the listener speaks TLS, but security.protocol is PLAINTEXT or \
                             SASL_PLAINTEXT: set it to SSL or SASL_SSL (and the truststore) for \
                             this cluster"
                        .into(),
                });
            }
            Err(e) => return Err(e),
        };
        let _ = inner.versions.set(versions);
        let _ = inner.features.set(features);
        if dial.sasl.is_none() {
            *inner.unproven.lock().unwrap() = Some(dial.clone());
        }
        let conn = Connection { inner };
        if let Some(sasl) = &dial.sasl {
            if let Some(lifetime) = sasl::authenticate(&conn, sasl).await? {
                let task = tokio::spawn(renew(Arc::downgrade(&conn.inner), sasl.clone(), lifetime));
                let _ = conn.inner.renewal.set(task);
            }
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    /// The TLS version and cipher suite negotiated (`TLSv1_3 TLS13_AES_256_GCM_SHA384`);
    /// `None` for PLAINTEXT.
    pub fn tls(&self) -> Option<&str> {
        self.inner.tls.as_deref()
    }

    /// False once an I/O error, a framing error or a timeout has poisoned the connection.
    pub fn is_usable(&self) -> bool {
        self.inner.pending.lock().unwrap().poisoned.is_none()
    }

    /// The highest version of `R` both strait and the broker speak.
    pub fn version<R: Request>(&self) -> Option<i16> {
        pick_version(self.inner.versions.get()?, R::KEY, R::VERSIONS)
    }

    /// The level at which the cluster has switched `feature` on (its finalized maximum), as
    /// the broker said in ApiVersions; 0 when it has not (or predates features).
    pub fn feature(&self, feature: &str) -> i16 {
        self.inner
            .features
            .get()
            .and_then(|f| f.get(feature).copied())
            .unwrap_or(0)
    }

    /// Sends `req` at the negotiated version and waits for its response.
    pub async fn send<R: Request>(&self, req: &R) -> Result<R::Response, KafkaError> {
        self.start(req)?.response().await
    }

    /// Like [`Connection::send`], at version `at_most` or lower: for requests whose newer
    /// versions mean something else (AddPartitionsToTxn v4+ is for brokers only).
    pub async fn send_at_most<R: Request>(
        &self,
        at_most: i16,
        req: &R,
    ) -> Result<R::Response, KafkaError> {
        let version = self.negotiated::<R>(at_most)?;
        queue::<R>(
            &self.inner,
            Lane::Requests,
            version,
            |correlation, client_id| {
                codec::encode_request(req, version, correlation, client_id).map(Segments::from)
            },
        )?
        .response()
        .await
    }

    /// Queues `req` now, in call order, and returns the handle to await its response:
    /// what keeps pipelined Produce requests of one partition in sequence order.
    pub fn start<R: Request>(&self, req: &R) -> Result<InFlight<R>, KafkaError> {
        self.start_on(Lane::Requests, req)
    }

    /// Sends a SASL request on the authentication lane, which a renewal does not hold.
    pub(super) async fn send_auth<R: Request>(&self, req: &R) -> Result<R::Response, KafkaError> {
        self.start_on(Lane::Auth, req)?.response().await
    }

    fn start_on<R: Request>(&self, lane: Lane, req: &R) -> Result<InFlight<R>, KafkaError> {
        let version = self.negotiated::<R>(i16::MAX)?;
        queue(&self.inner, lane, version, |correlation, client_id| {
            codec::encode_request(req, version, correlation, client_id).map(Segments::from)
        })
    }

    /// Like [`Connection::start`], for a request of type `R` whose body the caller encodes
    /// itself, at the version `encode_body` is given: `at_most` or lower.
    pub fn start_encoded<R: Request>(
        &self,
        at_most: i16,
        encode_body: impl FnOnce(i16) -> Segments,
    ) -> Result<InFlight<R>, KafkaError> {
        let version = self.negotiated::<R>(at_most)?;
        let body = encode_body(version);
        queue(
            &self.inner,
            Lane::Requests,
            version,
            |correlation, client_id| {
                let header =
                    codec::encode_header::<R>(version, correlation, client_id, body.remaining())?;
                let mut frame = Segments::from(header);
                frame.append(body);
                Ok(frame)
            },
        )
    }

    fn negotiated<R: Request>(&self, at_most: i16) -> Result<i16, KafkaError> {
        self.version::<R>()
            .map(|v| v.min(at_most))
            .filter(|&v| v >= R::VERSIONS.min)
            .ok_or_else(|| KafkaError::UnsupportedApi {
                addr: self.inner.addr.clone(),
                api: api_name(R::KEY),
            })
    }
}

/// Segments one vectored write gathers from queued frames (Linux takes up to 1024).
const WRITE_SEGMENTS: usize = 256;

/// A request that is already queued on the connection, waiting for its response.
pub struct InFlight<R: Request> {
    inner: Arc<Inner>,
    version: i16,
    rx: oneshot::Receiver<Result<Bytes, KafkaError>>,
    _request: std::marker::PhantomData<fn() -> R>,
}

impl<R: Request> InFlight<R> {
    /// Waits for the response (bounded by the connection's request timeout).
    pub async fn response(self) -> Result<R::Response, KafkaError> {
        let inner = &self.inner;
        let api = api_name(R::KEY);
        let body = match tokio::time::timeout(inner.timeout, self.rx).await {
            Ok(Ok(Ok(body))) => {
                inner.unproven.lock().unwrap().take();
                body
            }
            Ok(Ok(Err(e @ KafkaError::Disconnected { .. }))) => {
                let unproven = inner.unproven.lock().unwrap().take();
                let Some(dial) = unproven else {
                    return Err(e);
                };
                let probe = sasl_mechanisms(
                    inner.addr.clone(),
                    inner.client_id.to_string(),
                    inner.timeout,
                    dial,
                );
                return Err(match probe.await {
                    Some(enabled) => KafkaError::Listener {
                        addr: inner.addr.clone(),
                        reason: format!(
                            "the listener requires SASL (it enables {enabled}), but \
                             security.protocol is PLAINTEXT or SSL: set it to SASL_PLAINTEXT \
                             or SASL_SSL, with sasl.mechanism and sasl.jaas.config"
                        ),
                    },
                    None => e,
                });
            }
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) => {
                return Err(KafkaError::Disconnected {
                    addr: inner.addr.clone(),
                    reason: "reader stopped".into(),
                })
            }
            Err(_) => {
                // The response may still arrive, but nobody knows when; like the Java client,
                // give the whole connection up.
                inner
                    .pending
                    .lock()
                    .unwrap()
                    .poison(&inner.addr, &format!("{api} timed out"));
                return Err(KafkaError::Timeout {
                    addr: inner.addr.clone(),
                    api,
                    timeout_ms: inner.timeout.as_millis() as u64,
                });
            }
        };
        codec::decode_response::<R>(body, self.version).map_err(|e| KafkaError::Protocol {
            addr: inner.addr.clone(),
            api,
            version: self.version,
            reason: e.to_string(),
        })
    }
}

/// Encodes a request of type `R` (`encode` gets the correlation id and client id) and
/// queues its frame behind every request queued before it (synchronously, so callers
/// control the order in which requests reach the broker).
fn queue<R: Request>(
    inner: &Arc<Inner>,
    lane: Lane,
    version: i16,
    encode: impl FnOnce(i32, &StrBytes) -> anyhow::Result<Segments>,
) -> Result<InFlight<R>, KafkaError> {
    let correlation = inner.next_correlation.fetch_add(1, Ordering::Relaxed) & i32::MAX;
    let frame = encode(correlation, &inner.client_id).map_err(|e| KafkaError::Protocol {
        addr: inner.addr.clone(),
        api: api_name(R::KEY),
        version,
        reason: e.to_string(),
    })?;
    let (tx, rx) = oneshot::channel();
    let mut pending = inner.pending.lock().unwrap();
    if let Some(reason) = &pending.poisoned {
        return Err(KafkaError::Disconnected {
            addr: inner.addr.clone(),
            reason: reason.clone(),
        });
    }
    let sent = match lane {
        Lane::Requests => inner.outbox.send(frame).is_ok(),
        Lane::Auth => inner.auth.send(Auth::Frame(frame)).is_ok(),
    };
    if !sent {
        return Err(KafkaError::Disconnected {
            addr: inner.addr.clone(),
            reason: "writer stopped".into(),
        });
    }
    pending.waiters.insert(correlation, tx);
    Ok(InFlight {
        inner: inner.clone(),
        version,
        rx,
        _request: std::marker::PhantomData,
    })
}

/// Hands a response frame to the request waiting for it.
fn deliver(pending: &Mutex<Pending>, frame: Bytes) -> Result<(), String> {
    let Some(id) = codec::correlation_id(&frame) else {
        return Err("frame without correlation id".into());
    };
    match pending.lock().unwrap().waiters.remove(&id) {
        Some(waiter) => {
            let _ = waiter.send(Ok(frame));
            Ok(())
        }
        None => Err(format!("response with unknown correlation id {id}")),
    }
}

/// The length of the large frame `buf` starts, when `buf` does not hold all of it yet: that
/// frame is read into a buffer of its own ([`buffer_pool`](super::buffer_pool)).
fn large_frame(buf: &[u8]) -> Option<usize> {
    let len = usize::try_from(i32::from_be_bytes(*buf.first_chunk::<4>()?)).ok()?;
    (buffer_pool::POOLED_FRAME_BYTES..=MAX_FRAME_BYTES)
        .contains(&len)
        .then_some(len)
        .filter(|len| buf.len() < 4 + len)
}

/// How a read error that is a TLS failure (an alert from the broker) starts its reason.
const TLS_FAILURE: &str = "TLS: ";

/// The reason a failed read poisons the connection with.
fn read_failed(e: &std::io::Error) -> String {
    match tls::tls_reason(e) {
        Some(reason) => format!("{TLS_FAILURE}{reason}"),
        None => format!("read failed: {e}"),
    }
}

/// The SASL mechanisms the listener at `addr` enables, if it requires SASL: asked on a new
/// connection dialled as `dial` (no SASL), whose SaslHandshake a listener without SASL
/// answers ILLEGAL_SASL_STATE.
///
/// Boxed: the probe's own requests come back through [`InFlight::response`].
fn sasl_mechanisms(
    addr: String,
    client_id: String,
    timeout: Duration,
    dial: Dial,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>> {
    Box::pin(async move {
        let probe = dial_again(&addr, &client_id, timeout, &dial).await.ok()?;
        probe.inner.unproven.lock().unwrap().take();
        let answer = probe
            .send_auth(
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await
            .ok()?;
        (answer.error_code != ResponseError::IllegalSaslState.code()).then(|| {
            let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            enabled.join(", ")
        })
    })
}

/// Whether the listener at `addr` completes a plaintext Kafka connection (ApiVersions).
async fn answers_plaintext(addr: &str, client_id: &str, timeout: Duration) -> bool {
    dial_again(addr, client_id, timeout, &Dial::default())
        .await
        .is_ok()
}

/// A connection dialled from within [`Connection::connect`] (a probe): boxed, as a future
/// cannot hold itself.
fn dial_again<'a>(
    addr: &'a str,
    client_id: &'a str,
    timeout: Duration,
    dial: &'a Dial,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Connection, KafkaError>> + Send + 'a>>
{
    Box::pin(Connection::connect(addr, client_id, timeout, dial))
}

/// Starts the writer task, which sends queued frames in order (SASL frames first; requests
/// not while a renewal holds them), and the reader task, which hands responses to their
/// waiters; whichever fails first poisons the connection.
fn spawn_io<R, W>(
    addr: &str,
    mut read: R,
    mut write: W,
    pending: &Arc<Mutex<Pending>>,
    (mut rx, mut auth): (
        mpsc::UnboundedReceiver<Segments>,
        mpsc::UnboundedReceiver<Auth>,
    ),
) -> [JoinHandle<()>; 2]
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = {
        let pending = pending.clone();
        let addr = addr.to_string();
        tokio::spawn(async move {
            let mut held = false;
            loop {
                let mut frames = tokio::select! {
                    biased;
                    message = auth.recv() => match message {
                        Some(Auth::Frame(frame)) => frame,
                        Some(Auth::Hold) => {
                            held = true;
                            continue;
                        }
                        Some(Auth::Release) => {
                            held = false;
                            continue;
                        }
                        None => return,
                    },
                    frame = rx.recv(), if !held => match frame {
                        Some(mut frames) => {
                            // Whatever else is queued goes out in the same vectored writes.
                            while frames.segments() < WRITE_SEGMENTS {
                                match rx.try_recv() {
                                    Ok(more) => frames.append(more),
                                    Err(_) => break,
                                }
                            }
                            frames
                        }
                        None => return,
                    },
                };
                // A writer may hold what it accepted (TLS keeps the records a full socket did
                // not take): flushed, a request never waits for the next one to go out.
                let sent = match write.write_all_buf(&mut frames).await {
                    Ok(()) => write.flush().await,
                    Err(e) => Err(e),
                };
                if let Err(e) = sent {
                    pending
                        .lock()
                        .unwrap()
                        .poison(&addr, &format!("write failed: {e}"));
                    return;
                }
            }
        })
    };
    let reader = {
        let pending = pending.clone();
        let addr = addr.to_string();
        tokio::spawn(async move {
            let reason = read_loop(&mut read, &pending).await;
            pending.lock().unwrap().poison(&addr, &reason);
        })
    };
    [writer, reader]
}

async fn read_loop(read: &mut (impl AsyncRead + Unpin), pending: &Mutex<Pending>) -> String {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            if let Some(len) = large_frame(&buf) {
                buf.advance(4);
                let mut body = buffer_pool::take(len);
                body.extend_from_slice(&buf);
                buf.clear();
                while body.len() < len {
                    let rest = len - body.len();
                    match read.read_buf(&mut (&mut body).limit(rest)).await {
                        Ok(0) => return "closed by broker".into(),
                        Ok(_) => {}
                        Err(e) => return read_failed(&e),
                    }
                }
                if let Err(e) = deliver(pending, buffer_pool::freeze(body)) {
                    return e;
                }
                continue;
            }
            match codec::decode_frame(&mut buf, MAX_FRAME_BYTES) {
                Ok(Some(frame)) => {
                    if let Err(e) = deliver(pending, frame) {
                        return e;
                    }
                }
                Ok(None) => break,
                Err(e) => return format!("bad frame: {e}"),
            }
        }
        if buf.capacity() - buf.len() < 8 * 1024 {
            buf.reserve(64 * 1024);
        }
        match read.read_buf(&mut buf).await {
            Ok(0) => return "closed by broker".into(),
            Ok(_) => {}
            Err(e) => return read_failed(&e),
        }
    }
}

/// Renews the SASL session of the connection `weak` points to before each lifetime the broker
/// gives runs out, until the connection is gone or poisoned. A renewal that fails poisons the
/// connection: its owner dials a new one, which authenticates afresh (and a refusal there is
/// fatal, as at start-up).
async fn renew(weak: Weak<Inner>, sasl: Arc<sasl::Login>, mut lifetime: Duration) {
    loop {
        tokio::time::sleep(renewal_delay(lifetime, rand::random())).await;
        let Some(inner) = weak.upgrade() else { return };
        let conn = Connection { inner };
        if !conn.is_usable() {
            return;
        }
        let started = std::time::Instant::now();
        let _ = conn.inner.auth.send(Auth::Hold);
        let renewed = sasl::authenticate(&conn, &sasl).await;
        let _ = conn.inner.auth.send(Auth::Release);
        match renewed {
            Ok(next) => {
                tracing::debug!(
                    broker = conn.addr(),
                    took_ms = started.elapsed().as_millis() as u64,
                    lifetime_ms = next.map_or(0, |l| l.as_millis() as u64),
                    "SASL session re-authenticated"
                );
                match next {
                    Some(next) => lifetime = next,
                    None => return,
                }
            }
            Err(e) => {
                conn.inner
                    .pending
                    .lock()
                    .unwrap()
                    .poison(conn.addr(), &format!("SASL re-authentication failed: {e}"));
                return;
            }
        }
    }
}

/// When to renew a session of `lifetime`, `r` in [0, 1) spreading renewals: like the Java
/// clients between 85 % and 95 % of it, but at least a second before it ends, since requests
/// written just before the renewal reach the broker only after those ahead of them (a Fetch
/// may wait for data), and it closes the connection if one arrives after the session ended.
fn renewal_delay(lifetime: Duration, r: f64) -> Duration {
    lifetime
        .mul_f64(0.85 + 0.1 * r.clamp(0.0, 1.0))
        .min(lifetime.saturating_sub(Duration::from_secs(1)))
        .max(lifetime / 2)
}

/// ApiVersions v3 first; a broker that does not speak it answers UNSUPPORTED_VERSION with
/// its own range in a v0 body (KIP-511), and strait retries with that. Returns the version
/// ranges by API key and the finalized feature levels.
async fn negotiate(
    inner: &Arc<Inner>,
) -> Result<(HashMap<i16, VersionRange>, HashMap<String, i16>), KafkaError> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("strait"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let encode = |version| {
        let request = &request;
        move |correlation, client_id: &StrBytes| {
            codec::encode_request(request, version, correlation, client_id).map(Segments::from)
        }
    };
    let mut response: ApiVersionsResponse =
        queue::<ApiVersionsRequest>(inner, Lane::Requests, 3, encode(3))?
            .response()
            .await?;
    if response.error_code == 35 {
        let max = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::ApiVersions as i16)
            .map(|k| k.max_version.min(3))
            .unwrap_or(0);
        response = queue::<ApiVersionsRequest>(inner, Lane::Requests, max, encode(max))?
            .response()
            .await?;
    }
    KafkaError::check("ApiVersions", || inner.addr.clone(), response.error_code)?;
    let features = response
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    let versions = response
        .api_keys
        .iter()
        .map(|k| {
            (
                k.api_key,
                VersionRange {
                    min: k.min_version,
                    max: k.max_version,
                },
            )
        })
        .collect();
    Ok((versions, features))
}

fn pick_version(broker: &HashMap<i16, VersionRange>, key: i16, ours: VersionRange) -> Option<i16> {
    let both = broker.get(&key)?.intersect(&ours);
    (!both.is_empty()).then_some(both.max)
}

fn api_name(key: i16) -> &'static str {
    ApiKey::try_from(key)
        .map(|k| match k {
            ApiKey::Produce => "Produce",
            ApiKey::Fetch => "Fetch",
            ApiKey::ListOffsets => "ListOffsets",
            ApiKey::Metadata => "Metadata",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::CreateTopics => "CreateTopics",
            ApiKey::InitProducerId => "InitProducerId",
            ApiKey::DescribeConfigs => "DescribeConfigs",
            ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
            ApiKey::CreatePartitions => "CreatePartitions",
            ApiKey::OffsetFetch => "OffsetFetch",
            ApiKey::OffsetCommit => "OffsetCommit",
            ApiKey::ListGroups => "ListGroups",
            ApiKey::DescribeGroups => "DescribeGroups",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            _ => "request",
        })
        .unwrap_or("request")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address that drops SYNs (here: a loopback listener whose accept queue is full)
    /// fails within `CONNECT_TIMEOUT`, not after the request timeout, which may be minutes.
    #[tokio::test]
    async fn a_dial_that_is_never_answered_gives_up_after_the_connect_timeout() {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).unwrap();
        let addr = listener.local_addr().unwrap();
        // Never accepted: the first fills the accept queue, later SYNs are dropped.
        let mut fillers = Vec::new();
        for _ in 0..3 {
            fillers.push(tokio::spawn(TcpStream::connect(addr)));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let started = std::time::Instant::now();
        let dialled = Connection::connect(
            &addr.to_string(),
            "strait-test",
            Duration::from_secs(120),
            &Dial::default(),
        )
        .await;
        let took = started.elapsed();
        assert!(
            matches!(dialled, Err(KafkaError::Timeout { api: "connect", .. })),
            "{:?}",
            dialled.err()
        );
        assert!(took < Duration::from_secs(60), "gave up after {took:?}");
        drop(listener);
    }

    /// A writer that holds what it accepts until flushed (as a TLS stream holds the records a
    /// full socket did not take) still delivers every request without waiting for the next.
    #[tokio::test]
    async fn a_request_reaches_the_broker_through_a_writer_that_holds_it() {
        let (strait, mut broker) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(strait);
        let pending = Arc::new(Mutex::new(Pending::default()));
        let (outbox, rx) = mpsc::unbounded_channel::<Segments>();
        let (_auth, auth_rx) = mpsc::unbounded_channel::<Auth>();
        let _tasks = spawn_io(
            "127.0.0.1:9092",
            read,
            tokio::io::BufWriter::new(write),
            &pending,
            (rx, auth_rx),
        );
        let frame = Bytes::from_static(b"\0\0\0\x08request");
        outbox.send(Segments::from(frame.clone())).unwrap();
        let mut got = vec![0; frame.len()];
        tokio::time::timeout(Duration::from_secs(5), broker.read_exact(&mut got))
            .await
            .expect("the request stayed in the writer")
            .unwrap();
        assert_eq!(got, frame);
    }

    #[test]
    fn a_session_is_renewed_before_it_ends_with_a_second_to_spare() {
        let secs = |s: f64| Duration::from_secs_f64(s);
        // An hour: between 85 % and 95 %, as the Java clients do.
        assert_eq!(renewal_delay(secs(3600.0), 0.0), secs(3060.0));
        assert_eq!(renewal_delay(secs(3600.0), 1.0), secs(3420.0));
        // Short sessions keep a second to spare, and never renew in the first half.
        assert_eq!(renewal_delay(secs(3.0), 0.5), secs(2.0));
        assert_eq!(renewal_delay(secs(1.5), 0.5), secs(0.75));
    }

    #[test]
    fn picks_the_highest_common_version() {
        let mut broker = HashMap::new();
        broker.insert(1, VersionRange { min: 4, max: 17 });
        assert_eq!(
            pick_version(&broker, 1, VersionRange { min: 4, max: 18 }),
            Some(17)
        );
        assert_eq!(
            pick_version(&broker, 1, VersionRange { min: 0, max: 3 }),
            None
        );
        assert_eq!(
            pick_version(&broker, 2, VersionRange { min: 0, max: 3 }),
            None
        );
    }
}
