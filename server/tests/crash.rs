//! A killed server loses nothing it acknowledged: the real binary, SIGKILL, restart.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::sample_run;

const SERVER: &str = env!("CARGO_BIN_EXE_headroom-server");

fn start(data_dir: &std::path::Path, addr: &str) -> Child {
    Command::new(SERVER)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["serve", "--listen", addr])
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start headroom-server")
}

async fn wait_ready(http: &reqwest::Client, base: &str) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if http.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("server at {base} did not become ready");
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_runs_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let init = Command::new(SERVER)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["admin", "init-local"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let token = std::fs::read_to_string(dir.path().join("agent-token")).unwrap().trim().to_string();
    let addr = free_addr();
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();

    let mut server = start(dir.path(), &addr);
    wait_ready(&http, &base).await;
    let mut acknowledged = Vec::new();
    for i in 0..20 {
        let run = sample_run(&format!("node-{}", i % 3));
        let response = http.post(format!("{base}/api/v1/runs")).bearer_auth(&token).json(&run).send().await.unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::CREATED);
        acknowledged.push(run.run_id);
    }
    server.kill().expect("SIGKILL");
    server.wait().unwrap();

    let mut server = start(dir.path(), &addr);
    wait_ready(&http, &base).await;
    let api_token = Command::new(SERVER)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["admin", "create-api-token", "--user", "admin"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let api_token = String::from_utf8_lossy(&api_token.stdout).split_whitespace().last().unwrap().to_string();
    for run_id in &acknowledged {
        let response = http.get(format!("{base}/api/v1/runs/{run_id}")).bearer_auth(&api_token).send().await.unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK, "acknowledged run {run_id} lost by the kill");
        let detail: serde_json::Value = response.json().await.unwrap();
        assert_eq!(detail["measurements"].as_array().unwrap().len(), 5);
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
