//! MirrorMaker 2's side of a flow: everything strait writes or syncs so that the target looks
//! as MM2 would have left it. [`records`] owns MM2's internal record formats byte for byte;
//! the tasks that write them are [`heartbeat`], [`checkpoint`] (with consumer-group offset
//! sync) and [`offset_sync`]; [`topic_sync`] and [`acl_sync`] make the target's remote topics,
//! their configs and their ACLs follow the source's. Which topic each record goes to is the
//! replication policy's business ([`crate::policy`]).

pub mod acl_sync;
pub mod checkpoint;
pub mod heartbeat;
pub mod offset_sync;
pub mod records;
pub mod source_offsets;
pub mod topic_sync;

pub use records::{Checkpoint, FormatError, Heartbeat, OffsetSync};
