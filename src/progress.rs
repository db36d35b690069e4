//! Durable replication progress. For every source partition strait records the next source
//! offset whose batch the target has not acknowledged yet, and the matching target offset,
//! in a compacted topic of its own on the target, `strait-progress.<source alias>.internal`
//! (the `.internal` suffix keeps it out of every MM2 topic filter). On start the topic is read
//! to its end; the last record per key wins.
//!
//! Record layout (big-endian, no headers, partition 0), in MM2's encoding (`mm2::records`):
//! key = STRING source topic, INT32 partition; value = INT16 version (0), INT64 next source
//! offset, INT64 next target offset (-1 if unknown).

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::batch::RawBatch;
use crate::kafka::log_reader::read_keyed_records;
use crate::kafka::{Cluster, KafkaError, TopicPartition};
use crate::mm2::records::{self, encode_partition_key, Part, Reader};
use crate::offset_map::Position;

/// The progress topic of a flow whose source is `source_alias`.
pub fn topic_name(source_alias: &str) -> String {
    format!("strait-progress.{source_alias}.internal")
}

/// The record name in decoding errors.
const RECORD: &str = "StraitProgress";

pub fn encode_value(pos: &Position) -> Bytes {
    let mut b = BytesMut::with_capacity(18);
    b.put_i16(0);
    b.put_i64(pos.source_next);
    b.put_i64(pos.target_next);
    b.freeze()
}

/// Decodes one progress record; `None` for bytes that are not one (foreign or newer version).
pub fn decode(key: &[u8], value: &[u8]) -> Option<(TopicPartition, Position)> {
    let mut k = Reader::new(RECORD, Part::Key, key);
    let topic = k.string("topic").ok()?;
    let partition = k.i32("partition").ok()?;
    k.finish().ok()?;
    let mut v = Reader::new(RECORD, Part::Value, value);
    v.version().ok()?;
    let source_next = v.i64("source_next").ok()?;
    let target_next = v.i64("target_next").ok()?;
    v.finish().ok()?;
    Some((
        TopicPartition::new(topic, partition),
        Position {
            source_next,
            target_next,
        },
    ))
}

/// One uncompressed batch holding a progress record per position.
pub fn encode(positions: &[(TopicPartition, Position)], timestamp: i64) -> RawBatch {
    let encoded: Vec<(Bytes, Bytes)> = positions
        .iter()
        .map(|(tp, pos)| (encode_partition_key(tp), encode_value(pos)))
        .collect();
    records::batch(&encoded, timestamp)
}

/// Reads the whole progress topic (to its current end) and returns the last position per
/// source partition. A missing topic means a first start: no progress.
pub async fn load(
    target: &Cluster,
    topic: &str,
) -> Result<HashMap<TopicPartition, Position>, KafkaError> {
    let tp = TopicPartition::new(topic, 0);
    let mut out = HashMap::new();
    for (_, key, value) in read_keyed_records(target, &tp).await?.unwrap_or_default() {
        if let Some((source, pos)) = decode(&key, &value) {
            out.insert(source, pos);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::decode_uncompressed;

    #[test]
    fn records_round_trip() {
        let tp = TopicPartition::new("orders", 7);
        let pos = Position {
            source_next: 1234,
            target_next: 99,
        };
        assert_eq!(
            decode(&encode_partition_key(&tp), &encode_value(&pos)),
            Some((tp.clone(), pos))
        );
        assert_eq!(
            &encode_partition_key(&tp)[..],
            &[0, 6, b'o', b'r', b'd', b'e', b'r', b's', 0, 0, 0, 7]
        );
        assert_eq!(
            decode(&encode_partition_key(&tp)[..5], &encode_value(&pos)),
            None
        );
        assert_eq!(decode(&[0xff, 0xff], &encode_value(&pos)), None);
        let batch = encode(&[(tp.clone(), pos)], 5);
        let decoded = decode_uncompressed(&batch).unwrap();
        assert_eq!(decoded.len(), 1);
        let (k, v) = (
            decoded[0].key.clone().unwrap(),
            decoded[0].value.clone().unwrap(),
        );
        assert_eq!(decode(&k, &v), Some((tp, pos)));
    }
}
