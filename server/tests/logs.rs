//! `--log-format json`: the real binary's log, one JSON object per line, each answered request
//! with its id, path and status, and no secret a client sent.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_headroom-server");

/// The real server with a fresh SQLite file, its log on a pipe; returns it and its base URL.
async fn serve(dir: &std::path::Path, log_format: &str) -> (std::process::Child, String) {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let server = Command::new(SERVER)
        .arg("--data-dir")
        .arg(dir)
        .args(["--log-format", log_format, "serve", "--listen", &addr])
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start headroom-server");
    let base = format!("http://{addr}");
    let start = Instant::now();
    while !reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
        assert!(start.elapsed() < Duration::from_secs(30), "server did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (server, base)
}

/// Stops the server and returns everything it logged.
fn stop(mut server: std::process::Child) -> String {
    server.kill().unwrap();
    let mut log = String::new();
    server.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    server.wait().unwrap();
    log
}

/// A failed sign-in with `name` (answered 303 to the login page).
async fn fail_sign_in(base: &str, name: &str, password: &str) {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let sign_in =
        http.post(format!("{base}/login")).form(&[("name", name), ("password", password)]).send().await.unwrap();
    assert_eq!(sign_in.status(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_each_request_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path(), "json").await;
    let http = reqwest::Client::new();
    let token = "hr_api_0123456789abcdef-must-not-be-logged";
    let refused = http
        .get(format!("{base}/api/v1/nodes?secret=in-the-query"))
        .bearer_auth(token)
        .header("x-request-id", "proxy-id-42")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.headers()["x-request-id"], "proxy-id-42");
    // A failed sign-in logs the name it was tried with, here one that tries to forge a line.
    let password = "correct-horse-must-not-be-logged";
    fail_sign_in(&base, "mallory\n{\"level\":\"INFO\",\"forged\":true}", password).await;
    let log = stop(server);

    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(lines.iter().all(|l| l["timestamp"].is_string() && l["level"].is_string()), "{log}");
    assert!(!lines.iter().any(|l| l.get("forged").is_some()), "a client forged a log line:\n{log}");
    let answered = lines
        .iter()
        .find(|l| l["span"]["id"] == "proxy-id-42")
        .unwrap_or_else(|| panic!("no line carries the request's id:\n{log}"));
    assert_eq!(answered["span"]["path"], "/api/v1/nodes", "{log}");
    assert_eq!(answered["span"]["method"], "GET", "{log}");
    assert_eq!(answered["status"], 401, "{log}");
    assert!(answered["latency"].is_string(), "{log}");
    assert!(
        lines.iter().any(|l| l["message"] == "failed sign-in" && l["span"]["path"] == "/login"),
        "the failed sign-in is not logged:\n{log}"
    );
    for secret in [token, password, "in-the-query"] {
        assert!(!log.contains(secret), "{secret} is in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_a_newline_cannot_forge_a_text_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path(), "text").await;
    fail_sign_in(&base, "mallory\nFORGED admin signed in", "whatever").await;
    let log = stop(server);
    assert!(log.contains("failed sign-in"), "{log}");
    assert!(!log.lines().any(|l| l.starts_with("FORGED")), "a client forged a log line:\n{log}");
}
