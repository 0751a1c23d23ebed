//! The server's rows of the fault table, against the real `headroom-server` binary on SQLite
//! and Postgres: SIGKILL under concurrent ingest, 200 concurrent large uploads, 500 agents at
//! once, and Postgres restarted under load (a private cluster, so the shared one is left alone).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{databases, sample_run};
use headroom_server::admin;
use headroom_server::store::{RunFilter, Store};
use model::{Measurement, RunUpload};
use reqwest::StatusCode;
use uuid::Uuid;

const SERVER: &str = env!("CARGO_BIN_EXE_headroom-server");

/// The real server binary over `url`, logging to `log`.
struct ServerProcess {
    child: Child,
    base: String,
}

impl ServerProcess {
    async fn start(url: &str, data_dir: &Path, addr: &str) -> Self {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(data_dir.join("server.log")).unwrap();
        let child = Command::new(SERVER)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--listen", addr])
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start headroom-server");
        let server = ServerProcess { child, base: format!("http://{addr}") };
        let http = reqwest::Client::new();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if http.get(format!("{}/readyz", server.base)).send().await.is_ok_and(|r| r.status().is_success()) {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("server at {addr} did not become ready: {}", log_tail(data_dir));
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_tail(data_dir: &Path) -> String {
    let log = std::fs::read_to_string(data_dir.join("server.log")).unwrap_or_default();
    log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// A run of `count` measurements on node `hostname` (memcpy at `count` sizes).
fn large_run(hostname: &str, count: usize) -> RunUpload {
    let mut run = sample_run(hostname);
    let template = run.measurements[0].clone();
    run.measurements = (0..count)
        .map(|i| Measurement {
            parameters: BTreeMap::from([("bytes".into(), (4096 + i).to_string()), ("threads".into(), "1".into())]),
            ..template.clone()
        })
        .collect();
    run
}

/// How one upload ended, after retrying 503s as the agent does.
#[derive(Debug)]
struct Outcome {
    status: StatusCode,
    unavailable: u32,
}

/// POSTs `body` until it is not a 503, honouring `Retry-After` (capped at 5 s); at most 60 tries.
async fn upload(http: &reqwest::Client, base: &str, token: &str, body: Vec<u8>) -> Result<Outcome, String> {
    let mut unavailable = 0;
    for _ in 0..60 {
        let response = http
            .post(format!("{base}/api/v1/runs"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        if status != StatusCode::SERVICE_UNAVAILABLE {
            let text = response.text().await.unwrap_or_default();
            return if status.is_success() {
                Ok(Outcome { status, unavailable })
            } else {
                Err(format!("{status}: {text}"))
            };
        }
        unavailable += 1;
        let wait = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .expect("a 503 carries Retry-After");
        tokio::time::sleep(Duration::from_secs(wait.min(5))).await;
    }
    Err(format!("still 503 after {unavailable} tries"))
}

/// Every stored run, with its measurement count as stored and as listed.
async fn stored(store: &Store) -> Vec<(Uuid, usize, u64)> {
    let runs = store.list_runs(&RunFilter { limit: 1000, ..Default::default() }).await.expect("runs");
    let mut out = Vec::new();
    for run in runs {
        let detail = store.get_run(run.run_id).await.expect("read run").expect("listed run readable");
        out.push((run.run_id, detail.measurements.len(), run.measurement_count));
    }
    out
}

/// Sends every run concurrently (one task each) with 503s retried; panics on any other error.
async fn upload_all(base: &str, uploads: Vec<(String, RunUpload)>, own_client: bool) -> (u32, Duration) {
    let shared = reqwest::Client::new();
    let started = Instant::now();
    let tasks: Vec<_> = uploads
        .into_iter()
        .map(|(token, run)| {
            let http = if own_client { reqwest::Client::new() } else { shared.clone() };
            let base = base.to_string();
            tokio::spawn(async move {
                let body = serde_json::to_vec(&run).unwrap();
                upload(&http, &base, &token, body).await.map_err(|e| format!("run {}: {e}", run.run_id))
            })
        })
        .collect();
    let mut unavailable = 0;
    let mut errors = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(outcome) => {
                assert_eq!(outcome.status, StatusCode::CREATED);
                unavailable += outcome.unavailable;
            }
            Err(e) => errors.push(e),
        }
    }
    assert!(errors.is_empty(), "{} uploads failed, e.g. {:?}", errors.len(), &errors[..errors.len().min(3)]);
    (unavailable, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_under_200_concurrent_ingests_keeps_every_acknowledged_run_whole() {
    const RUNS: usize = 200;
    const MEASUREMENTS: usize = 300;
    for db in databases().await {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&db.url).await.unwrap();
        let token = admin::create_agent_token(&store, "fleet").await.unwrap();
        let addr = free_addr();
        let server = ServerProcess::start(&db.url, dir.path(), &addr).await;
        let runs: Vec<RunUpload> = (0..RUNS).map(|i| large_run(&format!("node-{}", i % 10), MEASUREMENTS)).collect();

        let http = reqwest::Client::new();
        let acknowledged = Arc::new(Mutex::new(HashSet::new()));
        let tasks: Vec<_> = runs
            .iter()
            .map(|run| {
                let (http, base, token, acknowledged) =
                    (http.clone(), server.base.clone(), token.clone(), acknowledged.clone());
                let (run_id, body) = (run.run_id, serde_json::to_vec(run).unwrap());
                tokio::spawn(async move {
                    let response = http
                        .post(format!("{base}/api/v1/runs"))
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    if response.is_ok_and(|r| r.status() == StatusCode::CREATED) {
                        acknowledged.lock().unwrap().insert(run_id);
                    }
                })
            })
            .collect();
        // Kill once a tenth is acknowledged, the rest in flight.
        let deadline = Instant::now() + Duration::from_secs(120);
        while acknowledged.lock().unwrap().len() < RUNS / 10 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        server.kill();
        for task in tasks {
            task.await.unwrap();
        }
        let acknowledged = acknowledged.lock().unwrap().clone();
        assert!(acknowledged.len() >= RUNS / 10, "{}: only {} acknowledged", db.backend, acknowledged.len());
        assert!(acknowledged.len() < RUNS, "{}: the kill came after every upload ended", db.backend);

        // After a restart: every acknowledged run is there whole, and nothing stored is partial.
        let server = ServerProcess::start(&db.url, dir.path(), &addr).await;
        let after = stored(&store).await;
        for (run_id, rows, listed) in &after {
            assert_eq!((*rows, *listed), (MEASUREMENTS, MEASUREMENTS as u64), "{}: run {run_id} partial", db.backend);
        }
        let present: HashSet<Uuid> = after.iter().map(|(id, _, _)| *id).collect();
        let lost: Vec<_> = acknowledged.difference(&present).collect();
        assert!(lost.is_empty(), "{}: acknowledged runs lost by the kill: {lost:?}", db.backend);

        // The agents send again what was not acknowledged: each run ends stored exactly once.
        for run in &runs {
            let outcome = upload(&http, &server.base, &token, serde_json::to_vec(run).unwrap()).await.unwrap();
            if acknowledged.contains(&run.run_id) {
                assert_eq!(outcome.status, StatusCode::OK, "{}: a stored run is a duplicate", db.backend);
            }
        }
        let after = stored(&store).await;
        assert_eq!(after.len(), RUNS, "{}: every run stored exactly once", db.backend);
        eprintln!(
            "{}: {} of {RUNS} acknowledged before SIGKILL, {} stored whole at restart, 0 partial",
            db.backend,
            acknowledged.len(),
            present.len()
        );
        server.kill();
        store.close().await;
        db.drop_database().await;
    }
}

/// Finding 9: SQLite answered 125 of these with 500 "pool timed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_uploads_of_2000_measurements_all_succeed() {
    for db in databases().await {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&db.url).await.unwrap();
        let token = admin::create_agent_token(&store, "fleet").await.unwrap();
        let server = ServerProcess::start(&db.url, dir.path(), &free_addr()).await;
        let uploads = (0..200).map(|i| (token.clone(), large_run(&format!("node-{}", i % 20), 2000))).collect();
        let (unavailable, took) = upload_all(&server.base, uploads, false).await;
        let after = stored(&store).await;
        assert_eq!(after.len(), 200, "{}", db.backend);
        assert!(after.iter().all(|(_, rows, _)| *rows == 2000), "{}", db.backend);
        eprintln!("{}: 200 × 2000 measurements stored in {took:.1?}; 503s retried: {unavailable}", db.backend);
        server.kill();
        store.close().await;
        db.drop_database().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_agents_uploading_at_once_all_get_through() {
    for db in databases().await {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&db.url).await.unwrap();
        let mut uploads = Vec::new();
        for i in 0..500 {
            let token = admin::create_agent_token(&store, &format!("agent-{i}")).await.unwrap();
            uploads.push((token, sample_run(&format!("node-{i}"))));
        }
        let server = ServerProcess::start(&db.url, dir.path(), &free_addr()).await;
        // Each agent its own client, so its own connection.
        let (unavailable, took) = upload_all(&server.base, uploads, true).await;
        assert_eq!(stored(&store).await.len(), 500, "{}", db.backend);
        assert_eq!(store.list_nodes().await.unwrap().len(), 500, "{}", db.backend);
        eprintln!("{}: 500 agents stored in {took:.1?}; 503s retried: {unavailable}", db.backend);
        server.kill();
        store.close().await;
        db.drop_database().await;
    }
}

/// A Postgres cluster of the test's own in a temp dir (`initdb`, `pg_ctl`), so it can be
/// stopped without touching the shared one. As root, the cluster runs as `postgres`.
struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivatePostgres {
    fn init() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.flatten().map(|v| v.path().join("bin")).find(|b| b.join("initdb").exists()))
            .expect("HEADROOM_TEST_POSTGRES_URL is set, so the Postgres restart test needs initdb and pg_ctl");
        let dir = tempfile::tempdir().unwrap();
        let port = free_addr().rsplit_once(':').unwrap().1.parse().unwrap();
        let pg = PrivatePostgres { bin, dir, port };
        if Self::as_root() {
            let chown = Command::new("chown").args(["-R", "postgres"]).arg(pg.dir.path()).status().unwrap();
            assert!(chown.success());
        }
        let data = pg.data();
        pg.command("initdb", &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"]);
        pg.start();
        pg
    }

    fn as_root() -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn command(&self, tool: &str, args: &[&str]) {
        let tool = self.bin.join(tool);
        let output = if Self::as_root() {
            Command::new("runuser").args(["-u", "postgres", "--"]).arg(&tool).args(args).output()
        } else {
            Command::new(&tool).args(args).output()
        }
        .unwrap();
        assert!(output.status.success(), "{}: {}", tool.display(), String::from_utf8_lossy(&output.stderr));
    }

    fn start(&self) {
        let options = format!("-p {} -c listen_addresses=127.0.0.1 -k {}", self.port, self.dir.path().display());
        let log = self.dir.path().join("postgres.log").display().to_string();
        self.command("pg_ctl", &["-D", &self.data(), "-o", &options, "-l", &log, "-w", "start"]);
    }

    fn stop(&self) {
        self.command("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| self.stop());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_costs_503s_and_nothing_acknowledged() {
    if std::env::var("HEADROOM_TEST_POSTGRES_URL").map_or(true, |u| u.is_empty()) {
        eprintln!("skipped: HEADROOM_TEST_POSTGRES_URL is not set (CI sets it)");
        return;
    }
    let pg = PrivatePostgres::init();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(&pg.url()).await.unwrap();
    let token = admin::create_agent_token(&store, "fleet").await.unwrap();
    store.close().await;
    let server = ServerProcess::start(&pg.url(), dir.path(), &free_addr()).await;

    // Eight agents upload back to back, without retrying: every answer is recorded.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(Vec::<(Uuid, Option<StatusCode>, Instant)>::new()));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (stop, answers, base, token) = (stop.clone(), answers.clone(), server.base.clone(), token.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let run = large_run(&format!("node-{w}"), 50);
                    let response = http
                        .post(format!("{base}/api/v1/runs"))
                        .bearer_auth(&token)
                        .json(&run)
                        .send()
                        .await
                        .map(|r| r.status())
                        .ok();
                    answers.lock().unwrap().push((run.run_id, response, Instant::now()));
                    if response != Some(StatusCode::CREATED) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        })
        .collect();
    let http = reqwest::Client::new();
    tokio::time::sleep(Duration::from_secs(2)).await;
    pg.stop();
    let down_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ready = http.get(format!("{}/readyz", server.base)).send().await.unwrap().status();
    assert_eq!(ready, StatusCode::SERVICE_UNAVAILABLE, "/readyz while Postgres is down");
    pg.start();
    let up_at = Instant::now();
    // Recovery without a restart: acknowledgements resume.
    let deadline = Instant::now() + Duration::from_secs(30);
    let recovered = loop {
        let late =
            answers.lock().unwrap().iter().filter(|(_, s, at)| *at > up_at && *s == Some(StatusCode::CREATED)).count();
        if late >= 8 || Instant::now() > deadline {
            break late;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert!(recovered >= 8, "uploads did not resume after Postgres came back: {recovered}");
    assert_eq!(http.get(format!("{}/readyz", server.base)).send().await.unwrap().status(), StatusCode::OK);

    let answers = answers.lock().unwrap().clone();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (_, status, _) in &answers {
        *tally.entry(status.map_or("no answer".into(), |s| s.as_u16().to_string())).or_default() += 1;
    }
    eprintln!("answers while Postgres was stopped and started: {tally:?}");
    let unavailable = answers.iter().filter(|(_, s, at)| *s == Some(StatusCode::SERVICE_UNAVAILABLE) && *at > down_at);
    assert!(unavailable.count() > 0, "no 503 while Postgres was down: {tally:?}");
    let wrong: Vec<_> = answers
        .iter()
        .filter(|(_, s, _)| !matches!(s.map(|s| s.as_u16()), Some(201 | 503)))
        .map(|(id, s, _)| (id, s))
        .collect();
    assert!(wrong.is_empty(), "answers other than 201 or 503 (the server must not fail or drop): {wrong:?}");

    let store = Store::connect(&pg.url()).await.unwrap();
    let present: HashSet<Uuid> = stored_all(&store).await;
    let lost: Vec<_> =
        answers.iter().filter(|(id, s, _)| *s == Some(StatusCode::CREATED) && !present.contains(id)).collect();
    assert!(lost.is_empty(), "acknowledged runs lost: {lost:?}");
    store.close().await;
    server.kill();
}

/// Every stored run id (more than a page of [`stored`]).
async fn stored_all(store: &Store) -> HashSet<Uuid> {
    let runs = store.list_runs(&RunFilter { limit: 100_000, ..Default::default() }).await.expect("runs");
    runs.into_iter().map(|r| r.run_id).collect()
}
