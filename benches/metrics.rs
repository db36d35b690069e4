//! What the metrics cost on the forwarding path: the produce engine counts every batch it
//! fetches and every batch the target acknowledges into the partition's series (whether or
//! not anything scrapes them), and publishes each partition's lag and windows at every
//! progress commit. Measured per batch and per partition, to set beside the per-batch cost
//! of the path itself (`forward`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strait::config::MetricsAggregation;
use strait::kafka::TopicPartition;
use strait::telemetry::{Metrics, PartitionState};

const PARTITIONS: i32 = 64;

fn metrics(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics");
    for aggregation in [MetricsAggregation::Partition, MetricsAggregation::Topic] {
        let metrics = Arc::new(Metrics::new());
        let flow = metrics.flow("source", "target", aggregation);
        let mut parts: Vec<_> = (0..PARTITIONS)
            .map(|p| {
                flow.partition(
                    &TopicPartition::new("orders", p),
                    &TopicPartition::new("source.orders", p),
                )
            })
            .collect();
        let name = format!("{aggregation:?}").to_lowercase();
        group.throughput(Throughput::Elements(u64::from(PARTITIONS as u32)));
        // One batch per partition: fetched, then acknowledged.
        group.bench_function(BenchmarkId::new("batch", &name), |b| {
            let now = Instant::now();
            let mut ms = 1_000_000;
            b.iter(|| {
                ms += 1;
                flow.fetched(PARTITIONS as usize, 5_120 * PARTITIONS as usize);
                for p in &mut parts {
                    p.fetched(black_box(ms - 50), ms, now);
                    p.acked(black_box(5), 5_120, ms - 50, ms + 2, now);
                }
            })
        });
        // A progress commit's publication of every partition.
        group.bench_function(BenchmarkId::new("publish", &name), |b| {
            let now = Instant::now();
            let mut lag = 0;
            b.iter(|| {
                lag = (lag + 7) % 1_000;
                for p in &mut parts {
                    p.publish(
                        Some(black_box(lag)),
                        Some(1_000),
                        PartitionState::Replicating,
                        2_000,
                        now,
                    );
                }
            })
        });
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("scrape", &name), |b| {
            b.iter(|| black_box(metrics.encode().len()))
        });
    }
    group.finish();
}

criterion_group!(benches, metrics);
criterion_main!(benches);
