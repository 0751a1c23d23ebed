//! `measurements-agent`: runs Headroom's benchmark suites on this node, keeps every result in
//! a local spool, and uploads it to the server.

mod daemon;
mod inventory;
mod power;
mod spool;
mod stats;
mod suites;
mod upload;

use suites::{endpoint, transport};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Parser, Subcommand};
use model::{RunUpload, Suite};

use crate::spool::Spool;
use crate::suites::Effort;
use crate::upload::Target;

#[derive(Parser)]
#[command(name = "measurements-agent", version, about = "Measures this node for Headroom and uploads the results.")]
struct Cli {
    /// Where runs wait until the server acknowledges them.
    #[arg(long, env = "HEADROOM_SPOOL", global = true, default_value_os_t = default_spool())]
    spool: PathBuf,
    /// A TOML settings file: top-level keys are the global options, a table per subcommand
    /// holds its options (`[daemon]`, `every = "6h"`); a flag or environment variable
    /// wins over it.
    #[arg(long, env = "HEADROOM_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Print the effective settings (secrets redacted) and where each came from, then exit.
    #[arg(long, global = true)]
    print_config: bool,
    /// `text` for people, `json` (one object per line: timestamp, level, message) for a log
    /// collector. Progress and messages go to standard error either way.
    #[arg(long, env = "HEADROOM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Whether [`log`] writes JSON lines (`--log-format json`); set once, before anything is logged.
static LOG_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[derive(clap::Args)]
struct ServerArgs {
    /// The Headroom server, e.g. http://headroom:3000. Without it, runs stay in the spool.
    #[arg(long, env = "HEADROOM_SERVER")]
    server: Option<String>,
    /// This agent's ingest token (`headroom-server admin create-agent-token`).
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Upload attempts per run before leaving it in the spool.
    #[arg(long, default_value_t = 5)]
    attempts: u32,
    /// PEM CA certificate to trust for an https:// server, besides the public roots.
    #[arg(long, env = "HEADROOM_CA_CERT")]
    ca_cert: Option<PathBuf>,
}

/// The endpoint suite's options (`run endpoint --target URL --protocol P`).
#[derive(clap::Args)]
struct EndpointArgs {
    /// endpoint: the inference service's base URL, e.g. http://10.0.0.5:8080 (http-json: the
    /// full URL to POST to). Credentials go in HEADROOM_ENDPOINT_AUTHORIZATION, never here.
    #[arg(long, help_heading = "Endpoint")]
    target: Option<String>,
    /// endpoint: kserve-v2 (REST), kserve-v2-grpc, openai-chat, openai-completions or http-json.
    #[arg(long, value_parser = endpoint::protocol::Protocol::parse, help_heading = "Endpoint")]
    protocol: Option<endpoint::protocol::Protocol>,
    /// endpoint: the model name (kserve-v2 and kserve-v2-grpc: required; openai-*: default the first of /v1/models).
    #[arg(long, help_heading = "Endpoint")]
    model: Option<String>,
    /// endpoint (kserve-v2, kserve-v2-grpc): the model version.
    #[arg(long, help_heading = "Endpoint")]
    model_version: Option<String>,
    /// endpoint: open-loop rates in requests per second, one step each, e.g. 1,5,20.
    #[arg(long, value_delimiter = ',', value_parser = endpoint::parse_rate, help_heading = "Endpoint")]
    rates: Vec<f64>,
    /// endpoint: start at a low rate, then double it until the service saturates.
    #[arg(long, help_heading = "Endpoint")]
    sweep: bool,
    /// endpoint: closed loop instead of open: requests kept in flight, back to back, one step
    /// each, e.g. 1,4,16 (as `wrk -cN` and perf_analyzer do).
    #[arg(long, value_delimiter = ',', value_parser = endpoint::parse_concurrency, help_heading = "Endpoint")]
    concurrency: Vec<u32>,
    /// endpoint: poisson (default), constant, gamma:CV or trace:FILE (a CSV of send offsets in seconds).
    #[arg(long, value_parser = endpoint::arrivals::Arrivals::parse, help_heading = "Endpoint")]
    arrivals: Option<endpoint::arrivals::Arrivals>,
    /// endpoint: measured time per step (default 20s; 5s with --quick).
    #[arg(long, value_parser = endpoint::parse_duration, help_heading = "Endpoint")]
    duration: Option<Duration>,
    /// endpoint: time at the step's rate before measuring (default 3s; 1s with --quick).
    #[arg(long, value_parser = endpoint::parse_duration, help_heading = "Endpoint")]
    warmup: Option<Duration>,
    /// endpoint: most requests open at once; later sends wait (their wait counts as latency).
    #[arg(long, default_value_t = 512, help_heading = "Endpoint")]
    max_in_flight: usize,
    /// endpoint: a request not answered within this counts as a timeout.
    #[arg(long, default_value = "30s", value_parser = endpoint::parse_duration, help_heading = "Endpoint")]
    timeout: Duration,
    /// endpoint: a step whose send lag p99 is above this (or whose median lag is above a tenth
    /// of it) is marked client-limited. Default: a twentieth of the p99 of what the service
    /// took (time to first token for an LLM; the lag taken off), so a late send moves that p99
    /// by at most 5%, but no more than the gap between sends, and never under 10ms. A shared
    /// VM wakes sleeping threads milliseconds late at p99; on dedicated hardware 1ms is a fair
    /// bound. Each step records the bound it had (send_lag_bound_ms).
    #[arg(long, value_parser = endpoint::parse_duration, help_heading = "Endpoint")]
    max_send_lag: Option<Duration>,
    /// endpoint: per-request objectives for goodput, e.g. p99=200ms or ttft=500ms,itl=50ms.
    #[arg(long, value_parser = endpoint::Slo::parse, help_heading = "Endpoint")]
    slo: Option<endpoint::Slo>,
    /// endpoint: the request body to send (http-json: required; kserve-v2: a V2 inference
    /// request instead of one built from the metadata; openai-*: a whole request body).
    #[arg(long, help_heading = "Endpoint")]
    input: Option<PathBuf>,
    /// endpoint (http-json): the status a good answer has.
    #[arg(long, default_value_t = 200, help_heading = "Endpoint")]
    expect_status: u16,
    /// endpoint (openai-*): max_tokens of each request.
    #[arg(long, default_value_t = 128, help_heading = "Endpoint")]
    max_tokens: u32,
    /// endpoint (openai-*): the most requests the server decodes at once (llama.cpp's
    /// --parallel, vLLM's --max-num-seqs); default: what the server reports (llama.cpp's /props),
    /// else unknown, and the fit on the server assumes 256.
    #[arg(long, help_heading = "Endpoint")]
    slots: Option<u32>,
    /// endpoint (openai-*): prompt length in words, N or MIN-MAX (uniform), from a shipped corpus.
    #[arg(long, default_value = "64-256", value_parser = endpoint::prompts::parse_words, help_heading = "Endpoint")]
    prompt_words: (u32, u32),
    /// endpoint (kserve-v2): send tensors as JSON, or as raw bytes after a JSON header (the
    /// binary tensor data extension: Triton, KServe); auto = binary where the server's /v2
    /// lists binary_tensor_data.
    #[arg(long, default_value = "auto", value_parser = endpoint::protocol::TensorData::parse, help_heading = "Endpoint")]
    tensor_data: endpoint::protocol::TensorData,
    /// endpoint: the arrival schedule's random seed (default: a new one, recorded in the run).
    #[arg(long, help_heading = "Endpoint")]
    seed: Option<u64>,
}

impl EndpointArgs {
    /// The suite's configuration when `endpoint` is asked for; an error names a missing or
    /// misplaced argument.
    fn config(self, wanted: bool) -> anyhow::Result<Option<endpoint::Config>> {
        if !wanted {
            anyhow::ensure!(self.target.is_none(), "--target is for the endpoint suite: `run endpoint --target URL`");
            return Ok(None);
        }
        let target = self.target.context("run endpoint needs --target URL")?;
        endpoint::public_url(&target)?;
        let parsed = reqwest::Url::parse(&target)?;
        anyhow::ensure!(
            parsed.username().is_empty() && parsed.password().is_none(),
            "--target must not carry credentials (they would show in logs): put the header value in \
             HEADROOM_ENDPOINT_AUTHORIZATION, e.g. \"Basic …\" or \"Bearer …\""
        );
        let protocol = self
            .protocol
            .with_context(|| format!("run endpoint needs --protocol ({})", endpoint::protocol::Protocol::NAMES))?;
        let trace = matches!(self.arrivals, Some(endpoint::arrivals::Arrivals::Trace(_)));
        let closed = !self.concurrency.is_empty();
        anyhow::ensure!(
            !closed || (self.arrivals.is_none() && !self.sweep && self.rates.is_empty()),
            "--concurrency runs a closed loop, which has no arrival schedule: drop --rates, --sweep and --arrivals"
        );
        match (trace, self.sweep, self.rates.is_empty()) {
            _ if closed => {}
            (true, false, true) => {}
            (true, _, _) => anyhow::bail!("--arrivals trace:FILE replays its own offsets: drop --rates and --sweep"),
            (false, true, false) => anyhow::bail!("give --rates or --sweep, not both"),
            (false, false, true) => {
                anyhow::bail!(
                    "run endpoint needs --rates R1,R2,… or --sweep (open loop), or --concurrency N1,N2,… (closed loop)"
                )
            }
            _ => {}
        }
        anyhow::ensure!(self.concurrency.len() <= 32, "--concurrency takes at most 32 values");
        anyhow::ensure!((1..=100_000).contains(&self.max_in_flight), "--max-in-flight must be 1 to 100000");
        anyhow::ensure!(self.rates.len() <= 32, "--rates takes at most 32 rates");
        anyhow::ensure!(
            parsed.query().is_none() || protocol == endpoint::protocol::Protocol::HttpJson,
            "--target for {} is the server's base URL, without a query",
            protocol.as_str()
        );
        anyhow::ensure!(
            self.tensor_data == endpoint::protocol::TensorData::Auto
                || protocol == endpoint::protocol::Protocol::KserveV2,
            "--tensor-data is for kserve-v2 (REST); {} sends {}",
            protocol.as_str(),
            if protocol == endpoint::protocol::Protocol::KserveV2Grpc { "raw tensors always" } else { "no tensors" }
        );
        let slo = self.slo.unwrap_or_default();
        anyhow::ensure!(
            protocol.is_llm() || (slo.ttft.is_none() && slo.itl.is_none()),
            "--slo ttft= and itl= are for openai-chat and openai-completions; {} has no tokens",
            protocol.as_str()
        );
        anyhow::ensure!((1..=1_000_000).contains(&self.max_tokens), "--max-tokens must be 1 to 1000000");
        if let Some(slots) = self.slots {
            let most = model::plan::llm::fit::MAX_FITTED_SLOTS;
            anyhow::ensure!(
                protocol.is_llm(),
                "--slots is for openai-chat and openai-completions: {} has no slots",
                protocol.as_str()
            );
            anyhow::ensure!((1..=most).contains(&slots), "--slots must be 1 to {most}");
        }
        let input = match &self.input {
            Some(path) => {
                let bytes = std::fs::read(path).with_context(|| format!("cannot read --input {}", path.display()))?;
                anyhow::ensure!(bytes.len() <= 64 << 20, "--input {} is larger than 64 MiB", path.display());
                Some(bytes)
            }
            None => None,
        };
        let authorization =
            std::env::var("HEADROOM_ENDPOINT_AUTHORIZATION").ok().filter(|v| !v.is_empty()).map(endpoint::Secret);
        Ok(Some(endpoint::Config {
            target,
            protocol,
            options: endpoint::protocol::TargetOptions {
                model: self.model,
                model_version: self.model_version,
                input,
                expect_status: self.expect_status,
                max_tokens: self.max_tokens,
                slots: self.slots,
                prompt_words: self.prompt_words,
                tensor_data: self.tensor_data,
            },
            authorization,
            rates: self.rates,
            sweep: self.sweep,
            concurrency: self.concurrency,
            arrivals: self.arrivals.unwrap_or(endpoint::arrivals::Arrivals::Poisson),
            duration: self.duration,
            warmup: self.warmup,
            max_in_flight: self.max_in_flight,
            timeout: self.timeout,
            max_send_lag: self.max_send_lag.map_or(endpoint::LagBound::Relative, endpoint::LagBound::Fixed),
            slo,
            seed: self.seed,
        }))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run suites (default: every available one), spool the run, then upload the spool.
    Run {
        /// Suites to run: system, transport, quant, transfer, alloc, gemm (default: all of these; the GPU
        /// suites record their cases as skipped on a node without a CUDA driver), and endpoint (only
        /// when named, with --target and --protocol).
        #[arg(value_parser = parse_suite)]
        suites: Vec<Suite>,
        /// Fewer samples and sizes: a smoke test, not a basis for decisions.
        #[arg(long)]
        quick: bool,
        /// transport: measure against `measurements-agent serve` on another node (HOST:PORT)
        /// instead of a server process on this one.
        #[arg(long)]
        peer: Option<String>,
        /// transport: the token the peer's `serve` printed (or was given).
        #[arg(long, env = "HEADROOM_PEER_TOKEN", hide_env_values = true)]
        peer_token: Option<String>,
        /// transport: payload sizes, e.g. 1KiB,64KiB,4MiB (default 1KiB,8KiB,64KiB,512KiB,4MiB).
        #[arg(long, value_delimiter = ',', value_parser = parse_size)]
        sizes: Vec<usize>,
        /// Also print the run as JSON on standard output (always done without --server).
        #[arg(long)]
        json: bool,
        /// The node's instance type, e.g. p5.48xlarge.
        #[arg(long, env = "HEADROOM_INSTANCE_TYPE")]
        instance_type: Option<String>,
        /// What the node costs per hour, in USD.
        #[arg(long, env = "HEADROOM_HOURLY_USD")]
        hourly_usd: Option<f64>,
        #[command(flatten)]
        endpoint: Box<EndpointArgs>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Run the suites on a schedule until SIGTERM (a DaemonSet or a long-running service):
    /// each run is spooled and uploaded as `run` does, the spool is drained at start and after
    /// every run, and --metrics-listen serves Prometheus metrics.
    Daemon {
        /// Suites to run each time, as for `run` (default: every available one; not endpoint,
        /// whose target and load are set per run: schedule `run endpoint` for that).
        #[arg(long, value_delimiter = ',', value_parser = parse_suite, env = "HEADROOM_SUITES")]
        suites: Vec<Suite>,
        /// Time between the starts of two runs, e.g. 6h, 30m.
        #[arg(long, default_value = "6h", value_parser = daemon::parse_interval, env = "HEADROOM_EVERY")]
        every: Duration,
        /// Each start moves by up to half of this either way, and the first comes somewhere in
        /// the first such window, so a fleet started at once does not measure at once
        /// (default: a tenth of --every; 0s for none).
        #[arg(long, value_parser = daemon::parse_interval, env = "HEADROOM_JITTER")]
        jitter: Option<Duration>,
        /// Fewer samples and sizes: a smoke test, not a basis for decisions.
        #[arg(long)]
        quick: bool,
        /// Serve /metrics (Prometheus text) and /healthz here, e.g. 0.0.0.0:9464. Unauthenticated:
        /// counts and times only.
        #[arg(long, env = "HEADROOM_METRICS_LISTEN")]
        metrics_listen: Option<std::net::SocketAddr>,
        /// The node's instance type, e.g. p5.48xlarge.
        #[arg(long, env = "HEADROOM_INSTANCE_TYPE")]
        instance_type: Option<String>,
        /// What the node costs per hour, in USD.
        #[arg(long, env = "HEADROOM_HOURLY_USD")]
        hourly_usd: Option<f64>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Upload every run waiting in the spool.
    Upload {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Print this node's description as JSON.
    Inventory,
    /// Serve the transport suite's servers so an agent on another node can measure against
    /// this one (`run transport --peer THIS_HOST:PORT`).
    Serve {
        /// Address for HTTP, gRPC and control; a raw-exchange port is opened beside it. Loopback
        /// unless told otherwise: for cross-node runs give the address the other node reaches.
        #[arg(long, default_value = "127.0.0.1:7070")]
        listen: std::net::SocketAddr,
        /// The shared secret clients must send (at least 16 characters); default: a new random
        /// one, printed on standard error for `run transport --peer-token`.
        #[arg(long, env = "HEADROOM_PEER_TOKEN", hide_env_values = true)]
        peer_token: Option<String>,
        /// Run every server thread on this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Exit when standard input closes (used when the agent starts its own server).
        #[arg(long, hide = true)]
        stop_on_stdin_eof: bool,
    },
    /// Print a completion script for SHELL to standard output
    /// (`cargo xtask dist` installs them under `share/`).
    Completions { shell: clap_complete::Shell },
    /// Print this program's man page (roff) to standard output, or write it and one page per
    /// subcommand into a folder.
    Man {
        /// Write every page here (`NAME.1`, `NAME-SUBCOMMAND.1`, …) instead.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn default_spool() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("headroom").join("spool")
}

fn parse_suite(text: &str) -> Result<Suite, String> {
    Suite::parse(text)
}

/// `4096`, `1KiB`, `64KiB`, `4MiB`.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: usize = digits.parse().map_err(|_| format!("'{text}' is not a size such as 4096, 64KiB or 4MiB"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        _ => return Err(format!("unknown unit in '{text}': use B, KiB or MiB")),
    };
    let bytes = n.checked_mul(scale).ok_or_else(|| format!("'{text}' is too large"))?;
    if !(1024..=(64 << 20)).contains(&bytes) || bytes % 1024 != 0 {
        return Err(format!("'{text}': sizes must be whole KiB between 1KiB and 64MiB"));
    }
    Ok(bytes)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A line for the operator on standard error: as it is, or with `--log-format json` one JSON
/// object with the time (UTC, RFC 3339), a level read from the line's `error:` or `warning:`
/// prefix (`INFO` otherwise) and the message without it.
fn log(line: &str) {
    if !LOG_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{line}");
        return;
    }
    let (level, message) = match (line.strip_prefix("error: "), line.strip_prefix("warning: ")) {
        (Some(rest), _) => ("ERROR", rest),
        (_, Some(rest)) => ("WARN", rest),
        _ => ("INFO", line),
    };
    let object = serde_json::json!({ "timestamp": rfc3339(now_ms()), "level": level, "message": message });
    eprintln!("{object}");
}

/// `2026-12-05T16:40:01.123Z` for a Unix time in milliseconds.
fn rfc3339(unix_ms: i64) -> String {
    let day = model::calendar::Date::from_unix_ms(unix_ms);
    let ms = unix_ms.rem_euclid(86_400_000);
    let (h, m, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{day}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli: Cli = cli_config::parse();
    LOG_JSON.store(cli.log_format == LogFormat::Json, std::sync::atomic::Ordering::Relaxed);
    match run(cli).await {
        Ok(code) => code,
        Err(err) => {
            log(&format!("error: {err:#}"));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Completions { shell } => {
            print_completions(shell);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => man(dir).map(|()| ExitCode::SUCCESS),
        Command::Inventory => {
            let node = inventory::node(&inventory::OperatorFacts::default());
            println!("{}", serde_json::to_string_pretty(&node)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Daemon { suites, every, jitter, quick, metrics_listen, instance_type, hourly_usd, server } => {
            anyhow::ensure!(
                !suites.contains(&Suite::Endpoint),
                "the daemon does not run endpoint (its target and load are set per run): schedule `run endpoint …` instead"
            );
            anyhow::ensure!(!every.is_zero(), "--every must be above zero");
            check_hourly_usd(hourly_usd)?;
            let jitter = jitter.unwrap_or(every / 10);
            anyhow::ensure!(jitter <= every, "--jitter must not be longer than --every");
            let target = target(&server)?.context("the daemon needs --server (or HEADROOM_SERVER) to upload to")?;
            let spool = Spool::open(&cli.spool)?;
            let facts = inventory::OperatorFacts { instance_type, hourly_usd };
            let schedule = daemon::Schedule { every, jitter, suites, effort: Effort { quick }, facts, metrics_listen };
            daemon::run(schedule, spool, target).await
        }
        Command::Upload { server } => {
            let spool = Spool::open(&cli.spool)?;
            let target = target(&server)?.context("--server (or HEADROOM_SERVER) is required to upload")?;
            flush(&spool, &target).await
        }
        Command::Serve { listen, peer_token, cpu, stop_on_stdin_eof } => {
            let token = match peer_token {
                Some(token) => token,
                None => {
                    let token = transport::peer::new_token();
                    log(&format!("peer token (give it to `run transport --peer-token`): {token}"));
                    token
                }
            };
            // Blocking servers and a runtime of their own; keep them off this runtime's threads.
            tokio::task::spawn_blocking(move || transport::peer::serve(listen, token, cpu, stop_on_stdin_eof))
                .await??;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run { suites, quick, json, instance_type, hourly_usd, server, peer, peer_token, sizes, endpoint } => {
            let endpoint = endpoint.config(suites.contains(&Suite::Endpoint))?;
            check_hourly_usd(hourly_usd)?;
            let spool = Spool::open(&cli.spool)?;
            let target = target(&server)?;
            let facts = inventory::OperatorFacts { instance_type, hourly_usd };
            let options = suites::Options { peer, peer_token, sizes, endpoint };
            let run =
                tokio::task::spawn_blocking(move || measure(&suites, Effort { quick }, &options, &facts)).await??;
            let path = match spool.put(&run) {
                Ok(path) => path,
                Err(err) => {
                    // The measurements are not lost yet: they go to standard output.
                    log(&format!("error: {err:#}; the run is printed on standard output instead"));
                    println!("{}", serde_json::to_string_pretty(&run)?);
                    return Ok(ExitCode::from(5));
                }
            };
            log(&format!("run {} spooled at {}", run.run_id, path.display()));
            if json || target.is_none() {
                println!("{}", serde_json::to_string_pretty(&run)?);
            }
            match target {
                Some(target) => flush(&spool, &target).await,
                None => {
                    log(
                        "no --server given: the run stays in the spool; send it later with `measurements-agent upload`",
                    );
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
    }
}

fn check_hourly_usd(price: Option<f64>) -> anyhow::Result<()> {
    if let Some(price) = price {
        anyhow::ensure!(price.is_finite() && price >= 0.0, "--hourly-usd must be a finite, non-negative number");
    }
    Ok(())
}

fn target(args: &ServerArgs) -> anyhow::Result<Option<Target>> {
    let Some(server) = args.server.clone() else { return Ok(None) };
    let token = args.token.clone().context("--token (or HEADROOM_TOKEN) is required with --server")?;
    let ca_pem = match &args.ca_cert {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| format!("cannot read --ca-cert {}", path.display()))?;
            anyhow::ensure!(pem.starts_with(b"-----BEGIN"), "--ca-cert {} is not a PEM certificate", path.display());
            Some(pem)
        }
        None => None,
    };
    Ok(Some(Target { server, token, attempts: args.attempts, first_backoff: Duration::from_millis(500), ca_pem }))
}

/// Runs the chosen suites (all available ones when none is named).
fn measure(
    requested: &[Suite],
    effort: Effort,
    options: &suites::Options,
    facts: &inventory::OperatorFacts,
) -> anyhow::Result<RunUpload> {
    let chosen = if requested.is_empty() { suites::available() } else { requested.to_vec() };
    let started_at_ms = now_ms();
    let node = inventory::node(facts);
    let mut measurements = Vec::new();
    let mut progress = suites::Progress::stderr();
    for suite in chosen {
        let bench = suites::benchmark(suite, options).expect("suites were checked when parsing arguments");
        progress.line(&format!("running suite {}", bench.suite()));
        let results = bench.run(effort, &mut progress).with_context(|| format!("suite {suite} could not run"))?;
        measurements.extend(results);
    }
    Ok(RunUpload {
        run_id: uuid::Uuid::new_v4(),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at_ms,
        finished_at_ms: now_ms(),
        node,
        measurements,
    })
}

/// Uploads the spool; exit code 3 when runs remain in it, 4 when the server refused some.
async fn flush(spool: &Spool, target: &Target) -> anyhow::Result<ExitCode> {
    let report = upload::flush(spool, target, &mut |line| log(line)).await?;
    for (run, reason) in &report.kept {
        log(&format!(
            "run {run} kept in the spool ({reason}); it will be sent by the next run or `measurements-agent upload`"
        ));
    }
    log(&format!(
        "{} uploaded, {} refused, {} waiting in {}",
        report.acked.len(),
        report.rejected.len(),
        report.kept.len(),
        spool.dir().display()
    ));
    Ok(if !report.kept.is_empty() {
        ExitCode::from(3)
    } else if !report.rejected.is_empty() {
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints `shell`'s completion script. For bash it mends clap_complete's spelling of a hyphenated
/// name: its case labels say `measurements__subcmd__agent…` where its state says `measurements__agent…`, so nothing past the first word
/// completed (clap-rs/clap#6421, open).
fn print_completions(shell: clap_complete::Shell) {
    const NAME: &str = "measurements-agent";
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), NAME, &mut script);
    let script = String::from_utf8_lossy(&script).replace(&NAME.replace('-', "__subcmd__"), &NAME.replace('-', "__"));
    print!("{script}");
}

/// The man page on standard output, or every page (one per subcommand too) written into `dir`.
fn man(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let command = <Cli as clap::CommandFactory>::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write man pages to {}", dir.display()))
        }
        // As `generate_to` does: no page for the `help` subcommand, so none is named.
        None => Ok(clap_mangen::Man::new(command.disable_help_subcommand(true)).render(&mut std::io::stdout())?),
    }
}
