//! The agent binary against the real server binary: upload, outage, spool, retry.

mod common;

use std::path::Path;

use assert_cmd::cargo::CommandCargoExt;
use common::{Fault, Server, agent, text};

/// The server with TLS for `localhost` (a fresh self-signed certificate), itself or behind a
/// TLS-terminating proxy that cannot carry gRPC; and the certificate (PEM) an agent must trust.
async fn start_tls(db_dir: &Path, without_grpc: bool) -> (Server, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (certified.cert.pem(), certified.signing_key.serialize_pem());
    let server = if without_grpc {
        Server::behind_tls_proxy(db_dir, &cert, &key).await
    } else {
        Server::start_tls(db_dir, &cert, &key).await
    };
    (server, cert)
}

fn spooled(spool: &Path) -> usize {
    std::fs::read_dir(spool)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_an_outage_and_is_uploaded_later() {
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let server = Server::start(db.path(), "127.0.0.1:0").await;
    let token = server.agent_token("node-agent");
    let url = server.url.clone();

    // Server up: the run is measured, uploaded and leaves the spool.
    let out = agent(&["run", "system", "--quick", "--attempts", "1"], spool.path(), Some((&url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("over gRPC"), "gRPC is the first choice: {}", text(&out));
    // Power is read where the kernel publishes RAPL, and said to be missing where it does not
    // (this VM has no /sys/class/powercap).
    if Path::new("/sys/class/powercap").exists() {
        assert!(text(&out).contains("system: power"), "{}", text(&out));
    } else {
        assert!(
            text(&out).contains("system: power not measured: no RAPL: cannot list /sys/class/powercap"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(spooled(spool.path()), 0);
    assert_eq!(server.run_count().await, 1);
    let nodes = server.nodes().await;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(nodes[0]["hostname"], hostname.trim(), "the node is this machine");
    let bandwidth = nodes[0]["memcpy_bytes_per_second"].as_f64().expect("memcpy measured");
    assert!(bandwidth > 1e8, "memcpy bandwidth {bandwidth} B/s is implausibly low");

    // Server down: the run stays in the spool and the exit code says so.
    server.stop().await;
    let out = agent(&["run", "system", "--quick", "--attempts", "2"], spool.path(), Some((&url, &token))).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("kept in the spool"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 1);

    // Server back on the same address and database: `upload` delivers it exactly once.
    let server = Server::start(db.path(), url.trim_start_matches("http://")).await;
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
    let server = Server::behind_proxy(db.path(), None).await;
    let token = server.agent_token("behind-proxy");
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
        let token = server.agent_token("tls-agent");
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
    let server = Server::start(db.path(), "127.0.0.1:0").await;
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
    let memcpy: Vec<&model::Measurement> = run.measurements.iter().filter(|m| m.case == "memcpy").collect();
    assert_eq!(memcpy.len(), if cores > 1 { 4 } else { 3 });
    // Power: one skipped case where the kernel publishes no RAPL (this VM), else idle and busy
    // (each read, or skipped with its reason).
    let power: Vec<&model::Measurement> = run.measurements.iter().filter(|m| m.case == "power").collect();
    if std::path::Path::new("/sys/class/powercap").exists() {
        assert!(!power.is_empty() && power.len() <= 2, "{power:?}");
    } else {
        assert_eq!(power.len(), 1, "{power:?}");
        assert_eq!(power[0].status, model::MeasurementStatus::Skipped);
        assert!(power[0].reason.as_deref().unwrap_or_default().starts_with("no RAPL: cannot list /sys/class/powercap"));
    }
    assert_eq!(run.measurements.len(), memcpy.len() + power.len(), "nothing else");
    if cores > 1 {
        let param = |m: &model::Measurement, key: &str| m.parameters.get(key).cloned().unwrap_or_default();
        let all_cores = memcpy.iter().find(|m| param(m, "threads") == cores.to_string()).expect("an all-core case");
        let one_core = memcpy.iter().find(|m| param(m, "bytes") == (256usize << 20).to_string()).unwrap();
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
    let server = Server::behind_proxy(db.path(), Some(fault)).await;
    let token = server.agent_token("behind-nginx");
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
    let server = Server::behind_proxy(db.path(), Some(fault)).await;
    let token = server.agent_token("confused");
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
    let server = Server::behind_proxy(db.path(), Some(fault)).await;
    let token = server.agent_token("patient");
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
        let server = if without_grpc {
            Server::behind_proxy(db.path(), None).await
        } else {
            Server::start(db.path(), "127.0.0.1:0").await
        };
        let token = server.agent_token("refused");
        let out = agent(&["upload", "--attempts", "1"], spool.path(), Some((&server.url, &token))).await;
        assert_eq!(spooled(spool.path()), 0, "{}", text(&out));
        assert_eq!(rejected(spool.path()), 1, "{}", text(&out));
        assert!(text(&out).contains("node.hostname"), "{}", text(&out));
        assert_eq!(server.run_count().await, 0);
        server.stop().await;
    }
}

// The agent's rows of the fault table.

/// Runs spooled so far, by run id.
fn spooled_ids(spool: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(spool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect()
}

async fn stored_ids(server: &Server) -> std::collections::BTreeSet<String> {
    server.runs().await.into_iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect()
}

/// The server is down while the agent keeps producing runs (60 s in the fault table;
/// `HEADROOM_TEST_OUTAGE_SECS`, default 10, in tests): after it is back, every run is stored
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_made_during_an_outage_are_stored_exactly_once_after_it() {
    let outage = std::env::var("HEADROOM_TEST_OUTAGE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let db = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    // Reserve an address nobody listens on until the server comes back.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let url = format!("http://{addr}");
    let token = common::agent_token(db.path(), "through-the-outage");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(outage);
    let mut produced = 0;
    while produced < 2 || std::time::Instant::now() < until {
        let out = agent(&["run", "system", "--quick", "--attempts", "2"], spool.path(), Some((&url, &token))).await;
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        produced += 1;
        assert_eq!(spooled(spool.path()), produced, "every run is kept: {}", text(&out));
    }
    let made = spooled_ids(spool.path());

    let server = Server::start(db.path(), &addr).await;
    // The next run carries the backlog with it.
    let out = agent(&["run", "system", "--quick"], spool.path(), Some((&url, &token))).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0, "{}", text(&out));
    let stored = stored_ids(&server).await;
    assert_eq!(stored.len(), produced + 1, "each run stored once");
    assert!(made.is_subset(&stored), "every run made in the outage is stored");
    let out = agent(&["upload"], spool.path(), Some((&url, &token))).await;
    assert!(text(&out).contains("0 uploaded"), "{}", text(&out));
    assert_eq!(stored_ids(&server).await.len(), produced + 1);
    eprintln!("{produced} runs made during a {outage} s outage, all stored once after it");
    server.stop().await;
}

/// Waits until `arrived` counts a request, at most 60 s.
async fn wait_for(arrived: &std::sync::atomic::AtomicUsize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while arrived.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "the upload never reached the server");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The agent is killed (SIGKILL) mid-upload, once before the server stored the run and once
/// after it stored it but before the acknowledgement arrived; restarted, it loses nothing and
/// the server holds the run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_upload_loses_and_duplicates_nothing() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static BEFORE: AtomicUsize = AtomicUsize::new(0);
    static AFTER: AtomicUsize = AtomicUsize::new(0);
    let hold_before: Fault = |request, next| {
        Box::pin(async move {
            if request.uri().path() == "/api/v1/runs" {
                BEFORE.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            }
            next.run(request).await
        })
    };
    let hold_after: Fault = |request, next| {
        Box::pin(async move {
            let upload = request.uri().path() == "/api/v1/runs";
            let response = next.run(request).await;
            if upload {
                AFTER.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            }
            response
        })
    };
    for (fault, arrived, stored_before_kill) in [(hold_before, &BEFORE, 0), (hold_after, &AFTER, 1)] {
        let db = tempfile::tempdir().unwrap();
        let spool = tempfile::tempdir().unwrap();
        let out = agent(&["run", "system", "--quick"], spool.path(), None).await;
        assert!(out.status.success(), "{}", text(&out));
        let made = spooled_ids(spool.path());

        let held = Server::behind_proxy(db.path(), Some(fault)).await;
        let token = held.agent_token("killed");
        let mut child = std::process::Command::cargo_bin("measurements-agent")
            .unwrap()
            .args(["upload", "--attempts", "1", "--server", &held.url, "--token", &token, "--spool"])
            .arg(spool.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for(arrived).await;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(spooled_ids(spool.path()), made, "the killed agent's run is still spooled");
        assert_eq!(held.run_count().await, stored_before_kill);
        held.abort();

        let server = Server::start(db.path(), "127.0.0.1:0").await;
        let out = agent(&["upload"], spool.path(), Some((&server.url, &token))).await;
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(spooled(spool.path()), 0, "{}", text(&out));
        assert_eq!(stored_ids(&server).await, made, "stored exactly once");
        server.stop().await;
    }
}

/// The spool's disk fills up (a 256 KiB tmpfs in a private mount namespace): the agent says
/// so, exits 5 and prints the run instead; what was spooled before is intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_spool_is_reported_and_damages_nothing() {
    let spool = tempfile::tempdir().unwrap();
    let out = agent(&["run", "system", "--quick"], spool.path(), None).await;
    assert!(out.status.success(), "{}", text(&out));
    let earlier = std::fs::read_dir(spool.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let before = std::fs::read(&earlier).unwrap();
    let work = tempfile::tempdir().unwrap();
    let agent_bin = assert_cmd::cargo::cargo_bin("measurements-agent");
    // In a mount namespace of its own: a tiny tmpfs holding the earlier run and a filler that
    // leaves less room than a run needs; then the agent runs with its spool there.
    let script = r#"
        set -e
        full="$1"; earlier="$2"; agent="$3"; out="$4"
        mount -t tmpfs -o size=256k headroom-full "$full"
        mkdir -p "$full/rejected"
        cp "$earlier" "$full/"
        dd if=/dev/zero of="$full/filler" bs=1k count=1024 2>/dev/null || true
        set +e
        "$agent" run system --quick --spool "$full" >"$out/stdout" 2>"$out/stderr"
        echo $? >"$out/code"
        cp "$full/$(basename "$earlier")" "$out/earlier"
        ls -a "$full" >"$out/listing"
    "#;
    let full = work.path().join("full");
    std::fs::create_dir(&full).unwrap();
    let status = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"])
        .arg(&full)
        .arg(&earlier)
        .arg(&agent_bin)
        .arg(work.path())
        .env_remove("HEADROOM_SERVER")
        .status()
        .expect("unshare (util-linux) runs the agent over a full tmpfs");
    assert!(status.success(), "the full-disk set-up failed (user and mount namespaces are needed)");
    let read = |name: &str| std::fs::read_to_string(work.path().join(name)).unwrap();
    let stderr = read("stderr");
    assert_eq!(read("code").trim(), "5", "{stderr}");
    assert!(stderr.contains("the disk is full"), "{stderr}");
    let printed: model::RunUpload = serde_json::from_str(&read("stdout")).expect("the run is printed instead");
    assert!(!printed.measurements.is_empty());
    assert_eq!(std::fs::read(work.path().join("earlier")).unwrap(), before, "the earlier run is intact");
    let listing = read("listing");
    assert!(!listing.contains(".tmp"), "no half-written file is left: {listing}");
}
