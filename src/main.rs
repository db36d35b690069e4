//! The `strait` command line: the only place that maps errors to exit codes (0 success,
//! 1 replication failure, 2 configuration error). Topology lives in the config file; runtime
//! knobs (log format and level) are flags.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

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
    /// Log filter (tracing `EnvFilter` syntax); `STRAIT_LOG` overrides it.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
}

#[derive(Subcommand)]
enum Command {
    /// Replicate as the config file says (`mm2.properties` or `strait.toml`) until SIGTERM/SIGINT.
    Run { config: PathBuf },
    /// Validate the config file and reach every cluster it names.
    Check { config: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = std::env::var("STRAIT_LOG").unwrap_or(cli.log_level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours for a person at a terminal, never escape codes in a log file or journal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strait: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let path = match &cli.command {
        Command::Run { config } | Command::Check { config } => config.clone(),
    };
    // `load` logs each warning itself, for `run` and `check` alike.
    let config = match strait::config::load(&path) {
        Ok((config, _warnings)) => config,
        Err(e) => {
            eprintln!("strait: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run { .. } => runtime.block_on(run(config)),
        Command::Check { .. } => runtime.block_on(check(config)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strait: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: strait::config::Config) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: draining in-flight batches and committing progress");
        signals.cancel();
    });
    strait::flow::run(config, shutdown).await?;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn check(config: strait::config::Config) -> anyhow::Result<()> {
    for c in config.clusters.values() {
        let cluster = strait::flow::cluster(c);
        let topics = cluster
            .metadata(None)
            .await
            .map_err(|e| anyhow::anyhow!("cluster {}: {e}", c.alias))?;
        println!(
            "cluster {}: reachable at {}, {} topics",
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
