//! `Cluster`: one Kafka cluster as strait sees it. Bootstraps over a list of addresses (a
//! dead first address does not matter), keeps the broker directory from Metadata responses,
//! and pools one `Connection` per broker, replacing poisoned ones on demand. Requests about
//! the cluster as a whole (Metadata, InitProducerId) are its methods.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    InitProducerIdRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::backoff::retry;
use super::connection::Connection;
use super::error::KafkaError;

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

/// Broker id -> `host:port`, from the last Metadata response of any sibling (brokers it
/// does not list are dropped).
type Directory = Arc<Mutex<HashMap<i32, String>>>;

#[derive(Default)]
struct Pool {
    conns: HashMap<i32, Connection>,
    bootstrap: Option<Connection>,
}

pub struct Cluster {
    alias: String,
    bootstrap: Vec<String>,
    client_id: String,
    timeout: Duration,
    /// `SO_SNDBUF` of every connection (`None`: the OS default).
    send_buffer: Option<u32>,
    /// Shared with the siblings: where the brokers are is the same for all of them.
    directory: Directory,
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
            send_buffer: None,
            directory: Directory::default(),
            pool: Mutex::new(Pool::default()),
        }
    }

    /// Sets the send buffer (`SO_SNDBUF`) of the connections dialled from now on; `None`
    /// leaves the OS default.
    pub fn with_send_buffer(mut self, bytes: Option<u32>) -> Self {
        self.send_buffer = bytes;
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
            ..Cluster::new(
                &self.alias,
                self.bootstrap.clone(),
                &self.client_id,
                self.timeout,
            )
            .with_send_buffer(self.send_buffer)
        }
    }

    pub fn alias(&self) -> &str {
        &self.alias
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
            match Connection::connect(addr, &self.client_id, self.timeout, self.send_buffer).await {
                Ok(c) => {
                    self.pool.lock().unwrap().bootstrap = Some(c.clone());
                    return Ok(c);
                }
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
        let known = self.directory.lock().unwrap().get(&id).cloned();
        let addr = match known {
            Some(a) => a,
            None => {
                self.metadata(Some(&[])).await?;
                self.directory
                    .lock()
                    .unwrap()
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| {
                        KafkaError::Other(format!("cluster {}: unknown broker id {id}", self.alias))
                    })?
            }
        };
        {
            let mut pool = self.pool.lock().unwrap();
            let reusable = |c: &&Connection| c.is_usable() && c.addr() == addr;
            if let Some(c) = pool.conns.get(&id).filter(reusable) {
                return Ok(c.clone());
            }
            if let Some(c) = pool.bootstrap.as_ref().filter(reusable).cloned() {
                pool.conns.insert(id, c.clone());
                return Ok(c);
            }
        }
        let conn =
            Connection::connect(&addr, &self.client_id, self.timeout, self.send_buffer).await?;
        self.pool.lock().unwrap().conns.insert(id, conn.clone());
        Ok(conn)
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

    /// A new producer id and epoch for an idempotent, non-transactional producer (strait's
    /// own on this cluster), retried like [`Cluster::with_retry`].
    pub async fn init_producer_id(&self) -> Result<(i64, i16), KafkaError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let response = self
            .with_retry(|conn| {
                let request = &request;
                async move {
                    let r = conn.send(request).await?;
                    KafkaError::check("InitProducerId", || conn.addr().to_string(), r.error_code)?;
                    Ok(r)
                }
            })
            .await?;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
    use kafka_protocol::messages::{BrokerId, ListGroupsResponse, RequestKind, ResponseKind};

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
