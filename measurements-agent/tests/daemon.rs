//! `measurements-agent daemon` as a DaemonSet runs it: the real agent binary on a short
//! schedule against the real server, scraped on its own `/metrics`, then stopped with SIGTERM.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Server, free_addr, text};

use assert_cmd::cargo::CommandCargoExt;

/// The daemon, its output going to a file (a pipe nobody reads would fill and stall it).
struct Daemon(Option<Child>, tempfile::NamedTempFile);

impl Daemon {
    fn start(args: &[&str], spool: &std::path::Path, node_name: Option<&str>) -> Daemon {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut command = Command::cargo_bin("measurements-agent").unwrap();
        command.arg("daemon").args(args).arg("--spool").arg(spool);
        command.env_remove("HEADROOM_SERVER").env_remove("HEADROOM_TOKEN").env_remove("HEADROOM_NODE_NAME");
        if let Some(name) = node_name {
            command.env("HEADROOM_NODE_NAME", name);
        }
        let (out, err) = (log.reopen().unwrap(), log.reopen().unwrap());
        let child = command.stdout(Stdio::from(out)).stderr(Stdio::from(err)).spawn().expect("the agent starts");
        Daemon(Some(child), log)
    }

    /// SIGTERM, then its exit status and what it printed.
    async fn stop(mut self) -> (std::process::ExitStatus, String) {
        let mut child = self.0.take().unwrap();
        let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(term.success());
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
        (status, std::fs::read_to_string(self.1.path()).unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `name{labels} value` from a scrape.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn scrape(addr: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match reqwest::get(format!("http://{addr}/metrics")).await {
            Ok(response) => {
                assert!(response.status().is_success());
                let kind = response.headers()["content-type"].to_str().unwrap().to_string();
                assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
                return response.text().await.unwrap();
            }
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(err) => panic!("no /metrics on {addr}: {err}"),
        }
    }
}

async fn until(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ok().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_measures_on_schedule_uploads_reports_metrics_and_stops_on_sigterm() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let server = Server::start(db.path(), "127.0.0.1:0").await;
    let token = server.agent_token("daemon-node");
    let metrics = free_addr();
    let daemon = Daemon::start(
        &["--suites", "system", "--quick", "--every", "2s", "--jitter", "0s", "--metrics-listen", &metrics]
            .iter()
            .chain(&["--server", &server.url, "--token", &token])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
        Some("gpu-node-7"),
    );

    until("two runs on the server", async || server.run_count().await >= 2).await;
    let scraped = scrape(&metrics).await;
    assert!(sample(&scraped, "headroom_agent_runs_total{outcome=\"measured\"}").unwrap() >= 2.0, "{scraped}");
    assert_eq!(sample(&scraped, "headroom_agent_runs_total{outcome=\"failed\"}"), Some(0.0), "{scraped}");
    assert!(sample(&scraped, "headroom_agent_uploads_total{outcome=\"acknowledged\"}").unwrap() >= 2.0);
    assert_eq!(sample(&scraped, "headroom_agent_upload_failures_total"), Some(0.0), "{scraped}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let last = sample(&scraped, "headroom_agent_last_run_timestamp_seconds").expect("a last run");
    assert!((now - 120.0..=now + 1.0).contains(&last), "last run at {last}, now {now}");
    assert!(sample(&scraped, "headroom_agent_last_run_duration_seconds").unwrap() > 0.0);
    let health = reqwest::get(format!("http://{metrics}/healthz")).await.unwrap();
    assert!(health.status().is_success());
    assert_eq!(reqwest::get(format!("http://{metrics}/admin")).await.unwrap().status(), 404);
    let post = reqwest::Client::new().post(format!("http://{metrics}/metrics")).body("x");
    assert_eq!(post.send().await.unwrap().status(), 400, "only GET is answered");
    // A client that sends nothing is cut off; scrapes go on meanwhile.
    let idle = tokio::net::TcpStream::connect(&metrics).await.unwrap();
    assert!(scrape(&metrics).await.contains("headroom_agent_runs_total"));
    drop(idle);

    let (status, printed) = daemon.stop().await;
    assert!(status.success(), "SIGTERM ends it cleanly: {status}\n{printed}");
    assert!(printed.contains("SIGTERM: stopping"), "{printed}");
    // Every run it spooled was acknowledged before it exited (an upload is never cut short; a
    // run still being measured at SIGTERM was never spooled), and none is stored twice.
    let spooled = printed.matches(" spooled at ").count();
    assert_eq!(server.run_count().await, spooled, "{printed}");
    // A pod's hostname is the pod's; HEADROOM_NODE_NAME names the node instead.
    let nodes = server.nodes().await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(nodes[0]["hostname"], "gpu-node-7");
    let left = std::fs::read_dir(spool.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"));
    assert_eq!(left.count(), 0, "nothing waits in the spool");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_made_while_the_server_is_down_wait_in_the_spool_and_go_out_when_it_is_back() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let token = {
        // The server's database and the agent's token exist; the server is not running yet.
        let server = Server::start(db.path(), &addr).await;
        let token = server.agent_token("daemon-node");
        server.stop().await;
        token
    };
    let metrics = free_addr();
    let url = format!("http://{addr}");
    let args = ["--suites", "system", "--quick", "--every", "2s", "--jitter", "0s", "--metrics-listen", &metrics];
    let server_args = ["--server", &url, "--token", &token, "--attempts", "1"];
    let daemon = Daemon::start(&args.iter().chain(&server_args).copied().collect::<Vec<_>>(), spool.path(), None);

    until("a failed upload", async || {
        sample(&scrape(&metrics).await, "headroom_agent_upload_failures_total").is_some_and(|n| n >= 1.0)
    })
    .await;
    let scraped = scrape(&metrics).await;
    assert!(sample(&scraped, "headroom_agent_spool_runs").unwrap() >= 1.0, "{scraped}");
    assert!(
        sample(&scraped, "headroom_agent_last_upload_success_timestamp_seconds").is_none(),
        "never uploaded: {scraped}"
    );
    assert!(sample(&scraped, "headroom_agent_start_timestamp_seconds").is_some(), "{scraped}");

    // Back up: the next run's upload sends what waited too.
    let server = Server::start(db.path(), &addr).await;
    until("the spool drained", async || {
        sample(&scrape(&metrics).await, "headroom_agent_spool_runs") == Some(0.0)
            && sample(&scrape(&metrics).await, "headroom_agent_running") == Some(0.0)
    })
    .await;
    let (status, printed) = daemon.stop().await;
    assert!(status.success(), "{printed}");
    let stored = server.run_count().await;
    let spooled = printed.matches(" spooled at ").count();
    assert!(stored >= 2, "runs from the outage and after it: {printed}");
    assert_eq!(stored, spooled, "every spooled run stored once: {printed}");
    server.stop().await;
}

#[test]
fn bad_schedules_are_refused_with_a_reason() {
    let cases: [(&[&str], &str); 5] = [
        (&["--suites", "endpoint", "--server", "http://h", "--token", "t"], "does not run endpoint"),
        (&["--every", "6 hours", "--server", "http://h", "--token", "t"], "give a whole number of s, m, h or d"),
        (&["--every", "1h", "--jitter", "2h", "--server", "http://h", "--token", "t"], "--jitter must not be longer"),
        (&["--every", "0s", "--server", "http://h", "--token", "t"], "--every must be above zero"),
        (&["--every", "1h"], "needs --server"),
    ];
    for (args, reason) in cases {
        let spool = tempfile::tempdir().unwrap();
        let out = Command::cargo_bin("measurements-agent")
            .unwrap()
            .arg("daemon")
            .args(args)
            .arg("--spool")
            .arg(spool.path())
            .env_remove("HEADROOM_SERVER")
            .env_remove("HEADROOM_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(text(&out).contains(reason), "{args:?}: {}", text(&out));
    }
}
