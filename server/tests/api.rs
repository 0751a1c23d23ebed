//! The HTTP API and gRPC ingest through the real router on a real port, on every backend.

mod common;

use common::{TestApp, databases, sample_run, spawn};
use headroom_server::auth::Role;
use proto::pb::ingest_client::IngestClient;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn post_json(app: &TestApp, token: Option<&str>, body: String) -> (StatusCode, Value) {
    common::post(app, token, "/api/v1/runs", body).await
}

async fn grpc(
    app: &TestApp,
    token: Option<&str>,
    run: proto::pb::RunUpload,
) -> Result<proto::pb::UploadAck, tonic::Status> {
    let mut client = IngestClient::connect(app.base.clone()).await.expect("gRPC connect");
    let mut request = tonic::Request::new(run);
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    client.upload_run(request).await.map(|r| r.into_inner())
}

async fn get(app: &TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn ingest_through_both_doors_then_read_back() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        let viewer = app.user_token(Role::Viewer).await;
        let first = sample_run("node-1");
        let second = sample_run("node-1");

        let (status, ack) = post_json(&app, Some(&agent), serde_json::to_string(&first).unwrap()).await;
        assert_eq!(status, StatusCode::CREATED, "{}: {ack}", app.backend);
        assert_eq!(ack["duplicate"], false);
        assert_eq!(ack["measurements_stored"], 5);
        let (status, ack) = post_json(&app, Some(&agent), serde_json::to_string(&first).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "a repeated upload succeeds");
        assert_eq!(ack["duplicate"], true);

        let ack = grpc(&app, Some(&agent), (&second).into()).await.expect("gRPC upload");
        assert!(!ack.duplicate);
        assert_eq!(ack.run_id, second.run_id.to_string());
        assert!(grpc(&app, Some(&agent), (&second).into()).await.unwrap().duplicate);
        assert!(grpc(&app, Some(&agent), (&first).into()).await.unwrap().duplicate, "one store behind both doors");

        let (status, runs) = get(&app, &viewer, "/api/v1/runs").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(runs.as_array().unwrap().len(), 2, "{}: {runs}", app.backend);
        let (_, detail) = get(&app, &viewer, &format!("/api/v1/runs/{}", second.run_id)).await;
        let measurements: Vec<model::Measurement> = serde_json::from_value(detail["measurements"].clone()).unwrap();
        assert_eq!(measurements, second.measurements, "gRPC round trip changed a measurement");
        let (_, nodes) = get(&app, &viewer, "/api/v1/nodes").await;
        assert_eq!(nodes[0]["hostname"], "node-1");
        assert_eq!(nodes[0]["run_count"], 2);
        let (_, filtered) = get(&app, &viewer, "/api/v1/runs?suite=transfer&node=id-node-1&limit=1").await;
        assert_eq!(filtered.as_array().unwrap().len(), 1);
        app.stop().await;
        db.drop_database().await;
    }
}

type Mutation = fn(&mut Value);

/// Bad uploads over HTTP: each gets a 4xx whose message names the problem, and nothing is stored.
#[tokio::test]
async fn bad_uploads_are_refused_with_a_reason_and_store_nothing() {
    let json_cases: Vec<(&str, Mutation, u16, &str)> = vec![
        ("wrong type", |v| v["node"]["cpu_cores"] = json!("two"), 422, "node.cpu_cores"),
        (
            "missing field",
            |v| {
                v["node"].as_object_mut().unwrap().remove("hostname");
            },
            422,
            "hostname",
        ),
        ("unknown suite", |v| v["measurements"][0]["suite"] = json!("warp"), 422, "measurements[0].suite"),
        ("unknown unit", |v| v["measurements"][1]["unit"] = json!("furlongs"), 422, "measurements[1].unit"),
        ("unknown status", |v| v["measurements"][0]["status"] = json!("great"), 422, "measurements[0].status"),
        ("unknown field", |v| v["colour"] = json!("blue"), 422, "colour"),
        ("bad UUID", |v| v["run_id"] = json!("not-a-uuid"), 422, "run_id"),
        ("nil UUID", |v| v["run_id"] = json!("00000000-0000-0000-0000-000000000000"), 422, "run_id"),
        ("no measurements", |v| v["measurements"] = json!([]), 422, "measurements"),
        (
            "negative samples",
            |v| v["measurements"][0]["stats"]["samples"] = json!(-1),
            422,
            "measurements[0].stats.samples",
        ),
        ("zero samples", |v| v["measurements"][0]["stats"]["samples"] = json!(0), 422, "measurements[0].stats.samples"),
        ("falling quantiles", |v| v["measurements"][0]["stats"]["p99"] = json!(1.0), 422, "measurements[0].stats.p99"),
        ("ok without stats", |v| v["measurements"][2]["stats"] = Value::Null, 422, "measurements[2].stats"),
        ("skipped without reason", |v| v["measurements"][4]["reason"] = Value::Null, 422, "measurements[4].reason"),
        ("finished before started", |v| v["finished_at_ms"] = json!(1), 422, "finished_at_ms"),
        ("empty hostname", |v| v["node"]["hostname"] = json!("  "), 422, "node.hostname"),
        ("negative price", |v| v["node"]["hourly_usd"] = json!(-2.0), 422, "node.hourly_usd"),
        ("array body", |v| *v = json!([1, 2]), 422, "invalid type"),
        (
            "floor without name",
            |v| v["measurements"][3]["floor"]["name"] = json!(""),
            422,
            "measurements[3].floor.name",
        ),
        (
            "histogram not base64",
            |v| v["measurements"][3]["histogram"] = json!("<svg>"),
            422,
            "measurements[3].histogram",
        ),
        (
            "histogram not HdrHistogram",
            |v| v["measurements"][3]["histogram"] = json!("SGVsbG8="),
            422,
            "measurements[3].histogram: not an HdrHistogram",
        ),
        (
            "histogram with other samples",
            |v| v["measurements"][3]["stats"]["samples"] = json!(21),
            422,
            "holds 20 samples but stats.samples is 21",
        ),
        (
            "histogram on a skipped case",
            |v| v["measurements"][4]["histogram"] = v["measurements"][3]["histogram"].clone(),
            422,
            "measurements[4].histogram",
        ),
    ];
    let raw_cases: Vec<(&str, String, u16, &str)> = vec![
        ("malformed JSON", "{\"run_id\": ".into(), 400, "malformed JSON"),
        ("empty body", String::new(), 400, "malformed JSON"),
        ("NaN literal", nan_body("NaN"), 400, "measurements[0].stats.mean"),
        ("Infinity literal", nan_body("Infinity"), 400, "measurements[0].stats.mean"),
        ("number out of range", nan_body("1e999"), 400, "measurements[0].stats.mean"),
    ];
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        let viewer = app.user_token(Role::Viewer).await;
        let base = serde_json::to_value(sample_run("node-bad")).unwrap();
        for (name, mutate, status, needle) in &json_cases {
            let mut body = base.clone();
            mutate(&mut body);
            let (got, answer) = post_json(&app, Some(&agent), body.to_string()).await;
            assert_eq!(got.as_u16(), *status, "{}: {name}: {answer}", app.backend);
            let message = answer["error"].as_str().unwrap_or_default();
            assert!(message.contains(needle), "{}: {name}: '{message}' does not name '{needle}'", app.backend);
        }
        for (name, body, status, needle) in &raw_cases {
            let (got, answer) = post_json(&app, Some(&agent), body.clone()).await;
            assert_eq!(got.as_u16(), *status, "{}: {name}: {answer}", app.backend);
            let message = answer["error"].as_str().unwrap_or_default();
            assert!(message.contains(needle), "{}: {name}: '{message}' does not name '{needle}'", app.backend);
        }
        let json = "application/json";
        let good = serde_json::to_string(&sample_run("node-bad")).unwrap().into_bytes();
        let bearer = |token: &str| Some(format!("Bearer {token}"));
        // name, Authorization header, Content-Type, body, expected status, word in the message
        type Refusal<'a> = (&'a str, Option<String>, &'a str, Vec<u8>, u16, &'a str);
        let refusals: Vec<Refusal> = vec![
            ("no token", None, json, good.clone(), 401, "token"),
            ("unknown token", bearer("hr_agent_nope"), json, good.clone(), 401, "unknown"),
            ("basic auth", Some("Basic YTpi".into()), json, good.clone(), 401, "Bearer"),
            ("viewer token", bearer(&viewer), json, good.clone(), 403, "agent token"),
            ("text/plain", bearer(&agent), "text/plain", good.clone(), 415, "application/json"),
            ("17 MiB body", bearer(&agent), json, vec![b' '; 17 << 20], 413, "too large"),
        ];
        for (name, authorization, content_type, body, status, needle) in refusals {
            let mut request = app.http.post(app.url("/api/v1/runs")).header("content-type", content_type).body(body);
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = request.send().await.expect("send");
            let got = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            assert_eq!(got, status, "{}: {name}: {text}", app.backend);
            assert!(text.contains(needle), "{}: {name}: '{text}' does not say '{needle}'", app.backend);
        }
        grpc_refusals(&app, &agent, &viewer).await;
        assert_eq!(app.counts().await, (0, 0), "{}: a refused upload stored something", app.backend);
        app.stop().await;
        db.drop_database().await;
    }
}

fn nan_body(literal: &str) -> String {
    let text = serde_json::to_string(&sample_run("node-bad")).unwrap();
    let at = text.find("\"mean\":").expect("a mean") + "\"mean\":".len();
    let end = at + text[at..].find(',').unwrap();
    format!("{}{literal}{}", &text[..at], &text[end..])
}

async fn grpc_refusals(app: &TestApp, agent: &str, viewer: &str) {
    let good: proto::pb::RunUpload = (&sample_run("node-bad")).into();
    let mut nan = good.clone();
    nan.measurements[0].stats.as_mut().unwrap().p50 = f64::NAN;
    let mut suite = good.clone();
    suite.measurements[2].suite = "warp".into();
    let mut uuid = good.clone();
    uuid.run_id = "12345".into();
    let mut no_node = good.clone();
    no_node.node = None;
    let cases: Vec<(&str, Option<&str>, proto::pb::RunUpload, tonic::Code, &str)> = vec![
        ("gRPC NaN", Some(agent), nan, tonic::Code::InvalidArgument, "measurements[0].stats.p50"),
        ("gRPC unknown suite", Some(agent), suite, tonic::Code::InvalidArgument, "measurements[2].suite"),
        ("gRPC bad UUID", Some(agent), uuid, tonic::Code::InvalidArgument, "run_id"),
        ("gRPC missing node", Some(agent), no_node, tonic::Code::InvalidArgument, "node"),
        ("gRPC no token", None, good.clone(), tonic::Code::Unauthenticated, "token"),
        ("gRPC unknown token", Some("hr_agent_nope"), good.clone(), tonic::Code::Unauthenticated, "unknown"),
        ("gRPC viewer token", Some(viewer), good, tonic::Code::PermissionDenied, "agent token"),
    ];
    for (name, token, run, code, needle) in cases {
        let status = grpc(app, token, run).await.expect_err(name);
        assert_eq!(status.code(), code, "{}: {name}: {}", app.backend, status.message());
        assert!(status.message().contains(needle), "{}: {name}: '{}' lacks '{needle}'", app.backend, status.message());
    }
    // Bytes that are not a protobuf message: the caller's error, INVALID_ARGUMENT (3).
    let frame = [&[0u8][..], &8u32.to_be_bytes(), &[0xff; 8]].concat();
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let response = h2
        .post(app.url("/headroom.v1.Ingest/UploadRun"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .bearer_auth(agent)
        .body(frame)
        .send()
        .await
        .expect("raw gRPC");
    let message = response.headers().get("grpc-message").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(response.headers().get("grpc-status").is_some_and(|s| s != "0"), "{}: garbage accepted", app.backend);
    assert!(
        message.to_lowercase().contains("decode"),
        "{}: '{message}' does not name the decoding problem",
        app.backend
    );
}

/// Who may call what: every route refuses anonymous callers and the roles below its own.
#[tokio::test]
async fn every_route_refuses_callers_below_its_role() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        let run = sample_run("node-r");
        assert_eq!(post_json(&app, Some(&agent), serde_json::to_string(&run).unwrap()).await.0, StatusCode::CREATED);
        let mut callers: Vec<(&str, Option<String>, Option<Role>)> =
            vec![("anonymous", None, None), ("agent", Some(agent.clone()), None)];
        for role in Role::ALL {
            callers.push((role.as_str(), Some(app.user_token(role).await), Some(role)));
        }
        let run_path = format!("/api/v1/runs/{}", run.run_id);
        let routes: Vec<(&str, &str, Role)> = vec![
            ("GET", "/api/v1/nodes", Role::Viewer),
            ("GET", "/api/v1/runs", Role::Viewer),
            ("GET", &run_path, Role::Viewer),
            ("GET", "/api/v1/me", Role::Viewer),
            ("GET", "/api/v1/agents", Role::Admin),
            ("GET", "/fleet", Role::Viewer),
            ("POST", "/srv/fleet", Role::Viewer),
            ("POST", "/srv/measured_nodes", Role::Viewer),
            ("POST", "/srv/transport_runs", Role::Viewer),
            ("POST", "/srv/llm_runs", Role::Viewer),
            ("POST", "/srv/scenarios", Role::Viewer),
            ("POST", "/srv/price_catalog", Role::Viewer),
            ("POST", "/srv/reports", Role::Finance),
            ("GET", "/api/v1/scenarios", Role::Viewer),
            ("GET", "/api/v1/prices", Role::Viewer),
            ("GET", "/api/v1/prices/versions", Role::Viewer),
            ("GET", "/api/v1/reports", Role::Finance),
        ];
        for (method, path, needed) in &routes {
            for (who, token, role) in &callers {
                let mut request = app.http.request(method.parse().unwrap(), app.url(path));
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                if *method == "POST" {
                    request = request.header("content-type", "application/x-www-form-urlencoded").body("");
                }
                let response = request.send().await.expect("send");
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                let allowed = role.is_some_and(|r| r >= *needed);
                let context = format!("{}: {who} {method} {path} → {status} {body:.200}", app.backend);
                match (allowed, *path) {
                    (true, _) => assert!(status.is_success(), "{context}"),
                    (false, "/fleet") => assert_eq!(status, StatusCode::SEE_OTHER, "{context}"),
                    (false, _) if token.is_none() => assert_eq!(status, StatusCode::UNAUTHORIZED, "{context}"),
                    (false, _) => assert_eq!(status, StatusCode::FORBIDDEN, "{context}"),
                }
            }
        }
        // The ingest door admits agents only.
        for (who, token, _) in &callers {
            let status = post_json(&app, token.as_deref(), serde_json::to_string(&run).unwrap()).await.0;
            let expected = match *who {
                "agent" => StatusCode::OK,
                "anonymous" => StatusCode::UNAUTHORIZED,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(status, expected, "{}: {who} POST /api/v1/runs", app.backend);
        }
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_restarted_server_still_has_everything() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        let run = sample_run("node-persist");
        assert_eq!(post_json(&app, Some(&agent), serde_json::to_string(&run).unwrap()).await.0, StatusCode::CREATED);
        let viewer = app.user_token(Role::Viewer).await;
        app.stop().await;

        let app = spawn(&db).await;
        let (status, detail) = get(&app, &viewer, &format!("/api/v1/runs/{}", run.run_id)).await;
        assert_eq!(status, StatusCode::OK, "{}: tokens and runs survive a restart", app.backend);
        assert_eq!(detail["measurements"].as_array().unwrap().len(), 5);
        assert_eq!(post_json(&app, Some(&agent), serde_json::to_string(&run).unwrap()).await.0, StatusCode::OK);
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn sign_in_shows_the_fleet_and_sign_out_ends_the_session() {
    for db in databases().await {
        let app = spawn(&db).await;
        headroom_server::admin::create_user(&app.store, "maria", Role::Planner, Some("a long password".into()))
            .await
            .unwrap();
        let agent = app.agent_token("agent-a").await;
        post_json(&app, Some(&agent), serde_json::to_string(&sample_run("node-on-page")).unwrap()).await;

        let anonymous = app.http.get(app.url("/fleet")).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::SEE_OTHER);
        assert_eq!(anonymous.headers()["location"], "/login?next=/fleet");
        // A shared link keeps its query through sign-in.
        let shared = app.http.get(app.url("/planner?requests=123M&training=45%2C000")).send().await.unwrap();
        assert_eq!(shared.headers()["location"], "/login?next=/planner%3Frequests%3D123M%26training%3D45%252C000");
        // The sign-in page carries it in the form itself, decoded once, before any script runs.
        let page = app.http.get(app.url(shared.headers()["location"].to_str().unwrap())).send().await.unwrap();
        let page = page.text().await.unwrap();
        assert!(page.contains(r#"name="next" value="/planner?requests=123M&amp;training=45%2C000""#), "{page}");
        let back = app
            .http
            .post(app.url("/login"))
            .form(&[
                ("name", "maria"),
                ("password", "a long password"),
                ("next", "/planner?requests=123M&training=45%2C000"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(back.headers()["location"], "/planner?requests=123M&training=45%2C000");
        let login_page = app.http.get(app.url("/login")).send().await.unwrap().text().await.unwrap();
        assert!(login_page.contains("name=\"password\""), "login form rendered");

        let wrong =
            app.http.post(app.url("/login")).form(&[("name", "maria"), ("password", "nope")]).send().await.unwrap();
        assert_eq!(wrong.headers()["location"], "/login?error=invalid");
        assert!(wrong.headers().get("set-cookie").is_none());

        let right = app
            .http
            .post(app.url("/login"))
            .form(&[("name", "maria"), ("password", "a long password"), ("next", "/fleet")])
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), StatusCode::SEE_OTHER, "{}", app.backend);
        assert_eq!(right.headers()["location"], "/fleet");
        let cookie = right.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
        assert!(!cookie.contains("Secure"), "plain HTTP cannot carry a Secure cookie: {cookie}");
        let behind_tls = app
            .http
            .post(app.url("/login"))
            .header("x-forwarded-proto", "https")
            .form(&[("name", "maria"), ("password", "a long password")])
            .send()
            .await
            .unwrap();
        assert!(behind_tls.headers()["set-cookie"].to_str().unwrap().contains("; Secure"));
        let session = cookie.split(';').next().unwrap().to_string();

        let me: Value =
            app.http.get(app.url("/api/v1/me")).header("cookie", &session).send().await.unwrap().json().await.unwrap();
        assert_eq!(me, json!({"name": "maria", "role": "planner"}));
        let page = app.http.get(app.url("/fleet")).header("cookie", &session).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        assert!(html.contains("node-on-page"), "{}: the server-rendered Fleet page lists the node", app.backend);
        assert!(html.contains("12.0 GB/s"), "{}: and its memcpy bandwidth", app.backend);

        let out = app.http.post(app.url("/logout")).header("cookie", &session).send().await.unwrap();
        assert_eq!(out.status(), StatusCode::SEE_OTHER);
        assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
        let after = app.http.get(app.url("/api/v1/me")).header("cookie", &session).send().await.unwrap();
        assert_eq!(after.status(), StatusCode::UNAUTHORIZED, "the session ended on the server too");
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn health_readiness_metrics_and_openapi() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        assert_eq!(app.http.get(app.url("/healthz")).send().await.unwrap().text().await.unwrap(), "ok");
        assert_eq!(app.http.get(app.url("/readyz")).send().await.unwrap().status(), StatusCode::OK);
        // Every answer names its request: our own id, or a proxy's when it looks like one.
        let id = |r: &reqwest::Response| r.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_string());
        let own = app.http.get(app.url("/api/v1/runs")).send().await.unwrap();
        assert_eq!(own.status(), StatusCode::UNAUTHORIZED);
        assert!(id(&own).is_some_and(|v| uuid::Uuid::parse_str(&v).is_ok()), "{:?}", id(&own));
        let proxied = app.http.get(app.url("/healthz")).header("x-request-id", "lb-7f3a.91").send().await.unwrap();
        assert_eq!(id(&proxied).as_deref(), Some("lb-7f3a.91"));
        let hostile =
            app.http.get(app.url("/healthz")).header("x-request-id", "a b=\"<script>\"").send().await.unwrap();
        assert!(id(&hostile).is_some_and(|v| uuid::Uuid::parse_str(&v).is_ok()), "a foreign id is replaced");
        post_json(&app, Some(&agent), serde_json::to_string(&sample_run("node-m")).unwrap()).await;
        let anonymous = app.http.get(app.url("/metrics")).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "metrics are not for anyone");
        let viewer = app.user_token(Role::Viewer).await;
        let denied = app.http.get(app.url("/metrics")).bearer_auth(&viewer).send().await.unwrap();
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);
        let admin = app.user_token(Role::Admin).await;
        let metrics = app.http.get(app.url("/metrics")).bearer_auth(&admin).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("http_requests_total{method=\"GET\",route=\"/readyz\",status=\"200\"}"), "{metrics}");
        assert!(metrics.contains("headroom_ingest_runs_total{door=\"http\",outcome=\"stored\"}"), "{metrics}");
        assert!(metrics.contains("http_request_duration_seconds_bucket"), "{metrics}");
        let doc: Value = app.http.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
        for path in ["/api/v1/runs", "/api/v1/runs/{id}", "/api/v1/nodes", "/api/v1/agents", "/api/v1/me"] {
            assert!(doc["paths"][path].is_object(), "OpenAPI lacks {path}");
        }
        assert!(doc["components"]["schemas"]["RunUpload"].is_object());
        // Readiness follows the database; liveness does not.
        app.store.close().await;
        assert_eq!(app.http.get(app.url("/readyz")).send().await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(app.http.get(app.url("/healthz")).send().await.unwrap().status(), StatusCode::OK);
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_run_dated_more_than_a_day_ahead_is_refused_through_both_doors() {
    let db = common::sqlite();
    let app = spawn(&db).await;
    let agent = app.agent_token("agent-a").await;
    let mut run = sample_run("node-1");
    run.started_at_ms = headroom_server::store::now_ms() + headroom_server::ingest::MAX_CLOCK_AHEAD_MS + 60_000;
    run.finished_at_ms = run.started_at_ms + 5_000;
    let (status, body) = post_json(&app, Some(&agent), serde_json::to_string(&run).unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.to_string().contains("started_at_ms"), "{body}");
    let err = grpc(&app, Some(&agent), (&run).into()).await.expect_err("refused over gRPC too");
    assert!(err.message().contains("started_at_ms"), "{err:?}");
    assert_eq!(app.counts().await, (0, 0), "nothing stored");
    // A node's clock a few minutes fast is fine.
    run.started_at_ms = headroom_server::store::now_ms() + 5 * 60_000;
    run.finished_at_ms = run.started_at_ms + 5_000;
    let (status, body) = post_json(&app, Some(&agent), serde_json::to_string(&run).unwrap()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    app.stop().await;
}
