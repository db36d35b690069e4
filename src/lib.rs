//! strait: a MirrorMaker 2 replacement that speaks the Kafka wire protocol itself and
//! forwards record batches from source Fetch responses into target Produce requests
//! byte for byte. See `DESIGN.md`-style overview in the README.
#![forbid(unsafe_code)]

pub mod batch;
pub mod config;
pub mod fetch;
pub mod filter;
pub mod flow;
pub mod kafka;
pub mod policy;
pub mod produce;
pub mod progress;
pub mod topic_sync;
