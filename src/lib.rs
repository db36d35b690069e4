//! strait: a MirrorMaker 2 replacement that speaks the Kafka wire protocol itself and
//! forwards record batches from source Fetch responses into target Produce requests byte for
//! byte. The README gives the overview; each module says what it owns.
//!
//! # Layout
//!
//! Layers from the wire up; a module imports only from modules listed before it.
//!
//! - [`batch`]: the unit strait forwards. [`batch::RawBatch`] (a zero-copy v2 batch with a
//!   read-only header view, CRC check, split, stamp) · `aborted` (KIP-98 filter) ·
//!   `read_committed` (the one split-and-filter loop) · `records` (the record codec for
//!   strait's own topics) · `rewrite` (renumber compacted batches, coalesce small ones) ·
//!   [`batch::compression`] · `crc`.
//! - [`kafka`]: the wire client. [`kafka::codec`] (the framing choke point) ·
//!   [`kafka::segments`] (outgoing frames as byte segments) · [`kafka::connection`] (one
//!   pipelined connection per broker) · [`kafka::tls`] (TLS inside it, rustls with
//!   graviola) · [`kafka::cluster`] (metadata, pooled connections,
//!   InitProducerId) · [`kafka::error`] · [`kafka::backoff`] (backoff and the one
//!   retry-until-deadline loop) · [`kafka::buffer_pool`] · request helpers:
//!   [`kafka::produce_request`] (zero-copy Produce bodies), [`kafka::appender`] (strait's own
//!   small appends), [`kafka::log_reader`] (reading an internal topic to its end),
//!   [`kafka::admin`] (topics and configs), [`kafka::acls`], [`kafka::groups`]
//!   (consumer-group offsets), [`kafka::partitioner`] (the Java producer's partition of a key); for unit tests only, `kafka::fake_broker` (a scripted broker
//!   for error paths).
//! - [`config`]: `mm2.properties` and TOML into one validated model: `model` · `error` ·
//!   `raw` · `keys` (the key table) · `properties` · `toml` · `validate`. [`policy`] (MM2's
//!   replication policy: remote topic names, internal topics) and [`filter`] (topic and
//!   group filters) are parts of that model.
//! - [`offset_map`]: exact source-to-target offset translation from the acknowledged
//!   batches, bounded by each partition's committed [`offset_map::Position`].
//! - [`fetch`]: the source side. [`fetch::Fetcher`] and its events · `coordinator` (places
//!   partitions on leaders) · `session` (one incremental fetch session per leader, the I/O) ·
//!   `outage` (a source outage told once, and its end) ·
//!   [`fetch::response`] (what each answer and error code means, no I/O).
//! - [`mm2`]: what MM2 tooling reads and MM2 would sync. [`mm2::records`] (MM2's record
//!   formats byte for byte) · [`mm2::heartbeat`] · [`mm2::checkpoint`] (and group offset sync)
//!   · [`mm2::offset_sync`] · [`mm2::topic_sync`] · [`mm2::acl_sync`] ·
//!   [`mm2::source_offsets`] (MM2's own source positions, in Connect's offsets topic).
//! - [`group`]: scale-out. The member of a flow's group on the target (Kafka's classic
//!   group protocol, type `strait`) in [`group`] · [`group::assignor`] (slots, the leader's
//!   sticky cooperative split, the bytes members exchange; no I/O).
//! - [`migration`]: switching a flow from a running MM2 to strait and back without a re-copy
//!   (take-over, no two writers, hand-back).
//! - [`progress`]: strait's committed positions, in a compacted topic of its own.
//! - [`telemetry`]: what an operator watches: [`telemetry::metrics`] (Prometheus series
//!   under MM2's names and strait's own), [`telemetry::health`] (liveness and readiness per
//!   flow) and the HTTP listener serving both.
//! - [`produce`]: the target side. The engine loop (requests, responses, producer recovery)
//!   in [`produce`] · `partition` (each partition's queue, sequences and what each Produce
//!   answer means, no I/O).
//! - [`inspect`]: answers from what the flows wrote, without a running instance: translated
//!   group offsets (`strait translate-offsets`) and replication status (`strait status`).
//! - [`flow`]: composition only: one `source->target` link wired from the parts above, and
//!   the one shutdown path. `main.rs` is the command line and maps errors to exit codes.
#![forbid(unsafe_code)]

pub mod batch;
pub mod config;
pub mod fetch;
pub mod filter;
pub mod flow;
pub mod group;
pub mod inspect;
pub mod kafka;
pub mod migration;
pub mod mm2;
pub mod offset_map;
pub mod policy;
pub mod produce;
pub mod progress;
pub mod telemetry;

/// Milliseconds since the Unix epoch (record timestamps of strait's own records).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
