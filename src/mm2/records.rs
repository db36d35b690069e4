//! MirrorMaker 2's internal record formats, byte for byte: [`Heartbeat`] (the `heartbeats`
//! topic), [`Checkpoint`] (`<source>.checkpoints.internal`) and [`OffsetSync`]
//! (`mm2-offset-syncs.<cluster>.internal`), so that MM2 tooling such as `RemoteClusterUtils`
//! and `MirrorClient` reads strait's internal topics as MM2's. This module owns their keys
//! and values and the one uncompressed batch ([`batch`]) that carries them; which topic each
//! goes to is the replication policy's business.
//!
//! The layouts are those of `org.apache.kafka.connect.mirror.Heartbeat` and `Checkpoint`
//! (connect-mirror-client) and `OffsetSync` (connect-mirror), which write
//! `org.apache.kafka.common.protocol.types` structs: STRING is an INT16 big-endian byte
//! length and UTF-8 (never null, at most 32767 bytes), integers are big-endian. Heartbeat and
//! Checkpoint values start with an INT16 version header (0, the only version); OffsetSync
//! values have none. `testdata/mm2/` holds the bytes the Kafka 4.1.1 jars make, which the
//! tests below compare against.
//!
//! Decoding is stricter than the jars': they read any version as version 0 (the version
//! check is a Java `assert`, off in production), ignore bytes after the last field and
//! replace invalid UTF-8 with U+FFFD. Here each of those is a [`FormatError`], as is any
//! short or malformed input; decoding never panics.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::batch::{encode_batch, OwnRecord, ProducerStamp, RawBatch};
use crate::kafka::TopicPartition;

/// The largest STRING, in UTF-8 bytes (`Type.STRING` writes the length as an INT16).
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// Which half of a record a [`FormatError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    Key,
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Key => "key",
            Part::Value => "value",
        })
    }
}

/// What is wrong with an MM2 record. `record` is the MM2 class (`"Heartbeat"`, ...) and
/// `field` the field name MM2's schema gives it (`"upstreamOffset"`, ...).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    #[error("{record} {part}: field `{field}` needs {needed} bytes, only {available} left")]
    Truncated {
        record: &'static str,
        part: Part,
        field: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("{record} {part}: field `{field}` has negative string length {len}")]
    NegativeLength {
        record: &'static str,
        part: Part,
        field: &'static str,
        len: i16,
    },
    #[error("{record} {part}: field `{field}` is not valid UTF-8")]
    InvalidUtf8 {
        record: &'static str,
        part: Part,
        field: &'static str,
    },
    #[error("{record} value: unsupported version {version} (only version 0 is defined)")]
    UnsupportedVersion { record: &'static str, version: i16 },
    #[error("{record} {part}: {extra} bytes left after the last field")]
    TrailingBytes {
        record: &'static str,
        part: Part,
        extra: usize,
    },
    #[error(
        "{record} {part}: field `{field}` is {len} bytes of UTF-8, more than the \
         {MAX_STRING_LEN} a STRING holds"
    )]
    StringTooLong {
        record: &'static str,
        part: Part,
        field: &'static str,
        len: usize,
    },
}

impl FormatError {
    /// A malformed record stays malformed: reading it again gives the same bytes.
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// The value version MM2 writes and the only one defined (`Heartbeat.VERSION`,
/// `Checkpoint.VERSION`).
const VERSION: i16 = 0;

/// A heartbeat, emitted by `MirrorHeartbeatConnector` every
/// `emit.heartbeats.interval.seconds` to `heartbeats` on the target and replicated onward
/// (as `<alias>.heartbeats`); `RemoteClusterUtils` follows them to find upstream clusters.
///
/// Key: STRING `sourceClusterAlias`, STRING `targetClusterAlias`.
/// Value: INT16 version (0), INT64 `timestamp` (ms). MM2 writes the record with this
/// timestamp as its record timestamp.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    pub source_cluster_alias: String,
    pub target_cluster_alias: String,
    pub timestamp: i64,
}

impl Heartbeat {
    const RECORD: &'static str = "Heartbeat";

    /// Checks that the record can be encoded (every STRING within [`MAX_STRING_LEN`]).
    pub fn validate(&self) -> Result<(), FormatError> {
        check_len(
            Self::RECORD,
            Part::Key,
            "sourceClusterAlias",
            &self.source_cluster_alias,
        )?;
        check_len(
            Self::RECORD,
            Part::Key,
            "targetClusterAlias",
            &self.target_cluster_alias,
        )
    }

    /// # Panics
    /// If an alias is longer than [`MAX_STRING_LEN`] bytes ([`Heartbeat::validate`] says).
    pub fn encode_key(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(
            4 + self.source_cluster_alias.len() + self.target_cluster_alias.len(),
        );
        put_string(&mut b, &self.source_cluster_alias);
        put_string(&mut b, &self.target_cluster_alias);
        b.freeze()
    }

    pub fn encode_value(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(2 + 8);
        b.put_i16(VERSION);
        b.put_i64(self.timestamp);
        b.freeze()
    }

    pub fn decode(key: &[u8], value: &[u8]) -> Result<Heartbeat, FormatError> {
        let mut k = Reader::new(Self::RECORD, Part::Key, key);
        let source_cluster_alias = k.string("sourceClusterAlias")?;
        let target_cluster_alias = k.string("targetClusterAlias")?;
        k.finish()?;
        let mut v = Reader::new(Self::RECORD, Part::Value, value);
        v.version()?;
        let timestamp = v.i64("timestamp")?;
        v.finish()?;
        Ok(Heartbeat {
            source_cluster_alias,
            target_cluster_alias,
            timestamp,
        })
    }
}

/// A consumer group's committed offset translated to the target, emitted by
/// `MirrorCheckpointConnector` to `<source>.checkpoints.internal` on the target and read by
/// `RemoteClusterUtils.translateOffsets`.
///
/// Key: STRING `group`, STRING `topic` (the target-side name, e.g. `source.orders`), INT32
/// `partition`. Value: INT16 version (0), INT64 `upstreamOffset`, INT64 `offset` (the
/// downstream offset), STRING `metadata`. MM2 takes the metadata from the group's
/// `OffsetAndMetadata`, which turns null into `""`; the jar cannot write a null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    pub consumer_group_id: String,
    pub topic_partition: TopicPartition,
    pub upstream_offset: i64,
    pub downstream_offset: i64,
    pub metadata: String,
}

impl Checkpoint {
    const RECORD: &'static str = "Checkpoint";

    /// Checks that the record can be encoded (every STRING within [`MAX_STRING_LEN`]).
    pub fn validate(&self) -> Result<(), FormatError> {
        check_len(Self::RECORD, Part::Key, "group", &self.consumer_group_id)?;
        check_len(
            Self::RECORD,
            Part::Key,
            "topic",
            &self.topic_partition.topic,
        )?;
        check_len(Self::RECORD, Part::Value, "metadata", &self.metadata)
    }

    /// # Panics
    /// If the group or topic is longer than [`MAX_STRING_LEN`] bytes
    /// ([`Checkpoint::validate`] says).
    pub fn encode_key(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(
            2 + self.consumer_group_id.len() + 2 + self.topic_partition.topic.len() + 4,
        );
        put_string(&mut b, &self.consumer_group_id);
        put_string(&mut b, &self.topic_partition.topic);
        b.put_i32(self.topic_partition.partition);
        b.freeze()
    }

    /// # Panics
    /// If the metadata is longer than [`MAX_STRING_LEN`] bytes ([`Checkpoint::validate`]
    /// says).
    pub fn encode_value(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(2 + 8 + 8 + 2 + self.metadata.len());
        b.put_i16(VERSION);
        b.put_i64(self.upstream_offset);
        b.put_i64(self.downstream_offset);
        put_string(&mut b, &self.metadata);
        b.freeze()
    }

    pub fn decode(key: &[u8], value: &[u8]) -> Result<Checkpoint, FormatError> {
        let mut k = Reader::new(Self::RECORD, Part::Key, key);
        let consumer_group_id = k.string("group")?;
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        k.finish()?;
        let mut v = Reader::new(Self::RECORD, Part::Value, value);
        v.version()?;
        let upstream_offset = v.i64("upstreamOffset")?;
        let downstream_offset = v.i64("offset")?;
        let metadata = v.string("metadata")?;
        v.finish()?;
        Ok(Checkpoint {
            consumer_group_id,
            topic_partition: TopicPartition::new(topic, partition),
            upstream_offset,
            downstream_offset,
            metadata,
        })
    }
}

/// A pair of matching offsets of one source partition, emitted by `MirrorSourceTask` to
/// `mm2-offset-syncs.<cluster>.internal`; `MirrorCheckpointTask` translates group offsets
/// with them.
///
/// Key: STRING `topic` (the source-side name), INT32 `partition`. Value: INT64
/// `upstreamOffset`, INT64 `offset` (the downstream offset), and no version header.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OffsetSync {
    pub topic_partition: TopicPartition,
    pub upstream_offset: i64,
    pub downstream_offset: i64,
}

impl OffsetSync {
    const RECORD: &'static str = "OffsetSync";

    /// Checks that the record can be encoded (the topic within [`MAX_STRING_LEN`]).
    pub fn validate(&self) -> Result<(), FormatError> {
        check_len(
            Self::RECORD,
            Part::Key,
            "topic",
            &self.topic_partition.topic,
        )
    }

    /// # Panics
    /// If the topic is longer than [`MAX_STRING_LEN`] bytes ([`OffsetSync::validate`]
    /// says; Kafka topic names are at most 249).
    pub fn encode_key(&self) -> Bytes {
        encode_partition_key(&self.topic_partition)
    }

    pub fn encode_value(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(8 + 8);
        b.put_i64(self.upstream_offset);
        b.put_i64(self.downstream_offset);
        b.freeze()
    }

    pub fn decode(key: &[u8], value: &[u8]) -> Result<OffsetSync, FormatError> {
        let mut k = Reader::new(Self::RECORD, Part::Key, key);
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        k.finish()?;
        let mut v = Reader::new(Self::RECORD, Part::Value, value);
        let upstream_offset = v.i64("upstreamOffset")?;
        let downstream_offset = v.i64("offset")?;
        v.finish()?;
        Ok(OffsetSync {
            topic_partition: TopicPartition::new(topic, partition),
            upstream_offset,
            downstream_offset,
        })
    }
}

/// The one uncompressed batch that carries `records` (key, value), all with record
/// timestamp `timestamp` (for heartbeats, the heartbeat's own timestamp, as MM2 writes
/// them): base offset 0, CreateTime, no headers, no producer id. The same bytes as the Java
/// client's `MemoryRecords.withRecords(Compression.NONE, ...)`; the produce path stamps
/// strait's producer identity on a copy. An empty `records` gives an empty batch, which
/// brokers reject.
pub fn batch(records: &[(Bytes, Bytes)], timestamp: i64) -> RawBatch {
    let own: Vec<OwnRecord<'_>> = records
        .iter()
        .map(|(key, value)| OwnRecord {
            key: Some(key),
            value: Some(value),
            timestamp,
        })
        .collect();
    RawBatch::new(encode_batch(&own, &ProducerStamp::NONE))
        .expect("encode_batch builds valid batches")
}

fn check_len(
    record: &'static str,
    part: Part,
    field: &'static str,
    s: &str,
) -> Result<(), FormatError> {
    if s.len() > MAX_STRING_LEN {
        return Err(FormatError::StringTooLong {
            record,
            part,
            field,
            len: s.len(),
        });
    }
    Ok(())
}

/// A topic-partition key as `OffsetSync` writes it: STRING topic, INT32 partition. strait's
/// own progress records use the same key.
///
/// # Panics
/// If the topic is longer than [`MAX_STRING_LEN`] bytes (Kafka topic names are at most 249).
pub(crate) fn encode_partition_key(tp: &TopicPartition) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + tp.topic.len() + 4);
    put_string(&mut b, &tp.topic);
    b.put_i32(tp.partition);
    b.freeze()
}

/// `Type.STRING`: INT16 length and the UTF-8 bytes.
fn put_string(b: &mut BytesMut, s: &str) {
    let len = i16::try_from(s.len()).expect("MM2 STRING longer than 32767 bytes");
    b.put_i16(len);
    b.put_slice(s.as_bytes());
}

/// Reads one key or value; every read is bounds-checked and names its field.
pub(crate) struct Reader<'a> {
    record: &'static str,
    part: Part,
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(record: &'static str, part: Part, buf: &'a [u8]) -> Self {
        Reader { record, part, buf }
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], FormatError> {
        if self.buf.len() < n {
            return Err(FormatError::Truncated {
                record: self.record,
                part: self.part,
                field,
                needed: n,
                available: self.buf.len(),
            });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], FormatError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(field, N)?);
        Ok(out)
    }

    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, FormatError> {
        self.array(field).map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, FormatError> {
        self.array(field).map(i32::from_be_bytes)
    }

    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, FormatError> {
        self.array(field).map(i64::from_be_bytes)
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, FormatError> {
        let len = self.i16(field)?;
        let Ok(n) = usize::try_from(len) else {
            return Err(FormatError::NegativeLength {
                record: self.record,
                part: self.part,
                field,
                len,
            });
        };
        let bytes = self.take(field, n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(FormatError::InvalidUtf8 {
                record: self.record,
                part: self.part,
                field,
            }),
        }
    }

    /// The INT16 header of Heartbeat and Checkpoint values.
    pub(crate) fn version(&mut self) -> Result<(), FormatError> {
        let version = self.i16("version")?;
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                record: self.record,
                version,
            });
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<(), FormatError> {
        if !self.buf.is_empty() {
            return Err(FormatError::TrailingBytes {
                record: self.record,
                part: self.part,
                extra: self.buf.len(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The key and value bytes the Kafka 4.1.1 jars make for vector `$name`
    /// (`testdata/mm2/vectors.txt` lists the inputs).
    macro_rules! jar {
        ($name:literal) => {
            (
                hex(include_str!(concat!(
                    "../../testdata/mm2/",
                    $name,
                    ".key.hex"
                ))),
                hex(include_str!(concat!(
                    "../../testdata/mm2/",
                    $name,
                    ".value.hex"
                ))),
            )
        };
    }

    /// A record's key and value bytes.
    type KeyValue = (Vec<u8>, Vec<u8>);

    fn hex(s: &str) -> Vec<u8> {
        let s = s.trim();
        assert!(s.len().is_multiple_of(2), "odd hex length");
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
            .collect()
    }

    fn heartbeat(source: &str, target: &str, timestamp: i64) -> Heartbeat {
        Heartbeat {
            source_cluster_alias: source.into(),
            target_cluster_alias: target.into(),
            timestamp,
        }
    }

    fn checkpoint(
        group: &str,
        topic: &str,
        partition: i32,
        upstream_offset: i64,
        downstream_offset: i64,
        metadata: &str,
    ) -> Checkpoint {
        Checkpoint {
            consumer_group_id: group.into(),
            topic_partition: TopicPartition::new(topic, partition),
            upstream_offset,
            downstream_offset,
            metadata: metadata.into(),
        }
    }

    fn offset_sync(
        topic: &str,
        partition: i32,
        upstream_offset: i64,
        downstream_offset: i64,
    ) -> OffsetSync {
        OffsetSync {
            topic_partition: TopicPartition::new(topic, partition),
            upstream_offset,
            downstream_offset,
        }
    }

    fn heartbeat_vectors() -> Vec<(Heartbeat, KeyValue)> {
        vec![
            (
                heartbeat("source", "target", 1_700_000_000_123),
                jar!("heartbeat-1"),
            ),
            (heartbeat("us-east-1", "eu-west-1", 0), jar!("heartbeat-2")),
            (heartbeat("zürich", "東京", i64::MAX), jar!("heartbeat-3")),
            (heartbeat("", "", -1), jar!("heartbeat-4")),
        ]
    }

    fn checkpoint_vectors() -> Vec<(Checkpoint, KeyValue)> {
        vec![
            (
                checkpoint("group-1", "source.orders", 0, 0, 0, ""),
                jar!("checkpoint-1"),
            ),
            (
                checkpoint(
                    "payments-consumer",
                    "source.payments",
                    7,
                    123_456_789_012,
                    123_456_789_000,
                    "commit-meta",
                ),
                jar!("checkpoint-2"),
            ),
            (
                checkpoint(
                    "grüppe-é",
                    "source.tópico-ñ",
                    i32::MAX,
                    -1,
                    -1,
                    "métadonnées ✓ 🚀",
                ),
                jar!("checkpoint-3"),
            ),
            (
                checkpoint("big", "a.b.orders", 2, i64::MAX, i64::MAX - 1, ""),
                jar!("checkpoint-4"),
            ),
        ]
    }

    fn offset_sync_vectors() -> Vec<(OffsetSync, KeyValue)> {
        vec![
            (offset_sync("orders", 0, 0, 0), jar!("offset-sync-1")),
            (offset_sync("payments", 3, 1000, 998), jar!("offset-sync-2")),
            (offset_sync("tópico-ñ", 12, -1, -1), jar!("offset-sync-3")),
            (
                offset_sync("orders", i32::MAX, i64::MAX, i64::MAX - 1),
                jar!("offset-sync-4"),
            ),
        ]
    }

    #[test]
    fn heartbeat_matches_jar() {
        for (h, (key, value)) in heartbeat_vectors() {
            assert_eq!(h.encode_key(), key, "{h:?} key");
            assert_eq!(h.encode_value(), value, "{h:?} value");
            assert_eq!(Heartbeat::decode(&key, &value), Ok(h));
        }
    }

    #[test]
    fn checkpoint_matches_jar() {
        for (c, (key, value)) in checkpoint_vectors() {
            assert_eq!(c.encode_key(), key, "{c:?} key");
            assert_eq!(c.encode_value(), value, "{c:?} value");
            assert_eq!(Checkpoint::decode(&key, &value), Ok(c));
        }
    }

    #[test]
    fn offset_sync_matches_jar() {
        for (s, (key, value)) in offset_sync_vectors() {
            assert_eq!(s.encode_key(), key, "{s:?} key");
            assert_eq!(s.encode_value(), value, "{s:?} value");
            assert_eq!(OffsetSync::decode(&key, &value), Ok(s));
        }
    }

    #[test]
    fn heartbeat_batch_matches_jar() {
        let expected = hex(include_str!("../../testdata/mm2/heartbeat-batch.hex"));
        let beats = [
            heartbeat("source", "target", 1_700_000_000_123),
            heartbeat("us-east-1", "eu-west-1", 0),
        ];
        let records: Vec<(Bytes, Bytes)> = beats
            .iter()
            .map(|h| (h.encode_key(), h.encode_value()))
            .collect();
        let b = batch(&records, beats[0].timestamp);
        assert_eq!(b.as_bytes().as_ref(), expected.as_slice());
        b.verify_crc().unwrap();
        let decoded = crate::batch::decode_uncompressed(&b).unwrap();
        assert_eq!(decoded.len(), 2);
        for (r, h) in decoded.iter().zip(&beats) {
            assert_eq!(r.timestamp, beats[0].timestamp);
            let (key, value) = (r.key.as_ref().unwrap(), r.value.as_ref().unwrap());
            assert_eq!(Heartbeat::decode(key, value).as_ref(), Ok(h));
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        for (h, (key, value)) in heartbeat_vectors() {
            for n in 0..key.len() {
                assert!(
                    Heartbeat::decode(&key[..n], &value).is_err(),
                    "{h:?} key[..{n}]"
                );
            }
            for n in 0..value.len() {
                assert!(
                    Heartbeat::decode(&key, &value[..n]).is_err(),
                    "{h:?} value[..{n}]"
                );
            }
        }
        for (c, (key, value)) in checkpoint_vectors() {
            for n in 0..key.len() {
                assert!(
                    Checkpoint::decode(&key[..n], &value).is_err(),
                    "{c:?} key[..{n}]"
                );
            }
            for n in 0..value.len() {
                assert!(
                    Checkpoint::decode(&key, &value[..n]).is_err(),
                    "{c:?} value[..{n}]"
                );
            }
        }
        for (s, (key, value)) in offset_sync_vectors() {
            for n in 0..key.len() {
                assert!(
                    OffsetSync::decode(&key[..n], &value).is_err(),
                    "{s:?} key[..{n}]"
                );
            }
            for n in 0..value.len() {
                assert!(
                    OffsetSync::decode(&key, &value[..n]).is_err(),
                    "{s:?} value[..{n}]"
                );
            }
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let (key, value) = jar!("heartbeat-1");
        assert_eq!(
            Heartbeat::decode(&key, &value[..6]),
            Err(FormatError::Truncated {
                record: "Heartbeat",
                part: Part::Value,
                field: "timestamp",
                needed: 8,
                available: 4,
            })
        );

        let mut newer = value.clone();
        newer[1] = 1;
        assert_eq!(
            Heartbeat::decode(&key, &newer),
            Err(FormatError::UnsupportedVersion {
                record: "Heartbeat",
                version: 1,
            })
        );

        let mut longer = key.clone();
        longer.push(0);
        assert_eq!(
            Heartbeat::decode(&longer, &value),
            Err(FormatError::TrailingBytes {
                record: "Heartbeat",
                part: Part::Key,
                extra: 1,
            })
        );

        assert_eq!(
            Heartbeat::decode(&[0xff, 0xff, 0, 0], &value),
            Err(FormatError::NegativeLength {
                record: "Heartbeat",
                part: Part::Key,
                field: "sourceClusterAlias",
                len: -1,
            })
        );

        assert_eq!(
            Heartbeat::decode(&[0, 1, 0xff, 0, 0], &value),
            Err(FormatError::InvalidUtf8 {
                record: "Heartbeat",
                part: Part::Key,
                field: "sourceClusterAlias",
            })
        );

        let (key, value) = jar!("checkpoint-2");
        let mut longer = value.clone();
        longer.extend_from_slice(&[0, 0]);
        assert_eq!(
            Checkpoint::decode(&key, &longer),
            Err(FormatError::TrailingBytes {
                record: "Checkpoint",
                part: Part::Value,
                extra: 2,
            })
        );
        assert!(matches!(
            Checkpoint::decode(&key, &value[..value.len() - 1]),
            Err(FormatError::Truncated {
                field: "metadata",
                ..
            })
        ));

        // An OffsetSync value has no version header: 16 bytes exactly.
        let (key, value) = jar!("offset-sync-2");
        assert!(matches!(
            OffsetSync::decode(&key, &value[2..]),
            Err(FormatError::Truncated {
                field: "offset",
                ..
            })
        ));
        assert!(!FormatError::InvalidUtf8 {
            record: "OffsetSync",
            part: Part::Key,
            field: "topic",
        }
        .is_retriable());
    }

    #[test]
    fn validate_rejects_strings_a_short_length_cannot_hold() {
        let mut h = heartbeat("a", "b", 1);
        assert_eq!(h.validate(), Ok(()));
        h.target_cluster_alias = "x".repeat(MAX_STRING_LEN);
        assert_eq!(h.validate(), Ok(()));
        assert_eq!(h.encode_key().len(), 2 + 1 + 2 + MAX_STRING_LEN);
        h.target_cluster_alias.push('x');
        assert_eq!(
            h.validate(),
            Err(FormatError::StringTooLong {
                record: "Heartbeat",
                part: Part::Key,
                field: "targetClusterAlias",
                len: MAX_STRING_LEN + 1,
            })
        );
        let mut c = checkpoint("g", "t", 0, 1, 2, "");
        assert_eq!(c.validate(), Ok(()));
        c.metadata = "é".repeat(MAX_STRING_LEN / 2 + 1);
        assert!(matches!(
            c.validate(),
            Err(FormatError::StringTooLong {
                field: "metadata",
                ..
            })
        ));
        let mut s = offset_sync("t", 0, 1, 2);
        assert_eq!(s.validate(), Ok(()));
        s.topic_partition.topic = "t".repeat(MAX_STRING_LEN + 1).into();
        assert!(s.validate().is_err());
    }

    fn mm2_string() -> impl Strategy<Value = String> {
        // Up to 64 chars of any Unicode: at most 256 bytes, well within a STRING.
        proptest::collection::vec(any::<char>(), 0..64).prop_map(|c| c.into_iter().collect())
    }

    proptest! {
        #[test]
        fn heartbeat_round_trips(
            source in mm2_string(),
            target in mm2_string(),
            timestamp in any::<i64>(),
        ) {
            let h = heartbeat(&source, &target, timestamp);
            prop_assert_eq!(Heartbeat::decode(&h.encode_key(), &h.encode_value()), Ok(h));
        }

        #[test]
        fn checkpoint_round_trips(
            group in mm2_string(),
            topic in mm2_string(),
            partition in any::<i32>(),
            upstream in any::<i64>(),
            downstream in any::<i64>(),
            metadata in mm2_string(),
        ) {
            let c = checkpoint(&group, &topic, partition, upstream, downstream, &metadata);
            prop_assert_eq!(Checkpoint::decode(&c.encode_key(), &c.encode_value()), Ok(c));
        }

        #[test]
        fn offset_sync_round_trips(
            topic in mm2_string(),
            partition in any::<i32>(),
            upstream in any::<i64>(),
            downstream in any::<i64>(),
        ) {
            let s = offset_sync(&topic, partition, upstream, downstream);
            prop_assert_eq!(OffsetSync::decode(&s.encode_key(), &s.encode_value()), Ok(s));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            key in proptest::collection::vec(any::<u8>(), 0..64),
            value in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let _ = Heartbeat::decode(&key, &value);
            let _ = Checkpoint::decode(&key, &value);
            let _ = OffsetSync::decode(&key, &value);
        }

        #[test]
        fn whatever_decodes_encodes_to_the_same_bytes(
            which in 0usize..12,
            in_key in any::<bool>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            // One byte of a jar vector changed: an error, or a record that encodes back to
            // exactly the changed bytes.
            let vectors: Vec<KeyValue> = heartbeat_vectors()
                .into_iter()
                .map(|(_, kv)| kv)
                .chain(checkpoint_vectors().into_iter().map(|(_, kv)| kv))
                .chain(offset_sync_vectors().into_iter().map(|(_, kv)| kv))
                .collect();
            let (mut key, mut value) = vectors[which].clone();
            let target = if in_key { &mut key } else { &mut value };
            let i = at.index(target.len());
            target[i] = byte;
            if let Ok(h) = Heartbeat::decode(&key, &value) {
                prop_assert_eq!(h.encode_key(), key.clone());
                prop_assert_eq!(h.encode_value(), value.clone());
            }
            if let Ok(c) = Checkpoint::decode(&key, &value) {
                prop_assert_eq!(c.encode_key(), key.clone());
                prop_assert_eq!(c.encode_value(), value.clone());
            }
            if let Ok(s) = OffsetSync::decode(&key, &value) {
                prop_assert_eq!(s.encode_key(), key);
                prop_assert_eq!(s.encode_value(), value);
            }
        }
    }
}
