//! `Cluster`: one Kafka cluster as strait sees it. Bootstraps over a list of addresses (a
//! dead first address does not matter), keeps the broker directory from Metadata responses,
//! and pools one `Connection` per broker, replacing poisoned ones on demand. Requests about
//! the cluster as a whole (Metadata, FindCoordinator, InitProducerId) are its methods.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest, MetadataResponse, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::backoff::retry;
use super::connection::{Connection, Dial};
use super::error::KafkaError;
use super::tls::Tls;
use crate::config::SaslConfig;

/// What strait needs to know about one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub error_code: i16,
}

/// What strait needs to know about one topic.
#[derive(Debug, Clone)]
pub struct TopicMeta {
    pub name: String,
    pub id: uuid::Uuid,
    pub is_internal: bool,
    pub error_code: i16,
    pub partitions: Vec<PartitionMeta>,
}

/// What FindCoordinator looks for (its `key_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorKind {
    Group = 0,
    Transaction = 1,
}

impl std::fmt::Display for CoordinatorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CoordinatorKind::Group => "group",
            CoordinatorKind::Transaction => "transactional id",
        })
    }
}

/// The transaction timeout InitProducerId declares with a transactional id (the Java
/// producer's default): in exactly-once mode, a transaction the coordinator aborts if it
/// stays open longer; otherwise strait begins none.
pub const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// The pause before asking again after CONCURRENT_TRANSACTIONS.
const CONCURRENT_TRANSACTIONS_BACKOFF: Duration = Duration::from_millis(100);

/// Broker id -> `host:port`, from the last Metadata response of any sibling (brokers it
/// does not list are dropped).
type Directory = Arc<Mutex<HashMap<i32, String>>>;

/// Whether the last dial of each broker worked, shared by a cluster's siblings: what
/// `strait_broker_connected` reports. A connection that dies is dialled again by the next
/// request for that broker, so a broker that went away shows within a retry.
#[derive(Clone, Default)]
pub struct BrokerLinks(Arc<Mutex<HashMap<i32, bool>>>);

impl BrokerLinks {
    fn dialled(&self, broker: i32, connected: bool) {
        self.0.lock().unwrap().insert(broker, connected);
    }

    /// Each broker strait dialled so far, with whether it got through the last time,
    /// sorted by broker id.
    pub fn snapshot(&self) -> Vec<(i32, bool)> {
        let mut all: Vec<(i32, bool)> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(b, c)| (*b, *c))
            .collect();
        all.sort_unstable();
        all
    }
}

#[derive(Default)]
struct Pool {
    conns: HashMap<i32, Connection>,
    bootstrap: Option<Connection>,
}

impl Pool {
    /// A usable connection to broker `id` at `addr`: its own, or the bootstrap connection
    /// when that reached the very broker (`true`: not pooled for `id` yet).
    fn usable(&self, id: i32, addr: &str) -> Option<(Connection, bool)> {
        let up = |c: &&Connection| c.is_usable() && c.addr() == addr;
        if let Some(c) = self.conns.get(&id).filter(up) {
            return Some((c.clone(), false));
        }
        self.bootstrap
            .as_ref()
            .filter(up)
            .map(|c| (c.clone(), true))
    }
}

pub struct Cluster {
    alias: String,
    bootstrap: Vec<String>,
    client_id: String,
    timeout: Duration,
    /// How every connection is set up: socket buffer, TLS, SASL.
    dial: Dial,
    /// Shared with the siblings: where the brokers are is the same for all of them.
    directory: Directory,
    links: BrokerLinks,
    pool: Mutex<Pool>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster({})", self.alias)
    }
}

impl Cluster {
    pub fn new(alias: &str, bootstrap: Vec<String>, client_id: &str, timeout: Duration) -> Self {
        Cluster {
            alias: alias.to_string(),
            bootstrap,
            client_id: client_id.to_string(),
            timeout,
            dial: Dial::default(),
            directory: Directory::default(),
            links: BrokerLinks::default(),
            pool: Mutex::new(Pool::default()),
        }
    }

    /// The same cluster with another request timeout, for requests that wait at the broker
    /// by design (a JoinGroup until every member joined).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the send buffer (`SO_SNDBUF`) of the connections dialled from now on; `None`
    /// leaves the OS default.
    pub fn with_send_buffer(mut self, bytes: Option<u32>) -> Self {
        self.dial.send_buffer = bytes;
        self
    }

    /// Runs every connection dialled from now on through `tls`.
    pub fn with_tls(mut self, tls: Option<Tls>) -> Self {
        self.dial.tls = tls;
        self
    }

    /// Authenticates every connection dialled from now on with `sasl` (after
    /// [`Cluster::with_tls`]: an OAUTHBEARER token endpoint is trusted as the brokers are).
    pub fn with_sasl(mut self, sasl: Option<SaslConfig>) -> Self {
        self.dial.sasl = sasl.map(|config| {
            Arc::new(super::sasl::Login::new(
                config,
                self.dial.tls.clone(),
                self.timeout,
            ))
        });
        self
    }

    /// Another handle on the same cluster with connections of its own. A broker handles one
    /// request per connection at a time, so requests that wait at the broker (CreateTopics
    /// until the controller commits, a Fetch until data arrives) hold up everything queued
    /// behind them on that connection; a sibling keeps another path out of that queue.
    /// Siblings share what they learn of the brokers' addresses.
    pub fn sibling(&self) -> Cluster {
        Cluster {
            directory: self.directory.clone(),
            links: self.links.clone(),
            dial: self.dial.clone(),
            ..Cluster::new(
                &self.alias,
                self.bootstrap.clone(),
                &self.client_id,
                self.timeout,
            )
        }
    }

    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// Whether strait reaches each broker it dialled, for this handle and its siblings.
    pub fn links(&self) -> BrokerLinks {
        self.links.clone()
    }

    /// Brokers in the last Metadata response.
    pub fn broker_count(&self) -> usize {
        self.directory.lock().unwrap().len()
    }

    /// Ids of the brokers in the last Metadata response, sorted.
    pub fn broker_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.directory.lock().unwrap().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The request timeout as the `timeout_ms` field of a request.
    pub fn timeout_ms(&self) -> i32 {
        self.timeout.as_millis().min(i32::MAX as u128) as i32
    }

    /// A connection to any live broker: the last one that worked, else the known brokers,
    /// else each bootstrap address in turn.
    pub async fn any_broker(&self) -> Result<Connection, KafkaError> {
        let known: Vec<String> = {
            let bootstrap = self.pool.lock().unwrap().bootstrap.clone();
            if let Some(c) = bootstrap.filter(Connection::is_usable) {
                return Ok(c);
            }
            self.directory.lock().unwrap().values().cloned().collect()
        };
        let mut last = String::from("no address");
        let mut tried = Vec::new();
        for addr in known.iter().chain(self.bootstrap.iter()) {
            tried.push(addr.clone());
            match self.dial(addr).await {
                Ok(c) => {
                    self.pool.lock().unwrap().bootstrap = Some(c.clone());
                    return Ok(c);
                }
                // The same certificates and credentials for every broker: another address
                // will not do better.
                Err(
                    e @ (KafkaError::Tls { .. }
                    | KafkaError::Listener { .. }
                    | KafkaError::Auth { .. }),
                ) => return Err(e),
                Err(e) => {
                    tracing::debug!(cluster = %self.alias, %addr, error = %e, "bootstrap address unreachable");
                    last = e.to_string();
                }
            }
        }
        Err(KafkaError::NoBootstrap {
            cluster: self.alias.clone(),
            tried: tried.join(", "),
            last,
        })
    }

    /// The pooled connection to broker `id` (from the last Metadata), dialled if needed.
    /// The bootstrap connection is reused when it reached that very broker.
    pub async fn broker(&self, id: i32) -> Result<Connection, KafkaError> {
        let addr = self.address(id).await?;
        {
            let mut pool = self.pool.lock().unwrap();
            if let Some((c, from_bootstrap)) = pool.usable(id, &addr) {
                if from_bootstrap {
                    self.links.dialled(id, true);
                    pool.conns.insert(id, c.clone());
                }
                return Ok(c);
            }
        }
        let dialled = self.dial(&addr).await;
        self.links.dialled(id, dialled.is_ok());
        let conn = dialled?;
        self.pool.lock().unwrap().conns.insert(id, conn.clone());
        Ok(conn)
    }

    /// Whether a pooled connection to broker `id` is up (not known to be broken): the
    /// broker was reached and has not been lost since.
    pub fn reaches(&self, id: i32) -> bool {
        let Some(addr) = self.directory.lock().unwrap().get(&id).cloned() else {
            return false;
        };
        self.pool.lock().unwrap().usable(id, &addr).is_some()
    }

    /// Connection `lane` to broker `id`: lane 0 is the pooled one (`broker`), every other
    /// lane a connection of its own, dialled now and kept by the caller (the produce engine
    /// spreads partitions over several, since a broker serves one connection's requests one
    /// at a time).
    pub async fn broker_lane(&self, id: i32, lane: usize) -> Result<Connection, KafkaError> {
        if lane == 0 {
            return self.broker(id).await;
        }
        let addr = self.address(id).await?;
        let dialled = self.dial(&addr).await;
        self.links.dialled(id, dialled.is_ok());
        dialled
    }

    /// Broker `id`'s address, from the last Metadata (asked again if it is not known).
    async fn address(&self, id: i32) -> Result<String, KafkaError> {
        if let Some(a) = self.directory.lock().unwrap().get(&id).cloned() {
            return Ok(a);
        }
        self.metadata(Some(&[])).await?;
        self.directory
            .lock()
            .unwrap()
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                KafkaError::Other(format!("cluster {}: unknown broker id {id}", self.alias))
            })
    }

    async fn dial(&self, addr: &str) -> Result<Connection, KafkaError> {
        let at = || format!("cluster {}, broker {addr}", self.alias);
        Connection::connect(addr, &self.client_id, self.timeout, &self.dial)
            .await
            .map_err(|e| match e {
                // Fatal, so the last words of the process: say which cluster's settings to fix.
                KafkaError::Tls { reason, .. } => KafkaError::Tls { addr: at(), reason },
                KafkaError::Listener { reason, .. } => KafkaError::Listener { addr: at(), reason },
                KafkaError::Auth {
                    mechanism, reason, ..
                } => KafkaError::Auth {
                    addr: at(),
                    mechanism,
                    reason,
                },
                other => other,
            })
    }

    /// Metadata for `topics` (`None`: every topic), retried with backoff over brokers for
    /// up to the request timeout. Replaces the broker directory with the brokers listed.
    pub async fn metadata(&self, topics: Option<&[String]>) -> Result<Vec<TopicMeta>, KafkaError> {
        let mut request = MetadataRequest::default();
        request.topics = topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect()
        });
        request.allow_auto_topic_creation = false;
        let response: MetadataResponse = self.send_any(&request).await?;
        // The response lists every live broker: one missing from it was retired (or is
        // down) and leaves the directory, so that asking every broker does not fail on it
        // forever. An answer with no broker at all is broken and changes nothing.
        if !response.brokers.is_empty() {
            let listed: HashMap<i32, String> = response
                .brokers
                .iter()
                .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
                .collect();
            self.pool
                .lock()
                .unwrap()
                .conns
                .retain(|id, _| listed.contains_key(id));
            *self.directory.lock().unwrap() = listed;
        }
        Ok(response
            .topics
            .into_iter()
            .map(|t| {
                let mut partitions: Vec<PartitionMeta> = t
                    .partitions
                    .into_iter()
                    .map(|p| PartitionMeta {
                        partition: p.partition_index,
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        error_code: p.error_code,
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                TopicMeta {
                    name: t.name.map(|n| n.0.to_string()).unwrap_or_default(),
                    id: t.topic_id,
                    is_internal: t.is_internal,
                    error_code: t.error_code,
                    partitions,
                }
            })
            .collect())
    }

    /// The connection to the coordinator of `key`: a group id or a transactional id, as
    /// `kind` says. One attempt: callers retry (a coordinator moves or is still loading).
    pub async fn coordinator(
        &self,
        kind: CoordinatorKind,
        key: &str,
    ) -> Result<Connection, KafkaError> {
        let conn = self.any_broker().await?;
        let name = StrBytes::from_string(key.to_string());
        // v4+ asks for a batch of keys (KIP-699); earlier versions for one.
        let request = match conn.version::<FindCoordinatorRequest>() {
            Some(v) if v >= 4 => {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![name])
            }
            _ => FindCoordinatorRequest::default().with_key(name),
        }
        .with_key_type(kind as i8);
        let response = conn.send(&request).await?;
        let (node, code) = match response.coordinators.first() {
            Some(c) => (c.node_id.0, c.error_code),
            None => (response.node_id.0, response.error_code),
        };
        KafkaError::check("FindCoordinator", || format!("{kind} {key}"), code)?;
        self.broker(node).await
    }

    /// A producer id and epoch for strait's idempotent producer on this cluster, retried
    /// until the request timeout. With a `transactional_id` the id is the same on every
    /// call and its epoch is bumped: the transaction coordinator fences every earlier holder,
    /// whose next batch the target refuses (INVALID_PRODUCER_EPOCH), and aborts a
    /// transaction the id left open (exactly-once mode: `transaction`).
    pub async fn init_producer_id(
        &self,
        transactional_id: Option<&str>,
    ) -> Result<(i64, i16), KafkaError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(
                transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
            )
            .with_transaction_timeout_ms(transactional_id.map_or(-1, |_| TRANSACTION_TIMEOUT_MS))
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let check = |conn: &Connection, code: i16| {
            KafkaError::check(
                "InitProducerId",
                || match transactional_id {
                    Some(id) => format!("transactional id {id} at {}", conn.addr()),
                    None => conn.addr().to_string(),
                },
                code,
            )
        };
        let response = match transactional_id {
            None => {
                self.with_retry(|conn| {
                    let request = &request;
                    async move {
                        let r = conn.send(request).await?;
                        check(&conn, r.error_code)?;
                        Ok(r)
                    }
                })
                .await?
            }
            Some(id) => {
                retry(self.timeout, || async {
                    let conn = self.coordinator(CoordinatorKind::Transaction, id).await?;
                    loop {
                        let r = conn.send(&request).await?;
                        // The coordinator is still completing the previous holder's epoch
                        // bump or abort: the Java producer retries this one too.
                        if r.error_code == ResponseError::ConcurrentTransactions.code() {
                            tokio::time::sleep(CONCURRENT_TRANSACTIONS_BACKOFF).await;
                            continue;
                        }
                        check(&conn, r.error_code)?;
                        return Ok(r);
                    }
                })
                .await?
            }
        };
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// Sends `request` to any broker, retried like [`Cluster::with_retry`]: for requests
    /// any broker answers (metadata, admin requests that brokers forward to the controller).
    pub async fn send_any<R: Request>(&self, request: &R) -> Result<R::Response, KafkaError> {
        self.with_retry(|conn| async move { conn.send(request).await })
            .await
    }

    /// Runs `f` against any broker, retrying retriable failures with backoff until the
    /// cluster's request timeout has passed.
    pub async fn with_retry<T, F, Fut>(&self, f: F) -> Result<T, KafkaError>
    where
        F: Fn(Connection) -> Fut,
        Fut: std::future::Future<Output = Result<T, KafkaError>>,
    {
        retry(self.timeout, || async {
            let result = match self.any_broker().await {
                Ok(conn) => f(conn).await,
                Err(e) => Err(e),
            };
            if result.as_ref().is_err_and(KafkaError::is_retriable) {
                // The next attempt dials afresh rather than reuse what just failed.
                self.pool.lock().unwrap().bootstrap = None;
            }
            result
        })
        .await
        .map_err(|e| match e {
            // Found on a request (a SASL listener hangs up on the first one): fatal, so say
            // which cluster's settings to fix, as `dial` does.
            KafkaError::Listener { addr, reason } if !addr.starts_with("cluster ") => {
                KafkaError::Listener {
                    addr: format!("cluster {}, broker {addr}", self.alias),
                    reason,
                }
            }
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
    use kafka_protocol::messages::{
        BrokerId, InitProducerIdResponse, ListGroupsResponse, RequestKind, ResponseKind,
    };

    /// With a transactional id, InitProducerId goes to that id's transaction coordinator and
    /// waits out CONCURRENT_TRANSACTIONS (the coordinator still fencing the previous holder).
    #[tokio::test]
    async fn transactional_init_asks_the_transaction_coordinator_and_waits_out_a_fence() {
        let mut answered = 0;
        let broker = FakeBroker::start(3, &[], move |r| match &r.body {
            RequestKind::InitProducerId(request) => {
                answered += 1;
                let id = request.transactional_id.as_ref().map(|id| id.0.to_string());
                assert_eq!(id.as_deref(), Some("strait-a->b"));
                assert_eq!(request.transaction_timeout_ms, TRANSACTION_TIMEOUT_MS);
                let answer = InitProducerIdResponse::default().with_producer_id(42.into());
                Reply::Answer(ResponseKind::InitProducerId(if answered == 1 {
                    answer.with_error_code(ResponseError::ConcurrentTransactions.code())
                } else {
                    answer.with_producer_epoch(5)
                }))
            }
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new("b", vec![broker.addr.clone()], "t", Duration::from_secs(5));
        assert_eq!(
            cluster.init_producer_id(Some("strait-a->b")).await.unwrap(),
            (42, 5)
        );
        let lookups: Vec<i8> = broker
            .received()
            .into_iter()
            .filter_map(|r| match r.body {
                RequestKind::FindCoordinator(f) => Some(f.key_type),
                _ => None,
            })
            .collect();
        assert_eq!(lookups, vec![CoordinatorKind::Transaction as i8]);
        assert_eq!(
            broker
                .received_of(kafka_protocol::messages::ApiKey::InitProducerId)
                .len(),
            2
        );
    }

    fn listed(id: i32, port: u16) -> MetadataResponseBroker {
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(i32::from(port))
    }

    /// A broker retired from the cluster leaves the directory at the next Metadata: asking
    /// every broker (ListGroups) works again instead of failing on it forever.
    #[tokio::test]
    async fn brokers_no_longer_listed_leave_the_directory() {
        let port = Arc::new(Mutex::new(0u16));
        let own = port.clone();
        let mut metadata_calls = 0;
        let broker = FakeBroker::start(1, &[], move |r| match r.body {
            RequestKind::Metadata(_) => {
                metadata_calls += 1;
                let own = *own.lock().unwrap();
                // Broker 2 (nothing listens on port 9) is listed at first, then retired.
                let brokers = match metadata_calls {
                    1 => vec![listed(1, own), listed(2, 9)],
                    _ => vec![listed(1, own)],
                };
                Reply::Answer(ResponseKind::Metadata(
                    MetadataResponse::default().with_brokers(brokers),
                ))
            }
            RequestKind::ListGroups(_) => {
                Reply::Answer(ResponseKind::ListGroups(ListGroupsResponse::default()))
            }
            _ => Reply::Default,
        })
        .await;
        *port.lock().unwrap() = broker.addr.rsplit(':').next().unwrap().parse().unwrap();
        let cluster = Cluster::new(
            "fake",
            vec![broker.addr.clone()],
            "test",
            Duration::from_secs(1),
        );
        cluster.metadata(Some(&[])).await.unwrap();
        assert_eq!(cluster.broker_ids(), [1, 2]);
        let groups = crate::kafka::groups::list(&cluster).await;
        assert!(groups.unwrap().is_empty());
        assert_eq!(cluster.broker_ids(), [1]);
    }
}
