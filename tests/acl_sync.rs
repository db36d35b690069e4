//! Topic ACL sync (MM2's `sync.topic.acls`) against real Apache Kafka brokers with KRaft's
//! `StandardAuthorizer`: ACLs are added and listed with Kafka's own `AclCommand`, the sync is
//! `strait::mm2::acl_sync::sync_acls` called directly. A broker without an authorizer answers
//! `SECURITY_DISABLED`, which is no error.

mod common;

use std::collections::BTreeSet;

use common::kafka::{self, Cluster};
use common::strait::{block_on, client};
use strait::policy::ReplicationPolicy;

const ACL_COMMAND: &str = "org.apache.kafka.tools.AclCommand";
/// A combined KRaft node with an authorizer; PLAINTEXT clients (strait, the tools, the broker
/// itself on the controller listener) are `User:ANONYMOUS`, a super user.
const WITH_AUTHORIZER: &[&str] = &[
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
    "allow.everyone.if.no.acl.found=true",
];

fn acl_command(c: &Cluster, args: &[&str]) {
    let mut all = vec!["--bootstrap-server", c.bootstrap.as_str()];
    all.extend_from_slice(args);
    kafka::tool(ACL_COMMAND, &all);
}

/// The ACL entries of the literal topic `topic` as `AclCommand --list` prints them:
/// `(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`.
fn list_acls(c: &Cluster, topic: &str) -> BTreeSet<String> {
    let out = kafka::tool(
        ACL_COMMAND,
        &[
            "--bootstrap-server",
            &c.bootstrap,
            "--list",
            "--topic",
            topic,
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("(principal="))
        .map(str::to_string)
        .collect()
}

#[test]
fn topic_acls_are_copied_with_mm2_rules() {
    kafka::fetch();
    let source = std::thread::spawn(|| Cluster::start("aclsrc", WITH_AUTHORIZER));
    let no_authorizer = std::thread::spawn(|| Cluster::start("aclnone", &[]));
    let target = Cluster::start("acltgt", WITH_AUTHORIZER);
    let source = source.join().expect("starting the source cluster");
    let no_authorizer = no_authorizer.join().expect("starting the plain cluster");

    let alias = "aclsrc";
    let topic = "orders";
    let remote = format!("{alias}.{topic}");
    kafka::create_topic(&source, topic, 1, &[]);
    kafka::create_topic(&target, &remote, 1, &[]);
    let t = ["--topic", topic];
    acl_command(
        &source,
        &[
            &["--add", "--allow-principal", "User:alice"][..],
            &["--operation", "Read", "--operation", "Write"],
            &t,
        ]
        .concat(),
    );
    acl_command(
        &source,
        &[
            &[
                "--add",
                "--allow-principal",
                "User:bob",
                "--operation",
                "All",
            ][..],
            &t,
        ]
        .concat(),
    );
    acl_command(
        &source,
        &[
            &[
                "--add",
                "--deny-principal",
                "User:eve",
                "--operation",
                "Read",
            ][..],
            &t,
        ]
        .concat(),
    );
    // A prefixed pattern covering the topic: MM2 copies LITERAL patterns only.
    acl_command(
        &source,
        &[
            "--add",
            "--allow-principal",
            "User:carol",
            "--operation",
            "Read",
            "--resource-pattern-type",
            "prefixed",
            "--topic",
            "ord",
        ],
    );

    let policy = ReplicationPolicy::default();
    let topics = vec![topic.to_string()];
    let (src, tgt, plain) = (client(&source), client(&target), client(&no_authorizer));
    let sync = |from: &strait::kafka::Cluster, to: &strait::kafka::Cluster| {
        block_on(strait::mm2::acl_sync::sync_acls(
            from, to, &policy, alias, &topics,
        ))
        .unwrap_or_else(|e| panic!("sync_acls {} -> {}: {e}", from.alias(), to.alias()))
    };

    assert_eq!(sync(&src, &tgt), 3, "alice READ, bob READ, eve DENY READ");
    let expected: BTreeSet<String> = [
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:eve, host=*, operation=READ, permissionType=DENY)",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    assert_eq!(list_acls(&target, &remote), expected);
    // Only missing ACLs are created: a second sync has nothing to do.
    assert_eq!(sync(&src, &tgt), 0);

    // No authorizer on either side: SECURITY_DISABLED is nothing to sync, not an error.
    assert_eq!(sync(&plain, &tgt), 0);
    assert_eq!(sync(&src, &plain), 0);
}
