//! The body of a Produce request (v3-v13), encoded by strait so that the records of each
//! batch are not copied: the small fields go into one buffer, split into segments around
//! the records bytes, which are appended as the shared slices they already are. The layout
//! is the one of `ProduceRequest.json` (Apache Kafka); a test checks it byte for byte
//! against the `kafka-protocol` crate's encoder for every version.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};

use super::segments::Segments;
use crate::batch::{put_uvarint, Stamped};

/// The batches of one topic in a Produce request: one per partition (Produce v3+ rule).
#[derive(Debug)]
pub struct TopicData {
    pub name: Arc<str>,
    /// Sent instead of the name from v13 on.
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<(i32, Stamped)>,
}

impl TopicData {
    /// Adds `stamped` for `partition` of `topic` to the request's `topics`, under the topic's
    /// entry if it has one already (`topic_id` is asked only for a new entry). `index` maps
    /// each name in `topics` to its entry: a request may carry thousands of topics.
    pub fn push(
        topics: &mut Vec<TopicData>,
        index: &mut HashMap<Arc<str>, usize>,
        topic: &Arc<str>,
        topic_id: impl FnOnce() -> uuid::Uuid,
        partition: i32,
        stamped: Stamped,
    ) {
        let at = *index.entry(topic.clone()).or_insert_with(|| {
            topics.push(TopicData {
                name: topic.clone(),
                topic_id: topic_id(),
                partitions: Vec::new(),
            });
            topics.len() - 1
        });
        topics[at].partitions.push((partition, stamped));
    }
}

/// Encodes `transactional_id = null, acks, timeout_ms, topic_data` at `version`, one of
/// `ProduceRequest::VERSIONS` (the range a connection negotiates for Produce).
pub fn encode(
    version: i16,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[TopicData],
) -> Segments {
    let flexible = version >= 9;
    let mut frame = Segments::default();
    let mut out = BytesMut::with_capacity(64 + topics.len() * 32);
    // transactional_id: NULLABLE_STRING, compact (length + 1, 0 for null) from v9 on.
    match (transactional_id, flexible) {
        (None, true) => put_uvarint(&mut out, 0),
        (None, false) => out.put_i16(-1),
        (Some(id), true) => put_uvarint(&mut out, id.len() as u64 + 1),
        (Some(id), false) => out.put_i16(id.len() as i16),
    }
    if let Some(id) = transactional_id {
        out.put_slice(id.as_bytes());
    }
    out.put_i16(acks);
    out.put_i32(timeout_ms);
    put_len(&mut out, flexible, topics.len());
    for topic in topics {
        if version >= 13 {
            out.put_slice(topic.topic_id.as_bytes());
        } else {
            // STRING: INT16 length before v9, COMPACT_STRING (length + 1) from v9 on.
            if flexible {
                put_uvarint(&mut out, topic.name.len() as u64 + 1);
            } else {
                out.put_i16(topic.name.len() as i16);
            }
            out.put_slice(topic.name.as_bytes());
        }
        put_len(&mut out, flexible, topic.partitions.len());
        for (index, batch) in &topic.partitions {
            out.put_i32(*index);
            // Records: non-null (compact) bytes.
            if flexible {
                put_uvarint(&mut out, batch.size() as u64 + 1);
            } else {
                out.put_i32(batch.size() as i32);
            }
            out.put_slice(&batch.header);
            frame.push(out.split().freeze());
            frame.push(batch.records.clone());
            if flexible {
                put_uvarint(&mut out, 0); // partition tagged fields
            }
        }
        if flexible {
            put_uvarint(&mut out, 0); // topic tagged fields
        }
    }
    if flexible {
        put_uvarint(&mut out, 0); // request tagged fields
    }
    frame.push(out.freeze());
    frame
}

/// An array length: INT32 before v9, UNSIGNED_VARINT of length + 1 (compact) from v9 on.
fn put_len(out: &mut BytesMut, flexible: bool, len: usize) {
    if flexible {
        put_uvarint(out, len as u64 + 1);
    } else {
        out.put_i32(len as i32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{ProducerStamp, RawBatch};
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
    use kafka_protocol::protocol::{Encodable, Message, StrBytes};

    fn stamped(payload_len: usize) -> Stamped {
        let value = vec![7u8; payload_len];
        let records: Vec<crate::batch::OwnRecord> = (0..3)
            .map(|i| crate::batch::OwnRecord {
                key: None,
                value: Some(&value),
                timestamp: 1_700_000_000_000 + i,
            })
            .collect();
        let batch = crate::batch::encode_batch(&records, &ProducerStamp::NONE);
        RawBatch::new(batch).unwrap().stamp(&ProducerStamp {
            producer_id: 77,
            producer_epoch: 3,
            base_sequence: 12,
            transactional: false,
        })
    }

    /// Byte-for-byte what the `kafka-protocol` crate encodes for the same request, at every
    /// version, with names long enough to need two-byte varints.
    #[test]
    fn matches_the_reference_encoder_at_every_version() {
        let topics = vec![
            TopicData {
                name: "orders".into(),
                topic_id: uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788),
                partitions: vec![(0, stamped(10)), (5, stamped(200))],
            },
            TopicData {
                name: "x".repeat(140).into(),
                topic_id: uuid::Uuid::from_u128(42),
                partitions: vec![(3, stamped(1))],
            },
        ];
        let versions = ProduceRequest::VERSIONS;
        let ids = [None, Some("strait-a->b")];
        for (version, id) in (versions.min..=versions.max).flat_map(|v| ids.map(|id| (v, id))) {
            let reference = ProduceRequest::default()
                .with_transactional_id(
                    id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
                )
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(
                    topics
                        .iter()
                        .map(|t| {
                            TopicProduceData::default()
                                .with_name(TopicName(StrBytes::from_string(t.name.to_string())))
                                .with_topic_id(t.topic_id)
                                .with_partition_data(
                                    t.partitions
                                        .iter()
                                        .map(|(i, b)| {
                                            PartitionProduceData::default()
                                                .with_index(*i)
                                                .with_records(Some(b.to_bytes()))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let mut expected = BytesMut::new();
            reference.encode(&mut expected, version).unwrap();
            let ours = encode(version, id, -1, 30_000, &topics);
            assert_eq!(
                ours.to_vec(),
                expected.to_vec(),
                "Produce v{version} {id:?}"
            );
        }
    }

    #[test]
    fn records_are_shared_not_copied() {
        let batch = stamped(1000);
        let topics = vec![TopicData {
            name: "t".into(),
            topic_id: uuid::Uuid::nil(),
            partitions: vec![(0, batch.clone())],
        }];
        let frame = encode(9, None, -1, 1, &topics);
        // prefix (fields + header), records, trailing tagged fields
        assert_eq!(frame.segments(), 3);
        let mut slots = [std::io::IoSlice::new(&[]); 3];
        bytes::Buf::chunks_vectored(&frame, &mut slots);
        assert_eq!(slots[1].as_ptr(), batch.records.as_ptr());
        let _: Bytes = batch.records;
    }
}
