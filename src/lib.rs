//! strait: a MirrorMaker 2 replacement that speaks the Kafka wire protocol itself and
//! forwards record batches from source Fetch responses into target Produce requests
//! byte for byte. The README gives the overview; each module says what it owns.
#![forbid(unsafe_code)]

pub mod acl_sync;
pub mod appender;
pub mod batch;
pub mod checkpoint;
pub mod compression;
pub mod config;
pub(crate) mod crc;
pub mod fetch;
pub mod filter;
pub mod flow;
pub mod groups;
pub mod heartbeat;
pub mod kafka;
pub mod mm2;
pub mod offset_map;
pub mod offset_sync;
pub mod policy;
pub mod produce;
pub mod progress;
pub mod topic_sync;

/// Milliseconds since the Unix epoch (record timestamps of strait's own records).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
