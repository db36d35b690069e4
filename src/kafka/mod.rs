//! The Kafka wire client: framing, one pipelined connection per broker, cluster metadata
//! and the error type shared by everything that talks to a broker. Messages themselves come
//! from the `kafka-protocol` crate; this module owns how they travel.

pub mod acls;
pub mod admin;
pub mod appender;
pub mod backoff;
pub mod buffer_pool;
pub mod cluster;
pub mod codec;
pub mod connection;
pub mod error;
#[cfg(test)]
pub mod fake_broker;
pub mod groups;
pub mod log_reader;
mod oauth;
pub mod partitioner;
pub mod produce_request;
pub mod sasl;
pub mod segments;
pub mod tls;
pub mod transaction;

pub use cluster::{BrokerLinks, Cluster, PartitionMeta, TopicMeta};
pub use connection::Connection;
pub use error::KafkaError;

/// A topic-partition, the unit of replication. Shared cheaply (`Arc<str>` name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: std::sync::Arc<str>,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<std::sync::Arc<str>>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
