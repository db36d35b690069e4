//! The `strait` command line: the only place that maps errors to exit codes (0 success,
//! 1 replication failure, 2 configuration error, 128 + the signal's number when a second
//! SIGTERM/SIGINT cuts the drain short). Topology lives in the config file; runtime knobs
//! (log format and level) are flags.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

/// musl's allocator hands freed memory back to the kernel eagerly: the buffers TLS
/// allocates per record then cost a page fault each time. dlmalloc (pure Rust) keeps them.
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[derive(Parser)]
#[command(
    name = "strait",
    version,
    about = "Replicates Kafka topics between clusters, byte for byte (a MirrorMaker 2 replacement)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log filter (tracing `EnvFilter` syntax), over the config file's `log.level` (which
    /// a SIGHUP then leaves alone); `STRAIT_LOG` overrides both.
    #[arg(long, global = true)]
    log_level: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Replicate as the config file says (`mm2.properties` or `strait.toml`) until SIGTERM/SIGINT.
    Run {
        config: PathBuf,
        /// Serve `/metrics` (Prometheus), `/healthz` and `/readyz` over HTTP on this
        /// address (such as `0.0.0.0:9404`), over the file's `metrics.listen`; off unless
        /// either is set.
        #[arg(long, value_name = "ADDR:PORT")]
        metrics_listen: Option<std::net::SocketAddr>,
        /// Drive only the flows that write to these clusters, as MM2's
        /// `connect-mirror-maker.sh mm2.properties --clusters A B` (one process per data
        /// centre, each for the flows into it).
        #[arg(long, num_args = 1.., value_name = "ALIAS")]
        clusters: Vec<String>,
        /// Where MirrorMaker 2 still runs a flow, wait for it to stop and take the flow over
        /// (`takeover.wait = true` for every flow), instead of refusing to start.
        #[arg(long)]
        takeover: bool,
    },
    /// Write strait's committed positions into MirrorMaker 2's offsets topic on each flow's
    /// target, so that MM2 started on the same file resumes where strait stopped (stop
    /// strait first).
    Handback {
        config: PathBuf,
        /// Only the flows that write to these clusters (as `run --clusters`).
        #[arg(long, num_args = 1.., value_name = "ALIAS")]
        clusters: Vec<String>,
    },
    /// Validate the config file and reach every cluster it names.
    Check { config: PathBuf },
    /// Per flow and partition: the source end offset, the committed position, the lag (read
    /// from the clusters; no running instance needed).
    Status {
        config: PathBuf,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Where a consumer group resumes on the target, from the flows' latest checkpoints
    /// (what MM2's RemoteClusterUtils.translateOffsets returns).
    TranslateOffsets {
        config: PathBuf,
        /// The consumer group.
        #[arg(long)]
        group: String,
        /// Only this topic (its source or remote name).
        #[arg(long)]
        topic: Option<String>,
        /// JSON instead of a table.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// `topic,partition,offset` lines, as `kafka-consumer-groups --reset-offsets
        /// --from-file` reads them.
        #[arg(long)]
        csv: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The runtime of `runtime.threads` threads: one runs every task on the calling thread.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let fixed = std::env::var("STRAIT_LOG").ok().or(cli.log_level.clone());
    let log = Log::init(cli.log_format, fixed);
    let path = match &cli.command {
        Command::Run { config, .. }
        | Command::Handback { config, .. }
        | Command::Check { config }
        | Command::Status { config, .. }
        | Command::TranslateOffsets { config, .. } => config.clone(),
    };
    let overrides = match &cli.command {
        Command::Run {
            clusters, takeover, ..
        } => Overrides {
            targets: clusters.clone(),
            takeover: *takeover,
        },
        Command::Handback { clusters, .. } => Overrides {
            targets: clusters.clone(),
            takeover: false,
        },
        _ => Overrides::default(),
    };
    // `load` logs each warning itself, for `run` and `check` alike.
    let config = match load(&path, &overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("strait: {e}");
            return ExitCode::from(2);
        }
    };
    log.follow(&config.log_level);
    let runtime = match runtime(config.runtime_threads) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strait: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = match cli.command {
        Command::Run { metrics_listen, .. } => {
            runtime.block_on(run(config, &path, &overrides, metrics_listen, &log))
        }
        Command::Handback { .. } => runtime.block_on(hand_back(config)),
        Command::Check { .. } => runtime.block_on(check(config)),
        Command::Status { json, .. } => runtime.block_on(status(config, json)),
        Command::TranslateOffsets {
            group,
            topic,
            json,
            csv,
            ..
        } => runtime.block_on(translate_offsets(
            config,
            &group,
            topic.as_deref(),
            json,
            csv,
        )),
    };
    // A task still hanging (the shutdown deadline passed) must not hold the exit.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strait: {}", message(&e));
            ExitCode::from(1)
        }
    }
}

/// The log: its filter comes from `STRAIT_LOG` or `--log-level` when given ("fixed"), else
/// from the config file's `log.level`, which a SIGHUP re-reads.
struct Log {
    filter: tracing_subscriber::reload::Handle<
        tracing_subscriber::EnvFilter,
        tracing_subscriber::Registry,
    >,
    fixed: bool,
}

impl Log {
    /// Starts logging to standard error in `format`, at `fixed` or at `info` until the
    /// config file is read.
    fn init(format: LogFormat, fixed: Option<String>) -> Log {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = fixed.as_deref().unwrap_or("info");
        let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|e| {
            eprintln!("strait: log filter `{filter}`: {e}; logging at info");
            tracing_subscriber::EnvFilter::new("info")
        });
        let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
        let fmt = tracing_subscriber::fmt::layer()
            // Colours for a person at a terminal, never escape codes in a log file or journal.
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr);
        let registry = tracing_subscriber::registry().with(filter);
        match format {
            LogFormat::Text => registry.with(fmt).init(),
            LogFormat::Json => registry.with(fmt.json()).init(),
        }
        Log {
            filter: handle,
            fixed: fixed.is_some(),
        }
    }

    /// Logs at `level` (a config file's `log.level`, checked when loaded) unless the filter
    /// is fixed. Returns whether the filter changed.
    fn follow(&self, level: &str) -> bool {
        if self.fixed {
            return false;
        }
        let Ok(filter) = tracing_subscriber::EnvFilter::try_new(level) else {
            return false;
        };
        let unchanged = self
            .filter
            .with_current(|f| f.to_string() == filter.to_string())
            .unwrap_or(true);
        !unchanged && self.filter.reload(filter).is_ok()
    }
}

/// The error and its causes, each once: a cause whose text its context already quotes
/// (`flow a->b: <cause>`) or that repeats its context (`cluster a` then `cluster a: ...`)
/// is not printed twice.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain().map(ToString::to_string) {
        if out.contains(&cause) {
            continue;
        }
        if cause.starts_with(&out) {
            out = cause;
        } else {
            out = format!("{out}: {cause}");
        }
    }
    out
}

/// The config file's flows into `targets` (`--clusters`; all of them when empty). `load`
/// logs each warning itself.
/// What the command line changes in the config file, at start-up and at each SIGHUP.
#[derive(Default)]
struct Overrides {
    /// `--clusters`: only the flows writing to these (all when empty).
    targets: Vec<String>,
    /// `--takeover`: `takeover.wait` for every flow.
    takeover: bool,
}

fn load(path: &std::path::Path, overrides: &Overrides) -> Result<strait::config::Config, String> {
    let (config, _warnings) = strait::config::load(path).map_err(|e| e.to_string())?;
    let mut config = config.writing_to(&overrides.targets)?;
    if overrides.takeover {
        for flow in &mut config.flows {
            flow.takeover.wait = true;
        }
    }
    Ok(config)
}

/// Room the shutdown gives the tasks around the drain (stopping the fetcher and the MM2
/// tasks, writing the last offset syncs) on top of `shutdown.drain.timeout.ms`.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(10);

/// Replicates until a first SIGTERM/SIGINT (or a failed flow) starts the drain. A second
/// signal exits at once; a drain still running at the deadline is cut short.
async fn run(
    config: strait::config::Config,
    path: &std::path::Path,
    overrides: &Overrides,
    metrics_listen: Option<std::net::SocketAddr>,
    log: &Log,
) -> anyhow::Result<()> {
    let mut signals = Signals::new()?;
    let drain = config
        .flows
        .iter()
        .map(|f| Duration::from_millis(f.shutdown_drain_timeout_ms))
        .max()
        .unwrap_or_default();
    let deadline = drain + SHUTDOWN_MARGIN;
    let shutdown = CancellationToken::new();
    let telemetry = std::sync::Arc::new(strait::telemetry::Telemetry::default());
    if let Some(addr) = metrics_listen.or(config.metrics_listen) {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("metrics listener on {addr}: {e}"))?;
        tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
        tokio::spawn(strait::telemetry::serve(
            listener,
            telemetry.clone(),
            shutdown.child_token(),
        ));
    }
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| anyhow::anyhow!("cannot listen for SIGHUP: {e}"))?;
    let (updates, updates_rx) = tokio::sync::watch::channel(config.clone());
    let flows = strait::flow::run(config, telemetry, updates_rx, shutdown.clone());
    tokio::pin!(flows);
    loop {
        tokio::select! {
            done = &mut flows => return Ok(done?),
            // A flow failed: the others are draining.
            _ = shutdown.cancelled() => break,
            _ = hangups.recv() => reload(path, overrides, &updates, log),
            signal = signals.recv() => {
                tracing::info!(%signal, "shutting down: draining in-flight batches and committing progress (a second signal exits at once)");
                shutdown.cancel();
                break;
            }
        }
    }
    tokio::select! {
        done = &mut flows => Ok(done?),
        signal = signals.recv() => {
            let code = signal.exit_code();
            tracing::warn!(%signal, exit_code = code, "second signal: exiting at once without draining; what was not committed is replicated again at the next start");
            std::process::exit(code);
        }
        _ = tokio::time::sleep(deadline) => Err(anyhow::anyhow!(
            "shutdown did not finish within {} ms (shutdown.drain.timeout.ms + {} s); exiting without completing it",
            deadline.as_millis(),
            SHUTDOWN_MARGIN.as_secs()
        )),
    }
}

/// SIGHUP: reads the config file again. The settings that change live go to the flows;
/// the others are named, for the next restart. A file that does not load is rejected with
/// its error, and the running config stays.
fn reload(
    path: &std::path::Path,
    overrides: &Overrides,
    updates: &tokio::sync::watch::Sender<strait::config::Config>,
    log: &Log,
) {
    tracing::info!(path = %path.display(), "SIGHUP: reloading the config file");
    match load(path, overrides) {
        Err(e) => tracing::error!(error = %e, "config reload rejected; the running config stays"),
        Ok(new) => {
            if log.follow(&new.log_level) {
                tracing::info!(log_level = %new.log_level, "config reload: log level changed");
            } else if log.fixed && new.log_level != updates.borrow().log_level {
                tracing::warn!(log_level = %new.log_level, "config reload: log.level ignored: --log-level or STRAIT_LOG sets the log filter");
            }
            for change in strait::flow::restart_only_changes(&updates.borrow(), &new) {
                tracing::warn!(%change, "config reload: this change takes effect at the next restart");
            }
            updates.send_replace(new);
        }
    }
}

/// SIGTERM and SIGINT, as they arrive.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

/// Which of the two arrived.
#[derive(Clone, Copy)]
enum Signal {
    Term,
    Int,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind| {
            signal(kind).map_err(|e| anyhow::anyhow!("cannot listen for SIGTERM/SIGINT: {e}"))
        };
        Ok(Signals {
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::Term,
            _ = self.int.recv() => Signal::Int,
        }
    }
}

impl Signal {
    /// The shell's convention for a process ended by a signal: 128 + its number.
    fn exit_code(self) -> i32 {
        match self {
            Signal::Term => 128 + 15,
            Signal::Int => 128 + 2,
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
        })
    }
}

async fn status(config: strait::config::Config, json: bool) -> anyhow::Result<()> {
    let flows = strait::inspect::status(&config).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&flows)?);
        return Ok(());
    }
    let or_dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for flow in flows {
        let ago = flow.last_commit_age_ms.map_or("never".to_string(), |ms| {
            format!("{:.1} s ago", ms as f64 / 1000.0)
        });
        let lag: i64 = flow.partitions.iter().filter_map(|p| p.lag).sum();
        let heartbeat = flow
            .last_heartbeat_age_ms
            .map_or("no heartbeat".to_string(), |ms| {
                format!("last heartbeat {:.1} s ago", ms as f64 / 1000.0)
            });
        let running = match flow.running {
            Some(true) => format!("running ({heartbeat})"),
            Some(false) => format!("not running ({heartbeat})"),
            None => "running: unknown (no heartbeats emitted)".to_string(),
        };
        println!(
            "flow {}: {running}, last commit {ago}, lag {lag}",
            flow.flow
        );
        let rows: Vec<Vec<String>> = flow
            .partitions
            .iter()
            .map(|p| {
                vec![
                    p.topic.clone(),
                    p.partition.to_string(),
                    p.remote_topic.clone(),
                    or_dash(p.source_end),
                    or_dash(p.committed),
                    or_dash(p.target_committed),
                    or_dash(p.lag),
                    match (p.origin, p.taken_over_at) {
                        (Some("mirrormaker2"), _) => "mm2".to_string(),
                        (Some(o), Some(at)) => format!("{o} from {at} (mm2 before)"),
                        (Some(o), None) => o.to_string(),
                        (None, _) => "-".to_string(),
                    },
                ]
            })
            .collect();
        let header = [
            "TOPIC",
            "PARTITION",
            "REMOTE TOPIC",
            "SOURCE END",
            "COMMITTED",
            "TARGET OFFSET",
            "LAG",
            "ORIGIN",
        ];
        print!("{}", strait::inspect::table(&header, &rows));
    }
    Ok(())
}

async fn translate_offsets(
    config: strait::config::Config,
    group: &str,
    topic: Option<&str>,
    json: bool,
    csv: bool,
) -> anyhow::Result<()> {
    let offsets = strait::inspect::translate_offsets(&config, group, topic).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&offsets)?);
    } else if csv {
        for o in &offsets {
            println!("{},{},{}", o.topic, o.partition, o.offset);
        }
    } else {
        let rows: Vec<Vec<String>> = offsets
            .iter()
            .map(|o| {
                vec![
                    o.flow.clone(),
                    o.topic.clone(),
                    o.partition.to_string(),
                    o.offset.to_string(),
                    o.source_offset.to_string(),
                ]
            })
            .collect();
        let header = ["FLOW", "TOPIC", "PARTITION", "OFFSET", "SOURCE OFFSET"];
        print!("{}", strait::inspect::table(&header, &rows));
    }
    Ok(())
}

/// `strait handback`: every flow's committed positions into MM2's offsets topic.
async fn hand_back(config: strait::config::Config) -> anyhow::Result<()> {
    for flow in &config.flows {
        let target = strait::flow::cluster(&config.clusters[&flow.target])?;
        let name = format!("{}->{}", flow.source, flow.target);
        let done = strait::migration::hand_back(flow, &target)
            .await
            .map_err(|e| anyhow::Error::new(e).context(format!("flow {name}: hand-back")))?;
        println!(
            "flow {name}: {} positions written to {} on {}: MirrorMaker 2 resumes there",
            done.positions, done.topic, flow.target
        );
    }
    Ok(())
}

async fn check(config: strait::config::Config) -> anyhow::Result<()> {
    for c in config.clusters.values() {
        let cluster = strait::flow::cluster(c)?;
        let topics = cluster
            .metadata(None)
            .await
            .map_err(|e| anyhow::Error::new(e).context(format!("cluster {}", c.alias)))?;
        let tls = cluster
            .any_broker()
            .await
            .ok()
            .and_then(|b| b.tls().map(String::from));
        let mut security = vec![match (tls.is_some(), c.sasl.is_some()) {
            (false, false) => "PLAINTEXT".to_string(),
            (true, false) => "SSL".to_string(),
            (false, true) => "SASL_PLAINTEXT".to_string(),
            (true, true) => "SASL_SSL".to_string(),
        }];
        if let Some(tls) = tls {
            security.push(format!("{tls}, broker certificate verified"));
        }
        if let Some(sasl) = &c.sasl {
            security.push(format!(
                "SASL {} authenticated {}",
                sasl.mechanism.name(),
                match &sasl.credentials {
                    strait::config::SaslCredentials::Password { username, .. } => {
                        format!("as {username}")
                    }
                    strait::config::SaslCredentials::Token { .. } => "with a bearer token".into(),
                }
            ));
        }
        let security = security.join(", ");
        println!(
            "cluster {}: reachable at {} ({security}), {} topics",
            c.alias,
            c.bootstrap_servers.join(","),
            topics.len()
        );
    }
    for f in &config.flows {
        println!("flow {}->{}: enabled", f.source, f.target);
    }
    Ok(())
}
