//! The real server binary for the agent's tests, as an operator runs it: `headroom-server serve`
//! over a fresh SQLite file in a data directory, set up with its own `admin` commands and read
//! back through its API with an admin's token; optionally behind a proxy that speaks only HTTP
//! (no gRPC) and can inject a fault, the way a load balancer or a broken middlebox would.
//!
//! The binary is the one `cargo test --workspace` builds beside these tests; run alone
//! (`cargo test -p measurements-agent`), build it first with `cargo build -p headroom-server`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use tokio::sync::oneshot;

/// `target/<profile>/headroom-server`, beside this test's own `deps/` directory.
pub fn server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("headroom-server");
    assert!(
        bin.exists(),
        "{} is missing: `cargo test --workspace` builds it; alone, run `cargo build -p headroom-server` first",
        bin.display()
    );
    bin
}

/// Runs `headroom-server admin ARGS` on the database in `data_dir`; its standard output.
pub fn admin(data_dir: &Path, args: &[&str]) -> String {
    let out = Command::new(server_bin())
        .arg("admin")
        .args(args)
        .env("HEADROOM_DATA_DIR", data_dir)
        .env_remove("DATABASE_URL")
        .output()
        .expect("headroom-server runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "admin {args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// The secret an `admin create-*-token` command printed (its last word).
fn secret(printed: &str) -> String {
    printed.split_whitespace().last().expect("a token").to_string()
}

/// A new agent's ingest token, made by the server's own CLI.
pub fn agent_token(data_dir: &Path, name: &str) -> String {
    secret(&admin(data_dir, &["create-agent-token", "--name", name]))
}

/// A new person with `role` and their API token.
pub fn api_token(data_dir: &Path, name: &str, role: &str) -> String {
    // On a restart over the same database the person exists already.
    let _ = Command::new(server_bin())
        .args(["admin", "create-user", "--name", name, "--role", role])
        .env("HEADROOM_DATA_DIR", data_dir)
        .env_remove("DATABASE_URL")
        .output();
    secret(&admin(data_dir, &["create-api-token", "--user", name]))
}

/// Runs the agent binary off the async runtime, with `--spool` and, if given, `--server` and
/// `--token`; the environment's server and token are not inherited.
pub async fn agent(args: &[&str], spool: &Path, server: Option<(&str, &str)>) -> Output {
    let mut cmd = Command::cargo_bin("measurements-agent").unwrap();
    cmd.args(args).arg("--spool").arg(spool).env_remove("HEADROOM_SERVER").env_remove("HEADROOM_TOKEN");
    if let Some((url, token)) = server {
        cmd.args(["--server", url, "--token", token]);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

/// What a finished process printed, standard output then standard error.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// An address on this machine nobody listens on now.
pub fn free_addr() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}

/// How a request is answered by a fault in front of the server.
pub type Fault = fn(
    axum::extract::Request,
    axum::middleware::Next,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = axum::response::Response> + Send>>;

/// A running server (and the proxy in front of it, if any).
pub struct Server {
    /// What agents are given: the proxy's address if there is one.
    pub url: String,
    /// The server itself, for reading back what it stored.
    direct: String,
    data_dir: PathBuf,
    child: Option<Child>,
    admin_token: String,
    http: reqwest::Client,
    proxy: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

impl Server {
    /// The server on `listen` (`127.0.0.1:0`: a free port) over the database in `data_dir`.
    pub async fn start(data_dir: &Path, listen: &str) -> Server {
        Self::spawn(data_dir, listen, None, &[]).await
    }

    /// [`Server::start`] with more `serve` flags.
    pub async fn start_with(data_dir: &Path, flags: &[&str]) -> Server {
        Self::spawn(data_dir, "127.0.0.1:0", None, flags).await
    }

    /// The server serving HTTPS (and gRPC over TLS) with `cert`/`key` (PEM).
    pub async fn start_tls(data_dir: &Path, cert: &str, key: &str) -> Server {
        let (cert_path, key_path) = (data_dir.join("cert.pem"), data_dir.join("key.pem"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        Self::spawn(data_dir, "127.0.0.1:0", Some((cert_path, key_path)), &[]).await
    }

    async fn spawn(data_dir: &Path, listen: &str, tls: Option<(PathBuf, PathBuf)>, flags: &[&str]) -> Server {
        let listen = if listen.ends_with(":0") { free_addr() } else { listen.to_string() };
        let mut command = Command::new(server_bin());
        command
            .args(["serve", "--listen", &listen, "--site-root", "/nonexistent-site"])
            .args(flags)
            .env("HEADROOM_DATA_DIR", data_dir)
            .env("RUST_LOG", "error")
            .env_remove("DATABASE_URL")
            .stdout(Stdio::null());
        let scheme = match &tls {
            Some((cert, key)) => {
                command.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
                "https"
            }
            None => "http",
        };
        let child = command.spawn().expect("headroom-server starts");
        let port = listen.rsplit(':').next().unwrap();
        // TLS: the certificate is for `localhost`.
        let url = if tls.is_some() { format!("{scheme}://localhost:{port}") } else { format!("{scheme}://{listen}") };
        let http = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http.get(format!("{url}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            assert!(Instant::now() < deadline, "the server at {url} is not ready within 60 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let admin_token = api_token(data_dir, "tests-admin", "admin");
        Server {
            url: url.clone(),
            direct: url,
            data_dir: data_dir.to_path_buf(),
            child: Some(child),
            admin_token,
            http,
            proxy: None,
        }
    }

    /// The server behind a proxy that speaks only HTTP/1 (gRPC is answered 503, as by a proxy
    /// that cannot carry it), passing each request through `fault` first if given.
    pub async fn behind_proxy(data_dir: &Path, fault: Option<Fault>) -> Server {
        let mut server = Self::start(data_dir, "127.0.0.1:0").await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        server.url = format!("http://{}", listener.local_addr().unwrap());
        let router = proxy_router(&server.direct, fault);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        server.proxy = Some((stop, task));
        server
    }

    /// The server behind a proxy that terminates TLS with `cert`/`key` and speaks only HTTP
    /// (gRPC is refused), forwarding plain HTTP to the server.
    pub async fn behind_tls_proxy(data_dir: &Path, cert: &str, key: &str) -> Server {
        let mut server = Self::start(data_dir, "127.0.0.1:0").await;
        let config = axum_server::tls_rustls::RustlsConfig::from_pem(cert.as_bytes().to_vec(), key.as_bytes().to_vec())
            .await
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        server.url = format!("https://localhost:{}", listener.local_addr().unwrap().port());
        let router = proxy_router(&server.direct, None);
        let handle = axum_server::Handle::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let stopper = handle.clone();
        tokio::spawn(async move {
            let _ = stopped.await;
            stopper.shutdown();
        });
        listener.set_nonblocking(true).unwrap();
        let task = tokio::spawn(async move {
            let _ = axum_server::from_tcp_rustls(listener, config)
                .unwrap()
                .handle(handle)
                .serve(router.into_make_service())
                .await;
        });
        server.proxy = Some((stop, task));
        server
    }

    /// A new agent's token.
    pub fn agent_token(&self, name: &str) -> String {
        agent_token(&self.data_dir, name)
    }

    async fn get(&self, path: &str) -> serde_json::Value {
        let response = self.http.get(format!("{}{path}", self.direct)).bearer_auth(&self.admin_token).send().await;
        let response = response.expect("the server answers");
        assert!(response.status().is_success(), "GET {path}: {}", response.status());
        response.json().await.expect("JSON")
    }

    /// The stored runs, newest first (at most 1,000).
    pub async fn runs(&self) -> Vec<serde_json::Value> {
        self.get("/api/v1/runs?limit=1000").await.as_array().expect("a list").clone()
    }

    pub async fn run_count(&self) -> usize {
        self.runs().await.len()
    }

    /// One stored run with its measurements.
    pub async fn run(&self, id: &str) -> serde_json::Value {
        self.get(&format!("/api/v1/runs/{id}")).await
    }

    /// Regression alerts, active first (at most 200).
    pub async fn alerts(&self) -> Vec<serde_json::Value> {
        self.get("/api/v1/alerts").await.as_array().expect("a list").clone()
    }

    /// Sets an alert's state as an admin; the status answered.
    pub async fn set_alert_state(&self, id: &str, state: &str) -> u16 {
        let response = self
            .http
            .patch(format!("{}/api/v1/alerts/{id}", self.direct))
            .bearer_auth(&self.admin_token)
            .json(&serde_json::json!({ "state": state }))
            .send()
            .await
            .expect("the server answers");
        response.status().as_u16()
    }

    /// The nodes, as `GET /api/v1/nodes` lists them.
    pub async fn nodes(&self) -> Vec<serde_json::Value> {
        self.get("/api/v1/nodes").await.as_array().expect("a list").clone()
    }

    /// Stops the proxy, then the server (SIGTERM: it finishes what is in flight).
    pub async fn stop(mut self) {
        if let Some((stop, task)) = self.proxy.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
        let mut child = self.child.take().expect("running");
        let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
        assert!(term.success(), "SIGTERM reached the server");
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
        assert!(status.success(), "the server exits cleanly on SIGTERM: {status}");
    }

    /// Ends the proxy and the server at once, requests in flight or not.
    pub fn abort(mut self) {
        if let Some((_, task)) = self.proxy.take() {
            task.abort();
        }
    }
}

impl Drop for Server {
    /// A server left running (a failed test) is killed.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Forwards every request to `upstream`, refusing gRPC, after `fault` if given.
fn proxy_router(upstream: &str, fault: Option<Fault>) -> axum::Router {
    let upstream = upstream.to_string();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3600)).build().unwrap();
    let forward = move |request: axum::extract::Request| {
        let (upstream, client) = (upstream.clone(), client.clone());
        async move { forward(&client, &upstream, request).await }
    };
    let mut router = axum::Router::new().fallback(forward).layer(axum::middleware::from_fn(refuse_grpc));
    if let Some(fault) = fault {
        router = router.layer(axum::middleware::from_fn(fault));
    }
    router
}

/// Like a proxy that only speaks HTTP/1: gRPC requests are refused with 503.
async fn refuse_grpc(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let grpc = request.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc { axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response() } else { next.run(request).await }
}

async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let mut outgoing = client.request(parts.method.clone(), format!("{upstream}{path}")).body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            outgoing = outgoing.header(name, value);
        }
    }
    let Ok(answer) = outgoing.send().await else {
        return axum::http::StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let bytes = answer.bytes().await.unwrap_or_default();
    let mut response = (status, bytes).into_response();
    for (name, value) in &headers {
        if name != axum::http::header::CONTENT_LENGTH && name != axum::http::header::TRANSFER_ENCODING {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}

/// The virtual environment `tools/NAME/setup.sh` installs beside the build output (created
/// on first use, reused after; never skipped: a failed install fails the test).
pub fn tool_venv(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target directory").join(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tools/{name}/setup.sh"));
    let status = Command::new("bash").arg(&script).arg(&dir).status().expect("bash runs");
    assert!(status.success(), "{} failed", script.display());
    dir
}
