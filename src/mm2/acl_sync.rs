//! Topic ACL sync: MM2's `sync.topic.acls` (`MirrorSourceConnector.syncTopicAcls`). Every
//! `sync.topic.acls.interval.seconds` the source's topic ACLs are listed and those of
//! replicated topics are created on the matching remote topics, with MM2's rules:
//! * only `TOPIC` resources with a `LITERAL` pattern (prefixed patterns are never copied);
//! * `ALLOW WRITE` is dropped: only strait writes to a remote topic;
//! * `ALLOW ALL` becomes `ALLOW READ` (same principal and host);
//! * everything else, `DENY` entries included (`DENY WRITE`, `DENY ALL` too), is copied as is;
//! * the resource becomes the remote topic (`format_remote_topic`), `LITERAL`.
//!
//! ACLs are only ever added, never removed, like MM2. Unlike MM2, strait lists the target's
//! topic ACLs first and creates only the missing ones. A cluster without an authorizer
//! answers `SECURITY_DISABLED`: there is nothing to sync, so that is `Ok(0)` (logged once).

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{CreateAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::{Cluster, KafkaError};
use crate::policy::ReplicationPolicy;

/// Kafka's `SECURITY_DISABLED`: the broker has no authorizer.
const SECURITY_DISABLED: i16 = 54;

/// `ResourceType` codes (`org.apache.kafka.common.resource.ResourceType`).
pub const RESOURCE_ANY: i8 = 1;
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_GROUP: i8 = 3;
/// `PatternType` codes.
pub const PATTERN_ANY: i8 = 1;
pub const PATTERN_LITERAL: i8 = 3;
pub const PATTERN_PREFIXED: i8 = 4;
/// `AclOperation` codes (those strait needs to name).
pub const OPERATION_ANY: i8 = 1;
pub const OPERATION_ALL: i8 = 2;
pub const OPERATION_READ: i8 = 3;
pub const OPERATION_WRITE: i8 = 4;
pub const OPERATION_DESCRIBE: i8 = 8;
/// `AclPermissionType` codes.
pub const PERMISSION_ANY: i8 = 1;
pub const PERMISSION_DENY: i8 = 2;
pub const PERMISSION_ALLOW: i8 = 3;

/// One ACL binding (Kafka's `AclBinding`: resource pattern + access control entry), with the
/// wire codes of the enums.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `User:alice`.
    pub principal: String,
    /// `*` for any host.
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// The ACLs the target must hold for the source's `acls` (MM2's rules, see the module doc):
/// only LITERAL TOPIC bindings of `topics` (the replicated source topics), ALLOW WRITE dropped,
/// ALLOW ALL turned into ALLOW READ, renamed to the remote topic. Sorted, without duplicates.
pub fn remote_acls(
    acls: &[AclBinding],
    policy: &ReplicationPolicy,
    source_alias: &str,
    topics: &[String],
) -> Vec<AclBinding> {
    let replicated: HashSet<&str> = topics.iter().map(String::as_str).collect();
    let out: BTreeSet<AclBinding> = acls
        .iter()
        .filter(|a| a.resource_type == RESOURCE_TOPIC && a.pattern_type == PATTERN_LITERAL)
        .filter(|a| !(a.permission == PERMISSION_ALLOW && a.operation == OPERATION_WRITE))
        .filter(|a| replicated.contains(a.resource_name.as_str()))
        .map(|a| AclBinding {
            resource_type: RESOURCE_TOPIC,
            resource_name: policy.format_remote_topic(source_alias, &a.resource_name),
            pattern_type: PATTERN_LITERAL,
            principal: a.principal.clone(),
            host: a.host.clone(),
            operation: if a.permission == PERMISSION_ALLOW && a.operation == OPERATION_ALL {
                OPERATION_READ
            } else {
                a.operation
            },
            permission: a.permission,
        })
        .collect();
    out.into_iter().collect()
}

/// Copies the topic ACLs of the replicated source `topics` to their remote topics on the
/// target (see [`remote_acls`]), creating only those the target lacks. Returns how many were
/// created. A cluster without an authorizer gives `Ok(0)`. A binding the target refuses is
/// logged (warning) and not counted, like MM2; the others are still created.
pub async fn sync_acls(
    source: &Cluster,
    target: &Cluster,
    policy: &ReplicationPolicy,
    source_alias: &str,
    topics: &[String],
) -> Result<usize, KafkaError> {
    if topics.is_empty() {
        return Ok(0);
    }
    let Some(source_acls) = describe_topic_acls(source, PATTERN_ANY).await? else {
        return Ok(0);
    };
    let wanted = remote_acls(&source_acls, policy, source_alias, topics);
    if wanted.is_empty() {
        return Ok(0);
    }
    let Some(existing) = describe_topic_acls(target, PATTERN_LITERAL).await? else {
        return Ok(0);
    };
    let existing: HashSet<AclBinding> = existing.into_iter().collect();
    let missing: Vec<AclBinding> = wanted
        .into_iter()
        .filter(|a| !existing.contains(a))
        .collect();
    if missing.is_empty() {
        return Ok(0);
    }
    create_acls(target, &missing).await
}

/// Every TOPIC ACL binding of `cluster` whose pattern type matches `pattern_type` (ANY or
/// one type); `None` when the cluster has no authorizer.
async fn describe_topic_acls(
    cluster: &Cluster,
    pattern_type: i8,
) -> Result<Option<Vec<AclBinding>>, KafkaError> {
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(RESOURCE_TOPIC)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(pattern_type)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(OPERATION_ANY)
        .with_permission_type(PERMISSION_ANY);
    let response = cluster.send_any(&request).await?;
    if response.error_code == SECURITY_DISABLED {
        security_disabled(cluster);
        return Ok(None);
    }
    let detail = response
        .error_message
        .map(|m| m.to_string())
        .unwrap_or_default();
    KafkaError::check(
        "DescribeAcls",
        || format!("topic ACLs on {}: {detail}", cluster.alias()),
        response.error_code,
    )?;
    let mut out = Vec::new();
    for r in response.resources {
        for a in r.acls {
            out.push(AclBinding {
                resource_type: r.resource_type,
                resource_name: r.resource_name.to_string(),
                pattern_type: r.pattern_type,
                principal: a.principal.to_string(),
                host: a.host.to_string(),
                operation: a.operation,
                permission: a.permission_type,
            });
        }
    }
    Ok(Some(out))
}

/// Creates `acls` on `target`; returns how many the broker accepted.
async fn create_acls(target: &Cluster, acls: &[AclBinding]) -> Result<usize, KafkaError> {
    let request = CreateAclsRequest::default().with_creations(
        acls.iter()
            .map(|a| {
                AclCreation::default()
                    .with_resource_type(a.resource_type)
                    .with_resource_name(StrBytes::from_string(a.resource_name.clone()))
                    .with_resource_pattern_type(a.pattern_type)
                    .with_principal(StrBytes::from_string(a.principal.clone()))
                    .with_host(StrBytes::from_string(a.host.clone()))
                    .with_operation(a.operation)
                    .with_permission_type(a.permission)
            })
            .collect(),
    );
    let response = target.send_any(&request).await?;
    let mut created = 0;
    for (acl, result) in acls.iter().zip(response.results) {
        match result.error_code {
            0 => {
                created += 1;
                tracing::info!(
                    cluster = %target.alias(), topic = %acl.resource_name,
                    principal = %acl.principal, host = %acl.host,
                    operation = operation_name(acl.operation),
                    permission = permission_name(acl.permission),
                    "created topic ACL"
                );
            }
            SECURITY_DISABLED => {
                security_disabled(target);
                return Ok(created);
            }
            code => {
                let detail = result
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                if let Err(e) = KafkaError::check(
                    "CreateAcls",
                    || {
                        format!(
                            "{} {} of {} on topic {} on {}: {detail}",
                            permission_name(acl.permission),
                            operation_name(acl.operation),
                            acl.principal,
                            acl.resource_name,
                            target.alias()
                        )
                    },
                    code,
                ) {
                    tracing::warn!(error = %e, "could not sync a topic ACL");
                }
            }
        }
    }
    Ok(created)
}

/// Logs, once per cluster and at debug level (the sync runs periodically), that `cluster`
/// has no authorizer.
fn security_disabled(cluster: &Cluster) {
    static LOGGED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if LOGGED.lock().unwrap().insert(cluster.alias().to_string()) {
        tracing::debug!(
            cluster = %cluster.alias(),
            "no ACL authorizer on the cluster (SECURITY_DISABLED); topic ACL sync skipped \
             (set sync.topic.acls.enabled=false to stop trying)"
        );
    }
}

/// Kafka's name for an `AclOperation` code.
pub fn operation_name(code: i8) -> &'static str {
    match code {
        1 => "ANY",
        2 => "ALL",
        3 => "READ",
        4 => "WRITE",
        5 => "CREATE",
        6 => "DELETE",
        7 => "ALTER",
        8 => "DESCRIBE",
        9 => "CLUSTER_ACTION",
        10 => "DESCRIBE_CONFIGS",
        11 => "ALTER_CONFIGS",
        12 => "IDEMPOTENT_WRITE",
        13 => "CREATE_TOKENS",
        14 => "DESCRIBE_TOKENS",
        15 => "TWO_PHASE_COMMIT",
        _ => "UNKNOWN",
    }
}

/// Kafka's name for an `AclPermissionType` code.
pub fn permission_name(code: i8) -> &'static str {
    match code {
        1 => "ANY",
        2 => "DENY",
        3 => "ALLOW",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        resource_type: i8,
        name: &str,
        pattern_type: i8,
        principal: &str,
        operation: i8,
        permission: i8,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: "*".to_string(),
            operation,
            permission,
        }
    }

    fn topic(name: &str, principal: &str, operation: i8, permission: i8) -> AclBinding {
        acl(
            RESOURCE_TOPIC,
            name,
            PATTERN_LITERAL,
            principal,
            operation,
            permission,
        )
    }

    fn remote(acls: &[AclBinding]) -> Vec<AclBinding> {
        remote_acls(
            acls,
            &ReplicationPolicy::default(),
            "src",
            &["orders".to_string(), "payments".to_string()],
        )
    }

    #[test]
    fn allow_write_is_dropped_and_allow_read_renamed() {
        let got = remote(&[
            topic("orders", "User:alice", OPERATION_READ, PERMISSION_ALLOW),
            topic("orders", "User:alice", OPERATION_WRITE, PERMISSION_ALLOW),
        ]);
        assert_eq!(
            got,
            vec![topic(
                "src.orders",
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW
            )]
        );
    }

    #[test]
    fn allow_all_becomes_allow_read_keeping_principal_and_host() {
        let mut all = topic("orders", "User:bob", OPERATION_ALL, PERMISSION_ALLOW);
        all.host = "10.0.0.1".to_string();
        let got = remote(&[all]);
        let mut want = topic("src.orders", "User:bob", OPERATION_READ, PERMISSION_ALLOW);
        want.host = "10.0.0.1".to_string();
        assert_eq!(got, vec![want]);
    }

    #[test]
    fn deny_entries_are_kept_as_they_are() {
        let got = remote(&[
            topic("orders", "User:eve", OPERATION_WRITE, PERMISSION_DENY),
            topic("orders", "User:eve", OPERATION_ALL, PERMISSION_DENY),
            topic("orders", "User:eve", OPERATION_READ, PERMISSION_DENY),
        ]);
        assert_eq!(
            got,
            vec![
                topic("src.orders", "User:eve", OPERATION_ALL, PERMISSION_DENY),
                topic("src.orders", "User:eve", OPERATION_READ, PERMISSION_DENY),
                topic("src.orders", "User:eve", OPERATION_WRITE, PERMISSION_DENY),
            ]
        );
    }

    #[test]
    fn other_allow_operations_are_kept() {
        let got = remote(&[topic(
            "payments",
            "User:carol",
            OPERATION_DESCRIBE,
            PERMISSION_ALLOW,
        )]);
        assert_eq!(
            got,
            vec![topic(
                "src.payments",
                "User:carol",
                OPERATION_DESCRIBE,
                PERMISSION_ALLOW
            )]
        );
    }

    #[test]
    fn other_resources_patterns_and_topics_are_ignored() {
        let got = remote(&[
            acl(
                RESOURCE_GROUP,
                "orders",
                PATTERN_LITERAL,
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW,
            ),
            acl(
                RESOURCE_TOPIC,
                "orders",
                PATTERN_PREFIXED,
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW,
            ),
            // The wildcard literal `*` names no replicated topic.
            topic("*", "User:alice", OPERATION_READ, PERMISSION_ALLOW),
            topic(
                "unreplicated",
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW,
            ),
        ]);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn all_and_read_of_one_principal_give_one_binding() {
        let got = remote(&[
            topic("orders", "User:bob", OPERATION_ALL, PERMISSION_ALLOW),
            topic("orders", "User:bob", OPERATION_READ, PERMISSION_ALLOW),
        ]);
        assert_eq!(
            got,
            vec![topic(
                "src.orders",
                "User:bob",
                OPERATION_READ,
                PERMISSION_ALLOW
            )]
        );
    }

    #[test]
    fn identity_policy_keeps_the_name() {
        let got = remote_acls(
            &[topic(
                "orders",
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW,
            )],
            &ReplicationPolicy::Identity,
            "src",
            &["orders".to_string()],
        );
        assert_eq!(
            got,
            vec![topic(
                "orders",
                "User:alice",
                OPERATION_READ,
                PERMISSION_ALLOW
            )]
        );
    }

    #[test]
    fn names_of_codes() {
        assert_eq!(operation_name(OPERATION_ALL), "ALL");
        assert_eq!(operation_name(OPERATION_WRITE), "WRITE");
        assert_eq!(permission_name(PERMISSION_DENY), "DENY");
        assert_eq!(permission_name(0), "UNKNOWN");
    }
}
