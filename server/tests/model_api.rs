//! The planning endpoints through the real router on a real port: the documented examples,
//! roles, and impossible inputs.

mod common;

use common::{post, spawn, sqlite};
use headroom_server::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Every number in a response is a number (no `null` standing in for NaN) where the schema
/// says number.
fn assert_no_nan_nulls(value: &Value, path: &str, allowed_nulls: &[&str]) {
    match value {
        Value::Null => assert!(
            allowed_nulls.iter().any(|a| path.ends_with(a)),
            "{path} is null; only optional fields may be: {allowed_nulls:?}"
        ),
        Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{path} = {n}"),
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| assert_no_nan_nulls(v, &format!("{path}[{i}]"), allowed_nulls))
        }
        Value::Object(map) => {
            map.iter().for_each(|(k, v)| assert_no_nan_nulls(v, &format!("{path}.{k}"), allowed_nulls))
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_documented_example_answers_what_the_document_says() {
    let db = sqlite();
    let app = spawn(&db).await;
    let planner = app.user_token(Role::Planner).await;
    let doc: Value = app.http.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    let model_paths: Vec<&String> =
        doc["paths"].as_object().unwrap().keys().filter(|p| p.starts_with("/api/v1/model/")).collect();
    assert_eq!(model_paths.len(), 9, "{model_paths:?}");
    for path in model_paths {
        let op = &doc["paths"][path]["post"];
        let request = &op["requestBody"]["content"]["application/json"]["example"];
        let documented = &op["responses"]["200"]["content"]["application/json"]["example"];
        assert!(request.is_object(), "{path} documents a request example");
        assert!(documented.is_object(), "{path} documents a response example");
        let (status, body) = post(&app, Some(&planner), path, request.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(&body, documented, "{path}: the served answer is the documented one");
        assert_no_nan_nulls(
            &body,
            path,
            &[
                "accuracy_delta",
                "probability_break_even",
                "cheapest",
                "recommended",
                "excluded",
                "months_to_pay_back",
                "break_even_requests_per_retrain",
            ],
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn figures_follow_the_formulas() {
    let db = sqlite();
    let app = spawn(&db).await;
    let planner = app.user_token(Role::Planner).await;

    let (status, out) = post(
        &app,
        Some(&planner),
        "/api/v1/model/amortization",
        json!({"training_cost_usd": 20000, "retrains_per_month": 2, "requests_per_month": 1e8,
               "serving_cost_per_request_usd": 0.0001})
        .to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() <= 1e-12 * want.abs().max(1.0);
    assert!(close(&out["training_cost_per_request_usd"], 4e-4), "{out}");
    assert!(close(&out["total_cost_per_request_usd"], 5e-4), "{out}");
    assert!(close(&out["monthly_training_usd"], 40_000.0), "{out}");
    assert!(close(&out["monthly_serving_usd"], 10_000.0), "{out}");
    assert!(close(&out["monthly_total_usd"], 50_000.0), "{out}");

    // Saving 3e-5 per request on 1e8 requests = 3000/month against 4000/month extra training.
    let (status, out) = post(
        &app,
        Some(&planner),
        "/api/v1/model/break-even",
        json!({"extra_training_cost_usd": 2000, "retrains_per_month": 2, "requests_per_month": 1e8,
               "baseline_serving_cost_per_request_usd": 1e-4, "optimized_serving_cost_per_request_usd": 7e-5,
               "accuracy_delta": -0.004})
        .to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(close(&out["monthly_net_usd"], -1000.0), "{out}");
    assert_eq!(out["worth_it"], false);
    assert_eq!(out["accuracy_delta"], -0.004, "the accuracy change is carried through");
    assert!(close(&out["break_even_requests_per_retrain"], 2000.0 / 3e-5), "{out}");

    // One replica at ρ = 0.5 M/M/1: mean response = 1/(μ−λ) = 0.2 s.
    let (status, out) = post(
        &app,
        Some(&planner),
        "/api/v1/model/replicas",
        json!({"arrival_rate_rps": 5, "service_time_mean_s": 0.1, "service_time_cv": 1, "slo_latency_s": 2,
               "slo_quantile": 0.9, "max_utilization": 0.6})
        .to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["replicas"], 1);
    assert!(close(&out["mean_latency_s"], 0.2), "{out}");
    // M/M/1 response time is exponential with rate μ−λ = 5: p90 = ln(10)/5.
    assert!((out["latency_at_quantile_s"].as_f64().unwrap() - 10f64.ln() / 5.0).abs() < 1e-6, "{out}");
    app.stop().await;
}

#[tokio::test]
async fn roles_below_planner_are_refused() {
    let db = sqlite();
    let app = spawn(&db).await;
    let (_, example) = headroom_server::api::model::examples().swap_remove(0);
    let (status, body) = post(&app, None, "/api/v1/model/amortization", example.to_string()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let viewer = app.user_token(Role::Viewer).await;
    let (status, body) = post(&app, Some(&viewer), "/api/v1/model/amortization", example.to_string()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"].as_str().unwrap().contains("planner"), "{body}");
    let agent = app.agent_token("agent-x").await;
    let (status, _) = post(&app, Some(&agent), "/api/v1/model/amortization", example.to_string()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "an agent's ingest token cannot plan");
    for role in [Role::Planner, Role::Finance, Role::Admin] {
        let token = app.user_token(role).await;
        let (status, body) = post(&app, Some(&token), "/api/v1/model/amortization", example.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{role:?}: {body}");
    }
    app.stop().await;
}

#[tokio::test]
async fn impossible_inputs_are_422_naming_the_field() {
    let db = sqlite();
    let app = spawn(&db).await;
    let planner = app.user_token(Role::Planner).await;
    let examples: std::collections::BTreeMap<&str, Value> =
        headroom_server::api::model::examples().into_iter().collect();
    let with = |path: &str, pointer: &str, value: Value| {
        let mut body = examples[path].clone();
        *body.pointer_mut(pointer).unwrap_or_else(|| panic!("{path} has {pointer}")) = value;
        body
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/api/v1/model/amortization",
            with("/api/v1/model/amortization", "/requests_per_month", json!(-5)),
            "requests_per_month",
        ),
        (
            "/api/v1/model/amortization",
            with("/api/v1/model/amortization", "/requests_per_month", json!(0)),
            "requests_per_month",
        ),
        (
            "/api/v1/model/amortization",
            with("/api/v1/model/amortization", "/training_cost_usd", json!(-1)),
            "training_cost_usd",
        ),
        (
            "/api/v1/model/amortization",
            with("/api/v1/model/amortization", "/training_cost_usd", json!("NaN")),
            "training_cost_usd",
        ),
        (
            "/api/v1/model/break-even",
            with("/api/v1/model/break-even", "/retrains_per_month", json!(-1)),
            "retrains_per_month",
        ),
        (
            "/api/v1/model/replicas",
            with("/api/v1/model/replicas", "/service_time_mean_s", json!(0)),
            "service_time_mean_s",
        ),
        ("/api/v1/model/replicas", with("/api/v1/model/replicas", "/max_utilization", json!(1.0)), "max_utilization"),
        ("/api/v1/model/replicas", with("/api/v1/model/replicas", "/max_utilization", json!(1.5)), "max_utilization"),
        ("/api/v1/model/replicas", with("/api/v1/model/replicas", "/slo_latency_s", json!(0.001)), "slo_latency_s"),
        ("/api/v1/model/replicas", with("/api/v1/model/replicas", "/slo_quantile", json!(1.0)), "slo_quantile"),
        ("/api/v1/model/replicas", with("/api/v1/model/replicas", "/arrival_rate_rps", json!(-3)), "arrival_rate_rps"),
        ("/api/v1/model/right-size", with("/api/v1/model/right-size", "/max_utilization", json!(1)), "max_utilization"),
        (
            "/api/v1/model/right-size",
            with("/api/v1/model/right-size", "/model/parameters", json!(0)),
            "model.parameters",
        ),
        (
            "/api/v1/model/memory-fit",
            with("/api/v1/model/memory-fit", "/device_memory_bytes", json!(-1)),
            "device_memory_bytes",
        ),
        ("/api/v1/model/transport", with("/api/v1/model/transport", "/measurements", json!([])), "measurements"),
        (
            "/api/v1/model/transport",
            with("/api/v1/model/transport", "/requests_per_second", json!(0)),
            "requests_per_second",
        ),
        ("/api/v1/model/uncertainty", with("/api/v1/model/uncertainty", "/samples", json!(0)), "samples"),
        ("/api/v1/model/uncertainty", with("/api/v1/model/uncertainty", "/samples", json!(50_000_000)), "samples"),
        ("/api/v1/model/purchase", with("/api/v1/model/purchase", "/running_share", json!(1.5)), "running_share"),
        (
            "/api/v1/model/purchase",
            with("/api/v1/model/purchase", "/replicas_by_month", json!([])),
            "replicas_by_month",
        ),
        (
            "/api/v1/model/purchase",
            with("/api/v1/model/purchase", "/replicas_by_month", json!(vec![1; 121])),
            "replicas_by_month",
        ),
        (
            "/api/v1/model/purchase",
            with("/api/v1/model/purchase", "/commitments/0/term_months", json!(0)),
            "commitments.term_months",
        ),
        (
            "/api/v1/model/purchase",
            with("/api/v1/model/purchase", "/commitments/1/name", json!("</td><script>alert(1)</script>\u{7}")),
            "commitments.name",
        ),
        (
            "/api/v1/model/purchase",
            with("/api/v1/model/purchase", "/spot/interruptions_per_hour", json!(-1)),
            "spot.interruptions_per_hour",
        ),
        ("/api/v1/model/owned-cost", with("/api/v1/model/owned-cost", "/pue", json!(0.5)), "pue"),
        ("/api/v1/model/owned-cost", with("/api/v1/model/owned-cost", "/life_months", json!(0)), "life_months"),
    ];
    for (path, body, field) in cases {
        let (status, answer) = post(&app, Some(&planner), path, body.to_string()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path} {field}: {answer}");
        let named = answer
            .get("field")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| answer["error"].as_str().filter(|e| e.contains(field)).map(|_| field.to_string()));
        assert_eq!(named.as_deref(), Some(field), "{path}: the error names {field}: {answer}");
    }

    // Finite inputs whose result overflows are refused rather than answered with null.
    let huge = json!({"training_cost_usd": 1e300, "retrains_per_month": 1e300, "requests_per_month": 1,
                      "serving_cost_per_request_usd": 0});
    let (status, answer) = post(&app, Some(&planner), "/api/v1/model/amortization", huge.to_string()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("not be a finite number"), "{answer}");

    // Shape and syntax problems.
    let amort = examples["/api/v1/model/amortization"].clone();
    let mut unknown = amort.clone();
    unknown["requests_per_year"] = json!(1);
    let (status, answer) = post(&app, Some(&planner), "/api/v1/model/amortization", unknown.to_string()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("requests_per_year"), "{answer}");
    let mut missing = amort.clone();
    missing.as_object_mut().unwrap().remove("retrains_per_month");
    let (status, answer) = post(&app, Some(&planner), "/api/v1/model/amortization", missing.to_string()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("retrains_per_month"), "{answer}");
    let (status, answer) =
        post(&app, Some(&planner), "/api/v1/model/amortization", r#"{"training_cost_usd": NaN}"#.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a bare NaN is not JSON: {answer}");
    let (status, _) = post(&app, Some(&planner), "/api/v1/model/amortization", "{".to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let response = app
        .http
        .post(app.url("/api/v1/model/amortization"))
        .bearer_auth(&planner)
        .header("content-type", "text/plain")
        .body(amort.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = vec![b' '; headroom_server::api::model::MAX_MODEL_BODY_BYTES + 1];
    let (status, _) = post(&app, Some(&planner), "/api/v1/model/right-size", big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    app.stop().await;
}
