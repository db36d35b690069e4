//! Regenerates `testdata/fetch/`: real Fetch responses of Kafka 4.1.1, one file per kind of
//! traffic, for the `forward` benchmark (`benches/forward.rs`). See `testdata/fetch/README.md`.
//!
//! ```sh
//! cargo test --test capture_fetch -- --ignored --nocapture
//! ```
//!
//! Each variant is a fresh 8-partition topic on the shared `source` test cluster, filled by
//! Kafka's own `ProducerPerformance` with the 1 KiB JSON-like records of
//! `scripts/bench/payloads.py` (the records of `scripts/bench.sh`), then read back with one
//! sessionless `read_committed` Fetch of all 8 partitions from offset 0 through
//! `strait::kafka::Connection::send`. The decoded response is encoded again at the same
//! version behind a response header: a file holds exactly what
//! `strait::kafka::codec::decode_response::<FetchRequest>` takes (correlation id first, no
//! 4-byte size prefix).

mod common;

use std::path::Path;
use std::process::Command;

use bytes::BytesMut;
use common::kafka;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use strait::batch::split_batches;
use strait::kafka::codec::decode_response;

const PARTITIONS: i32 = 8;
/// Per-partition cap of the Fetch: 8 partitions make at most 2 MiB per file.
const PARTITION_MAX_BYTES: i32 = 256 * 1024;
const RECORD_SIZE: usize = 1024;

/// One kind of traffic: file name, codec, batching, and how many records to produce.
struct Variant {
    name: &'static str,
    codec: &'static str,
    batch_size: u32,
    linger_ms: u32,
    records: u32,
}

const VARIANTS: [Variant; 6] = [
    // Large: 128 KiB batches (as `scripts/bench.sh`), with a linger long enough that the
    // compressing producer fills them. Small: ~5 KiB batches without linger (4 records).
    Variant {
        name: "none-large",
        codec: "none",
        batch_size: 128 * 1024,
        linger_ms: 100,
        records: 1600,
    },
    Variant {
        name: "none-small",
        codec: "none",
        batch_size: 5 * 1024,
        linger_ms: 0,
        records: 1200,
    },
    Variant {
        name: "lz4",
        codec: "lz4",
        batch_size: 128 * 1024,
        linger_ms: 100,
        records: 2400,
    },
    Variant {
        name: "zstd",
        codec: "zstd",
        batch_size: 128 * 1024,
        linger_ms: 100,
        records: 2400,
    },
    Variant {
        name: "gzip",
        codec: "gzip",
        batch_size: 128 * 1024,
        linger_ms: 100,
        records: 2400,
    },
    Variant {
        name: "snappy",
        codec: "snappy",
        batch_size: 128 * 1024,
        linger_ms: 100,
        records: 2400,
    },
];

#[test]
#[ignore = "regenerates testdata/fetch; run with --ignored"]
fn capture_fetch_responses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = root.join("testdata/fetch");
    std::fs::create_dir_all(&out_dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    let payloads = work.path().join("payloads.txt");
    let status = Command::new("python3")
        .arg(root.join("scripts/bench/payloads.py"))
        .arg(&payloads)
        .args(["--count", "2000", "--size", &RECORD_SIZE.to_string()])
        .status()
        .expect("running python3 scripts/bench/payloads.py");
    assert!(status.success(), "payloads.py failed: {status}");
    let payloads = payloads.to_str().expect("temp dir path is UTF-8");

    let source = &kafka::clusters()[0];
    // One runtime for the whole run: the pooled connections' tasks live on it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = common::strait::client(source);
    for v in &VARIANTS {
        let topic = format!("fetch-{}", v.name);
        kafka::create_topic(source, &topic, PARTITIONS, &[]);
        let records = v.records.to_string();
        let bootstrap = format!("bootstrap.servers={}", source.bootstrap);
        let codec = format!("compression.type={}", v.codec);
        let batch = format!("batch.size={}", v.batch_size);
        let linger = format!("linger.ms={}", v.linger_ms);
        kafka::tool(
            "org.apache.kafka.tools.ProducerPerformance",
            &[
                "--topic",
                &topic,
                "--num-records",
                &records,
                "--payload-file",
                payloads,
                "--throughput",
                "-1",
                "--producer-props",
                &bootstrap,
                "acks=all",
                &codec,
                &batch,
                &linger,
                // Every partition gets records (the sticky default can leave some empty).
                "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
            ],
        );

        let (version, response) = rt.block_on(fetch_all(&client, &topic));
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(1)
            .encode(&mut frame, FetchResponse::header_version(version))
            .unwrap();
        response.encode(&mut frame, version).unwrap();
        let frame = frame.freeze();
        // What the benchmark will read back.
        let decoded = decode_response::<FetchRequest>(frame.clone(), version).unwrap();
        assert_eq!(decoded, response, "{}: re-encoded response", v.name);

        let (mut batches, mut bytes, mut truncated, mut count) = (0, 0, 0, 0i64);
        let mut per_partition = Vec::new();
        for p in decoded.responses.iter().flat_map(|t| &t.partitions) {
            assert_eq!(p.error_code, 0, "{}-{}", topic, p.partition_index);
            let records = p.records.clone().unwrap_or_default();
            let split = split_batches(records.clone()).unwrap();
            assert!(!split.batches.is_empty(), "{topic}-{}", p.partition_index);
            for b in &split.batches {
                b.verify_crc().unwrap();
                assert_eq!(
                    format!("{:?}", b.compression().unwrap()).to_lowercase(),
                    v.codec
                );
                count += i64::from(b.record_count());
            }
            batches += split.batches.len();
            bytes += records.len();
            truncated += split.truncated_bytes;
            per_partition.push(split.batches.len());
        }
        assert_eq!(per_partition.len(), PARTITIONS as usize, "{}", v.name);
        let file = out_dir.join(format!("{}.v{version}.bin", v.name));
        std::fs::write(&file, &frame).unwrap();
        println!(
            "{}: {} bytes, {PARTITIONS} partitions, {batches} batches {per_partition:?}, \
             {count} records, {bytes} records bytes ({truncated} in partial batches)",
            file.strip_prefix(root).unwrap().display(),
            frame.len(),
        );
    }
}

/// One sessionless `read_committed` Fetch of every partition of `topic` from offset 0, at
/// the highest version the broker and strait share.
async fn fetch_all(client: &strait::kafka::Cluster, topic: &str) -> (i16, FetchResponse) {
    let meta = client.metadata(Some(&[topic.to_string()])).await.unwrap();
    let meta = meta.into_iter().find(|t| t.name == topic).unwrap();
    assert_eq!(meta.error_code, 0);
    let leader = meta.partitions[0].leader;
    assert!(meta.partitions.iter().all(|p| p.leader == leader));
    let conn = client.broker(leader).await.unwrap();
    let version = conn.version::<FetchRequest>().unwrap();
    let request = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(64 * 1024 * 1024)
        .with_isolation_level(1)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            // By name up to v12, by topic id from v13 on.
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_topic_id(meta.id)
            .with_partitions(
                meta.partitions
                    .iter()
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p.partition)
                            .with_current_leader_epoch(p.leader_epoch)
                            .with_fetch_offset(0)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(PARTITION_MAX_BYTES)
                    })
                    .collect(),
            )]);
    let response = conn.send(&request).await.unwrap();
    assert_eq!(response.error_code, 0);
    (version, response)
}
