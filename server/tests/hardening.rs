//! Hostile callers and bad networks (issue 13's findings), each through the real router on a
//! real port, on every backend under test.

mod common;

use std::time::Duration;

use common::{TestApp, databases, post, sample_run, spawn, spawn_with};
use headroom_server::auth::Role;
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GRPC_PATH: &str = "/headroom.v1.Ingest/UploadRun";

/// Sends `message` as one gRPC frame whose header claims `declared` bytes; the answer's
/// grpc-status (from headers or trailers), whether the server signed a content refusal, and
/// the message.
async fn raw_grpc(app: &TestApp, token: Option<&str>, declared: u32, message: Vec<u8>) -> (i32, bool, String) {
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&declared.to_be_bytes());
    frame.extend_from_slice(&message);
    let mut request =
        client.post(app.url(GRPC_PATH)).header("content-type", "application/grpc").header("te", "trailers").body(frame);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("an answer, not a reset stream");
    let headers = response.headers().clone();
    let status = headers.get("grpc-status").map(|v| v.to_str().unwrap().parse::<i32>().unwrap());
    let refusal = headers.get("headroom-refusal").is_some();
    let message = headers.get("grpc-message").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let status = status.expect("a trailers-only gRPC answer");
    (status, refusal, message)
}

/// `count` empty `measurements` entries: two bytes each on the wire.
fn empty_measurements(count: usize) -> Vec<u8> {
    [0x32u8, 0x00].repeat(count)
}

#[tokio::test]
async fn grpc_authenticates_before_decoding_and_caps_counts() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-g").await;
        // Not protobuf at all: an anonymous caller learns only that it must authenticate.
        let (code, _, _) = raw_grpc(&app, None, 3, vec![0xff, 0xff, 0xff]).await;
        assert_eq!(code, tonic::Code::Unauthenticated as i32, "{}: checked before decoding", app.backend);
        // 16 MiB of empty entries (8 million structs if decoded), anonymously.
        let huge = empty_measurements(8 << 20);
        let (code, _, _) = raw_grpc(&app, None, huge.len() as u32 - 16, huge[16..].to_vec()).await;
        assert_eq!(code, tonic::Code::Unauthenticated as i32);
        let viewer = app.user_token(Role::Viewer).await;
        let (code, _, _) = raw_grpc(&app, Some(&viewer), 3, vec![0xff, 0xff, 0xff]).await;
        assert_eq!(code, tonic::Code::PermissionDenied as i32);
        // An agent's message past the count limit is refused before decoding, as too large.
        let many = empty_measurements(model::wire::validate::MAX_MEASUREMENTS + 1);
        let (code, signed, message) = raw_grpc(&app, Some(&agent), many.len() as u32, many).await;
        assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
        assert!(signed && message.contains("measurements"), "{message}");
        // A frame that says it is over 16 MiB: RESOURCE_EXHAUSTED, not OUT_OF_RANGE or a reset.
        let (code, signed, message) = raw_grpc(&app, Some(&agent), (16 << 20) + 1, vec![0; 1024]).await;
        assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
        assert!(signed);
        assert_eq!(app.counts().await, (0, 0), "nothing stored");
        app.stop().await;
        db.drop_database().await;
    }
}

/// Sends only the head of a request that announces a large body, and reads what comes back
/// within two seconds: a server that authenticates first answers without waiting for the body.
async fn answer_to_head(app: &TestApp, path: &str, extra_header: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 15000000\r\n{extra_header}\r\n{{",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).to_string(),
        _ => "no answer before the body".to_string(),
    }
}

#[tokio::test]
async fn http_refuses_callers_before_reading_the_body() {
    let db = common::sqlite();
    let app = spawn(&db).await;
    let viewer = app.user_token(Role::Viewer).await;
    for path in ["/api/v1/runs", "/api/v1/model/amortization", "/api/v1/prices", "/api/v1/reports"] {
        let answer = answer_to_head(&app, path, "").await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{path}: {answer}");
    }
    let answer = answer_to_head(&app, "/api/v1/runs", &format!("Authorization: Bearer {viewer}\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "a person's token cannot ingest: {answer}");
    app.stop().await;
}

#[tokio::test]
async fn every_route_answers_413_past_its_limit() {
    let db = common::sqlite();
    let app = spawn(&db).await;
    let session = app.session(Role::Admin).await;
    let big = vec![b' '; 2 << 20];
    for path in ["/srv/fleet", "/srv/save_scenario", "/login", "/api/v1/scenarios", "/api/v1/runs/x"] {
        let response = app
            .http
            .post(app.url(path))
            .header("cookie", &session)
            .header(
                "content-type",
                if path.starts_with("/api") { "application/json" } else { "application/x-www-form-urlencoded" },
            )
            .body(big.clone())
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert!(
            status == StatusCode::PAYLOAD_TOO_LARGE || status == StatusCode::METHOD_NOT_ALLOWED && path.ends_with("/x"),
            "{path}: {status}"
        );
    }
    // Without Content-Length (chunked), the page-data routes count what they read.
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /srv/fleet HTTP/1.1\r\nHost: {}\r\nCookie: {session}\r\nTransfer-Encoding: chunked\r\n\r\n",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = [format!("{:x}\r\n", 64 << 10).into_bytes(), vec![b' '; 64 << 10], b"\r\n".to_vec()].concat();
    for _ in 0..32 {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    app.stop().await;
}

#[tokio::test]
async fn metrics_labels_stay_bounded_and_need_a_token() {
    let db = common::sqlite();
    let app = spawn_with(&db, |state| {
        state.metrics_token_hash = Some(headroom_server::auth::hash_token("scraper-secret-0123456789"));
    })
    .await;
    for i in 0..50 {
        let method = reqwest::Method::from_bytes(format!("X{i}Y").as_bytes()).unwrap();
        app.http.request(method, app.url("/healthz")).send().await.unwrap();
    }
    let scrape = |token: &'static str| app.http.get(app.url("/metrics")).bearer_auth(token).send();
    assert_eq!(scrape("wrong-token").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let metrics = scrape("scraper-secret-0123456789").await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("method=\"X"), "invented methods became labels");
    assert!(metrics.contains("method=\"other\""), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn cross_site_form_posts_are_refused() {
    let db = common::sqlite();
    let app = spawn(&db).await;
    headroom_server::admin::create_user(&app.store, "ana", Role::Viewer, Some("a long password".into())).await.unwrap();
    let form = [("name", "ana"), ("password", "a long password")];
    let post = |headers: Vec<(&'static str, String)>| {
        let mut request = app.http.post(app.url("/login")).form(&form);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let evil = post(vec![("origin", "http://evil.example".into())]).await.unwrap();
    assert_eq!(evil.status(), StatusCode::FORBIDDEN);
    let fetch = post(vec![("sec-fetch-site", "cross-site".into())]).await.unwrap();
    assert_eq!(fetch.status(), StatusCode::FORBIDDEN);
    let same = post(vec![("origin", format!("http://{}", app.addr)), ("sec-fetch-site", "same-origin".into())]);
    assert_eq!(same.await.unwrap().status(), StatusCode::SEE_OTHER);
    assert_eq!(post(vec![]).await.unwrap().status(), StatusCode::SEE_OTHER, "scripts send neither header");
    app.stop().await;
}

#[tokio::test]
async fn control_characters_in_text_are_422_and_nothing_is_stored() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-n").await;
        for (field, mutate) in [
            (
                "node.hostname",
                Box::new(|r: &mut model::RunUpload| r.node.hostname = "a\0b".into()) as Box<dyn Fn(&mut _)>,
            ),
            ("measurements[0].case", Box::new(|r: &mut model::RunUpload| r.measurements[0].case = "x\u{1b}[2J".into())),
        ] {
            let mut run = sample_run("node-nul");
            mutate(&mut run);
            let (status, body) = post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{}: {body}", app.backend);
            assert_eq!(body["field"], field);
        }
        assert_eq!(app.counts().await, (0, 0));
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn sign_in_is_throttled_across_replicas() {
    for db in databases().await {
        let app = spawn(&db).await;
        let replica = spawn(&db).await;
        headroom_server::admin::create_user(&app.store, "omar", Role::Viewer, Some("the right password".into()))
            .await
            .unwrap();
        let sign_in = |app: &TestApp, password: &'static str| {
            app.http.post(app.url("/login")).form(&[("name", "omar"), ("password", password)]).send()
        };
        for _ in 0..=headroom_server::api::session::FREE_FAILURES_PER_ACCOUNT {
            let wrong = sign_in(&app, "guess").await.unwrap();
            assert_eq!(wrong.headers()["location"], "/login?error=invalid");
        }
        let right = sign_in(&app, "the right password").await.unwrap();
        assert_eq!(right.headers()["location"], "/login?error=throttled", "{}", app.backend);
        let elsewhere = sign_in(&replica, "the right password").await.unwrap();
        assert_eq!(elsewhere.headers()["location"], "/login?error=throttled", "the lock is shared");
        assert!(right.headers().get("set-cookie").is_none());
        // The first lock is short; after it the right password works and clears the count.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let right = sign_in(&replica, "the right password").await.unwrap();
        assert_eq!(right.headers()["location"], "/fleet", "{}", app.backend);
        replica.stop().await;
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn exports_neutralise_formulas_and_keep_strings_strings() {
    for db in databases().await {
        let app = spawn(&db).await;
        let finance = app.user_token(Role::Finance).await;
        let formula = "=HYPERLINK(\"http://evil.example\",\"x\")";
        let catalog = headroom_server::prices::DEFAULT_CATALOG.replacen(",g5.xlarge,", ",@g5.xlarge,", 1);
        let mut lines: Vec<String> = catalog.lines().map(str::to_string).collect();
        let last = lines.len() - 1;
        let cells: Vec<&str> = lines[last].split(',').collect();
        let mut cells: Vec<String> = cells.into_iter().map(str::to_string).collect();
        cells[9] = format!("\"{}\"", formula.replace('"', "\"\""));
        lines[last] = cells.join(",");
        let csv = lines.join("\n") + "\n";
        let import = app.http.post(app.url("/api/v1/prices")).bearer_auth(&finance);
        let response = import.header("content-type", "text/csv").body(csv).send().await.unwrap();
        assert!(response.status().is_success(), "{}: {}", app.backend, response.text().await.unwrap());
        let exported = app.http.get(app.url("/api/v1/prices")).bearer_auth(&finance).send().await.unwrap();
        let exported = exported.text().await.unwrap();
        assert!(exported.contains(",'@g5.xlarge,"), "{exported}");
        assert!(exported.contains("\"'=HYPERLINK("), "{exported}");
        assert!(!exported.lines().any(|l| l.split(',').any(|c| c.starts_with(['=', '@']))), "{exported}");
        // What we export imports back to the same values.
        let again = app.http.post(app.url("/api/v1/prices")).bearer_auth(&finance).header("content-type", "text/csv");
        assert!(again.body(exported.clone()).send().await.unwrap().status().is_success());
        let rows = app.store.price_catalog().await.unwrap();
        assert!(rows.iter().any(|r| r.instance_type == "@g5.xlarge"));
        assert!(rows.iter().any(|r| r.source == formula));

        let hostile = json!({
            "name": "-2+3", "from": "2026-11-01", "to": "2026-11-30",
            "deployments": [{"name": "=cmd|' /C calc'!A0", "team": "+team", "serving_cost_per_request_usd": 0.00001,
                              "requests_per_month": 1000000}]
        });
        let (status, report) = post(&app, Some(&finance), "/api/v1/reports", hostile.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{report}");
        let id = report["id"].as_str().unwrap().to_string();
        let csv = app.http.get(app.url(&format!("/api/v1/reports/{id}.csv"))).bearer_auth(&finance).send();
        let csv = csv.await.unwrap().text().await.unwrap();
        let row = csv.lines().nth(1).unwrap();
        assert!(
            row.starts_with("\"'=cmd|' /C calc'!A0\",'+team,") || row.starts_with("'=cmd|' /C calc'!A0,'+team,"),
            "{row}"
        );
        let xlsx = app.http.get(app.url(&format!("/api/v1/reports/{id}.xlsx"))).bearer_auth(&finance).send();
        let xlsx = xlsx.await.unwrap().bytes().await.unwrap().to_vec();
        use calamine::Reader;
        let mut book: calamine::Xlsx<_> = calamine::open_workbook_from_rs(std::io::Cursor::new(xlsx)).unwrap();
        let sheet = book.worksheet_range("Report").unwrap();
        assert_eq!(sheet.get((1, 0)), Some(&calamine::Data::String("=cmd|' /C calc'!A0".into())), "a string, as typed");
        app.stop().await;
        db.drop_database().await;
    }
}

/// What a hostile name looks like in a page if it was not escaped.
const SCRIPT: &str = "</textarea><script>alert(1)</script>";

#[tokio::test]
async fn hostile_names_are_escaped_in_every_page() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-x").await;
        let admin_token = app.user_token(Role::Admin).await;
        let mut run = sample_run("node-x");
        run.node.hostname = format!("host{SCRIPT}");
        run.node.instance_type = Some(format!("inst{SCRIPT}"));
        run.measurements[0].case = format!("case{SCRIPT}");
        let (status, _) = post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
        assert_eq!(status, StatusCode::CREATED);
        let catalog = headroom_server::prices::DEFAULT_CATALOG.replacen("g5.xlarge", &format!("g5{SCRIPT}"), 1);
        let import =
            app.http.post(app.url("/api/v1/prices")).bearer_auth(&admin_token).header("content-type", "text/csv");
        let response = import.body(catalog).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.text().await.unwrap());
        let scenario = json!({"kind": "planner", "name": format!("plan{SCRIPT}"), "inputs": {}});
        let (status, body) = post(&app, Some(&admin_token), "/api/v1/scenarios", scenario.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let report = json!({"name": format!("report{SCRIPT}"), "from": "2026-11-01", "to": "2026-11-30",
            "deployments": [{"name": format!("dep{SCRIPT}"), "team": "t", "serving_cost_per_request_usd": 0.00001,
                             "requests_per_month": 1000000}]});
        let (status, body) = post(&app, Some(&admin_token), "/api/v1/reports", report.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");

        let session = app.session(Role::Admin).await;
        let run_page = format!("/runs/{}", run.run_id);
        for page in
            ["/fleet", run_page.as_str(), "/scenarios", "/reports", "/admin", "/right-sizing", "/transport", "/planner"]
        {
            let response = app.http.get(app.url(page)).header("cookie", &session).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{page}");
            // A page whose stream never ends is named, not left to the client's 120 s timeout.
            let html = tokio::time::timeout(Duration::from_secs(60), response.text()).await;
            let html =
                html.unwrap_or_else(|_| panic!("{}: {page} sent its head but its body never ended", app.backend));
            let html = html.unwrap();
            assert!(!html.contains("<script>alert(1)"), "{}: {page} runs the hostile script", app.backend);
            let shown = html.matches("&lt;script&gt;alert(1)").count();
            eprintln!("{page}: the hostile text is shown escaped {shown} times");
            if !["/planner", "/transport", "/right-sizing"].contains(&page) {
                assert!(shown > 0, "{}: {page} does not show the hostile name at all, so proves nothing", app.backend);
            }
        }
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn api_tokens_expire_and_can_be_revoked() {
    for db in databases().await {
        let app = spawn(&db).await;
        headroom_server::admin::create_user(&app.store, "script", Role::Viewer, None).await.unwrap();
        let me = |token: String| app.http.get(app.url("/api/v1/me")).bearer_auth(token).send();
        let (token, id) = headroom_server::admin::create_expiring_api_token(&app.store, "script", None).await.unwrap();
        let (lasting, _) =
            headroom_server::admin::create_expiring_api_token(&app.store, "script", Some(30)).await.unwrap();
        assert_eq!(me(token.clone()).await.unwrap().status(), StatusCode::OK);
        assert!(app.store.revoke_api_token(&id).await.unwrap());
        assert_eq!(me(token).await.unwrap().status(), StatusCode::UNAUTHORIZED, "{}: revoked", app.backend);
        assert!(!app.store.revoke_api_token(&id).await.unwrap(), "revoked once");
        assert_eq!(me(lasting).await.unwrap().status(), StatusCode::OK, "the other token still works");
        // A token whose expiry has passed (set in the store directly: a day is too long to wait).
        let user = app.store.user_by_name("script").await.unwrap().unwrap();
        let hash = headroom_server::auth::hash_token("hr_api_expired");
        app.store.create_api_token(&user.id, &hash, Some(headroom_server::store::now_ms() - 1)).await.unwrap();
        assert_eq!(me("hr_api_expired".into()).await.unwrap().status(), StatusCode::UNAUTHORIZED);
        let listed = app.store.list_api_tokens().await.unwrap();
        assert_eq!(listed.len(), 3);
        assert!(listed.iter().any(|t| t.id == id && t.revoked_at_ms.is_some()));
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_node_belongs_to_the_agent_that_first_reported_it() {
    for db in databases().await {
        let app = spawn(&db).await;
        let owner = app.agent_token("owner").await;
        let intruder = app.agent_token("intruder").await;
        let run = sample_run("node-owned");
        let (status, _) = post(&app, Some(&owner), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
        assert_eq!(status, StatusCode::CREATED);
        let mut forged = sample_run("node-owned");
        forged.node.hostname = "renamed-by-intruder".into();
        let (status, body) = post(&app, Some(&intruder), "/api/v1/runs", serde_json::to_string(&forged).unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", app.backend);
        assert!(body["error"].as_str().unwrap().contains("bind-node"), "{body}");
        let nodes = app.store.list_nodes().await.unwrap();
        assert_eq!(nodes[0].hostname, "node-owned", "the node is unchanged");
        assert_eq!(app.counts().await.0, 1, "the forged run is not stored");
        headroom_server::admin::bind_node(&app.store, &run.node.node_id, "intruder").await.unwrap();
        let (status, _) = post(&app, Some(&intruder), "/api/v1/runs", serde_json::to_string(&forged).unwrap()).await;
        assert_eq!(status, StatusCode::CREATED, "after an admin's re-binding");
        let again = sample_run("node-owned");
        let (status, _) = post(&app, Some(&owner), "/api/v1/runs", serde_json::to_string(&again).unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "and the first agent no longer may");
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn only_the_bundle_is_served_and_the_database_file_is_private() {
    let db = common::sqlite();
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("pkg")).unwrap();
    std::fs::write(site.path().join("pkg/headroom.css"), "body {}").unwrap();
    std::fs::write(site.path().join("secrets.env"), "DATABASE_URL=postgres://admin:pw@db").unwrap();
    let root = site.path().to_path_buf();
    let app = spawn_with(&db, move |state| {
        *state = headroom_server::AppState::new(state.store.clone(), &root);
    })
    .await;
    let css = app.http.get(app.url("/pkg/headroom.css")).send().await.unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    let secret = app.http.get(app.url("/secrets.env")).send().await.unwrap();
    assert_eq!(secret.status(), StatusCode::NOT_FOUND);
    assert!(!secret.text().await.unwrap().contains("postgres://"), "a file outside the bundle was served");
    let path = db.url.trim_start_matches("sqlite://").split('?').next().unwrap().to_string();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{path} is readable by others: {mode:o}");
    app.stop().await;
}

/// Generating the route list runs the whole app once with resource loading switched off for the
/// entire process (leptos_server's `SuppressResourceLoad`, a process-wide flag): a page whose
/// resource first polled at that moment stayed pending forever, its head sent and its body
/// never ended (leptos-rs/leptos#4773). A server does it before it serves, so only a process
/// running several servers meets it: these tests, one of which timed out in CI on a page.
#[tokio::test]
async fn pages_end_while_other_routers_are_built() {
    let db = databases().await.remove(0);
    let app = spawn(&db).await;
    let session = app.session(Role::Admin).await;
    let store = app.store.clone();
    /// Stops the builder when dropped, a panic's unwinding included: a runtime dropped with a
    /// blocking task still running waits for it forever.
    struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let building = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stop = Stop(building.clone());
    let builder = tokio::task::spawn_blocking(move || {
        let state = headroom_server::AppState::new(store, std::path::Path::new("/nonexistent-site"));
        let mut built = 0;
        while building.load(std::sync::atomic::Ordering::Relaxed) {
            drop(headroom_server::web::router(&state));
            built += 1;
        }
        built
    });
    for round in 0..150 {
        let page = ["/fleet", "/right-sizing", "/transport", "/scenarios"][round % 4];
        let response = app.http.get(app.url(page)).header("cookie", &session).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{page}");
        let html = tokio::time::timeout(Duration::from_secs(10), response.text()).await;
        assert!(html.is_ok(), "{page} (round {round}) sent its head but its body never ended");
    }
    drop(stop);
    let built = builder.await.unwrap();
    eprintln!("150 pages ended while {built} routers were built beside them");
    assert!(built > 0, "no router was built beside the pages, so this proves nothing");
    app.stop().await;
    db.drop_database().await;
}
