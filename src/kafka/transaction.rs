//! The transaction coordinator's part of a transactional producer, in transactions v1
//! (KIP-98): enrolling partitions in the open transaction before writing to them
//! (AddPartitionsToTxn, at v3 at most: later versions are the brokers' own) and ending it
//! (EndTxn, at v4 at most: v5 is transactions v2, where every end bumps the epoch and Produce
//! v12+ enrols partitions by itself). Produce requests of a transaction stay at v11 or lower
//! for the same reason ([`PRODUCE_AT_MOST`]). The producer id comes from
//! [`Cluster::init_producer_id`], which also aborts a transaction its id left open.

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
pub const PRODUCE_AT_MOST: i16 = 11;
/// The last AddPartitionsToTxn version a client sends.
const ADD_PARTITIONS_AT_MOST: i16 = 3;
/// The last EndTxn version of transactions v1.
const END_AT_MOST: i16 = 4;
/// The pause before asking again after CONCURRENT_TRANSACTIONS: the coordinator is still
/// writing the markers of the transaction before (the Java producer retries as soon).
const CONCURRENT_BACKOFF: Duration = Duration::from_millis(20);

/// One transactional producer: its id, and the producer id and epoch it holds.
#[derive(Debug, Clone)]
pub struct TransactionalProducer {
    pub transactional_id: String,
    pub producer: (i64, i16),
}

impl TransactionalProducer {
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
                    ),
                    None => (String::new(), r.error_code),
                })
            }
        })
        .await
    }

    /// Commits (`commit`) or aborts the open transaction: once this returns `Ok`, the
    /// coordinator has decided, and writes the markers on its own.
    pub async fn end(&self, cluster: &Cluster, commit: bool) -> Result<(), KafkaError> {
        let request = EndTxnRequest::default()
            .with_transactional_id(self.id())
            .with_producer_id(ProducerId(self.producer.0))
            .with_producer_epoch(self.producer.1)
            .with_committed(commit);
        self.at_coordinator(cluster, "EndTxn", |conn| {
            let request = &request;
            async move {
                let r = conn.send_at_most(END_AT_MOST, request).await?;
                Ok((String::new(), r.error_code))
            }
        })
        .await
    }

    fn id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.transactional_id.clone()))
    }

    /// Sends what `attempt` sends to the transaction coordinator until it answers without a
    /// retriable error (or the request timeout passes): `attempt` returns the partition the
    /// answer's error is about (empty: the request as a whole) and the error code, 0 for none.
    async fn at_coordinator<F, Fut>(
        &self,
        cluster: &Cluster,
        api: &'static str,
        attempt: F,
    ) -> Result<(), KafkaError>
    where
        F: Fn(Connection) -> Fut,
        Fut: std::future::Future<Output = Result<(String, i16), KafkaError>>,
    {
        retry(cluster.timeout(), || async {
            let conn = cluster
                .coordinator(CoordinatorKind::Transaction, &self.transactional_id)
                .await?;
            loop {
                let (context, code) = attempt(conn.clone()).await?;
                if code == ResponseError::ConcurrentTransactions.code() {
                    tokio::time::sleep(CONCURRENT_BACKOFF).await;
                    continue;
                }
                return KafkaError::check(
                    api,
                    || match context.is_empty() {
                        true => format!("transactional id {}", self.transactional_id),
                        false => format!("transactional id {}, {context}", self.transactional_id),
                    },
                    code,
                );
            }
        })
        .await
    }
}
