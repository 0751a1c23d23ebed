//! `cargo bench -p headroom-server --bench store`: the store at fleet scale.
//!
//! Fills a store through the real ingest (`Store::insert_run`) with runs of 2 000 nodes, 100
//! measurements each (3 memcpy, 60 transport, 37 quantization, shaped as the agent sends
//! them), and times every read the pages and lists make at two sizes in the same run: one run
//! per node (200 000 measurements: the whole fleet, no history) and a history of
//! [`HISTORY`] runs for the node whose runs are read, so that a read over one node's runs
//! answers as many rows at both sizes; then `HEADROOM_BENCH_MEASUREMENTS` (10 000 000 by
//! default: 50 runs per node). Each read is called [`CALLS`] times; the table gives its p50 and
//! p99 at both sizes and p99 large ÷ p99 small (goal ≤ 2: a read must not cost more as history
//! grows), beside `SELECT 1` as the floor.
//!
//! SQLite always (WAL, synchronous=FULL, one writer); Postgres when
//! `HEADROOM_BENCH_POSTGRES_URL` names a server where it may create a database. On Postgres it
//! also measures ingest: measurement rows per second of 8 agents uploading at once, against
//! `psql \copy` of the same rows into a table of the same shape and indexes (goal ≥ 0.5),
//! and the time a run takes when one upload at a time is stored.
//! Postgres is `VACUUM (ANALYZE)`d after each fill, as autovacuum would have done in service
//! (without it, the 50 dead versions of each node's row that the uploads leave double the
//! node list's time at 10 M: 15 ms to 32 ms at p50 in the run before this was added).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_server::api;
use headroom_server::auth::{self, Caller, Principal, Role};
use headroom_server::store::{RunFilter, Store};
use model::{Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};

const NODES: usize = 2_000;
const PER_RUN: usize = 100;
const CALLS: usize = 200;
/// The node whose runs the per-node reads list, and the runs it has before the fleet's first.
const PROBE: usize = 7;
const HISTORY: usize = 100;
/// How many uploads are in flight at once while filling and in the ingest figure.
const AGENTS: usize = 8;

fn stats(v: f64) -> Stats {
    Stats { samples: 40, mean: v, p50: v, p90: v * 1.1, p99: v * 1.3, p999: v * 1.5, ci95_low: v, ci95_high: v }
}

fn measurement(suite: Suite, case: &str, params: &[(&str, String)], unit: Unit, value: f64) -> Measurement {
    Measurement {
        suite,
        case: case.into(),
        parameters: params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>(),
        unit,
        status: MeasurementStatus::Ok,
        reason: None,
        stats: Some(stats(value)),
        floor: None,
        histogram: None,
    }
}

const FIRST_MS: i64 = 1_700_000_000_000;

/// Run number `i`: node `i % NODES`, a minute after run `i - 1`.
fn run(i: usize) -> RunUpload {
    run_of(i % NODES, FIRST_MS + i as i64 * 60_000, i)
}

/// Run `k` of the probe node's history, `k + 1` minutes before the fleet's first run.
fn history(k: usize) -> RunUpload {
    run_of(PROBE, FIRST_MS - (k as i64 + 1) * 60_000, k)
}

fn run_of(node: usize, started: i64, i: usize) -> RunUpload {
    let jitter = 1.0 + (i % 17) as f64 / 100.0;
    let mut ms = Vec::with_capacity(PER_RUN);
    for (threads, bytes) in [(1u64, 1u64 << 20), (1, 256 << 20), (8, 64 << 20)] {
        let p = [("threads", threads.to_string()), ("bytes", bytes.to_string())];
        ms.push(measurement(Suite::System, "memcpy", &p, Unit::BytesPerSecond, 1e10 * jitter * threads as f64));
    }
    for transport in ["http_json", "grpc_protobuf", "unix_socket", "shared_memory"] {
        for payload in [64u64, 1024, 16 << 10, 256 << 10, 4 << 20] {
            let p = |extra: &[(&'static str, String)]| {
                let mut p = vec![
                    ("transport", transport.to_string()),
                    ("payload_bytes", payload.to_string()),
                    ("load", "closed".to_string()),
                    ("in_flight", "1".to_string()),
                    ("placement", "different_cores".to_string()),
                ];
                p.extend(extra.iter().cloned());
                p
            };
            let latency = (2e-5 + payload as f64 * 1e-10) * jitter;
            ms.push(measurement(Suite::Transport, "round_trip", &p(&[]), Unit::Seconds, latency));
            for side in ["client", "server"] {
                let cpu = latency / 3.0;
                ms.push(measurement(
                    Suite::Transport,
                    "cpu_per_request",
                    &p(&[("side", side.into())]),
                    Unit::Seconds,
                    cpu,
                ));
            }
        }
    }
    for variant in ["fp32", "fp16", "int8"] {
        for batch in [1u32, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048] {
            let p =
                [("variant", variant.to_string()), ("precision", variant.to_string()), ("batch", batch.to_string())];
            let latency = 1e-4 * f64::from(batch).sqrt() * jitter;
            ms.push(measurement(Suite::Quant, "mlp_latency", &p, Unit::Seconds, latency));
        }
    }
    ms.push(measurement(Suite::Quant, "mlp_throughput", &[("variant", "fp32".into())], Unit::RequestsPerSecond, 9e4));
    assert_eq!(ms.len(), PER_RUN);
    RunUpload {
        run_id: uuid::Uuid::new_v4(),
        agent_version: "bench".into(),
        started_at_ms: started,
        finished_at_ms: started + 5_000,
        node: NodeInfo {
            node_id: format!("node-{node}"),
            hostname: format!("host-{node}"),
            cpu_model: "bench".into(),
            cpu_cores: 64,
            memory_bytes: 1 << 40,
            kernel: "6.1".into(),
            instance_type: Some(format!("bench.{}xlarge", node % 8)),
            hourly_usd: None,
            gpus: vec![],
        },
        measurements: ms,
    }
}

/// Stores runs `from..to`, `agents` uploads in flight at once; the time it took.
async fn fill(store: &Store, agent: &str, from: usize, to: usize, agents: usize) -> Duration {
    fill_with(store, agent, from, to, agents, run, false).await
}

async fn fill_with(
    store: &Store,
    agent: &str,
    from: usize,
    to: usize,
    agents: usize,
    make: fn(usize) -> RunUpload,
    judge: bool,
) -> Duration {
    let start = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(from));
    let mut tasks = Vec::new();
    for _ in 0..agents {
        let (store, agent, next) = (store.clone(), agent.to_string(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= to {
                    break;
                }
                let run = make(i);
                store.insert_run(&agent, &run).await.expect("insert");
                if judge {
                    let settings = headroom_server::alerts::Settings::default();
                    headroom_server::alerts::after_ingest(&store, &settings, &run, &agent, true).await;
                }
                if i % 10_000 == 0 && i > from {
                    eprintln!("  … {} measurements stored", i * PER_RUN);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

/// p50 and p99 of `CALLS` calls.
async fn percentiles<F, Fut, T>(mut call: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        std::hint::black_box(call().await);
        times.push(start.elapsed());
    }
    times.sort();
    (times[CALLS / 2], times[(CALLS * 99).div_ceil(100) - 1])
}

/// Every read, timed once over the store as it is now: (name, p50, p99).
async fn reads(store: &Store, caller: &Caller, runs: usize) -> Vec<(&'static str, Duration, Duration)> {
    let newest = RunFilter { limit: 100, ..Default::default() };
    let probe = format!("node-{PROBE}");
    let node = RunFilter { node: Some(probe.clone()), limit: 100, ..Default::default() };
    let suite = RunFilter { suite: Some(Suite::Quant), limit: 100, ..Default::default() };
    // A run of the probe node from the middle of its history; its page lists and trends the
    // node's newest.
    let middle = store
        .list_runs(&RunFilter {
            node: Some(probe.clone()),
            limit: 1,
            before_ms: Some(run(runs / 2).started_at_ms),
            ..Default::default()
        })
        .await
        .unwrap()[0]
        .run_id;
    let middle_text = middle.to_string();
    let mut rows = Vec::new();
    macro_rules! time {
        ($name:expr, $call:expr) => {{
            let (p50, p99) = percentiles(|| async { $call.await.expect($name) }).await;
            rows.push(($name, p50, p99));
        }};
    }
    time!("SELECT 1 (floor)", async { Ok::<_, ()>(store.ping().await) });
    time!("Fleet page data (2 000 nodes, newest runs)", api::nodes::fleet(store, caller));
    time!("Right-sizing / Planner data (newest quant run per type)", api::nodes::measured(store, caller));
    time!("Transport page data (100 nodes' newest runs)", api::nodes::transport_runs(store, caller));
    time!("run page (run, node's 30 runs, trends)", api::runs::page(store, caller, &middle_text));
    time!("GET /runs/{id} (100 measurements)", store.get_run(middle));
    time!("list 100 newest runs", store.list_runs(&newest));
    time!("list a node's 100 newest runs", store.list_runs(&node));
    time!("list 100 newest quant runs", store.list_runs(&suite));
    time!("list nodes (API)", store.list_nodes());
    time!("list reports (200)", store.list_reports(200));
    rows
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

async fn bench(name: &str, url: &str, small_runs: usize, large_runs: usize) {
    let store = Store::connect(url).await.expect("connect");
    let agent = store.upsert_agent("bench", &auth::hash_token("bench")).await.unwrap();
    let caller = Caller(Some(Principal::User { id: "bench".into(), name: "bench".into(), role: Role::Admin }));
    let postgres = url.starts_with("postgres");
    let agents = if postgres { AGENTS } else { 1 };
    eprintln!("{name}: filling {} measurements", (small_runs + HISTORY) * PER_RUN);
    fill_with(&store, &agent, 0, HISTORY, agents, history, false).await;
    let first = fill(&store, &agent, 0, small_runs, agents).await;
    store.vacuum_analyze().await.unwrap();
    let small = reads(&store, &caller, small_runs).await;
    eprintln!("{name}: filling to {} measurements", large_runs * PER_RUN);
    let second = fill(&store, &agent, small_runs, large_runs, agents).await;
    store.vacuum_analyze().await.unwrap();
    let large = reads(&store, &caller, large_runs).await;
    let rate = |runs: usize, took: Duration| runs as f64 * PER_RUN as f64 / took.as_secs_f64();
    println!(
        "\n{name}, {NODES} nodes: ingest {:.0} measurements/s filling to {} ({} uploads at once), {:.0}/s on to {}",
        rate(small_runs, first),
        small_runs * PER_RUN,
        agents,
        rate(large_runs - small_runs, second),
        large_runs * PER_RUN,
    );
    let (s, l) = ((small_runs + HISTORY) * PER_RUN, (large_runs + HISTORY) * PER_RUN);
    println!(
        "{:<54} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "read",
        format!("p50 {}", short(s)),
        format!("p99 {}", short(s)),
        format!("p50 {}", short(l)),
        format!("p99 {}", short(l)),
        "p99 ratio"
    );
    for ((read, p50s, p99s), (_, p50l, p99l)) in small.iter().zip(&large) {
        println!(
            "{read:<54} {:>10} {:>10} {:>10} {:>10} {:>12.2}",
            ms(*p50s),
            ms(*p99s),
            ms(*p50l),
            ms(*p99l),
            p99l.as_secs_f64() / p99s.as_secs_f64()
        );
    }
    println!("(milliseconds; p99 ratio = p99 at {} ÷ p99 at {}, goal ≤ 2)", short(l), short(s));
    if postgres {
        ingest_against_copy(&store, url, &agent, large_runs).await;
    }
    store.close().await;
}

fn short(measurements: usize) -> String {
    match measurements {
        m if m >= 1_000_000 => format!("{}M", m / 1_000_000),
        m if m >= 1_000 => format!("{}k", m / 1_000),
        m => m.to_string(),
    }
}

/// Measurement rows per second through the ingest against `psql \copy` of the same rows.
async fn ingest_against_copy(store: &Store, url: &str, agent: &str, from: usize) {
    const RUNS: usize = 500;
    let took = fill(store, agent, from, from + RUNS, AGENTS).await;
    let ingest = (RUNS * PER_RUN) as f64 / took.as_secs_f64();
    // The same rows as CSV, into an empty table of the measurements table's columns, key and
    // indexes (one table: `LIKE` does not copy the partitioning).
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("measurements.csv");
    let mut text = String::new();
    for i in from + RUNS..from + 2 * RUNS {
        let r = run(i);
        for (seq, m) in r.measurements.iter().enumerate() {
            let s = m.stats.unwrap();
            let params = serde_json::to_string(&m.parameters).unwrap().replace('"', "\"\"");
            text.push_str(&format!(
                "{},{seq},{},{},{},\"{params}\",{},ok,,{},{},{},{},{},{},{},{},,,\n",
                r.run_id,
                r.started_at_ms,
                m.suite.as_str(),
                m.case,
                m.unit.as_str(),
                s.samples,
                s.mean,
                s.p50,
                s.p90,
                s.p99,
                s.p999,
                s.ci95_low,
                s.ci95_high
            ));
        }
    }
    std::fs::write(&csv, text).unwrap();
    let psql = |sql: &str| {
        let out = std::process::Command::new("psql").arg(url).args(["-v", "ON_ERROR_STOP=1", "-qc", sql]).output();
        let out = out.expect("psql (Debian's postgresql-client) for the \\copy baseline");
        assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
    };
    psql("DROP TABLE IF EXISTS measurements_copy; CREATE TABLE measurements_copy (LIKE measurements INCLUDING ALL)");
    let start = Instant::now();
    psql(&format!(
        "\\copy measurements_copy (run_id, seq, started_at_ms, suite, case_name, parameters_json, unit, status, reason, \
         samples, mean, p50, p90, p99, p999, ci95_low, ci95_high, floor_name, floor_value, histogram) FROM '{}' WITH (FORMAT csv)",
        csv.display()
    ));
    let copied = (RUNS * PER_RUN) as f64 / start.elapsed().as_secs_f64();
    psql("DROP TABLE measurements_copy");
    // One upload at a time: what a single agent waits for, its round trips to the database
    // included (with 8 at once the two cores are the limit instead).
    const ALONE: usize = 200;
    let took = fill(store, agent, from + 2 * RUNS, from + 2 * RUNS + ALONE, 1).await;
    // The same with what the ingest does after the commit: each headline judged against its
    // class's newest runs (regression alerts).
    let (first, last) = (from + 2 * RUNS + ALONE, from + 2 * RUNS + 2 * ALONE);
    let judged = fill_with(store, agent, first, last, 1, run, true).await;
    println!(
        "\none upload at a time: {:.2} ms a run of {PER_RUN} measurements ({ALONE} runs); {:.2} ms with the \
         regression judgement",
        took.as_secs_f64() * 1e3 / ALONE as f64,
        judged.as_secs_f64() * 1e3 / ALONE as f64
    );
    println!(
        "\ningest of {RUNS} runs, {AGENTS} uploads at once: {ingest:.0} measurements/s; psql \\copy of as many rows: \
         {copied:.0}/s; ratio {:.2} (goal ≥ 0.5)",
        ingest / copied
    );
}

#[tokio::main]
async fn main() {
    let large: usize =
        std::env::var("HEADROOM_BENCH_MEASUREMENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000);
    let (small_runs, large_runs) = (NODES, (large / PER_RUN).max(NODES + 1));
    if std::env::var("HEADROOM_BENCH_SKIP_SQLITE").is_err() {
        let dir = tempfile::tempdir().unwrap();
        let url = headroom_server::store::sqlite_url(dir.path());
        bench("SQLite (WAL, synchronous=FULL)", &url, small_runs, large_runs).await;
    }
    if let Ok(admin) = std::env::var("HEADROOM_BENCH_POSTGRES_URL") {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&admin).await.expect("Postgres");
        sqlx::query("DROP DATABASE IF EXISTS headroom_bench WITH (FORCE)").execute(&mut conn).await.unwrap();
        sqlx::query("CREATE DATABASE headroom_bench").execute(&mut conn).await.unwrap();
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(head, _)| head);
        bench("Postgres", &format!("{base}/headroom_bench"), small_runs, large_runs).await;
        sqlx::query("DROP DATABASE IF EXISTS headroom_bench WITH (FORCE)").execute(&mut conn).await.unwrap();
    }
}
