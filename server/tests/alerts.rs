//! Regression alerts through the real router, on SQLite and Postgres: raised once, later
//! regressed runs counted on it (a run sent again is not), priced from the newest report once
//! one lists the class, acted on by role, shown escaped on the Alerts and run pages, counted in
//! `/metrics`, and posted to a webhook that is retried until it takes the alert.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{databases, post, sample_run, spawn, spawn_with};
use headroom_server::alerts::{Settings, Webhook, WebhookFormat};
use headroom_server::auth::Role;
use model::RunUpload;
use reqwest::StatusCode;
use serde_json::{Value, json};

const SCRIPT: &str = "</td><script>alert(1)</script>";

/// Run `i` of a node of class `c7i.2xlarge`, its memcpy headline at `bandwidth` bytes/s.
fn run(i: i64, bandwidth: f64) -> RunUpload {
    let mut run = sample_run(&format!("node-{}", i % 3));
    run.started_at_ms += i * 3_600_000;
    run.finished_at_ms = run.started_at_ms + 5_000;
    // The headline is the memcpy of the most threads, then the largest buffer: 256 MiB here.
    let headline =
        run.measurements.iter_mut().find(|m| m.parameters.get("bytes").map(String::as_str) == Some("268435456"));
    headline.expect("sample_run has a 256 MiB memcpy").stats = Some(common::stats(bandwidth));
    run
}

/// 12e9 bytes/s give or take half a per cent.
fn steady(i: i64) -> f64 {
    12e9 * (1.0 + 0.005 * ((i % 5) as f64 - 2.0))
}

async fn get(app: &common::TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn patch(app: &common::TestApp, token: Option<&str>, id: &str, body: &str) -> (StatusCode, Value) {
    let mut request =
        app.http.patch(app.url(&format!("/api/v1/alerts/{id}"))).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_regression_alerts_once_is_counted_on_after_and_priced_from_the_newest_report() {
    for db in databases().await {
        let app = spawn(&db).await;
        let b = app.backend;
        let agent = app.agent_token("agent-a").await;
        let viewer = app.user_token(Role::Viewer).await;
        let planner = app.user_token(Role::Planner).await;
        let admin = app.user_token(Role::Admin).await;
        let upload = |run: RunUpload| {
            let (app, agent) = (&app, &agent);
            async move { post(app, Some(agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await }
        };
        for i in 0..30 {
            assert_eq!(upload(run(i, steady(i))).await.0, StatusCode::CREATED, "{b}");
        }
        assert_eq!(get(&app, &viewer, "/api/v1/alerts").await, (StatusCode::OK, json!([])), "{b}: steady runs");

        // 25 % more capacity needed: 9e9 against about 12e9.
        let mut first = run(30, 9e9);
        first.node.hostname = format!("host{SCRIPT}");
        assert_eq!(upload(first.clone()).await.0, StatusCode::CREATED, "{b}");
        let (_, alerts) = get(&app, &viewer, "/api/v1/alerts").await;
        let alerts = alerts.as_array().unwrap().clone();
        assert_eq!(alerts.len(), 1, "{b}: {alerts:#?}");
        let a = &alerts[0];
        let id = a["id"].as_str().unwrap().to_string();
        assert_eq!(
            (a["state"].as_str(), a["class"].as_str(), a["suite"].as_str()),
            (Some("open"), Some("c7i.2xlarge"), Some("system"))
        );
        assert_eq!(a["run_id"], first.run_id.to_string());
        let worse_by = a["worse_by"].as_f64().unwrap();
        assert!((worse_by - (12e9 / 9e9 - 1.0)).abs() < 0.01, "{b}: {worse_by}");
        assert_eq!(a["monthly_cost_usd"], Value::Null, "{b}: no report yet");
        assert!(a["cost_basis"].as_str().unwrap().contains("no report yet"), "{b}: {a}");
        assert_eq!(a["webhook_state"], "none", "{b}: no webhook set");
        assert!(a["changes"].as_str().unwrap().contains("nothing recorded changed"), "{b}: {a}");
        assert_eq!(
            (a["judged_on"].as_str(), a["baseline_runs"].as_i64()),
            (Some("run"), Some(16)),
            "{b}: the 14 newest are the window"
        );

        // Sent again: stored already, counted already.
        assert_eq!(upload(first.clone()).await.0, StatusCode::OK, "{b}");
        // Another regressed run, on a new agent version: counted on the same alert.
        let mut second = run(31, 9.1e9);
        second.agent_version = "0.2.0".into();
        assert_eq!(upload(second.clone()).await.0, StatusCode::CREATED, "{b}");
        let (_, one) = get(&app, &viewer, &format!("/api/v1/alerts/{id}")).await;
        assert_eq!(
            (one["runs"].as_i64(), one["last_run_id"].as_str()),
            (Some(2), Some(second.run_id.to_string().as_str())),
            "{b}"
        );

        // Roles, bodies and ids.
        assert_eq!(patch(&app, None, &id, r#"{"state":"resolved"}"#).await.0, StatusCode::UNAUTHORIZED, "{b}");
        assert_eq!(patch(&app, Some(&viewer), &id, r#"{"state":"resolved"}"#).await.0, StatusCode::FORBIDDEN, "{b}");
        let (status, body) = patch(&app, Some(&planner), &id, r#"{"state":"closed"}"#).await;
        assert_eq!((status, body["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("state")), "{b}: {body}");
        let (status, _) = patch(&app, Some(&planner), &id, r#"{"state":"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{b}");
        let unknown = uuid::Uuid::new_v4().to_string();
        assert_eq!(
            patch(&app, Some(&planner), &unknown, r#"{"state":"resolved"}"#).await.0,
            StatusCode::NOT_FOUND,
            "{b}"
        );
        assert_eq!(get(&app, &viewer, "/api/v1/alerts?state=closed").await.0, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
        let (status, acked) = patch(&app, Some(&planner), &id, r#"{"state":"acknowledged"}"#).await;
        assert_eq!((status, acked["state"].as_str()), (StatusCode::OK, Some("acknowledged")), "{b}: {acked}");
        assert!(acked["acted_by"].as_str().is_some(), "{b}: {acked}");

        // /metrics counts them by state, from the database.
        let metrics = app.http.get(app.url("/metrics")).bearer_auth(&admin).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("headroom_alerts{state=\"acknowledged\"} 1"), "{b}: {metrics}");
        assert!(metrics.contains("headroom_alerts{state=\"open\"} 0"), "{b}");

        // A report with deployments on the class: the next alert is priced from it.
        let report = json!({"name": "November", "from": "2026-11-01", "to": "2026-11-30",
            "deployments": [{"name": "ranker", "team": "search", "instance_type": "c7i.2xlarge", "replicas": 4,
                             "requests_per_month": 1000000}]});
        let (status, body) = post(&app, Some(&admin), "/api/v1/reports", report.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{b}: {body}");
        assert_eq!(patch(&app, Some(&planner), &id, r#"{"state":"resolved"}"#).await.0, StatusCode::OK, "{b}");
        let third = run(32, 9e9);
        assert_eq!(upload(third.clone()).await.0, StatusCode::CREATED, "{b}");
        let (_, open) = get(&app, &viewer, "/api/v1/alerts?state=open").await;
        let all = get(&app, &viewer, "/api/v1/alerts").await.1;
        let priced = open.as_array().unwrap().first().unwrap_or_else(|| panic!("{b}: no open alert: {all:#}"));
        assert_ne!(priced["id"].as_str(), Some(id.as_str()), "{b}: resolved, so a new alert");
        let cost = priced["monthly_cost_usd"].as_f64().expect("priced");
        // 4 replicas of c7i.2xlarge a month (the shipped catalog's price), times the share worse.
        let monthly: f64 = report_monthly(&app, &admin).await;
        assert!((cost - monthly * priced["worse_by"].as_f64().unwrap()).abs() < 0.01, "{b}: {cost} {monthly}");
        assert!(priced["cost_basis"].as_str().unwrap().contains("November"), "{b}: {priced}");
        assert!(priced["changes"].as_str().unwrap().contains("agent 0.2.0 → 0.1.0"), "{b}: {priced}");
        // The resolved one cannot be reopened while the new one is active.
        let (status, body) = patch(&app, Some(&planner), &id, r#"{"state":"open"}"#).await;
        assert_eq!(status, StatusCode::CONFLICT, "{b}: {body}");

        // The pages show it escaped.
        let session = app.session(Role::Viewer).await;
        for page in ["/alerts".to_string(), format!("/runs/{}", first.run_id)] {
            let response = app.http.get(app.url(&page)).header("cookie", &session).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{b}: {page}");
            let html = tokio::time::timeout(Duration::from_secs(60), response.text()).await.unwrap().unwrap();
            assert!(!html.contains("<script>alert(1)"), "{b}: {page} runs the hostile script");
            assert!(html.contains("&lt;script&gt;alert(1)"), "{b}: {page} shows the hostname");
            assert!(html.contains("memcpy bandwidth"), "{b}: {page}");
        }
        app.stop().await;
        db.drop_database().await;
    }
}

/// The newest report's monthly serving spend.
async fn report_monthly(app: &common::TestApp, token: &str) -> f64 {
    let (_, reports) = get(app, token, "/api/v1/reports").await;
    let id = reports.as_array().unwrap()[0]["id"].as_str().unwrap().to_string();
    let (_, report) = get(app, token, &format!("/api/v1/reports/{id}")).await;
    let serving: i64 =
        report["rows"].as_array().unwrap().iter().map(|r| r["serving_micro_usd"].as_i64().unwrap()).sum();
    serving as f64 / 1e6 / report["days"].as_f64().unwrap() * model::calendar::DAYS_PER_MONTH
}

#[tokio::test]
async fn the_webhook_is_retried_until_the_receiver_takes_the_alert() {
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let tried = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (store, tries) = (received.clone(), tried.clone());
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<Value>| {
            let (store, tries) = (store.clone(), tries.clone());
            async move {
                if tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    return axum::http::StatusCode::BAD_GATEWAY;
                }
                store.lock().unwrap().push(body.0);
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });
    for db in databases().await {
        received.lock().unwrap().clear();
        tried.store(0, std::sync::atomic::Ordering::SeqCst);
        let settings = Arc::new(Settings {
            webhook: Some(Webhook::new(&hook, WebhookFormat::Slack).unwrap()),
            ..Settings::default()
        });
        let wired = settings.clone();
        let app = spawn_with(&db, move |state| state.alerts = wired).await;
        let deliverer =
            headroom_server::alerts::spawn_deliverer(app.store.clone(), settings).expect("a webhook is set");
        let agent = app.agent_token("agent-w").await;
        for i in 0..30 {
            post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run(i, steady(i))).unwrap()).await;
        }
        // Against a median of 12e9: 50 % more capacity.
        let mut regressed = run(30, 8e9);
        regressed.node.hostname = "<!channel> & <http://evil|click>\nAll clear, rotate `keys` @channel".into();
        post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&regressed).unwrap()).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while received.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "{}: no delivery within 30 s", db.backend);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let text = received.lock().unwrap()[0]["text"].as_str().unwrap().to_string();
        assert!(text.contains("&lt;!channel&gt; &amp; &lt;http://evil|click&gt;"), "{}: {text}", db.backend);
        assert!(!text.contains("<!channel>") && !text.contains('\n'), "{}: {text}", db.backend);
        assert!(
            text.contains("All clear, rotate 'keys' @channel`"),
            "{}: the hostname stays in its code span: {text}",
            db.backend
        );
        assert!(text.contains("`memcpy bandwidth` on `c7i.2xlarge` is 50.0 % worse"), "{}: {text}", db.backend);
        let alerts = app.store.alerts(None, 10).await.unwrap();
        // The receiver's answer is recorded just after it is sent.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut alert = alerts[0].clone();
        while alert.webhook_state != "sent" && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            alert = app.store.alert(&alert.id).await.unwrap().unwrap();
        }
        assert_eq!((alert.webhook_state.as_str(), alert.webhook_attempts), ("sent", 2), "{}", db.backend);
        deliverer.abort();
        app.stop().await;
        db.drop_database().await;
    }
}

#[test]
fn a_webhook_url_with_credentials_or_another_scheme_is_refused() {
    assert!(Webhook::new("https://hooks.example/T000/B000/XXXX", WebhookFormat::Slack).is_ok());
    assert!(Webhook::new("ftp://example.com/hook", WebhookFormat::Json).is_err());
    assert!(Webhook::new("https://user:pass@example.com/hook", WebhookFormat::Json).is_err());
    assert!(Webhook::new("not a url", WebhookFormat::Json).is_err());
}

/// Postgres prepares a statement with the parameter types of its first execution on a
/// connection: on one connection, an alert without a price and then one with a price must both
/// store (a `float4` NULL first made the second fail).
#[tokio::test]
async fn an_alert_unpriced_then_priced_binds_alike_on_one_connection() {
    use headroom_server::store::{NewAlert, Recorded, Store};
    for db in databases().await {
        let store = Store::connect_with(&db.url, 1).await.expect("connect");
        let agent = store.upsert_agent("agent-1", &headroom_server::auth::hash_token("t")).await.unwrap();
        let mut ids = Vec::new();
        for (i, cost) in [None, Some(1234.5), None].into_iter().enumerate() {
            let r = run(i as i64, 9e9);
            store.insert_run(&agent, &r).await.unwrap();
            let new = NewAlert {
                class: format!("class-{i}"),
                suite: "system".into(),
                figure: "memcpy bandwidth".into(),
                unit: "bytes_per_second".into(),
                better: "higher",
                run_id: r.run_id.to_string(),
                node_id: r.node.node_id.clone(),
                hostname: r.node.hostname.clone(),
                started_at_ms: r.started_at_ms,
                judged_on: "run",
                value: 9e9,
                median: 12e9,
                noise: 1e8,
                baseline_runs: 12,
                worse_by: 1.0 / 3.0,
                bound: 0.1,
                threshold: 0.1,
                monthly_cost_usd: cost,
                cost_basis: "test".into(),
                changes: "none".into(),
                notify: false,
            };
            match store.record_regression(&new).await {
                Ok(Recorded::Raised(id)) => ids.push((id, cost)),
                other => panic!("{}: alert {i} with cost {cost:?}: {other:?}", db.backend),
            }
        }
        for (id, cost) in ids {
            assert_eq!(store.alert(&id).await.unwrap().unwrap().monthly_cost_usd, cost, "{}", db.backend);
        }
        store.close().await;
        db.drop_database().await;
    }
}

/// A run sent again (its agent got no answer: the server may have died between storing it and
/// judging it) is judged from what was stored, whatever the body sent again says, and only for
/// the agent that stored it.
#[tokio::test]
async fn a_run_sent_again_is_judged_from_what_was_stored_and_only_for_its_agent() {
    for db in databases().await {
        let app = spawn(&db).await;
        let b = app.backend;
        let (token, other) = (app.agent_token("agent-s").await, app.agent_token("agent-o").await);
        for i in 0..30 {
            let (status, _) =
                post(&app, Some(&token), "/api/v1/runs", serde_json::to_string(&run(i, steady(i))).unwrap()).await;
            assert_eq!(status, StatusCode::CREATED, "{b}");
        }
        // Stored, never judged: 25 % short of the class's bandwidth.
        let regressed = run(30, 9e9);
        let headroom_server::auth::Principal::Agent(agent) =
            headroom_server::auth::bearer(&app.store, &token).await.unwrap()
        else {
            panic!("an agent token")
        };
        app.store.insert_run(&agent.id, &regressed).await.unwrap();
        assert!(app.store.alerts(None, 10).await.unwrap().is_empty(), "{b}");

        // Another agent sends the run id with its own node and a figure that would alert: the run
        // is stored already, and not its; nothing is judged.
        let mut forged = run(30, 1e9);
        forged.run_id = regressed.run_id;
        forged.node.node_id = "id-forged".into();
        let (status, _) = post(&app, Some(&other), "/api/v1/runs", serde_json::to_string(&forged).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{b}: a duplicate");
        assert!(app.store.alerts(None, 10).await.unwrap().is_empty(), "{b}: judged for another agent");

        // Its own agent sends it again with a steady figure: the stored 9e9 is judged.
        let mut again = run(30, 12e9);
        again.run_id = regressed.run_id;
        let (status, _) = post(&app, Some(&token), "/api/v1/runs", serde_json::to_string(&again).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{b}: a duplicate");
        let alerts = app.store.alerts(None, 10).await.unwrap();
        assert_eq!(alerts.len(), 1, "{b}");
        assert_eq!(
            (alerts[0].run_id.as_str(), alerts[0].value, alerts[0].runs),
            (regressed.run_id.to_string().as_str(), 9e9, 1),
            "{b}"
        );
        // And a third time: counted once.
        post(&app, Some(&token), "/api/v1/runs", serde_json::to_string(&again).unwrap()).await;
        assert_eq!(app.store.alerts(None, 10).await.unwrap()[0].runs, 1, "{b}");
        app.stop().await;
        db.drop_database().await;
    }
}
