//! The limits no replicator can beat, for the end-to-end benchmark (`scripts/bench.sh`): each
//! side of a replication alone, measured with strait's own engines on the same brokers.
//!
//! - **fetch only**: strait's fetch engine reads a source topic from its log start to its last
//!   stable offset, every batch split and its CRC32C checked as when replicating, into memory
//!   and nowhere else. No produce side competes for the machine.
//! - **produce only**: the batches read, held in memory, are then written by strait's produce
//!   engine (idempotent, `acks=all`, its pipelining) into a fresh topic on the target, with
//!   nothing fetched meanwhile.
//!
//! - **both at once** (the machine limit): a fetch pass that drops what it reads while the
//!   batches of another (untimed) are written into a second fresh topic: what the machine
//!   does when both brokers and both engines share it, as a replicator's do.
//!
//! A replicator does both at once on the same machine, so its catch-up cannot exceed the
//! slower of the two alone, nor the slower of the two at once; unlike the Java clients' perf
//! tools, neither side here is slower than strait's own.
//!
//! ```text
//! cargo bench --bench limits -- --source 127.0.0.1:9092 --topic bench-none \
//!     --target 127.0.0.1:9093 --to limit-none-1 [--in-flight 5] [--connections 2]
//! ```
//!
//! prints one JSON line: `{"records":..,"bytes":..,"batches":..,"fetch_s":..,"produce_s":..,
//! "both_fetch_s":..,"both_produce_s":..}` (`bytes`: the record batches as stored, so
//! compressed for a compressed topic; `produce_s`: the time for all records at the rate the
//! target acknowledged them once it started to, as the replicators' catch-up is timed from
//! the first record on the target; `both_*`: each side's time in the pass of both at once).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use strait::config::defaults;
use strait::config::OffsetReset;
use strait::fetch::{FetchConfig, FetchEvent, Fetcher};
use strait::kafka::admin::{create_topics, TopicSpec};
use strait::kafka::cluster::Cluster;
use strait::kafka::log_reader::end_offsets;
use strait::kafka::TopicPartition;
use strait::mm2::offset_sync;
use strait::offset_map::{Lineage, Translations};
use strait::produce::{Command, Engine, ProduceConfig, Route, Stats};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The allocator the strait binary runs with.
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[derive(Parser)]
struct Args {
    /// Bootstrap address of the source cluster.
    #[arg(long)]
    source: String,
    /// The source topic, read from its log start to its end.
    #[arg(long)]
    topic: String,
    /// Bootstrap address of the target cluster.
    #[arg(long)]
    target: String,
    /// A topic that does not exist yet on the target: created with the source topic's
    /// partition count, and written.
    #[arg(long)]
    to: String,
    /// Unacknowledged batches per partition (strait's `produce.max.in.flight`; 5 is what
    /// strait takes to a near broker when the key is unset).
    #[arg(long, default_value_t = 5)]
    in_flight: usize,
    /// Connections per target broker (strait's `produce.connections.per.broker`).
    #[arg(long, default_value_t = defaults::PRODUCE_CONNECTIONS_PER_BROKER)]
    connections: usize,
    /// Added by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// What a fetch pass read (its batches only if it kept them).
struct Read {
    events: Vec<FetchEvent>,
    records: u64,
    batches: u64,
    bytes: u64,
    seconds: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // As the strait binary runs.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

fn cluster(alias: &str, address: &str) -> Cluster {
    Cluster::new(
        alias,
        vec![address.to_string()],
        defaults::CLIENT_ID,
        Duration::from_millis(defaults::REQUEST_TIMEOUT_MS),
    )
    .with_send_buffer(Some(defaults::SEND_BUFFER_BYTES as u32))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let source = cluster("source", &args.source);
    let target = Arc::new(cluster("target", &args.target));
    let meta = source
        .metadata(Some(std::slice::from_ref(&args.topic)))
        .await?
        .into_iter()
        .find(|t| t.name == args.topic && t.error_code == 0)
        .with_context(|| format!("no topic {} on {}", args.topic, args.source))?;
    let ends: HashMap<TopicPartition, i64> = end_offsets(&source, |t| t == args.topic)
        .await?
        .into_iter()
        .map(|(tp, end)| {
            end.map(|e| (tp, e))
                .with_context(|| "a leader did not answer")
        })
        .collect::<anyhow::Result<_>>()?;
    let (read, fetcher) = fetch_all(&source, &ends, true).await?;
    let both = format!("{}-both", args.to);
    let specs: Vec<TopicSpec> = [&args.to, &both]
        .into_iter()
        .flat_map(|to| {
            [
                TopicSpec {
                    name: to.clone(),
                    partitions: meta.partitions.len() as i32,
                    replication_factor: -1,
                    configs: Vec::new(),
                },
                TopicSpec {
                    name: format!("{to}-progress"),
                    partitions: 1,
                    replication_factor: -1,
                    configs: vec![("cleanup.policy".into(), "compact".into())],
                },
            ]
        })
        .collect();
    let created = create_topics(&target, &specs.iter().collect::<Vec<_>>()).await?;
    if let Some((topic, error)) = created.refused.first() {
        bail!("CreateTopics {topic} on {}: {error}", args.target);
    }
    let lineage = Lineage {
        topic_id: meta.id,
        leader_epoch: -1,
        taken_over_at: -1,
    };
    let routes = |to: &str| -> Vec<Route> {
        ends.keys()
            .map(|tp| Route {
                source: tp.clone(),
                target: TopicPartition::new(to, tp.partition),
                resume: None,
                slot: 0,
                lineage,
                new_log: false,
                origin: None,
            })
            .collect()
    };
    let window = (args.in_flight, args.connections);
    let (records, batches, bytes, fetch_s) = (read.records, read.batches, read.bytes, read.seconds);
    let produce_s = produce_all(
        target.clone(),
        &args.to,
        fetcher,
        window,
        routes(&args.to),
        (read.events, records),
    )
    .await?;
    // Both at once: another read's batches written while the source is read into nothing.
    let (again, fetcher) = fetch_all(&source, &ends, true).await?;
    let (written, dropped) = tokio::join!(
        produce_all(
            target,
            &both,
            fetcher,
            window,
            routes(&both),
            (again.events, records)
        ),
        fetch_all(&source, &ends, false),
    );
    let both_produce_s = written?;
    let both_fetch_s = dropped?.0.seconds;
    println!(
        "{{\"records\":{records},\"bytes\":{bytes},\"batches\":{batches},\"fetch_s\":{fetch_s:.3},\"produce_s\":{produce_s:.3},\"both_fetch_s\":{both_fetch_s:.3},\"both_produce_s\":{both_produce_s:.3}}}"
    );
    Ok(())
}

/// Reads every partition of `ends` from its log start to its end offset, and keeps what came
/// if `keep` (else drops it once counted); the fetcher is stopped by then (the produce
/// engine wants its handle).
async fn fetch_all(
    source: &Cluster,
    ends: &HashMap<TopicPartition, i64>,
    keep: bool,
) -> anyhow::Result<(Read, Fetcher)> {
    let (events_tx, mut events_rx) = mpsc::channel(1024);
    let shutdown = CancellationToken::new();
    let (fetcher, task) = Fetcher::spawn(
        source,
        FetchConfig {
            max_wait_ms: defaults::FETCH_MAX_WAIT_MS,
            max_bytes: defaults::FETCH_MAX_BYTES,
            partition_max_bytes: defaults::FETCH_PARTITION_MAX_BYTES,
            offset_reset: OffsetReset::Earliest,
            // No bound: a pass that keeps what it reads holds all of it until it is written.
            buffer_bytes: 1 << 40,
        },
        events_tx,
        shutdown.clone(),
    );
    let mut pending: HashMap<&TopicPartition, i64> = ends
        .iter()
        .filter(|(_, &end)| end > 0)
        .map(|(tp, &end)| (tp, end))
        .collect();
    let started = Instant::now();
    for tp in pending.keys() {
        fetcher.assign((*tp).clone(), None, None, 0);
    }
    let mut read = Read {
        events: Vec::new(),
        records: 0,
        batches: 0,
        bytes: 0,
        seconds: 0.0,
    };
    while !pending.is_empty() {
        let event = tokio::time::timeout(Duration::from_secs(60), events_rx.recv())
            .await
            .context("nothing fetched for 60 s")?
            .context("the fetcher stopped")?;
        let chunk = match &event {
            FetchEvent::Chunk(chunk) => chunk,
            FetchEvent::Stopped { tp, error } => bail!("fetching {tp} stopped: {error}"),
        };
        for f in &chunk.batches {
            read.batches += 1;
            read.records += u64::try_from(f.batch.record_count()).unwrap_or(0);
            read.bytes += f.batch.len() as u64;
        }
        if pending
            .get(&chunk.tp)
            .is_some_and(|&end| chunk.next_offset >= end)
        {
            pending.remove(&chunk.tp);
        }
        if keep {
            read.events.push(event);
        }
    }
    read.seconds = started.elapsed().as_secs_f64();
    shutdown.cancel();
    let _ = task.await;
    Ok((read, fetcher))
}

/// Writes `events` (`records` records in all) along `routes` into topic `to` with strait's
/// produce engine at `(in_flight, connections)` (its progress in topic `<to>-progress`;
/// `fetcher`, stopped, is only asked to pause partitions, which none are): the seconds the
/// target took to acknowledge them all at the rate it acknowledged them once it started to.
async fn produce_all(
    target: Arc<Cluster>,
    to: &str,
    fetcher: Fetcher,
    (in_flight, connections): (usize, usize),
    routes: Vec<Route>,
    (events, records): (Vec<FetchEvent>, u64),
) -> anyhow::Result<f64> {
    let progress = format!("{to}-progress");
    let config = ProduceConfig {
        max_in_flight: Some(in_flight),
        max_request_bytes: defaults::PRODUCE_MAX_REQUEST_BYTES,
        // The engine reports its counts at each commit: often, to see the end promptly.
        commit_interval: Duration::from_millis(100),
        drain_timeout: Duration::from_millis(defaults::SHUTDOWN_DRAIN_TIMEOUT_MS),
        delivery_timeout: Duration::from_millis(defaults::PRODUCE_DELIVERY_TIMEOUT_MS),
        coalesce_bytes: 0,
        connections,
        transactional_id: None,
        exactly_once: false,
    };
    let (syncs, _syncs_rx) = offset_sync::queue();
    let engine = Engine::new(
        target,
        config,
        &progress,
        Translations::default(),
        syncs,
        fetcher,
    )
    .await?;
    let (commands, commands_rx) = mpsc::unbounded_channel();
    for route in routes {
        let _ = commands.send(Command::Route(route));
    }
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (stats_tx, mut stats) = watch::channel(Stats::default());
    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(engine.run(events_rx, commands_rx, stats_tx, shutdown.clone()));
    tokio::spawn(async move {
        for event in events {
            if events_tx.send(event).await.is_err() {
                break;
            }
        }
    });
    // Timed from the first acknowledgement seen, as the replicators' catch-up is from the
    // first record on the target: the fresh topic's leaders settling is start-up, not rate.
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let acked = stats.borrow_and_update().records;
        if acked > 0 && first.is_none() {
            first = Some((Instant::now(), acked));
        }
        if acked >= records {
            break;
        }
        tokio::time::timeout(Duration::from_secs(60), stats.changed())
            .await
            .context("the target acknowledged nothing for 60 s")?
            .context("the produce engine stopped")?;
    }
    let (since, before) = first.unwrap_or((Instant::now(), 0));
    let seconds = since.elapsed().as_secs_f64();
    shutdown.cancel();
    let last = engine.await?.context("the produce engine")?;
    if last.stopped > 0 {
        bail!("{} target partitions stopped", last.stopped);
    }
    // The rate of the records acknowledged after the first report, over the whole count.
    Ok(seconds * records as f64 / records.saturating_sub(before).max(1) as f64)
}
