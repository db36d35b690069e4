//! Offset syncs in MM2's format: strait writes an `OffsetSync(upstream, downstream)` record
//! at every offset gap of every replicated partition (where MM2 writes one every
//! `offset.lag.max` records), to `mm2-offset-syncs.<alias>.internal` on the cluster that
//! `offset-syncs.topic.location` names, so that MM2 tooling reading that topic sees exact
//! pairs. strait's own translation does not need to read them back while it runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::records::{self, OffsetSync};
use crate::kafka::appender::append;
use crate::kafka::log_reader::read_keyed_records;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::topic_sync::await_internal_topic;
use crate::now_ms;

/// Reads `topic` back (to its current end) and gives the syncs of each source partition in
/// the order they were written; a missing topic gives none. Records that are not
/// `OffsetSync`s are skipped with a warning.
pub async fn load(
    cluster: &Cluster,
    topic: &str,
) -> Result<HashMap<TopicPartition, Vec<(i64, i64)>>, KafkaError> {
    let mut out: HashMap<TopicPartition, Vec<(i64, i64)>> = HashMap::new();
    let tp = TopicPartition::new(topic, 0);
    for (offset, key, value) in read_keyed_records(cluster, &tp).await?.unwrap_or_default() {
        match OffsetSync::decode(&key, &value) {
            Ok(s) => out
                .entry(s.topic_partition)
                .or_default()
                .push((s.upstream_offset, s.downstream_offset)),
            Err(e) => {
                tracing::warn!(topic, offset, error = %e, "skipping a record that is not an offset sync")
            }
        }
    }
    Ok(out)
}

/// Records per appended batch at most (keeps a batch well under a megabyte).
const MAX_BATCH_RECORDS: usize = 4096;

/// Writes the syncs arriving on `syncs` to `topic` on `cluster` until `shutdown`, then
/// writes what is still queued.
pub async fn run(
    cluster: Arc<Cluster>,
    topic: String,
    replication_factor: i16,
    mut syncs: mpsc::UnboundedReceiver<OffsetSync>,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    if !await_internal_topic(&cluster, &topic, replication_factor, &shutdown).await? {
        return Ok(());
    }
    let tp = TopicPartition::new(topic.as_str(), 0);
    let mut pending: Vec<OffsetSync> = Vec::new();
    loop {
        let stop = tokio::select! {
            _ = shutdown.cancelled() => true,
            got = syncs.recv() => match got {
                Some(s) => { pending.push(s); false }
                None => true,
            },
        };
        while let Ok(s) = syncs.try_recv() {
            pending.push(s);
        }
        for chunk in pending.chunks(MAX_BATCH_RECORDS) {
            let records: Vec<_> = chunk
                .iter()
                .map(|s| (s.encode_key(), s.encode_value()))
                .collect();
            if let Err(e) = append(&cluster, &tp, &records::batch(&records, now_ms())).await {
                tracing::warn!(topic = %topic, error = %e, count = chunk.len(), "offset syncs not written");
            }
        }
        pending.clear();
        if stop {
            return Ok(());
        }
        // Gather a little: one append per burst of acknowledgements, not one per gap.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
