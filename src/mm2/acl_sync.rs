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

use crate::kafka::acls::{
    create_acls, describe_topic_acls, AclBinding, OPERATION_ALL, OPERATION_READ, OPERATION_WRITE,
    PATTERN_ANY, PATTERN_LITERAL, PERMISSION_ALLOW, RESOURCE_TOPIC,
};
use crate::kafka::{Cluster, KafkaError};
use crate::policy::ReplicationPolicy;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::acls::{
        OPERATION_DESCRIBE, PATTERN_PREFIXED, PERMISSION_DENY, RESOURCE_GROUP,
    };

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
}
