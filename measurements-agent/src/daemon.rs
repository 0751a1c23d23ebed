//! `measurements-agent daemon`: the suites on a schedule, for a Kubernetes DaemonSet or any
//! long-running service. Each run is spooled and uploaded like `run`'s; the spool is drained
//! at start and after every run; SIGTERM ends it cleanly (an upload in flight gets
//! [`UPLOAD_GRACE`] to finish, a run being measured is dropped, since nothing of it was
//! spooled); and `/metrics` tells a Prometheus scraper when it last ran, how many runs wait in
//! the spool, and what failed.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use model::Suite;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Semaphore, watch};

use crate::spool::Spool;
use crate::suites::{self, Effort};
use crate::upload::{self, Target};
use crate::{inventory, log};

/// How long an upload in flight at SIGTERM may go on (Kubernetes' default grace is 30 s):
/// runs it has not sent stay in the spool, and the server ignores one sent twice.
const UPLOAD_GRACE: Duration = Duration::from_secs(20);
/// A run still measuring after this long is taken as hung: `/healthz` answers 503, so a
/// liveness probe restarts the agent.
const HUNG_AFTER: Duration = Duration::from_secs(3 * 3600);
/// Scrapes served at once; more connections are closed unanswered.
const MAX_SCRAPES: usize = 16;
/// A scrape's whole connection: request read and answer written, or it is closed.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(5);
/// When the last run started, kept beside the spool so a restarted agent keeps its schedule.
const LAST_START: &str = ".daemon-last-start";

pub struct Schedule {
    pub every: Duration,
    pub jitter: Duration,
    pub suites: Vec<Suite>,
    pub effort: Effort,
    pub facts: inventory::OperatorFacts,
    pub metrics_listen: Option<SocketAddr>,
}

/// `6h`, `30m`, `90s`, `0s`.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number.parse().map_err(|_| format!("'{text}' is not a duration such as 90s, 30m or 6h"))?;
    let scale = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("'{text}': give a whole number of s, m, h or d")),
    };
    match value.checked_mul(scale) {
        Some(seconds) if seconds <= 30 * 86_400 => Ok(Duration::from_secs(seconds)),
        _ => Err(format!("'{text}' is more than 30 days")),
    }
}

/// What `/metrics` reports; counters since this process started.
#[derive(Default)]
struct State {
    started: f64,
    spooled: Option<usize>,
    measured: u64,
    failed: u64,
    acknowledged: u64,
    refused: u64,
    upload_failures: u64,
    running_since: Option<std::time::Instant>,
    last_run_end: Option<f64>,
    last_run_seconds: Option<f64>,
    last_upload_ok: Option<f64>,
    next_run: Option<f64>,
}

fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Prometheus' text format, version 0.0.4.
fn exposition(state: &State) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, f64)]| {
        let _ = writeln!(out, "# HELP headroom_agent_{name} {help}\n# TYPE headroom_agent_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "headroom_agent_{name}{labels} {value}");
        }
    };
    metric(
        "runs_total",
        "counter",
        "Runs of the suites since start, by outcome.",
        &[(r#"{outcome="measured"}"#, state.measured as f64), (r#"{outcome="failed"}"#, state.failed as f64)],
    );
    metric(
        "uploads_total",
        "counter",
        "Spooled runs the server acknowledged or refused (refused ones are in spool/rejected/).",
        &[(r#"{outcome="acknowledged"}"#, state.acknowledged as f64), (r#"{outcome="refused"}"#, state.refused as f64)],
    );
    metric(
        "upload_failures_total",
        "counter",
        "Uploads of the spool that left runs in it (server unreachable or token refused).",
        &[("", state.upload_failures as f64)],
    );
    if let Some(n) = state.spooled {
        metric("spool_runs", "gauge", "Runs waiting in the spool for the server.", &[("", n as f64)]);
    }
    let running = f64::from(u8::from(state.running_since.is_some()));
    metric("running", "gauge", "1 while the suites are being measured.", &[("", running)]);
    for (name, help, value) in [
        ("start_timestamp_seconds", "When this agent process started (Unix time).", Some(state.started)),
        ("last_run_timestamp_seconds", "When the last run of the suites ended (Unix time).", state.last_run_end),
        ("last_run_duration_seconds", "How long the last run of the suites took.", state.last_run_seconds),
        (
            "last_upload_success_timestamp_seconds",
            "When the server last acknowledged a run and the spool was left empty (Unix time).",
            state.last_upload_ok,
        ),
        ("next_run_timestamp_seconds", "When the next run starts (Unix time).", state.next_run),
    ] {
        if let Some(value) = value {
            metric(name, "gauge", help, &[("", value)]);
        }
    }
    out
}

/// `/metrics` and `/healthz` over HTTP/1.1, one request per connection, read and answered
/// within [`SCRAPE_DEADLINE`] and at most [`MAX_SCRAPES`] at once, whoever connects: a slow or
/// flooding client costs a bounded few kilobytes and never the measurements' CPU for long.
async fn serve_metrics(listener: tokio::net::TcpListener, state: Arc<Mutex<State>>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(SCRAPE_DEADLINE, answer(stream, &state)).await;
            drop(slot);
        });
    }
}

async fn answer(mut stream: tokio::net::TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut buffer = [0u8; 4096];
    let mut filled = 0;
    let path = loop {
        let n = stream.read(&mut buffer[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buffer[..filled]) {
            Ok(httparse::Status::Complete(_)) => {
                break (request.method == Some("GET"), request.path.map(str::to_owned));
            }
            Ok(httparse::Status::Partial) if filled < buffer.len() => continue,
            // Too long or not HTTP.
            _ => break (false, None),
        }
    };
    let (status, kind, body) = match path {
        (true, Some(path)) if path == "/metrics" => {
            let state = state.lock().unwrap_or_else(|p| p.into_inner());
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", exposition(&state))
        }
        (true, Some(path)) if path == "/healthz" => {
            let state = state.lock().unwrap_or_else(|p| p.into_inner());
            match state.running_since.map(|since| since.elapsed()) {
                Some(running) if running > HUNG_AFTER => (
                    "503 Service Unavailable",
                    "text/plain; charset=utf-8",
                    format!("a run has been measuring for {} s\n", running.as_secs()),
                ),
                _ => ("200 OK", "text/plain; charset=utf-8", "ok\n".to_string()),
            }
        }
        (true, Some(_)) => ("404 Not Found", "text/plain; charset=utf-8", "only /metrics and /healthz\n".into()),
        _ => ("400 Bad Request", "text/plain; charset=utf-8", "a GET of /metrics or /healthz\n".into()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// A uniformly random duration in [0, span).
fn random_within(span: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    let unit = match getrandom::fill(&mut bytes) {
        Ok(()) => (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64,
        Err(_) => 0.5,
    };
    span.mul_f64(unit)
}

/// Uploads the spool, counting what happened. A SIGTERM during it leaves it [`UPLOAD_GRACE`]
/// to finish; then the process ends, and what was not acknowledged stays in the spool.
async fn drain(spool: &Spool, target: &Target, state: &Mutex<State>, stop: &mut watch::Receiver<bool>) {
    let mut progress = |line: &str| log(line);
    let flushing = upload::flush(spool, target, &mut progress);
    let report = tokio::select! {
        biased;
        report = flushing => report,
        _ = async {
            let _ = stop.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(UPLOAD_GRACE).await;
        } => {
            log("the upload did not finish in time after SIGTERM; what it had not sent stays in the spool");
            std::process::exit(0);
        }
    };
    let spooled = spool.pending().ok().map(|p| p.len());
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    state.spooled = spooled;
    match report {
        Ok(report) => {
            state.acknowledged += report.acked.len() as u64;
            state.refused += report.rejected.len() as u64;
            for (run, reason) in &report.kept {
                log(&format!("run {run} kept in the spool ({reason}); it is sent after the next run"));
            }
            if !report.kept.is_empty() {
                state.upload_failures += 1;
            } else if !report.acked.is_empty() {
                state.last_upload_ok = Some(unix_seconds(SystemTime::now()));
            }
        }
        Err(err) => {
            log(&format!("error: cannot upload the spool: {err:#}"));
            state.upload_failures += 1;
        }
    }
}

/// When the previous process last started a run, if it said.
fn last_start(spool: &Spool) -> Option<SystemTime> {
    let text = std::fs::read_to_string(spool.dir().join(LAST_START)).ok()?;
    let seconds: u64 = text.trim().parse().ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

fn note_start(spool: &Spool, at: SystemTime) {
    let seconds = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    if let Err(err) = std::fs::write(spool.dir().join(LAST_START), format!("{seconds}\n")) {
        log(&format!("warning: cannot note the run's start in the spool: {err}"));
    }
}

/// The first start: where the schedule of an earlier process puts it, if that is still ahead;
/// otherwise somewhere in the first jitter window, so a fleet started at once (a DaemonSet
/// rolled out) does not measure and upload at once.
fn first_start(schedule: &Schedule, previous: Option<SystemTime>, now: SystemTime) -> Duration {
    let scheduled = previous.map(|at| at + schedule.every.saturating_sub(schedule.jitter / 2));
    match scheduled.and_then(|at| at.duration_since(now).ok()) {
        Some(ahead) => ahead + random_within(schedule.jitter),
        None => random_within(schedule.jitter),
    }
}

pub async fn run(schedule: Schedule, spool: Spool, target: Target) -> anyhow::Result<ExitCode> {
    let state = Arc::new(Mutex::new(State { started: unix_seconds(SystemTime::now()), ..State::default() }));
    if let Some(addr) = schedule.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on --metrics-listen {addr}: {e}"))?;
        log(&format!("metrics on http://{}/metrics", listener.local_addr()?));
        tokio::spawn(serve_metrics(listener, state.clone()));
    }
    let (stop_tx, mut stop) = watch::channel(false);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => log("SIGTERM: stopping"),
            _ = tokio::signal::ctrl_c() => log("interrupted: stopping"),
        }
        let _ = stop_tx.send(true);
        // A second signal does not wait for anything.
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        log("second signal: exiting now; what was not acknowledged stays in the spool");
        std::process::exit(0);
    });

    let names: Vec<String> = schedule.suites.iter().map(|s| s.to_string()).collect();
    log(&format!(
        "daemon: {} every {}s (± {}s), uploading to {}",
        if names.is_empty() { "every suite".to_string() } else { names.join(", ") },
        schedule.every.as_secs(),
        schedule.jitter.as_secs() / 2,
        target.server
    ));
    // What earlier runs (or an earlier process) left.
    drain(&spool, &target, &state, &mut stop).await;

    // Then every `every`, each start moved by up to half the jitter either way.
    let mut next = tokio::time::Instant::now() + first_start(&schedule, last_start(&spool), SystemTime::now());
    loop {
        let wait = next.saturating_duration_since(tokio::time::Instant::now());
        state.lock().unwrap_or_else(|p| p.into_inner()).next_run = Some(unix_seconds(SystemTime::now() + wait));
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break,
            _ = tokio::time::sleep_until(next) => {}
        }
        let started = tokio::time::Instant::now();
        note_start(&spool, SystemTime::now());
        state.lock().unwrap_or_else(|p| p.into_inner()).running_since = Some(std::time::Instant::now());
        let (suites, effort, facts) = (schedule.suites.clone(), schedule.effort, schedule.facts.clone());
        let measuring =
            tokio::task::spawn_blocking(move || crate::measure(&suites, effort, &suites::Options::default(), &facts));
        let measured = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => {
                // The benchmark threads cannot be interrupted, and the runtime would wait for
                // them on the way out: the process ends here, without them.
                log("the run being measured is dropped (nothing of it was spooled); exiting");
                std::process::exit(0);
            }
            measured = measuring => measured,
        };
        {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            state.running_since = None;
            state.last_run_end = Some(unix_seconds(SystemTime::now()));
            state.last_run_seconds = Some(started.elapsed().as_secs_f64());
        }
        match measured.map_err(anyhow::Error::from).and_then(|r| r) {
            Ok(run) => {
                state.lock().unwrap_or_else(|p| p.into_inner()).measured += 1;
                match spool.put(&run) {
                    Ok(path) => log(&format!("run {} spooled at {}", run.run_id, path.display())),
                    Err(err) => {
                        log(&format!("error: {err:#}; the run is printed on standard output instead"));
                        println!("{}", serde_json::to_string(&run)?);
                    }
                }
            }
            Err(err) => {
                state.lock().unwrap_or_else(|p| p.into_inner()).failed += 1;
                log(&format!("error: the run failed: {err:#}"));
            }
        }
        drain(&spool, &target, &state, &mut stop).await;
        if *stop.borrow() {
            break;
        }
        let half = schedule.jitter / 2;
        next = started + schedule.every.saturating_sub(half) + random_within(schedule.jitter);
    }
    log("stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_take_whole_units_and_refuse_nonsense() {
        assert_eq!(parse_interval("6h"), Ok(Duration::from_secs(6 * 3600)));
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_interval("2d"), Ok(Duration::from_secs(2 * 86_400)));
        for bad in ["", "6", "1.5h", "-1h", "6 hours", "31d", "99999999999999999999h"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metrics_are_prometheus_text_with_a_help_and_type_for_each() {
        let state = State {
            measured: 3,
            failed: 1,
            acknowledged: 2,
            last_run_end: Some(1.5e9),
            spooled: Some(4),
            ..State::default()
        };
        let text = exposition(&state);
        assert!(text.contains("headroom_agent_runs_total{outcome=\"measured\"} 3\n"), "{text}");
        assert!(text.contains("headroom_agent_runs_total{outcome=\"failed\"} 1\n"), "{text}");
        assert!(text.contains("headroom_agent_spool_runs 4\n"), "{text}");
        assert!(text.contains("headroom_agent_last_run_timestamp_seconds 1500000000\n"), "{text}");
        assert!(!text.contains("next_run"), "unknown values are left out: {text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} has no TYPE");
        }
        let unreadable = State { spooled: None, ..state };
        assert!(!exposition(&unreadable).contains("spool_runs"), "an unreadable spool is not 0");
    }

    #[test]
    fn a_restarted_agent_keeps_the_schedule_of_the_one_before() {
        let schedule = Schedule {
            every: Duration::from_secs(6 * 3600),
            jitter: Duration::from_secs(600),
            suites: Vec::new(),
            effort: Effort { quick: true },
            facts: inventory::OperatorFacts::default(),
            metrics_listen: None,
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // Started an hour ago: the next run is about five hours ahead, not within minutes.
        let wait = first_start(&schedule, Some(now - Duration::from_secs(3600)), now);
        assert!((4 * 3600 + 3300..5 * 3600 + 300).contains(&wait.as_secs()), "{wait:?}");
        // Overdue, or no note: somewhere in the first jitter window.
        for previous in [Some(now - Duration::from_secs(7 * 3600)), None] {
            assert!(first_start(&schedule, previous, now) < schedule.jitter, "{previous:?}");
        }
    }

    #[test]
    fn random_delays_stay_inside_their_window() {
        let span = Duration::from_secs(60);
        let draws: Vec<Duration> = (0..200).map(|_| random_within(span)).collect();
        assert!(draws.iter().all(|d| *d < span));
        // 200 uniform draws all in one half would be a 2^-199 event.
        assert!(draws.iter().any(|d| *d < span / 2) && draws.iter().any(|d| *d >= span / 2));
        assert_eq!(random_within(Duration::ZERO), Duration::ZERO);
    }
}
