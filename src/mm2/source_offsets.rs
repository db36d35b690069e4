//! MirrorMaker 2's source positions as Kafka Connect keeps them in its offsets topic
//! (`mm2-offsets.<source>.internal` on the target in dedicated mode; any name under Strimzi):
//! the key `["MirrorSourceConnector",{"cluster":"<source>","partition":<n>,"topic":"<t>"}]`
//! and the value `{"offset":<n>}`, the last source offset MM2 replicated (it resumes at
//! n + 1); a null value deletes the entry. Connect finds a position by the key's exact
//! bytes, so [`key`] and [`value`] write them as MM2's worker does: compact JSON, the
//! partition's fields in that order. Under Strimzi the connector name (the key's first
//! element) is `<source>-><target>.MirrorSourceConnector`.

use std::collections::HashMap;

use crate::kafka::TopicPartition;

/// The connector name MM2's dedicated mode stores its positions under.
pub const DEDICATED_CONNECTOR: &str = "MirrorSourceConnector";

/// The key under which `connector` keeps the position of `tp` read from cluster `source`.
pub fn key(connector: &str, source: &str, tp: &TopicPartition) -> Vec<u8> {
    let text = |s: &str| serde_json::to_string(s).expect("a string serializes");
    format!(
        "[{},{{\"cluster\":{},\"partition\":{},\"topic\":{}}}]",
        text(connector),
        text(source),
        tp.partition,
        text(&tp.topic)
    )
    .into_bytes()
}

/// The value holding `last`, the last source offset replicated.
pub fn value(last: i64) -> Vec<u8> {
    format!("{{\"offset\":{last}}}").into_bytes()
}

/// One record of the offsets topic: whose position it is and the last offset replicated
/// (`None`: the entry is deleted).
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub connector: String,
    pub source: String,
    pub tp: TopicPartition,
    pub last: Option<i64>,
}

/// Reads one record of the offsets topic. Connect keeps other connectors' positions in the
/// same topic, in other shapes: `Ok(None)` for a key that is not a MirrorSourceConnector's.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Entry>, String> {
    let Ok(serde_json::Value::Array(parts)) = serde_json::from_slice(key) else {
        return Ok(None);
    };
    let [serde_json::Value::String(connector), serde_json::Value::Object(partition)] =
        parts.as_slice()
    else {
        return Ok(None);
    };
    let (Some(source), Some(topic), Some(index)) = (
        partition.get("cluster").and_then(|v| v.as_str()),
        partition.get("topic").and_then(|v| v.as_str()),
        partition.get("partition").and_then(|v| v.as_i64()),
    ) else {
        return Ok(None);
    };
    let index = i32::try_from(index).map_err(|_| format!("partition {index} out of range"))?;
    let last = match value {
        None => None,
        Some(bytes) => {
            let offset: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|e| format!("the value of {topic}-{index} is not JSON: {e}"))?;
            let last = offset
                .get("offset")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| {
                    format!("the value of {topic}-{index} holds no integer `offset`: {offset}")
                })?;
            Some(last)
        }
    };
    Ok(Some(Entry {
        connector: connector.clone(),
        source: source.to_string(),
        tp: TopicPartition::new(topic, index),
        last,
    }))
}

/// The positions `connector` holds for cluster `source` after `records` (in log order:
/// the last record of a key wins, a deletion removes it): where MM2 resumes, the offset
/// after the last one it replicated.
pub fn resume_points<'r>(
    records: impl IntoIterator<Item = (&'r [u8], Option<&'r [u8]>)>,
    connector: &str,
    source: &str,
) -> Result<HashMap<TopicPartition, i64>, String> {
    let mut points = HashMap::new();
    for (key, value) in records {
        let Some(entry) = decode(key, value)? else {
            continue;
        };
        if entry.connector != connector || entry.source != source {
            continue;
        }
        match entry.last {
            Some(last) => points.insert(entry.tp, last.saturating_add(1)),
            None => points.remove(&entry.tp),
        };
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_the_bytes_mm2_writes() {
        let tp = TopicPartition::new("orders", 3);
        assert_eq!(
            key(DEDICATED_CONNECTOR, "us-east", &tp),
            br#"["MirrorSourceConnector",{"cluster":"us-east","partition":3,"topic":"orders"}]"#
        );
        // Strimzi's connector name.
        assert_eq!(
            key("us-east->eu-west.MirrorSourceConnector", "us-east", &tp),
            br#"["us-east->eu-west.MirrorSourceConnector",{"cluster":"us-east","partition":3,"topic":"orders"}]"#
        );
        assert_eq!(value(41), br#"{"offset":41}"#);
    }

    #[test]
    fn the_last_record_of_a_key_wins_and_a_deletion_removes_it() {
        let (a, b) = (TopicPartition::new("a", 0), TopicPartition::new("b", 1));
        let records = [
            (key(DEDICATED_CONNECTOR, "src", &a), Some(value(9))),
            (key(DEDICATED_CONNECTOR, "src", &b), Some(value(4))),
            (key(DEDICATED_CONNECTOR, "src", &a), Some(value(19))),
            (key(DEDICATED_CONNECTOR, "src", &b), None),
            // Another source's and another connector's positions, and Connect's own records.
            (key(DEDICATED_CONNECTOR, "other", &b), Some(value(7))),
            (key("MirrorCheckpointConnector", "src", &b), Some(value(7))),
            (br#"{"not":"a mirror key"}"#.to_vec(), Some(value(7))),
        ];
        let points = resume_points(
            records.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
            DEDICATED_CONNECTOR,
            "src",
        )
        .unwrap();
        assert_eq!(points, HashMap::from([(a, 20)]));
    }

    /// Strimzi's KafkaMirrorMaker2 names the connector `<source>-><target>.MirrorSourceConnector`
    /// and its offsets topic as the resource says: what Connect writes there under that name
    /// is found by it, and dedicated mode's entries in the same topic are not.
    #[test]
    fn strimzi_positions_are_found_by_their_connector_name() {
        let tp = TopicPartition::new("orders", 0);
        let strimzi = "us-east->eu-west.MirrorSourceConnector";
        let records: [(&[u8], Option<&[u8]>); 2] = [
            (
                br#"["us-east->eu-west.MirrorSourceConnector",{"cluster":"us-east","partition":0,"topic":"orders"}]"#,
                Some(br#"{"offset":1234}"#),
            ),
            (
                br#"["MirrorSourceConnector",{"cluster":"us-east","partition":0,"topic":"orders"}]"#,
                Some(br#"{"offset":5}"#),
            ),
        ];
        let points = resume_points(records, strimzi, "us-east").unwrap();
        assert_eq!(points, HashMap::from([(tp.clone(), 1235)]));
        let points = resume_points(records, DEDICATED_CONNECTOR, "us-east").unwrap();
        assert_eq!(points, HashMap::from([(tp, 6)]));
    }

    #[test]
    fn a_value_without_an_offset_is_an_error_naming_the_partition() {
        let tp = TopicPartition::new("orders", 2);
        let k = key(DEDICATED_CONNECTOR, "src", &tp);
        let e = decode(&k, Some(br#"{"position":3}"#)).unwrap_err();
        assert!(e.contains("orders-2"), "{e}");
        let e = decode(&k, Some(b"not json")).unwrap_err();
        assert!(e.contains("orders-2"), "{e}");
    }
}
