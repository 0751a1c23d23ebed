//! Test harness: a real database per test (an SQLite file always, a fresh Postgres database
//! when `HEADROOM_TEST_POSTGRES_URL` is set) and the real router on a real port.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use headroom_server::auth::Role;
use headroom_server::store::Store;
use headroom_server::{AppState, admin};
use model::{Floor, Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A database for one test.
pub struct TestDb {
    pub backend: &'static str,
    pub url: String,
    admin_url: Option<String>,
    name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

/// Every backend this run covers. Panics when Postgres is asked for but unreachable, so a
/// misconfigured CI fails instead of silently testing less.
pub async fn databases() -> Vec<TestDb> {
    let mut dbs = vec![sqlite()];
    if let Ok(admin_url) = std::env::var("HEADROOM_TEST_POSTGRES_URL")
        && !admin_url.is_empty()
    {
        dbs.push(postgres(&admin_url).await);
    }
    dbs
}

/// An SQLite file in a temp dir, for tests of what does not touch the store.
pub fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    TestDb {
        backend: "sqlite",
        url: headroom_server::store::sqlite_url(dir.path()),
        admin_url: None,
        name: None,
        _dir: Some(dir),
    }
}

async fn postgres(admin_url: &str) -> TestDb {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let name = format!("headroom_t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::AnyConnection::connect(admin_url)
        .await
        .unwrap_or_else(|e| panic!("HEADROOM_TEST_POSTGRES_URL is set but Postgres is unreachable: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    conn.close().await.ok();
    let (base, query) = admin_url.split_once('?').map_or((admin_url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(head, _)| head);
    let url = match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    };
    TestDb { backend: "postgres", url, admin_url: Some(admin_url.to_string()), name: Some(name), _dir: None }
}

impl TestDb {
    /// Drops a Postgres test database (SQLite files go with their temp dir).
    pub async fn drop_database(&self) {
        use sqlx::Connection;
        if let (Some(admin_url), Some(name)) = (&self.admin_url, &self.name)
            && let Ok(mut conn) = sqlx::AnyConnection::connect(admin_url).await
        {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&mut conn)
                .await;
        }
    }
}

/// A running server over one database.
pub struct TestApp {
    pub backend: &'static str,
    pub addr: SocketAddr,
    pub base: String,
    pub store: Store,
    pub http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// Connects (migrating) and serves the real router on 127.0.0.1:0.
pub async fn spawn(db: &TestDb) -> TestApp {
    spawn_with(db, |_| {}).await
}

/// [`spawn`] with the server's state changed by `configure` first.
pub async fn spawn_with(db: &TestDb, configure: impl FnOnce(&mut AppState)) -> TestApp {
    let store = Store::connect(&db.url).await.expect("connect store");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = oneshot::channel::<()>();
    let mut state = AppState::new(store.clone(), &PathBuf::from("/nonexistent-site"));
    configure(&mut state);
    let task = tokio::spawn(headroom_server::serve(listener, state, async move {
        let _ = rx.await;
    }));
    // Bounded, so a request the server never answers fails the test instead of hanging CI.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .expect("client");
    TestApp {
        backend: db.backend,
        addr,
        base: format!("http://{addr}"),
        store,
        http,
        shutdown: Some(tx),
        task: Some(task),
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Stops the server and closes the store.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            // Graceful shutdown waits for open requests; one that never ends is a bug to name.
            tokio::time::timeout(std::time::Duration::from_secs(60), task)
                .await
                .expect("the server did not stop within 60 s of shutdown: a request is still open")
                .expect("server task")
                .expect("server result");
        }
        self.store.close().await;
    }

    pub async fn agent_token(&self, name: &str) -> String {
        admin::create_agent_token(&self.store, name).await.expect("agent token")
    }

    /// An API token of a new user with `role`.
    pub async fn user_token(&self, role: Role) -> String {
        let name = format!("{}-{}", role.as_str(), uuid::Uuid::new_v4().simple());
        admin::create_user(&self.store, &name, role, Some("correct horse battery".into())).await.expect("user");
        admin::create_api_token(&self.store, &name).await.expect("api token")
    }

    /// A new user with `role` and `password`, signed in: the session cookie (`name=value`).
    pub async fn session(&self, role: Role) -> String {
        let name = format!("{}-{}", role.as_str(), uuid::Uuid::new_v4().simple());
        admin::create_user(&self.store, &name, role, Some("correct horse battery".into())).await.expect("user");
        let form = [("name", name.as_str()), ("password", "correct horse battery")];
        let response = self.http.post(self.url("/login")).form(&form).send().await.expect("sign in");
        let cookie = response.headers().get("set-cookie").expect("signed in").to_str().expect("ascii");
        cookie.split(';').next().expect("cookie").to_string()
    }

    /// How many runs and nodes are stored.
    pub async fn counts(&self) -> (usize, usize) {
        let filter = headroom_server::store::RunFilter { limit: 1000, ..Default::default() };
        let runs = self.store.list_runs(&filter).await.expect("runs").len();
        let nodes = self.store.list_nodes().await.expect("nodes").len();
        (runs, nodes)
    }
}

pub fn stats(p50: f64) -> Stats {
    Stats {
        samples: 20,
        mean: p50,
        p50,
        p90: p50 * 1.1,
        p99: p50 * 1.2,
        p999: p50 * 1.3,
        ci95_low: p50 * 0.99,
        ci95_high: p50 * 1.01,
    }
}

/// Latencies in nanoseconds as an agent encodes them.
pub fn histogram_of(nanoseconds: &[u64]) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer;
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000_000, 3).unwrap();
    for &v in nanoseconds {
        h.record(v).unwrap();
    }
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new().serialize(&h, &mut bytes).unwrap();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A realistic run: three memcpy sizes, a case with a floor, and a skipped case.
pub fn sample_run(hostname: &str) -> RunUpload {
    let memcpy = |bytes: u64, bandwidth: f64| Measurement {
        suite: Suite::System,
        case: "memcpy".into(),
        parameters: BTreeMap::from([("bytes".into(), bytes.to_string()), ("threads".into(), "1".into())]),
        unit: Unit::BytesPerSecond,
        status: MeasurementStatus::Ok,
        reason: None,
        stats: Some(stats(bandwidth)),
        floor: None,
        histogram: None,
    };
    RunUpload {
        run_id: uuid::Uuid::new_v4(),
        agent_version: "0.1.0".into(),
        started_at_ms: 1_796_000_000_000,
        finished_at_ms: 1_796_000_005_000,
        node: NodeInfo {
            node_id: format!("id-{hostname}"),
            hostname: hostname.into(),
            cpu_model: "Test CPU".into(),
            cpu_cores: 8,
            memory_bytes: 32 << 30,
            kernel: "6.1.0".into(),
            instance_type: Some("c7i.2xlarge".into()),
            hourly_usd: Some(0.357),
            gpus: vec![],
        },
        measurements: vec![
            memcpy(256 << 10, 100e9),
            memcpy(256 << 20, 12e9),
            memcpy(8 << 20, 40e9),
            Measurement {
                suite: Suite::Transport,
                case: "unix_socket".into(),
                parameters: BTreeMap::from([("payload_bytes".into(), "1024".into())]),
                unit: Unit::Seconds,
                status: MeasurementStatus::Ok,
                reason: None,
                stats: Some(stats(4e-6)),
                floor: Some(Floor { name: "spin_ping_pong".into(), value: 2e-7 }),
                histogram: Some(histogram_of(&[4_000; 20])),
            },
            Measurement {
                suite: Suite::Transfer,
                case: "h2d_pinned".into(),
                parameters: BTreeMap::new(),
                unit: Unit::BytesPerSecond,
                status: MeasurementStatus::Skipped,
                reason: Some("no CUDA driver".into()),
                stats: None,
                floor: None,
                histogram: None,
            },
        ],
    }
}

/// POSTs `body` as JSON to `path`; the answer as JSON (or as a JSON string when it is not JSON).
pub async fn post(
    app: &TestApp,
    token: Option<&str>,
    path: &str,
    body: impl Into<reqwest::Body>,
) -> (reqwest::StatusCode, serde_json::Value) {
    let mut request = app.http.post(app.url(path)).header("content-type", "application/json").body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

/// GETs a versioned CSV (the price catalog, the grid-intensity table): its status, the version
/// its `version_header` names, and its text.
pub async fn csv_get(
    app: &TestApp,
    token: &str,
    path: &str,
    version_header: &str,
) -> (reqwest::StatusCode, String, String) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.unwrap();
    let version = response.headers().get(version_header).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (response.status(), version, response.text().await.unwrap())
}

/// POSTs `csv` as `text/csv` to `path`: the status and the JSON answer.
pub async fn csv_post(app: &TestApp, token: &str, path: &str, csv: &str) -> (reqwest::StatusCode, serde_json::Value) {
    let response = app
        .http
        .post(app.url(path))
        .bearer_auth(token)
        .header("content-type", "text/csv")
        .body(csv.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// The measured nodes and services the Planner and Right-sizing size with, as the page-data
/// call answers `token`.
pub async fn measured_nodes(app: &TestApp, token: &str) -> serde_json::Value {
    let response = app
        .http
        .post(app.url("/srv/measured_nodes"))
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .expect("send");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("the measured fleet as JSON")
}

/// A run of `node` with quantization and transport figures, every latency × `scale`.
pub fn fleet_run(node: &str, started_at_ms: i64, scale: f64) -> model::RunUpload {
    let m = |suite: Suite, case: &str, params: &[(&str, &str)], value: f64| Measurement {
        suite,
        case: case.into(),
        parameters: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        unit: Unit::Seconds,
        status: MeasurementStatus::Ok,
        reason: None,
        stats: Some(stats(value)),
        floor: None,
        histogram: None,
    };
    let mut run = sample_run(node);
    run.started_at_ms = started_at_ms;
    run.finished_at_ms = started_at_ms + 5_000;
    for batch in ["1", "8"] {
        let b: f64 = batch.parse().unwrap();
        run.measurements.push(m(
            Suite::Quant,
            "mlp_latency",
            &[("variant", "fp32"), ("precision", "fp32"), ("batch", batch)],
            1e-4 * b * scale,
        ));
        run.measurements.push(m(
            Suite::Quant,
            "mlp_latency",
            &[("variant", "int8"), ("precision", "int8"), ("batch", batch)],
            4e-5 * b * scale,
        ));
    }
    run.measurements.push(m(Suite::Quant, "mlp_accuracy_delta", &[("variant", "int8")], -0.002));
    run.measurements.push(m(Suite::Quant, "mlp_throughput", &[("variant", "fp32"), ("batch", "8")], 8e4 / scale));
    for payload in ["1024", "65536"] {
        let base =
            [("transport", "http_json"), ("load", "closed"), ("in_flight", "1"), ("placement", "different_cores")];
        let with = |extra: &[(&'static str, &'static str)]| base.iter().chain(extra).copied().collect::<Vec<_>>();
        let p: f64 = payload.parse().unwrap();
        run.measurements.push(m(
            Suite::Transport,
            "round_trip",
            &with(&[("payload_bytes", payload)]),
            5e-5 * scale + p * 1e-10,
        ));
        for side in ["client", "server"] {
            run.measurements.push(m(
                Suite::Transport,
                "cpu_per_request",
                &with(&[("payload_bytes", payload), ("side", side)]),
                2e-5 * scale,
            ));
        }
    }
    run
}
