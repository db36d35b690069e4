//! The transaction coordinator's part of a transactional producer. Two protocols:
//!
//! * **v1** (KIP-98), which every Kafka since 0.11 speaks: each partition is enrolled in the
//!   open transaction before it is written (AddPartitionsToTxn, at v3 at most: later versions
//!   are the brokers' own), Produce stays at v11 or lower within a transaction
//!   ([`PRODUCE_AT_MOST`]), EndTxn at v4 at most keeps the producer epoch.
//! * **v2** (KIP-890, Kafka 4.0+ where the cluster finalized `transaction.version` 2): Produce
//!   v12+ enrols a partition by itself (its leader asks the coordinator), and every EndTxn
//!   (v5) bumps the producer epoch, handing back the producer id and epoch of the next
//!   transaction: a late write of an ended transaction is refused as of an old epoch.
//!
//! The producer id comes from [`Cluster::init_producer_id`], which also aborts a transaction
//! its id left open.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::backoff::retry;
use super::cluster::{Cluster, CoordinatorKind};
use super::connection::Connection;
use super::error::KafkaError;
use super::TopicPartition;

/// The last Produce version of transactions v1.
const PRODUCE_AT_MOST: i16 = 11;
/// The last AddPartitionsToTxn version a client sends.
const ADD_PARTITIONS_AT_MOST: i16 = 3;
/// The last EndTxn version of transactions v1.
const END_V1_AT_MOST: i16 = 4;
/// The EndTxn version of transactions v2: its answer carries the next producer epoch.
const END_V2: i16 = 5;
/// The feature whose finalized level 2 switches a cluster's transactions to v2.
const TRANSACTION_VERSION: &str = "transaction.version";
/// The pause before asking again after CONCURRENT_TRANSACTIONS: the coordinator is still
/// writing the markers of the transaction before (the Java producer retries as soon).
const CONCURRENT_BACKOFF: Duration = Duration::from_millis(20);

/// The transaction protocol a producer speaks with its coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    V1,
    V2,
}

impl Protocol {
    /// The highest Produce version a transaction may be written with.
    pub fn produce_at_most(self) -> i16 {
        match self {
            Protocol::V1 => PRODUCE_AT_MOST,
            Protocol::V2 => i16::MAX,
        }
    }

    /// Whether partitions are enrolled with AddPartitionsToTxn before they are written.
    pub fn enrols(self) -> bool {
        self == Protocol::V1
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::V1 => "v1",
            Protocol::V2 => "v2",
        })
    }
}

/// One transactional producer: its id, the producer id and epoch it holds, and the protocol
/// its coordinator speaks.
#[derive(Debug, Clone)]
pub struct TransactionalProducer {
    pub transactional_id: String,
    pub producer: (i64, i16),
    pub protocol: Protocol,
}

impl TransactionalProducer {
    /// The producer `producer` (from InitProducerId) of `transactional_id`, speaking v2 when
    /// the cluster finalized `transaction.version` 2 and takes EndTxn v5, v1 otherwise. Any
    /// broker tells (the cluster's pooled connection, no round trip): a feature is finalized
    /// cluster-wide, and only once every broker supports it. A feature switched later takes
    /// effect at the next start.
    pub async fn new(
        cluster: &Cluster,
        transactional_id: String,
        producer: (i64, i16),
    ) -> Result<TransactionalProducer, KafkaError> {
        let conn = cluster.any_broker().await?;
        let v2 = conn.feature(TRANSACTION_VERSION) >= 2
            && conn.version::<EndTxnRequest>().is_some_and(|v| v >= END_V2);
        Ok(TransactionalProducer {
            transactional_id,
            producer,
            protocol: if v2 { Protocol::V2 } else { Protocol::V1 },
        })
    }

    /// Enrols `partitions` in the open transaction (opening one if none is), retried until
    /// the request timeout while the coordinator moves, loads or ends the previous one.
    pub async fn add_partitions(
        &self,
        cluster: &Cluster,
        partitions: &[TopicPartition],
    ) -> Result<(), KafkaError> {
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for tp in partitions {
            match topics.iter_mut().find(|t| *t.name.0 == *tp.topic) {
                Some(t) => t.partitions.push(tp.partition),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(self.id())
            .with_v3_and_below_producer_id(ProducerId(self.producer.0))
            .with_v3_and_below_producer_epoch(self.producer.1)
            .with_v3_and_below_topics(topics);
        self.at_coordinator(cluster, "AddPartitionsToTxn", |conn| {
            let request = &request;
            async move {
                let r = conn.send_at_most(ADD_PARTITIONS_AT_MOST, request).await?;
                // OPERATION_NOT_ATTEMPTED marks the partitions left out because another failed.
                let failed = r
                    .results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter().map(move |p| (t, p)))
                    .filter(|(_, p)| p.partition_error_code != 0)
                    .min_by_key(|(_, p)| {
                        p.partition_error_code == ResponseError::OperationNotAttempted.code()
                    });
                Ok(match failed {
                    Some((t, p)) => (
                        format!("{}-{}", t.name.0, p.partition_index),
                        p.partition_error_code,
                        (),
                    ),
                    None => (String::new(), r.error_code, ()),
                })
            }
        })
        .await
    }

    /// Commits (`commit`) or aborts the open transaction: once this returns `Ok`, the
    /// coordinator has decided, and writes the markers on its own. In v2 the answer carries
    /// the producer id and epoch of the next transaction (the epoch bumped; a new id once
    /// the epoch ran out): returned for the caller to write with, its sequences from 0.
    pub async fn end(&self, cluster: &Cluster, commit: bool) -> Result<(i64, i16), KafkaError> {
        let request = EndTxnRequest::default()
            .with_transactional_id(self.id())
            .with_producer_id(ProducerId(self.producer.0))
            .with_producer_epoch(self.producer.1)
            .with_committed(commit);
        let at_most = match self.protocol {
            Protocol::V1 => END_V1_AT_MOST,
            Protocol::V2 => END_V2,
        };
        self.at_coordinator(cluster, "EndTxn", |conn| {
            let request = &request;
            let current = self.producer;
            async move {
                let r = conn.send_at_most(at_most, request).await?;
                // Below v5 the answer has no producer (-1): the epoch stays.
                let next = match (r.producer_id.0, r.producer_epoch) {
                    (id, epoch) if id >= 0 && epoch >= 0 => (id, epoch),
                    _ => current,
                };
                Ok((String::new(), r.error_code, next))
            }
        })
        .await
    }

    fn id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.transactional_id.clone()))
    }

    /// Sends what `attempt` sends to the transaction coordinator until it answers without a
    /// retriable error (or the request timeout passes): `attempt` returns the partition the
    /// answer's error is about (empty: the request as a whole), the error code (0 for none)
    /// and what the answer says.
    async fn at_coordinator<F, Fut, T>(
        &self,
        cluster: &Cluster,
        api: &'static str,
        attempt: F,
    ) -> Result<T, KafkaError>
    where
        F: Fn(Connection) -> Fut,
        Fut: std::future::Future<Output = Result<(String, i16, T), KafkaError>>,
    {
        retry(cluster.timeout(), || async {
            let conn = cluster
                .coordinator(CoordinatorKind::Transaction, &self.transactional_id)
                .await?;
            loop {
                let (context, code, answer) = attempt(conn.clone()).await?;
                if code == ResponseError::ConcurrentTransactions.code() {
                    tokio::time::sleep(CONCURRENT_BACKOFF).await;
                    continue;
                }
                KafkaError::check(
                    api,
                    || match context.is_empty() {
                        true => format!("transactional id {}", self.transactional_id),
                        false => format!("transactional id {}, {context}", self.transactional_id),
                    },
                    code,
                )?;
                return Ok(answer);
            }
        })
        .await
    }
}
