//! `cargo bench -p headroom-server --bench store`: read paths over a store holding a million
//! measurements (10 000 runs × 100, over 100 nodes), on SQLite and, when
//! `HEADROOM_BENCH_POSTGRES_URL` names a server where it may create a database, on Postgres.
//! Each figure is the median of 21 calls and its ratio to `SELECT 1` in the same run.
//! `HEADROOM_BENCH_RUNS` changes the number of runs. Postgres is `ANALYZE`d after loading, as
//! autovacuum would have done for a database in service.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use headroom_server::auth;
use headroom_server::store::{RunFilter, Store};
use model::{Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};

fn run(i: usize, nodes: usize) -> RunUpload {
    let node = i % nodes;
    let stats = |v: f64| Stats { samples: 40, mean: v, p50: v, p90: v, p99: v, p999: v, ci95_low: v, ci95_high: v };
    let measurements = (0..100)
        .map(|k| Measurement {
            suite: if k < 3 { Suite::System } else { Suite::Transport },
            case: if k < 3 { "memcpy".into() } else { format!("case-{k}") },
            parameters: BTreeMap::from([("bytes".to_string(), (1u64 << (10 + k % 20)).to_string())]),
            unit: Unit::BytesPerSecond,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(stats(1e9 + (i * 100 + k) as f64)),
            floor: None,
            histogram: None,
        })
        .collect();
    RunUpload {
        run_id: uuid::Uuid::new_v4(),
        agent_version: "bench".into(),
        started_at_ms: 1_700_000_000_000 + i as i64 * 60_000,
        finished_at_ms: 1_700_000_000_000 + i as i64 * 60_000 + 5_000,
        node: NodeInfo {
            node_id: format!("node-{node}"),
            hostname: format!("host-{node}"),
            cpu_model: "bench".into(),
            cpu_cores: 64,
            memory_bytes: 1 << 40,
            kernel: "6.1".into(),
            instance_type: None,
            hourly_usd: None,
            gpus: vec![],
        },
        measurements,
    }
}

async fn median<F, Fut, T>(mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut times = Vec::new();
    for _ in 0..21 {
        let start = Instant::now();
        std::hint::black_box(call().await);
        times.push(start.elapsed());
    }
    times.sort();
    times[10]
}

async fn bench(name: &str, url: &str, runs: usize) {
    let store = Store::connect(url).await.expect("connect");
    let agent = store.upsert_agent("bench", &auth::hash_token("bench")).await.unwrap();
    let start = Instant::now();
    let mut last = None;
    for i in 0..runs {
        let r = run(i, 100);
        store.insert_run(&agent, &r).await.unwrap();
        last = Some(r.run_id);
    }
    let filled = start.elapsed();
    // A database in service has planner statistics; one just bulk-loaded has not yet.
    if url.starts_with("postgres") {
        store.analyze().await.unwrap();
    }
    let last = last.unwrap();
    let baseline = median(|| store.ping()).await;
    let newest = RunFilter { limit: 100, ..Default::default() };
    let one_node = RunFilter { node: Some("node-7".into()), limit: 100, ..Default::default() };
    let system = RunFilter { suite: Some(Suite::System), limit: 100, ..Default::default() };
    let fresh: Vec<RunUpload> = (0..21).map(|i| run(runs + i, 100)).collect();
    let mut next = fresh.iter();
    let rows = [
        ("list nodes (100, with latest memcpy)", median(|| store.list_nodes()).await),
        ("list 100 newest runs", median(|| store.list_runs(&newest)).await),
        ("list 100 runs of one node", median(|| store.list_runs(&one_node)).await),
        ("list 100 runs with suite system", median(|| store.list_runs(&system)).await),
        ("get one run with 100 measurements", median(|| store.get_run(last)).await),
        ("ingest one run of 100 measurements", median(|| store.insert_run(&agent, next.next().unwrap())).await),
    ];
    println!("\n{name}: {runs} runs, {} measurements, filled in {filled:.1?}", runs * 100);
    println!("{:<40} {:>10} {:>12}", "operation", "median", "× SELECT 1");
    println!("{:<40} {:>10} {:>12}", "SELECT 1 (baseline)", format!("{baseline:.2?}"), "1.0");
    for (op, took) in rows {
        println!("{op:<40} {:>10} {:>12.1}", format!("{took:.2?}"), took.as_secs_f64() / baseline.as_secs_f64());
    }
    store.close().await;
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("HEADROOM_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    bench("SQLite (WAL, synchronous=FULL)", &headroom_server::store::sqlite_url(dir.path()), runs).await;
    if let Ok(admin) = std::env::var("HEADROOM_BENCH_POSTGRES_URL") {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&admin).await.expect("Postgres");
        sqlx::query("DROP DATABASE IF EXISTS headroom_bench WITH (FORCE)").execute(&mut conn).await.unwrap();
        sqlx::query("CREATE DATABASE headroom_bench").execute(&mut conn).await.unwrap();
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(head, _)| head);
        bench("Postgres", &format!("{base}/headroom_bench"), runs).await;
        sqlx::query("DROP DATABASE IF EXISTS headroom_bench WITH (FORCE)").execute(&mut conn).await.unwrap();
    }
}
