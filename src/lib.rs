//! strait: a MirrorMaker 2 replacement that speaks the Kafka wire protocol itself and
//! forwards record batches from source Fetch responses into target Produce requests
//! byte for byte. The README gives the overview; each module says what it owns.
#![forbid(unsafe_code)]

pub mod batch;
pub mod config;
pub mod fetch;
pub mod filter;
pub mod flow;
pub mod kafka;
pub mod mm2;
pub mod offset_map;
pub mod policy;
pub mod produce;
pub mod progress;

/// Milliseconds since the Unix epoch (record timestamps of strait's own records).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
