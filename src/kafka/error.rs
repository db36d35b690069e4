//! `KafkaError`: every failure of a request to a broker, with the context an operator needs
//! (which broker, which API, which topic-partition, which Kafka error code).

use kafka_protocol::error::ResponseError;

#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr}: {api} request timed out after {timeout_ms} ms")]
    Timeout {
        addr: String,
        api: &'static str,
        timeout_ms: u64,
    },
    #[error("{addr}: connection closed ({reason})")]
    Disconnected { addr: String, reason: String },
    /// The TLS handshake failed: a certificate or protocol problem, not retried. `addr` is
    /// `cluster <alias>, broker <host:port>` when a [`Cluster`](super::Cluster) dialled.
    #[error("{addr}: TLS handshake failed: {reason}")]
    Tls { addr: String, reason: String },
    /// The listener speaks another security protocol than `security.protocol` says (TLS to a
    /// plaintext listener, or the reverse): not retried.
    #[error("{addr}: {reason}")]
    Listener { addr: String, reason: String },
    /// The broker refused SASL authentication: not retried.
    #[error("{addr}: SASL {mechanism} authentication failed: {reason}")]
    Auth {
        addr: String,
        mechanism: &'static str,
        reason: String,
    },
    #[error("{addr}: bad frame: {reason}")]
    Frame { addr: String, reason: String },
    #[error("{addr}: cannot encode/decode {api} v{version}: {reason}")]
    Protocol {
        addr: String,
        api: &'static str,
        version: i16,
        reason: String,
    },
    #[error("{addr}: broker supports no version of {api} that strait speaks")]
    UnsupportedApi { addr: String, api: &'static str },
    #[error("{api} for {context}: Kafka error {code} ({}){}", code.code(), acl_hint(api, *code))]
    Broker {
        api: &'static str,
        context: String,
        code: ResponseError,
    },
    #[error("cluster {cluster}: no bootstrap server reachable (tried {tried}): {last}")]
    NoBootstrap {
        cluster: String,
        tried: String,
        last: String,
    },
    #[error(
        "another strait process took over: it registered transactional id `{transactional_id}`, \
         which fenced this one (the target refused a batch of {partition}: Kafka error {code} ({}))",
        code.code()
    )]
    Fenced {
        transactional_id: String,
        partition: String,
        code: ResponseError,
    },
    #[error("{0}")]
    Other(String),
}

/// For an authorization failure, the ACL strait's principal lacks: the operation Kafka checks
/// for `api` on the resource the code names (Kafka's `docs/security` authorization table).
fn acl_hint(api: &str, code: ResponseError) -> String {
    let (operation, resource) = match code {
        ResponseError::TopicAuthorizationFailed => (
            match api {
                "Fetch" | "OffsetCommit" => "READ",
                "Produce" => "WRITE",
                "CreateTopics" => "CREATE",
                "CreatePartitions" => "ALTER",
                "DescribeConfigs" => "DESCRIBE_CONFIGS",
                "IncrementalAlterConfigs" => "ALTER_CONFIGS",
                _ => "DESCRIBE",
            },
            "the topic",
        ),
        ResponseError::GroupAuthorizationFailed => (
            match api {
                "OffsetCommit" => "READ",
                _ => "DESCRIBE",
            },
            "the group",
        ),
        ResponseError::ClusterAuthorizationFailed => (
            match api {
                "CreateAcls" | "CreatePartitions" => "ALTER",
                "CreateTopics" => "CREATE",
                "InitProducerId" | "Produce" => "IDEMPOTENT_WRITE",
                "IncrementalAlterConfigs" => "ALTER_CONFIGS",
                _ => "DESCRIBE",
            },
            "the cluster",
        ),
        ResponseError::TransactionalIdAuthorizationFailed => (
            match api {
                "FindCoordinator" => "DESCRIBE",
                _ => "WRITE",
            },
            "the transactional id",
        ),
        _ => return String::new(),
    };
    format!(": the broker's ACLs do not allow strait's principal {operation} on {resource}")
}

impl KafkaError {
    /// Whether the same request may succeed if sent again (possibly after a metadata refresh).
    pub fn is_retriable(&self) -> bool {
        match self {
            KafkaError::Io { .. }
            | KafkaError::Timeout { .. }
            | KafkaError::Disconnected { .. }
            | KafkaError::NoBootstrap { .. } => true,
            KafkaError::Broker { code, .. } => code.is_retriable(),
            _ => false,
        }
    }

    /// Turns a response error code into `Err` with context; `0` is `Ok`.
    pub fn check(
        api: &'static str,
        context: impl FnOnce() -> String,
        code: i16,
    ) -> Result<(), KafkaError> {
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(code) => Err(KafkaError::Broker {
                api,
                context: context(),
                code,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authorization_failure_names_the_operation_and_the_resource() {
        let refused = |api, code| {
            KafkaError::Broker {
                api,
                context: "orders-0".into(),
                code,
            }
            .to_string()
        };
        assert_eq!(
            refused("Fetch", ResponseError::TopicAuthorizationFailed),
            "Fetch for orders-0: Kafka error TopicAuthorizationFailed (29): the broker's ACLs do \
             not allow strait's principal READ on the topic"
        );
        assert!(refused("Produce", ResponseError::TopicAuthorizationFailed)
            .ends_with("WRITE on the topic"));
        assert!(
            refused("OffsetCommit", ResponseError::GroupAuthorizationFailed)
                .ends_with("READ on the group")
        );
        assert!(
            refused("CreateAcls", ResponseError::ClusterAuthorizationFailed)
                .ends_with("ALTER on the cluster")
        );
        assert!(refused(
            "InitProducerId",
            ResponseError::TransactionalIdAuthorizationFailed
        )
        .ends_with("WRITE on the transactional id"));
        assert_eq!(
            refused("Fetch", ResponseError::NotLeaderOrFollower),
            "Fetch for orders-0: Kafka error NotLeaderOrFollower (6)"
        );
    }
}
