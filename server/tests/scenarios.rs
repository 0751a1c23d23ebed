//! Saved scenarios through the real router on a real port, on SQLite and Postgres: saved by a
//! planner, read by a viewer, refused with the field named when wrong, never stored partly.

mod common;

use common::{databases, post, spawn};
use headroom_server::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn get(app: &common::TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_planner_saves_a_scenario_and_a_viewer_reopens_it() {
    for db in databases().await {
        let app = spawn(&db).await;
        let planner = app.user_token(Role::Planner).await;
        let viewer = app.user_token(Role::Viewer).await;
        let body = json!({"kind": "planner", "name": "  Q3 launch ", "inputs": {"requests": "123M", "growth": "5", "uncertain": "1"}});
        let (status, saved) = post(&app, Some(&planner), "/api/v1/scenarios", body.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{saved}");
        assert_eq!(saved["name"], "Q3 launch", "the name is trimmed");
        assert_eq!(saved["query"], "growth=5&requests=123M&uncertain=1");
        assert!(saved["created_by"].as_str().unwrap().starts_with("planner-"));

        let id = saved["id"].as_str().unwrap();
        let (status, one) = get(&app, &viewer, &format!("/api/v1/scenarios/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(one, saved);
        let (status, list) = get(&app, &viewer, "/api/v1/scenarios").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list.as_array().unwrap().len(), 1);
        let (status, _) = get(&app, &viewer, "/api/v1/scenarios/no-such-id").await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        // A viewer may read but not save.
        let (status, refused) = post(&app, Some(&viewer), "/api/v1/scenarios", body.to_string()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn wrong_scenarios_are_refused_with_the_field_named_and_nothing_stored() {
    for db in databases().await {
        let app = spawn(&db).await;
        let planner = app.user_token(Role::Planner).await;
        let cases: Vec<(Value, &str)> = vec![
            (json!({"kind": "budget", "name": "x", "inputs": {}}), "kind"),
            (json!({"kind": "planner", "name": "   ", "inputs": {}}), "name"),
            (json!({"kind": "planner", "name": "x".repeat(121), "inputs": {}}), "name"),
            (json!({"kind": "planner", "name": "x", "inputs": {"requests": "-5"}}), "inputs.requests"),
            (json!({"kind": "planner", "name": "x", "inputs": {"requests": "NaN"}}), "inputs.requests"),
            (json!({"kind": "planner", "name": "x", "inputs": {"color": "blue"}}), "inputs.color"),
            (json!({"kind": "right_sizing", "name": "x", "inputs": {"quantile": "100"}}), "inputs.quantile"),
        ];
        for (body, field) in cases {
            let (status, answer) = post(&app, Some(&planner), "/api/v1/scenarios", body.to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
            assert_eq!(answer["field"], field, "{body}: {answer}");
        }
        let (status, _) = post(&app, Some(&planner), "/api/v1/scenarios", "{\"kind\": ").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, answer) =
            post(&app, Some(&planner), "/api/v1/scenarios", r#"{"kind": 5, "name": "x", "inputs": {}}"#).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        let huge = json!({"kind": "planner", "name": "x", "inputs": {"requests": "1".repeat(70_000)}});
        let (status, _) = post(&app, Some(&planner), "/api/v1/scenarios", huge.to_string()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let response = app
            .http
            .post(app.url("/api/v1/scenarios"))
            .bearer_auth(&planner)
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let (status, _) = post(&app, None, "/api/v1/scenarios", "{}").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (_, list) = get(&app, &planner, "/api/v1/scenarios").await;
        assert_eq!(list, json!([]), "nothing was stored");
        app.stop().await;
        db.drop_database().await;
    }
}

async fn send(
    app: &common::TestApp,
    method: reqwest::Method,
    token: Option<&str>,
    path: &str,
    body: Option<String>,
) -> (StatusCode, Value) {
    let mut request = app.http.request(method, app.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn any_planner_renames_and_deletes_a_scenario_and_a_viewer_cannot() {
    use reqwest::Method;
    for db in databases().await {
        let app = spawn(&db).await;
        let planner = app.user_token(Role::Planner).await;
        let viewer = app.user_token(Role::Viewer).await;
        let admin = app.user_token(Role::Admin).await;
        let body = json!({"kind": "planner", "name": "Q3 launch", "inputs": {"requests": "123M"}});
        let (_, saved) = post(&app, Some(&planner), "/api/v1/scenarios", body.to_string()).await;
        let id = saved["id"].as_str().unwrap().to_string();
        let path = format!("/api/v1/scenarios/{id}");
        let rename = |name: &str| Some(json!({ "name": name }).to_string());

        // A viewer may neither rename nor delete; nothing changes.
        let (status, _) = send(&app, Method::PATCH, Some(&viewer), &path, rename("viewer's")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = send(&app, Method::DELETE, Some(&viewer), &path, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = send(&app, Method::DELETE, None, &path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);

        // Wrong names are refused with the field named, and the name stays.
        for (name, field) in [("  ", "name"), (&*"x".repeat(121), "name")] {
            let (status, answer) = send(&app, Method::PATCH, Some(&planner), &path, rename(name)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["field"], field);
        }
        let (status, _) =
            send(&app, Method::PATCH, Some(&planner), &path, Some(r#"{"name": "x", "inputs": {}}"#.into())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "unknown fields are refused");
        let (status, _) = send(&app, Method::PATCH, Some(&planner), &path, Some("{\"name\": ".into())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (_, one) = get(&app, &viewer, &path).await;
        assert_eq!(one["name"], "Q3 launch");

        // A name with markup is kept as text; the inputs and the query stay as saved.
        let (status, renamed) =
            send(&app, Method::PATCH, Some(&admin), &path, rename(" </textarea><script>x</script> ")).await;
        assert_eq!(status, StatusCode::OK, "{renamed}");
        assert_eq!(renamed["name"], "</textarea><script>x</script>");
        assert_eq!(renamed["query"], saved["query"]);
        assert_eq!(renamed["created_by"], saved["created_by"], "who saved it does not change");
        let (_, one) = get(&app, &viewer, &path).await;
        assert_eq!(one, renamed);

        // An id longer than any the store hands out is not looked up, nor echoed.
        let long = format!("/api/v1/scenarios/{}", "x".repeat(10_000));
        let (status, answer) = send(&app, Method::DELETE, Some(&planner), &long, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(answer.to_string().len() < 200, "{answer}");
        // Unknown ids are 404 for both.
        let (status, _) = send(&app, Method::PATCH, Some(&planner), "/api/v1/scenarios/nope", rename("x")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = send(&app, Method::DELETE, Some(&planner), "/api/v1/scenarios/nope", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        // Another planner deletes it: gone from the list and from its own address; twice is 404.
        let other = app.user_token(Role::Planner).await;
        let (status, _) = send(&app, Method::DELETE, Some(&other), &path, None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, _) = get(&app, &viewer, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (_, list) = get(&app, &viewer, "/api/v1/scenarios").await;
        assert_eq!(list, json!([]));
        let (status, _) = send(&app, Method::DELETE, Some(&other), &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_page_data_call_with_a_missing_argument_is_a_400_naming_it() {
    for db in databases().await {
        let app = spawn(&db).await;
        let planner = app.user_token(Role::Planner).await;
        let response = app
            .http
            .post(app.url("/srv/rename_scenario"))
            .bearer_auth(&planner)
            .form(&[("id", "whatever")])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        // In the server functions' own encoding, so the page's client reads the reason.
        let body = response.text().await.unwrap();
        assert!(body.starts_with("ServerError|") && body.contains("missing field `name`"), "{body}");
        app.stop().await;
        db.drop_database().await;
    }
}
