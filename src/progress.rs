//! Durable replication progress. For every source partition strait records the next source
//! offset whose batch the target has not acknowledged yet, and the matching target offset,
//! in a compacted topic of its own on the target, `strait-progress.<source alias>.internal`
//! (the `.internal` suffix keeps it out of every MM2 topic filter). On start the topic is read
//! to its end; the last record per key wins.
//!
//! Record layout (big-endian, no headers, partition 0), in MM2's encoding (`mm2::records`):
//! key = STRING source topic, INT32 partition; value = INT16 version (1), INT64 next source
//! offset, INT64 next target offset (-1 if unknown), then the source log the position was
//! taken from ([`Lineage`]): INT32 partition leader epoch of the last batch before it (-1 if
//! unknown), UUID (16 bytes) source topic id (nil if unknown), INT64 the source offset at
//! which strait took the partition over from MirrorMaker 2 (-1: it did not). Values of
//! earlier releases are read too: version 1 ends after the topic id (not taken over), version
//! 0 after the target offset (an unknown lineage).
//!
//! One commit may hold a position per replicated partition: [`encode_batches`] splits it into
//! batches the topic accepts (its `max.message.bytes`, see [`batch_bytes`]), since a refused
//! batch would stop the progress partition and nothing would be durable again.

use std::collections::HashMap;
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use crate::batch::RawBatch;
use crate::kafka::admin::topic_configs;
use crate::kafka::log_reader::read_keyed_records;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::records::{self, encode_partition_key, Part, Reader};
use crate::offset_map::{Lineage, Position};

/// The progress topic of a flow whose source is `source_alias`.
pub fn topic_name(source_alias: &str) -> String {
    format!("strait-progress.{source_alias}.internal")
}

/// The record name in decoding errors.
const RECORD: &str = "StraitProgress";

/// The value version this release writes.
const VALUE_VERSION: i16 = 2;

pub fn encode_value(pos: &Position, lineage: &Lineage) -> Bytes {
    let mut b = BytesMut::with_capacity(46);
    b.put_i16(VALUE_VERSION);
    b.put_i64(pos.source_next);
    b.put_i64(pos.target_next);
    b.put_i32(lineage.leader_epoch);
    b.put_u128(lineage.topic_id.as_u128());
    b.put_i64(lineage.taken_over_at);
    b.freeze()
}

/// One progress record: a source partition, its position and the log it was taken from.
pub type Committed = (TopicPartition, Position, Lineage);

/// Decodes one progress record; `None` for bytes that are not one (foreign or newer version).
pub fn decode(key: &[u8], value: &[u8]) -> Option<Committed> {
    let mut k = Reader::new(RECORD, Part::Key, key);
    let topic = k.string("topic").ok()?;
    let partition = k.i32("partition").ok()?;
    k.finish().ok()?;
    let mut v = Reader::new(RECORD, Part::Value, value);
    let version = v.i16("version").ok()?;
    let source_next = v.i64("source_next").ok()?;
    let target_next = v.i64("target_next").ok()?;
    let lineage = match version {
        0 => Lineage::UNKNOWN,
        1 | VALUE_VERSION => {
            let leader_epoch = v.i32("leader_epoch").ok()?;
            let high = v.i64("topic_id").ok()? as u64;
            let low = v.i64("topic_id").ok()? as u64;
            let taken_over_at = match version {
                1 => -1,
                _ => v.i64("taken_over_at").ok()?,
            };
            Lineage {
                topic_id: uuid::Uuid::from_u64_pair(high, low),
                leader_epoch,
                taken_over_at,
            }
        }
        _ => return None,
    };
    v.finish().ok()?;
    Some((
        TopicPartition::new(topic, partition),
        Position {
            source_next,
            target_next,
        },
        lineage,
    ))
}

/// Bytes of one progress batch at most, unless the topic allows less: a quarter of the
/// 1 MiB a topic takes by default (`max.message.bytes`), so that brokers and topics with
/// somewhat smaller limits take it too.
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// A record's bytes besides its key and value, at most for strait's small records (length,
/// attributes, timestamp and offset deltas, key and value lengths, header count: varints).
const RECORD_OVERHEAD: usize = 24;

/// The v2 batch header.
const BATCH_HEADER: usize = 61;

/// The uncompressed batches holding a progress record per position, each at most
/// `max_bytes` long (a record that alone is longer goes alone), with the range of
/// `positions` each holds.
pub fn encode_batches(
    positions: &[Committed],
    max_bytes: usize,
    timestamp: i64,
) -> Vec<(RawBatch, Range<usize>)> {
    let mut out = Vec::new();
    let mut records: Vec<(Bytes, Bytes)> = Vec::new();
    let mut start = 0;
    let mut bytes = BATCH_HEADER;
    for (i, (tp, pos, lineage)) in positions.iter().enumerate() {
        let record = (encode_partition_key(tp), encode_value(pos, lineage));
        let size = record.0.len() + record.1.len() + RECORD_OVERHEAD;
        if bytes + size > max_bytes && !records.is_empty() {
            out.push((records::batch(&records, timestamp), start..i));
            records.clear();
            start = i;
            bytes = BATCH_HEADER;
        }
        bytes += size;
        records.push(record);
    }
    if !records.is_empty() {
        out.push((records::batch(&records, timestamp), start..positions.len()));
    }
    out
}

/// The largest progress batch `topic` on `target` accepts: its `max.message.bytes` when set
/// on the topic, at most [`MAX_BATCH_BYTES`]. A topic that does not exist yet (strait creates
/// it with the defaults) or whose configs cannot be read gets [`MAX_BATCH_BYTES`].
pub async fn batch_bytes(target: &Cluster, topic: &str) -> usize {
    let limit = match topic_configs(target, &[topic.to_string()]).await {
        Ok(configs) => configs
            .get(topic)
            .and_then(|c| c.get("max.message.bytes"))
            .and_then(|v| v.parse::<usize>().ok()),
        Err(e) => {
            tracing::debug!(topic, error = %e, "progress topic configs not read; default batch size");
            None
        }
    };
    limit.map_or(MAX_BATCH_BYTES, |l| l.min(MAX_BATCH_BYTES))
}

/// Reads the whole progress topic (to its current end) and returns the last position per
/// source partition, with the log it was taken from. A missing topic means a first start:
/// no progress.
pub async fn load(
    target: &Cluster,
    topic: &str,
) -> Result<HashMap<TopicPartition, (Position, Lineage)>, KafkaError> {
    let tp = TopicPartition::new(topic, 0);
    let mut out = HashMap::new();
    for (_, key, value) in read_keyed_records(target, &tp).await?.unwrap_or_default() {
        if let Some((source, pos, lineage)) = decode(&key, &value) {
            out.insert(source, (pos, lineage));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::decode_uncompressed;

    const LINEAGE: Lineage = Lineage {
        topic_id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
        leader_epoch: 7,
        taken_over_at: 1000,
    };

    #[test]
    fn records_round_trip() {
        let tp = TopicPartition::new("orders", 7);
        let pos = Position {
            source_next: 1234,
            target_next: 99,
        };
        let value = encode_value(&pos, &LINEAGE);
        assert_eq!(
            decode(&encode_partition_key(&tp), &value),
            Some((tp.clone(), pos, LINEAGE))
        );
        assert_eq!(
            &encode_partition_key(&tp)[..],
            &[0, 6, b'o', b'r', b'd', b'e', b'r', b's', 0, 0, 0, 7]
        );
        assert_eq!(&value[..2], &[0, 2], "version 2");
        assert_eq!(&value[18..22], &[0, 0, 0, 7], "leader epoch");
        assert_eq!(
            value[22..38],
            0x0123_4567_89ab_cdef_0011_2233_4455_6677u128.to_be_bytes()
        );
        assert_eq!(value[38..], 1000i64.to_be_bytes(), "taken over at");
        assert_eq!(decode(&encode_partition_key(&tp)[..5], &value), None);
        assert_eq!(decode(&[0xff, 0xff], &value), None);
        let batches = encode_batches(&[(tp.clone(), pos, LINEAGE)], MAX_BATCH_BYTES, 5);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].1, 0..1);
        let decoded = decode_uncompressed(&batches[0].0).unwrap();
        assert_eq!(decoded.len(), 1);
        let (k, v) = (
            decoded[0].key.clone().unwrap(),
            decoded[0].value.clone().unwrap(),
        );
        assert_eq!(decode(&k, &v), Some((tp, pos, LINEAGE)));
    }

    /// Progress written by earlier releases (version 0) resumes, with no lineage to check.
    #[test]
    fn version_0_values_read_with_an_unknown_lineage() {
        let tp = TopicPartition::new("orders", 7);
        let mut v0 = vec![0, 0];
        v0.extend(1234i64.to_be_bytes());
        v0.extend(99i64.to_be_bytes());
        let pos = Position {
            source_next: 1234,
            target_next: 99,
        };
        assert_eq!(
            decode(&encode_partition_key(&tp), &v0),
            Some((tp.clone(), pos, Lineage::UNKNOWN))
        );
        // Version 1 ends after the topic id: not taken over from MM2.
        let mut v1 = encode_value(&pos, &LINEAGE).to_vec();
        v1[1] = 1;
        v1.truncate(38);
        assert_eq!(
            decode(&encode_partition_key(&tp), &v1),
            Some((
                tp.clone(),
                pos,
                Lineage {
                    taken_over_at: -1,
                    ..LINEAGE
                }
            ))
        );
        // Anything after a value, or a version this release does not know, is not a
        // progress record.
        v0.push(0);
        assert_eq!(decode(&encode_partition_key(&tp), &v0), None);
        v1.push(0);
        assert_eq!(decode(&encode_partition_key(&tp), &v1), None);
        let mut v3 = encode_value(&pos, &LINEAGE).to_vec();
        v3[1] = 3;
        assert_eq!(decode(&encode_partition_key(&tp), &v3), None);
    }

    #[test]
    fn batches_stay_within_the_limit() {
        // 20 000 partitions: one batch of them is over 1 MiB, which a default topic refuses.
        let positions: Vec<Committed> = (0..20_000)
            .map(|p| {
                let pos = Position {
                    source_next: i64::from(p) * 1_000,
                    target_next: i64::from(p) * 999,
                };
                let tp = TopicPartition::new("orders-with-a-longer-name", p);
                (tp, pos, LINEAGE)
            })
            .collect();
        for max in [2048, 64 * 1024, MAX_BATCH_BYTES] {
            let batches = encode_batches(&positions, max, 7);
            assert!(batches.len() > 1);
            let mut next = 0;
            for (batch, range) in &batches {
                assert!(batch.len() <= max, "{} > {max}", batch.len());
                assert_eq!(range.start, next);
                next = range.end;
                let decoded = decode_uncompressed(batch).unwrap();
                assert_eq!(decoded.len(), range.len());
                for (r, committed) in decoded.iter().zip(&positions[range.clone()]) {
                    let (k, v) = (r.key.clone().unwrap(), r.value.clone().unwrap());
                    assert_eq!(decode(&k, &v).as_ref(), Some(committed));
                }
            }
            assert_eq!(next, positions.len());
        }
        // A limit below one record still makes progress: one record per batch.
        assert_eq!(encode_batches(&positions[..3], 10, 7).len(), 3);
        assert!(encode_batches(&[], 10, 7).is_empty());
    }
}
