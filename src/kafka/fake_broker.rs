//! A scripted Kafka broker for tests of the answers a real broker will not give on demand:
//! any error code, a sequence of answers (the first batch refused, the second accepted),
//! a stall, a connection cut in the middle of a frame, a listener that accepts and never
//! answers. It listens on 127.0.0.1, decodes every request with the `kafka-protocol`
//! crate's broker side and asks the test's script what to do with it.
//!
//! Real behaviour is tested against real brokers; this is only for error paths. It answers
//! on its own only what every client needs before anything else: ApiVersions (every
//! version the crate knows), Metadata (itself as the only broker, leader of the topics it
//! was given), FindCoordinator (itself), InitProducerId, Produce (appended at increasing
//! offsets) and DescribeConfigs (every resource found, with no config set) — each unless
//! the script answers it first.
//!
//! ```ignore
//! // The first Produce request is refused with NOT_ENOUGH_REPLICAS, every later one accepted.
//! let mut produced = 0;
//! let broker = FakeBroker::start(1, &[("t", 1)], move |r| match &r.body {
//!     RequestKind::Produce(_) if { produced += 1; produced == 1 } => Reply::Answer(..),
//!     _ => Reply::Default,
//! }).await;
//! let target = Cluster::new("target", vec![broker.addr.clone()], "strait", timeout);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, DescribeConfigsResponse, FindCoordinatorResponse,
    InitProducerIdResponse, MetadataResponse, ProduceResponse, RequestHeader, RequestKind,
    ResponseHeader, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::codec;

/// One request as the fake broker received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub header: RequestHeader,
    pub body: RequestKind,
    /// Which connection (in accept order, from 0) it came on.
    pub connection: usize,
}

impl Received {
    pub fn api_key(&self) -> Option<ApiKey> {
        ApiKey::try_from(self.header.request_api_key).ok()
    }
}

/// What the fake broker does with a request.
pub enum Reply {
    /// The built-in answer (see the module doc), or a connection cut for a request without one.
    Default,
    /// This answer, encoded at the request's version.
    Answer(ResponseKind),
    /// No answer: the request waits forever (the connection stays open).
    Stall,
    /// Closes the connection without answering.
    Close,
    /// Writes the first half of this answer's frame, then closes the connection.
    CutMidFrame(ResponseKind),
    /// This answer, held until a later request on the same connection for which the
    /// predicate is true has arrived (or [`HOLD_LIMIT`] passed): the slow answer a client
    /// pipelined more requests behind, without guessing how long the client takes.
    AnswerAfter(ResponseKind, Box<dyn Fn(&Received) -> bool + Send>),
    /// The built-in answer, sent after this long: a handshake or a disk that is slow, not
    /// dead.
    DefaultAfter(std::time::Duration),
}

/// How long [`Reply::AnswerAfter`] holds an answer at most.
pub const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The script: called for every request in arrival order.
pub type Script = Box<dyn FnMut(&Received) -> Reply + Send>;

/// A running fake broker; it stops when dropped.
pub struct FakeBroker {
    pub addr: String,
    pub node_id: i32,
    received: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The built-in state: the topics it leads and where each partition's log ends.
struct State {
    node_id: i32,
    host: String,
    port: i32,
    topics: Vec<(String, uuid::Uuid, i32)>,
    log_end: HashMap<(String, i32), i64>,
    script: Script,
}

impl FakeBroker {
    /// Starts a broker with id `node_id` leading `topics` (name, partition count), answering
    /// by `script`.
    pub async fn start(
        node_id: i32,
        topics: &[(&str, i32)],
        script: impl FnMut(&Received) -> Reply + Send + 'static,
    ) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let local = listener.local_addr().unwrap();
        let state = Arc::new(tokio::sync::Mutex::new(State {
            node_id,
            host: local.ip().to_string(),
            port: i32::from(local.port()),
            topics: topics
                .iter()
                .map(|(name, n)| (name.to_string(), uuid::Uuid::from_u128(rand::random()), *n))
                .collect(),
            log_end: HashMap::new(),
            script: Box::new(script),
        }));
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let task = tokio::spawn(async move {
            // Dropping the set (the broker stopped) closes every connection.
            let mut connections = tokio::task::JoinSet::new();
            for connection in 0.. {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (state, log) = (state.clone(), log.clone());
                connections.spawn(serve(stream, connection, state, log));
            }
        });
        FakeBroker {
            addr: local.to_string(),
            node_id,
            received,
            task,
        }
    }

    /// A listener that accepts connections and never answers anything (not even
    /// ApiVersions): the broker that is up for TCP and dead for Kafka.
    pub async fn silent() -> FakeBroker {
        FakeBroker::start(-1, &[], |_| Reply::Stall).await
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The requests received so far with API key `key`.
    pub fn received_of(&self, key: ApiKey) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.api_key() == Some(key))
            .collect()
    }
}

async fn serve(
    mut stream: TcpStream,
    connection: usize,
    state: Arc<tokio::sync::Mutex<State>>,
    log: Arc<Mutex<Vec<Received>>>,
) {
    let mut buf = BytesMut::new();
    loop {
        let frame = loop {
            match codec::decode_frame(&mut buf, codec::MAX_FRAME_BYTES) {
                Ok(Some(frame)) => break frame,
                Ok(None) => {}
                Err(_) => return,
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let Some(received) = decode(frame, connection) else {
            return;
        };
        log.lock().unwrap().push(received.clone());
        let (reply, delay) = {
            let mut state = state.lock().await;
            let scripted = (state.script)(&received);
            let delay = match scripted {
                Reply::DefaultAfter(delay) => Some(delay),
                _ => None,
            };
            let reply = match scripted {
                Reply::Default | Reply::DefaultAfter(_) => match state.default_answer(&received) {
                    Some(answer) => Reply::Answer(answer),
                    None => Reply::Close,
                },
                reply => reply,
            };
            (reply, delay)
        };
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let frame = match reply {
            Reply::Default | Reply::DefaultAfter(_) => unreachable!("resolved above"),
            Reply::Stall => {
                // Keep reading (and logging) nothing more on this connection: a stalled
                // broker answers none of the requests behind this one either.
                std::future::pending::<()>().await;
                return;
            }
            Reply::Close => return,
            Reply::Answer(answer) => match encode(&received.header, &answer) {
                Some(frame) => frame,
                None => return,
            },
            Reply::CutMidFrame(answer) => {
                let Some(frame) = encode(&received.header, &answer) else {
                    return;
                };
                let _ = stream.write_all(&frame[..frame.len() / 2]).await;
                return;
            }
            Reply::AnswerAfter(answer, next) => {
                hold(&mut stream, &mut buf, connection, next).await;
                match encode(&received.header, &answer) {
                    Some(frame) => frame,
                    None => return,
                }
            }
        };
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// Reads (without consuming) until a buffered request satisfies `next`, the connection
/// closes or [`HOLD_LIMIT`] passes.
async fn hold(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    connection: usize,
    next: Box<dyn Fn(&Received) -> bool + Send>,
) {
    let deadline = tokio::time::Instant::now() + HOLD_LIMIT;
    loop {
        let mut queued = buf.clone();
        while let Ok(Some(frame)) = codec::decode_frame(&mut queued, codec::MAX_FRAME_BYTES) {
            if decode(frame, connection).is_some_and(|r| next(&r)) {
                return;
            }
        }
        match tokio::time::timeout_at(deadline, stream.read_buf(buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    }
}

fn decode(mut frame: Bytes, connection: usize) -> Option<Received> {
    let key = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    let version = i16::from_be_bytes([*frame.get(2)?, *frame.get(3)?]);
    let api_key = ApiKey::try_from(key).ok()?;
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(version)).ok()?;
    let body = RequestKind::decode(api_key, &mut frame, version).ok()?;
    Some(Received {
        header,
        body,
        connection,
    })
}

/// The answer's frame; `None` (the test's script built an answer its version cannot carry:
/// printed, and the connection closes) when it does not encode.
fn encode(request: &RequestHeader, answer: &ResponseKind) -> Option<Bytes> {
    let version = request.request_api_version;
    let header = ResponseHeader::default().with_correlation_id(request.correlation_id);
    let mut body = BytesMut::new();
    let encoded = header
        .encode(&mut body, answer.header_version(version))
        .and_then(|()| answer.encode(&mut body, version));
    if let Err(e) = encoded {
        eprintln!("fake broker: cannot encode the answer to {request:?}: {e:#}");
        return None;
    }
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    Some(frame.freeze())
}

impl State {
    fn default_answer(&mut self, received: &Received) -> Option<ResponseKind> {
        Some(match &received.body {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions()),
            RequestKind::Metadata(request) => ResponseKind::Metadata(self.metadata(request)),
            RequestKind::FindCoordinator(request) => ResponseKind::FindCoordinator(
                self.coordinator(request, received.header.request_api_version),
            ),
            RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_producer_id(1000.into())
                    .with_producer_epoch(0),
            ),
            RequestKind::Produce(request) => ResponseKind::Produce(self.append(request)),
            RequestKind::DescribeConfigs(request) => ResponseKind::DescribeConfigs(
                DescribeConfigsResponse::default().with_results(
                    request
                        .resources
                        .iter()
                        .map(|r| {
                            DescribeConfigsResult::default()
                                .with_resource_type(r.resource_type)
                                .with_resource_name(r.resource_name.clone())
                        })
                        .collect(),
                ),
            ),
            _ => return None,
        })
    }

    fn metadata(&self, request: &kafka_protocol::messages::MetadataRequest) -> MetadataResponse {
        let wanted = |name: &str| {
            request.topics.as_ref().is_none_or(|topics| {
                topics
                    .iter()
                    .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            })
        };
        let topics = self
            .topics
            .iter()
            .filter(|(name, _, _)| wanted(name))
            .map(|(name, id, count)| {
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                    .with_topic_id(*id)
                    .with_partitions(
                        (0..*count)
                            .map(|p| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_leader_id(BrokerId(self.node_id))
                                    .with_replica_nodes(vec![BrokerId(self.node_id)])
                                    .with_isr_nodes(vec![BrokerId(self.node_id)])
                            })
                            .collect(),
                    )
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(self.node_id))
                .with_host(StrBytes::from_string(self.host.clone()))
                .with_port(self.port)])
            .with_controller_id(BrokerId(self.node_id))
            .with_topics(topics)
    }

    /// This broker coordinates every key.
    fn coordinator(
        &self,
        request: &kafka_protocol::messages::FindCoordinatorRequest,
        version: i16,
    ) -> FindCoordinatorResponse {
        // v4+ answers a batch of keys (KIP-699); earlier versions one key, at the top level.
        if version < 4 {
            return FindCoordinatorResponse::default()
                .with_node_id(BrokerId(self.node_id))
                .with_host(StrBytes::from_string(self.host.clone()))
                .with_port(self.port);
        }
        FindCoordinatorResponse::default().with_coordinators(
            request
                .coordinator_keys
                .iter()
                .cloned()
                .map(|key| {
                    Coordinator::default()
                        .with_key(key)
                        .with_node_id(BrokerId(self.node_id))
                        .with_host(StrBytes::from_string(self.host.clone()))
                        .with_port(self.port)
                })
                .collect(),
        )
    }

    /// Accepts every batch, at the next offsets of its partition's log.
    fn append(&mut self, request: &kafka_protocol::messages::ProduceRequest) -> ProduceResponse {
        let responses = request
            .topic_data
            .iter()
            .map(|t| {
                // Produce v13+ names topics by id only.
                let name = match t.name.0.as_str() {
                    "" => self
                        .topics
                        .iter()
                        .find(|(_, id, _)| *id == t.topic_id)
                        .map_or_else(|| t.topic_id.to_string(), |(name, _, _)| name.clone()),
                    name => name.to_string(),
                };
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(
                        t.partition_data
                            .iter()
                            .map(|p| {
                                let count = p.records.as_ref().map_or(0, record_count);
                                let end = self.log_end.entry((name.clone(), p.index)).or_default();
                                let base = *end;
                                *end += count;
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_base_offset(base)
                            })
                            .collect(),
                    )
            })
            .collect();
        ProduceResponse::default().with_responses(responses)
    }
}

/// Records in the batches of a Produce request's partition (the last-offset-delta field of
/// each batch header, plus one).
fn record_count(records: &Bytes) -> i64 {
    let mut count = 0;
    let mut rest = &records[..];
    while rest.len() >= 61 {
        let len = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
        let last_delta = i32::from_be_bytes([rest[23], rest[24], rest[25], rest[26]]);
        count += i64::from(last_delta) + 1;
        rest = &rest[(12 + len).min(rest.len())..];
    }
    count
}

/// Every API and version the `kafka-protocol` crate knows.
fn api_versions() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        (0..=i16::MAX)
            .take_while(|k| *k < 200)
            .filter_map(|k| ApiKey::try_from(k).ok())
            .map(|key| {
                let versions = key.valid_versions();
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(versions.min)
                    .with_max_version(versions.max)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{Cluster, KafkaError};
    use std::time::Duration;

    /// The built-in answers carry a client through start-up: versions, metadata, a producer id.
    #[tokio::test]
    async fn answers_what_every_client_needs() {
        let broker = FakeBroker::start(7, &[("t", 2)], |_| Reply::Default).await;
        let cluster = Cluster::new(
            "fake",
            vec![broker.addr.clone()],
            "test",
            Duration::from_secs(2),
        );
        let topics = cluster.metadata(Some(&["t".to_string()])).await.unwrap();
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].partitions.len(), 2);
        assert_eq!(topics[0].partitions[1].leader, 7);
        assert_eq!(cluster.init_producer_id(None).await.unwrap(), (1000, 0));
        assert_eq!(broker.received_of(ApiKey::Metadata).len(), 1);
    }

    /// A scripted error code reaches the client as that code.
    #[tokio::test]
    async fn scripted_error_codes_reach_the_client() {
        let broker = FakeBroker::start(1, &[], |r| match r.body {
            RequestKind::InitProducerId(_) => Reply::Answer(ResponseKind::InitProducerId(
                InitProducerIdResponse::default().with_error_code(87),
            )),
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new(
            "fake",
            vec![broker.addr.clone()],
            "test",
            Duration::from_secs(1),
        );
        let err = cluster.init_producer_id(None).await.unwrap_err();
        assert!(err.to_string().contains("InitProducerId"), "{err}");
    }

    /// A broker that accepts TCP and never answers times out; a cut frame is an error.
    #[tokio::test]
    async fn stalls_and_cuts_are_errors_within_the_timeout() {
        let silent = FakeBroker::silent().await;
        let cluster = Cluster::new(
            "fake",
            vec![silent.addr.clone()],
            "test",
            Duration::from_millis(300),
        );
        let started = std::time::Instant::now();
        assert!(cluster.metadata(None).await.is_err());
        assert!(started.elapsed() < Duration::from_secs(10));

        let cut = FakeBroker::start(1, &[], |r| match r.body {
            RequestKind::Metadata(_) => {
                Reply::CutMidFrame(ResponseKind::Metadata(MetadataResponse::default()))
            }
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new(
            "fake",
            vec![cut.addr.clone()],
            "test",
            Duration::from_millis(300),
        );
        let err: KafkaError = cluster.metadata(None).await.unwrap_err();
        assert!(!err.to_string().is_empty());
    }
}
