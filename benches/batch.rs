//! Throughput of the per-batch work on the forwarding path: split a partition's `records`
//! into batches, verify the CRC32C, rewrite the producer identity (copy + CRC).
//!
//! Batches hold one record whose value is random bytes, so the records are opaque and
//! incompressible, as a compressed production batch would be.

use bytes::Bytes;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strait::batch::{encode_batch, split_batches, OwnRecord, ProducerStamp, RawBatch};

const STAMP: ProducerStamp = ProducerStamp {
    producer_id: 31_337,
    producer_epoch: 2,
    base_sequence: 1_000,
    transactional: false,
};

/// Deterministic random bytes (xorshift64*), so runs compare.
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A valid batch of exactly `size` bytes: header plus one record of random value bytes.
fn batch_of(size: usize, seed: u64) -> Bytes {
    let encode = |value_len: usize| {
        let value = random_bytes(value_len, seed);
        encode_batch(
            &[OwnRecord {
                key: None,
                value: Some(&value),
                timestamp: 1_700_000_000_000,
            }],
            &ProducerStamp::NONE,
        )
    };
    let mut value_len = size - 100;
    // The record's varint lengths grow with the value: converge on the exact size.
    loop {
        let b = encode(value_len);
        if b.len() == size {
            return b;
        }
        value_len = value_len + size - b.len();
    }
}

fn label(size: usize) -> String {
    if size >= 1 << 20 {
        format!("{}MiB", size >> 20)
    } else {
        format!("{}KiB", size >> 10)
    }
}

fn single_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch");
    for size in [1 << 10, 16 << 10, 1 << 20] {
        let bytes = batch_of(size, 0x5eed + size as u64);
        let batch = RawBatch::new(bytes.clone()).unwrap();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(
            BenchmarkId::new("split+verify+rewrite", label(size)),
            &bytes,
            |b, bytes| {
                b.iter(|| {
                    let split = split_batches(black_box(bytes.clone())).unwrap();
                    let mut out = Vec::with_capacity(split.batches.len());
                    for batch in &split.batches {
                        batch.verify_crc().unwrap();
                        out.push(batch.stamp(&STAMP));
                    }
                    out
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("verify_crc", label(size)),
            &batch,
            |b, batch| b.iter(|| black_box(batch).verify_crc().unwrap()),
        );
        group.bench_with_input(
            BenchmarkId::new("rewrite", label(size)),
            &batch,
            |b, batch| b.iter(|| black_box(batch).stamp(&STAMP)),
        );
    }
    group.finish();
}

fn fetch_buffer(c: &mut Criterion) {
    // A 4 MiB fetch response partition: 256 batches of 16 KiB at consecutive offsets.
    const BATCH: usize = 16 << 10;
    const FETCH: usize = 4 << 20;
    let mut buf = Vec::with_capacity(FETCH);
    for i in 0..FETCH / BATCH {
        let mut b = batch_of(BATCH, i as u64 + 1).to_vec();
        b[..8].copy_from_slice(&(i as i64).to_be_bytes()); // baseOffset is outside the CRC
        buf.extend_from_slice(&b);
    }
    let buf = Bytes::from(buf);
    assert_eq!(
        split_batches(buf.clone()).unwrap().batches.len(),
        FETCH / BATCH
    );

    let mut group = c.benchmark_group("fetch_4MiB_of_16KiB_batches");
    group.throughput(Throughput::Bytes(FETCH as u64));
    group.bench_function("split_batches", |b| {
        b.iter(|| split_batches(black_box(buf.clone())).unwrap())
    });
    group.bench_function("split+verify+rewrite", |b| {
        b.iter(|| {
            let split = split_batches(black_box(buf.clone())).unwrap();
            split
                .batches
                .iter()
                .map(|batch| {
                    batch.verify_crc().unwrap();
                    batch.stamp(&STAMP)
                })
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group!(benches, single_batch, fetch_buffer);
criterion_main!(benches);
