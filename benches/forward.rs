//! Throughput of strait's forwarding path on real Fetch responses (`testdata/fetch/`, captured
//! from Kafka 4.1.1 by `tests/capture_fetch.rs`: several codecs, small and large batches, 8
//! partitions each), and of the offset map under many gaps.
//!
//! `forward/<file>` is the whole path of one response, through the functions `src/fetch/` and
//! `src/produce/` run it with: decode the frame (`codec::decode_response`), the fetch
//! session's decision for every partition (split into batches, verify their CRC32C, drop
//! aborted transactions), stamp strait's producer identity into each batch (header copy +
//! new CRC), and encode the Produce requests, one batch per partition per request. Throughput
//! is the bytes of the partitions' `records` (as stored, so compressed for the compressed
//! files); one core (the benchmark runs on one thread). `decode/<file>` and
//! `decode+split+verify/<file>` are its first steps alone, to show where the time goes.
//!
//! `coalesce/<file>` merges each partition's batches of the small-batch capture into batches
//! of up to 256 KiB (`produce.coalesce.bytes = 262144`), re-framing their records: the cost
//! of the opt-in path for sources written in tiny batches, per byte of records.
//!
//! `offset_map/*` records 100 000 forwarded batches into a fresh `OffsetMap`: contiguous, with
//! a gap after every batch (aborted transactions, transaction markers), and with holes inside
//! every batch (compaction).
//!
//! Quick run: `cargo bench --bench forward -- --warm-up-time 1 --measurement-time 3`.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest};
use kafka_protocol::protocol::Message;
use strait::batch::{coalesce as merge, ProducerStamp, RawBatch};
use strait::fetch::response::{partition_action, Action};
use strait::kafka::codec::decode_response;
use strait::kafka::produce_request::{self, TopicData};
use strait::kafka::TopicPartition;
use strait::offset_map::{Forwarded, OffsetMap};
use strait::produce::next_sequence;

/// One captured response: `testdata/fetch/<name>.v<version>.bin`.
struct Capture {
    name: String,
    version: i16,
    frame: Bytes,
    /// Total length of the partitions' `records`.
    records_bytes: u64,
}

fn captures() -> Vec<Capture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/fetch");
    let mut out: Vec<Capture> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let file = path
                .file_name()?
                .to_str()?
                .strip_suffix(".bin")?
                .to_string();
            let (name, version) = file.rsplit_once(".v")?;
            let version: i16 = version.parse().ok()?;
            let frame = Bytes::from(std::fs::read(&path).unwrap());
            let response = decode_response::<FetchRequest>(frame.clone(), version)
                .unwrap_or_else(|e| panic!("decoding {}: {e}", path.display()));
            let records_bytes = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64))
                .sum();
            Some(Capture {
                name: name.to_string(),
                version,
                frame,
                records_bytes,
            })
        })
        .collect();
    assert!(
        !out.is_empty(),
        "no captured responses in {}",
        dir.display()
    );
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The verified batches of every partition: `(topic name, topic id, partition, batches)`.
type Partitions = Vec<(Arc<str>, uuid::Uuid, i32, Vec<RawBatch>)>;

/// What a fetch session does with a response: every partition through the session's own
/// decision (`fetch::response::partition_action`: split, CRC check, aborted-transaction
/// filter, renumbering of compacted batches), from offset 0.
fn split_and_verify(response: FetchResponse) -> Partitions {
    let mut out = Vec::new();
    for topic in response.responses {
        let name: Arc<str> = Arc::from(topic.topic.0.as_str());
        for p in topic.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let Action::Deliver(delivery) = partition_action(&tp, 0, p) else {
                panic!("{tp}: the capture should deliver batches");
            };
            let batches = delivery.batches.into_iter().map(|f| f.batch).collect();
            out.push((name.clone(), topic.topic_id, tp.partition, batches));
        }
    }
    out
}

/// The produce side: stamp every batch and encode Produce requests with the engine's
/// functions, one batch per partition per request (the `k`-th request carries the `k`-th
/// batch of every partition that has one), all partitions in one request. Returns the bytes
/// of the request bodies.
fn produce(partitions: Partitions, version: i16) -> usize {
    let mut queues: Vec<_> = partitions
        .into_iter()
        .map(|(name, id, partition, batches)| (name, id, partition, 0i32, batches.into_iter()))
        .collect();
    let mut sent = 0;
    loop {
        let mut topics: Vec<TopicData> = Vec::new();
        let mut index = HashMap::new();
        for (name, id, partition, sequence, batches) in &mut queues {
            let Some(batch) = batches.next() else {
                continue;
            };
            let stamped = batch.stamp(&ProducerStamp {
                producer_id: 4_242,
                producer_epoch: 0,
                base_sequence: *sequence,
                transactional: false,
            });
            *sequence = next_sequence(*sequence, batch.record_count());
            TopicData::push(&mut topics, &mut index, name, || *id, *partition, stamped);
        }
        if topics.is_empty() {
            return sent;
        }
        let frame = produce_request::encode(version, None, -1, 30_000, &topics);
        sent += frame.remaining();
        black_box(frame);
    }
}

fn forward(c: &mut Criterion) {
    let produce_version = ProduceRequest::VERSIONS.max;
    let mut group = c.benchmark_group("forward");
    for capture in captures() {
        let id = format!("{}.v{}", capture.name, capture.version);
        // Every records byte goes into the Produce requests, plus their small fields.
        let response = decode_response::<FetchRequest>(capture.frame.clone(), capture.version);
        let sent = produce(split_and_verify(response.unwrap()), produce_version) as u64;
        assert!(sent > capture.records_bytes && sent < capture.records_bytes * 101 / 100);
        group.throughput(Throughput::Bytes(capture.records_bytes));
        group.bench_with_input(BenchmarkId::new("decode", &id), &capture, |b, cap| {
            b.iter(|| decode_response::<FetchRequest>(black_box(cap.frame.clone()), cap.version))
        });
        group.bench_with_input(
            BenchmarkId::new("decode+split+verify", &id),
            &capture,
            |b, cap| {
                b.iter(|| {
                    let response =
                        decode_response::<FetchRequest>(black_box(cap.frame.clone()), cap.version)
                            .unwrap();
                    split_and_verify(response)
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("forward", &id), &capture, |b, cap| {
            b.iter(|| {
                let response =
                    decode_response::<FetchRequest>(black_box(cap.frame.clone()), cap.version)
                        .unwrap();
                produce(split_and_verify(response), produce_version)
            })
        });
    }
    group.finish();
}

/// Merges consecutive batches of each partition into batches of up to `limit` bytes, as the
/// produce engine does with `produce.coalesce.bytes`. Returns the merged batches' bytes.
fn coalesced(partitions: &Partitions, limit: usize) -> usize {
    let mut out = 0;
    for (_, _, _, batches) in partitions {
        let mut start = 0;
        while start < batches.len() {
            let mut end = start + 1;
            let mut size = batches[start].len();
            while end < batches.len()
                && size + batches[end].len() <= limit
                && batches[end].can_follow(&batches[end - 1])
            {
                size += batches[end].len();
                end += 1;
            }
            out += merge(&batches[start], &batches[start + 1..end])
                .unwrap()
                .len();
            start = end;
        }
    }
    out
}

fn coalesce(c: &mut Criterion) {
    let mut group = c.benchmark_group("coalesce");
    for capture in captures().into_iter().filter(|c| c.name == "none-small") {
        let id = format!("{}.v{}", capture.name, capture.version);
        let response = decode_response::<FetchRequest>(capture.frame.clone(), capture.version);
        let partitions = split_and_verify(response.unwrap());
        let merged = coalesced(&partitions, 262_144);
        // Merging drops the headers of all but the first batch of each merge.
        let records = capture.records_bytes as usize;
        assert!(merged < records && merged > records * 9 / 10);
        group.throughput(Throughput::Bytes(capture.records_bytes));
        group.bench_with_input(BenchmarkId::new("256KiB", &id), &partitions, |b, parts| {
            b.iter(|| coalesced(black_box(parts), 262_144))
        });
    }
    group.finish();
}

const BATCHES: i64 = 100_000;
const RECORDS: i64 = 10;

/// `BATCHES` batches of `RECORDS` records each, appended back to back on the target.
/// `gap`: source offsets between consecutive batches. `holes`: every other record of each
/// batch was compacted away (the batch keeps its offset span, half its records).
fn batches(gap: i64, holes: bool) -> Vec<Forwarded> {
    let span = if holes { 2 * RECORDS } else { RECORDS };
    (0..BATCHES)
        .map(|i| {
            let source_base = i * (span + gap);
            Forwarded {
                source_base,
                source_last: source_base + span - 1,
                record_count: RECORDS as i32,
                target_base: i * RECORDS,
                holes: holes.then(|| (0..RECORDS as i32).map(|d| 2 * d).collect()),
            }
        })
        .collect()
}

fn offset_map(c: &mut Criterion) {
    let mut group = c.benchmark_group("offset_map");
    group.throughput(Throughput::Elements(BATCHES as u64));
    for (name, gap, holes) in [
        ("contiguous", 0, false),
        ("gap_after_every_batch", 2, false),
        ("holes_in_every_batch", 0, true),
    ] {
        let input = batches(gap, holes);
        let mut map = OffsetMap::new();
        let syncs: usize = input.iter().map(|f| map.record(f).len()).sum();
        println!("offset_map/{name}: {} points, {syncs} syncs", map.len());
        group.bench_with_input(BenchmarkId::new("record", name), &input, |b, input| {
            b.iter(|| {
                let mut map = OffsetMap::new();
                let mut syncs = 0;
                for f in input {
                    syncs += map.record(black_box(f)).len();
                }
                (map.len(), syncs)
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = forward, coalesce, offset_map
}
criterion_main!(benches);
