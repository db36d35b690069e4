//! Kafka ACL bindings on the wire: the resource, pattern, operation and permission codes
//! (`org.apache.kafka.common.acl` and `.resource`), listing a cluster's topic ACLs
//! (DescribeAcls) and creating bindings (CreateAcls). A cluster without an authorizer answers
//! `SECURITY_DISABLED`; that is not an error here but "no ACLs to read or write" (logged once
//! per cluster). Which bindings to copy is [`crate::mm2::acl_sync`]'s business.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{CreateAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Cluster, KafkaError};

/// `ResourceType` codes (`org.apache.kafka.common.resource.ResourceType`).
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

/// Every TOPIC ACL binding of `cluster` whose pattern type matches `pattern_type` (ANY or
/// one type); `None` when the cluster has no authorizer.
pub async fn describe_topic_acls(
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
    if response.error_code == ResponseError::SecurityDisabled.code() {
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
pub async fn create_acls(target: &Cluster, acls: &[AclBinding]) -> Result<usize, KafkaError> {
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
            code if code == ResponseError::SecurityDisabled.code() => {
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

    #[test]
    fn names_of_codes() {
        assert_eq!(operation_name(OPERATION_ALL), "ALL");
        assert_eq!(operation_name(OPERATION_WRITE), "WRITE");
        assert_eq!(permission_name(PERMISSION_DENY), "DENY");
        assert_eq!(permission_name(0), "UNKNOWN");
    }
}
