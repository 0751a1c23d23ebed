//! The agent binary against a real server: upload, outage, spool, retry.

use std::path::Path;
use std::process::Output;

use assert_cmd::cargo::CommandCargoExt;
use headroom_server::store::{RunFilter, Store};
use headroom_server::{AppState, admin};
use tokio::sync::oneshot;

struct Server {
    url: String,
    store: Store,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(db_dir: &Path, listen: &str) -> Server {
    start_with(db_dir, listen, false).await
}

/// Like a proxy that only speaks HTTP/1: gRPC requests are refused with 503.
async fn refuse_grpc(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let grpc = request.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc { axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response() } else { next.run(request).await }
}

async fn start_with(db_dir: &Path, listen: &str, without_grpc: bool) -> Server {
    let store = Store::connect(&headroom_server::store::sqlite_url(db_dir)).await.unwrap();
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, rx) = oneshot::channel::<()>();
    let state = AppState::new(store.clone(), Path::new("/nonexistent-site"));
    let shutdown = async move {
        let _ = rx.await;
    };
    let task = if without_grpc {
        let app = headroom_server::app(state).layer(axum::middleware::from_fn(refuse_grpc));
        tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await })
    } else {
        tokio::spawn(headroom_server::serve(listener, state, shutdown))
    };
    Server { url, store, stop, task }
}

/// The real router behind TLS with a fresh self-signed certificate for `localhost`; returns the
/// server and the certificate (PEM) an agent must trust.
async fn start_tls(db_dir: &Path, without_grpc: bool) -> (Server, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = certified.cert.pem();
    let key = certified.signing_key.serialize_pem();
    let config =
        axum_server::tls_rustls::RustlsConfig::from_pem(cert.clone().into_bytes(), key.into_bytes()).await.unwrap();
    let store = Store::connect(&headroom_server::store::sqlite_url(db_dir)).await.unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://localhost:{}", listener.local_addr().unwrap().port());
    let mut state = AppState::new(store.clone(), Path::new("/nonexistent-site"));
    state.tls = true;
    let mut router = headroom_server::app(state);
    if without_grpc {
        router = router.layer(axum::middleware::from_fn(refuse_grpc));
    }
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(headroom_server::serve_router_tls(listener, router, config, async move {
        let _ = rx.await;
    }));
    (Server { url, store, stop, task }, cert)
}

impl Server {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
        self.store.close().await;
    }

    async fn run_count(&self) -> usize {
        self.store.list_runs(&RunFilter { limit: 100, ..Default::default() }).await.unwrap().len()
    }
}

/// Runs the agent binary off the async runtime.
async fn agent(args: &[&str], spool: &Path, server: Option<(&str, &str)>) -> Output {
    let mut cmd = std::process::Command::cargo_bin("measurements-agent").unwrap();
    cmd.args(args).arg("--spool").arg(spool).env_remove("HEADROOM_SERVER").env_remove("HEADROOM_TOKEN");
    if let Some((url, token)) = server {
        cmd.args(["--server", url, "--token", token]);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn spooled(spool: &Path) -> usize {
    std::fs::read_dir(spool)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
        .count()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_an_outage_and_is_uploaded_later() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let server = start(db.path(), "127.0.0.1:0").await;
    let token = admin::create_agent_token(&server.store, "node-agent").await.unwrap();
    let url = server.url.clone();

    // Server up: the run is measured, uploaded and leaves the spool.
    let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("over gRPC"), "gRPC is the first choice: {}", text(&out));
    assert_eq!(spooled(spool.path()), 0);
    assert_eq!(server.run_count().await, 1);
    let nodes = server.store.list_nodes().await.unwrap();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(nodes[0].hostname, hostname.trim(), "the node is this machine");
    let bandwidth = nodes[0].memcpy_bytes_per_second.expect("memcpy measured");
    assert!(bandwidth > 1e8, "memcpy bandwidth {bandwidth} B/s is implausibly low");

    // Server down: the run stays in the spool and the exit code says so.
    server.stop().await;
    let out = agent(&["run", "system", "--quick", "--attempts", "2"], spool.path(), Some((&url, &token))).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("kept in the spool"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 1);

    // Server back on the same address and database: `upload` delivers it exactly once.
    let server = start(db.path(), url.trim_start_matches("http://")).await;
    let out = agent(&["upload"], spool.path(), Some((&url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0);
    assert_eq!(server.run_count().await, 2);
    let out = agent(&["upload"], spool.path(), Some((&url, &token))).await;
    assert!(text(&out).contains("0 uploaded"), "{}", text(&out));
    assert_eq!(server.run_count().await, 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_grpc_cannot_get_through_the_run_goes_over_http() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let server = start_with(db.path(), "127.0.0.1:0", true).await;
    let token = admin::create_agent_token(&server.store, "behind-proxy").await.unwrap();
    let url = server.url.clone();
    let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(server.run_count().await, 1, "the HTTP fallback delivered the run");
    assert!(text(&out).contains("over HTTP"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_to_an_https_server_over_both_doors_and_refuse_an_untrusted_certificate() {
    for without_grpc in [false, true] {
        let db = tempfile::tempdir().unwrap();
        let spool = tempfile::tempdir().unwrap();
        let (server, cert) = start_tls(db.path(), without_grpc).await;
        let ca = db.path().join("ca.pem");
        std::fs::write(&ca, &cert).unwrap();
        let token = admin::create_agent_token(&server.store, "tls-agent").await.unwrap();
        let url = server.url.clone();

        // Without trusting the self-signed certificate, nothing is sent and the run is kept.
        let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&url, &token))).await;
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        assert!(text(&out).to_lowercase().contains("certificate"), "{}", text(&out));
        assert_eq!(server.run_count().await, 0);

        let ca_arg = ca.to_str().unwrap();
        let out = agent(&["upload", "--ca-cert", ca_arg], spool.path(), Some((&url, &token))).await;
        assert!(out.status.success(), "{}", text(&out));
        let door = if without_grpc { "over HTTP" } else { "over gRPC" };
        assert!(text(&out).contains(door), "expected {door}: {}", text(&out));
        assert_eq!(server.run_count().await, 1);
        assert_eq!(spooled(spool.path()), 0);
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_keeps_the_run_and_says_why() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let server = start(db.path(), "127.0.0.1:0").await;
    let url = server.url.clone();
    let out = agent(&["run", "system", "--quick"], spool.path(), Some((&url, "hr_agent_wrong"))).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("unknown or revoked token"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 1, "a credentials problem must not lose the run");
    assert_eq!(server.run_count().await, 0);
    server.stop().await;
}

#[tokio::test]
async fn without_a_server_the_run_is_printed_and_spooled() {
    let spool = tempfile::tempdir().unwrap();
    let out = agent(&["run", "system", "--quick"], spool.path(), None).await;
    assert!(out.status.success(), "{}", text(&out));
    let run: model::RunUpload = serde_json::from_slice(&out.stdout).expect("stdout is the run as JSON");
    run.validate().expect("the agent produces valid runs");
    assert_eq!(run.suites(), vec![model::Suite::System]);
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(run.measurements.len(), if cores > 1 { 4 } else { 3 });
    if cores > 1 {
        let all_cores =
            run.measurements.iter().find(|m| m.parameters["threads"] == cores.to_string()).expect("an all-core case");
        let one_core = run.measurements.iter().find(|m| m.parameters["bytes"] == (256usize << 20).to_string()).unwrap();
        // Not a speed assertion: both figures exist and are plausible DRAM bandwidths.
        assert!(all_cores.stats.unwrap().p50 > 1e8 && one_core.stats.unwrap().p50 > 1e8);
    }
    assert_eq!(spooled(spool.path()), 1);
}

#[tokio::test]
async fn unknown_suites_are_refused_with_the_choices() {
    let spool = tempfile::tempdir().unwrap();
    let out = agent(&["run", "warp"], spool.path(), None).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("expected one of: system, transport, transfer, alloc, gemm, quant"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0);
}

#[tokio::test]
async fn inventory_prints_this_node() {
    let spool = tempfile::tempdir().unwrap();
    let out = agent(&["inventory"], spool.path(), None).await;
    assert!(out.status.success());
    let node: model::NodeInfo = serde_json::from_slice(&out.stdout).unwrap();
    assert!(node.cpu_cores >= 1 && node.memory_bytes > 0);
}

/// The real server behind a fault injected in front of it (a proxy or a broken server).
async fn start_behind(db_dir: &Path, fault: Fault) -> Server {
    let store = Store::connect(&headroom_server::store::sqlite_url(db_dir)).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, rx) = oneshot::channel::<()>();
    let state = AppState::new(store.clone(), Path::new("/nonexistent-site"));
    let app = headroom_server::app(state)
        .layer(axum::middleware::from_fn(refuse_grpc))
        .layer(axum::middleware::from_fn(fault));
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await
    });
    Server { url, store, stop, task }
}

type Fault = fn(
    axum::extract::Request,
    axum::middleware::Next,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = axum::response::Response> + Send>>;

fn rejected(spool: &Path) -> usize {
    std::fs::read_dir(spool.join("rejected"))
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json")).count())
}

/// A proxy's 413 (not signed by the server) is not the server refusing the run: it is kept,
/// and the proxy's text is printed without its terminal escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxys_413_keeps_the_run() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let fault: Fault = |_, _| {
        Box::pin(async {
            use axum::response::IntoResponse;
            (axum::http::StatusCode::PAYLOAD_TOO_LARGE, "nginx: too large\u{1b}[2J\u{1b}]0;owned\u{7}").into_response()
        })
    };
    let server = start_behind(db.path(), fault).await;
    let token = admin::create_agent_token(&server.store, "behind-nginx").await.unwrap();
    let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&server.url, &token))).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 1, "kept for a later try: {}", text(&out));
    assert_eq!(rejected(spool.path()), 0);
    assert!(text(&out).contains("nginx: too large"), "{}", text(&out));
    assert!(!text(&out).contains('\u{1b}') && !text(&out).contains('\u{7}'), "escapes reached the terminal");
    server.stop().await;
}

/// An acknowledgement that names another run does not take this one out of the spool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_for_another_run_keeps_the_run() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let fault: Fault = |request, next| {
        Box::pin(async move {
            use axum::response::IntoResponse;
            let response = next.run(request).await;
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            let mut ack: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if ack.get("run_id").is_some() {
                ack["run_id"] = uuid::Uuid::new_v4().to_string().into();
            }
            (parts.status, axum::Json(ack)).into_response()
        })
    };
    let server = start_behind(db.path(), fault).await;
    let token = admin::create_agent_token(&server.store, "confused").await.unwrap();
    let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&server.url, &token))).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("acknowledged run"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 1);
    server.stop().await;
}

/// An overloaded server's 503 + Retry-After is honoured, and the run then goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured() {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let fault: Fault = |request, next| {
        Box::pin(async move {
            use axum::response::IntoResponse;
            if CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                let busy = [(axum::http::header::RETRY_AFTER, "2")];
                return (axum::http::StatusCode::SERVICE_UNAVAILABLE, busy, "busy").into_response();
            }
            next.run(request).await
        })
    };
    let server = start_behind(db.path(), fault).await;
    let token = admin::create_agent_token(&server.store, "patient").await.unwrap();
    let out = agent(&["run", "system", "--quick", "--attempts", "3"], spool.path(), Some((&server.url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("retrying in 2s"), "the server's Retry-After sets the wait: {}", text(&out));
    assert_eq!(server.run_count().await, 1);
    server.stop().await;
}

/// A run the server itself refuses (and says so) is moved aside with the reason, over either door.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_server_refuses_is_moved_aside() {
    for without_grpc in [false, true] {
        let db = tempfile::tempdir().unwrap();
        let spool = tempfile::tempdir().unwrap();
        let out = agent(&["run", "system", "--quick"], spool.path(), None).await;
        assert!(out.status.success(), "{}", text(&out));
        let path = std::fs::read_dir(spool.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .unwrap();
        let mut run: model::RunUpload = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        run.node.hostname = "bad\u{0}name".into();
        std::fs::write(&path, serde_json::to_vec(&run).unwrap()).unwrap();
        let server = start_with(db.path(), "127.0.0.1:0", without_grpc).await;
        let token = admin::create_agent_token(&server.store, "refused").await.unwrap();
        let out = agent(&["upload", "--attempts", "1"], spool.path(), Some((&server.url, &token))).await;
        assert_eq!(spooled(spool.path()), 0, "{}", text(&out));
        assert_eq!(rejected(spool.path()), 1, "{}", text(&out));
        assert!(text(&out).contains("node.hostname"), "{}", text(&out));
        assert_eq!(server.run_count().await, 0);
        server.stop().await;
    }
}
