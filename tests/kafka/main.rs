//! The integration tests that share one pair of real Apache Kafka clusters: one test
//! binary, so the pair (`common::kafka::clusters`) starts once for all of them. Each test
//! uses topic names and consumer groups of its own. Tests that restart brokers (`faults`),
//! need other broker settings (`acl_sync`), or assert on every topic or alias a cluster
//! holds (`mm2_tools`, and `mm2_example` with its `.*` filter) keep binaries and clusters
//! of their own.

#[path = "../common/mod.rs"]
mod common;

mod fencing;
mod harness;
mod mm2_parity;
mod replication;
mod source_log;
