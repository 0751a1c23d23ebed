//! People and tokens managed by an admin through the real router on a real port, on SQLite and
//! Postgres: a person added (with a given or a made-up password) signs in; a role change and a
//! revocation apply to the very next request; removing a person ends their session and tokens;
//! the last admin cannot be demoted or removed, not even by two admins demoting each other at
//! once; bad names, roles and expiries are refused with the field named and nothing stored.

mod common;

use common::{TestApp, databases, post, spawn};
use headroom_server::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn send(app: &TestApp, method: &str, token: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = app.http.request(method.parse().unwrap(), app.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn people(app: &TestApp, admin: &str) -> Vec<Value> {
    let (status, list) = send(app, "GET", admin, "/api/v1/users", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list.as_array().unwrap().clone()
}

async fn id_of(app: &TestApp, admin: &str, name: &str) -> String {
    let found = people(app, admin).await.into_iter().find(|p| p["name"] == name);
    found.unwrap_or_else(|| panic!("{name} is listed"))["id"].as_str().unwrap().to_string()
}

async fn sign_in(app: &TestApp, name: &str, password: &str) -> Option<String> {
    let form = [("name", name), ("password", password)];
    let response = app.http.post(app.url("/login")).form(&form).send().await.expect("sign in");
    let cookie = response.headers().get("set-cookie")?.to_str().ok()?;
    Some(cookie.split(';').next()?.to_string())
}

async fn me_by_cookie(app: &TestApp, cookie: &str) -> StatusCode {
    app.http.get(app.url("/api/v1/me")).header("cookie", cookie).send().await.expect("me").status()
}

#[tokio::test]
async fn an_admin_adds_a_person_who_signs_in_and_changes_their_role_live() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;

        // A given password: answered without it.
        let body = json!({"name": " ana ", "role": "viewer", "password": "a long password"});
        let response = app
            .http
            .post(app.url("/api/v1/users"))
            .bearer_auth(&admin)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()["cache-control"], "no-store", "answers about secrets are never cached");
        let added: Value = response.json().await.unwrap();
        assert_eq!(added["person"]["name"], "ana", "the name is trimmed");
        assert_eq!(added["person"]["role"], "viewer");
        assert_eq!(added["generated_password"], Value::Null);
        let cookie = sign_in(&app, "ana", "a long password").await.expect("ana signs in");
        assert_eq!(me_by_cookie(&app, &cookie).await, StatusCode::OK);

        // A made-up password, shown once, that works.
        let (status, added) =
            post(&app, Some(&admin), "/api/v1/users", json!({"name": "bo", "role": "finance"}).to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{added}");
        let password = added["generated_password"].as_str().expect("a made-up password").to_string();
        assert!(password.len() >= 16, "{password}");
        assert!(sign_in(&app, "bo", &password).await.is_some(), "the made-up password signs in");
        assert!(!people(&app, &admin).await.iter().any(|p| p.to_string().contains(&password)), "never listed");

        // The same name again, in any letter case, is a conflict; nothing changes.
        let before = people(&app, &admin).await;
        let (status, refused) =
            post(&app, Some(&admin), "/api/v1/users", json!({"name": "ana", "role": "admin"}).to_string()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{refused}");
        assert!(refused["error"].as_str().unwrap().contains("ana"), "{refused}");
        assert_eq!(people(&app, &admin).await, before);

        // Ana's session may not save a scenario; made planner, the same session may, at once.
        let ana = id_of(&app, &admin, "ana").await;
        let scenario = json!({"kind": "planner", "name": "ana's", "inputs": {}}).to_string();
        let save = |cookie: String| {
            let app = &app;
            let scenario = scenario.clone();
            async move {
                app.http
                    .post(app.url("/api/v1/scenarios"))
                    .header("cookie", cookie)
                    .header("sec-fetch-site", "same-origin")
                    .header("content-type", "application/json")
                    .body(scenario)
                    .send()
                    .await
                    .unwrap()
                    .status()
            }
        };
        assert_eq!(save(cookie.clone()).await, StatusCode::FORBIDDEN);
        let (status, changed) =
            send(&app, "PATCH", &admin, &format!("/api/v1/users/{ana}"), Some(json!({"role": "planner"}))).await;
        assert_eq!(status, StatusCode::OK, "{changed}");
        assert_eq!(changed["role"], "planner");
        assert_eq!(save(cookie.clone()).await, StatusCode::CREATED);

        // Not a role; no such person; an id no store hands out is not echoed.
        let (status, refused) =
            send(&app, "PATCH", &admin, &format!("/api/v1/users/{ana}"), Some(json!({"role": "root"}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["field"], "role");
        let (status, _) =
            send(&app, "PATCH", &admin, "/api/v1/users/no-such-user", Some(json!({"role": "viewer"}))).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let long = "x".repeat(5000);
        let (status, refused) = send(&app, "DELETE", &admin, &format!("/api/v1/users/{long}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(!refused.to_string().contains(&long[..100]), "the id is not echoed");
        let (_, ana_now) = send(&app, "GET", &admin, "/api/v1/users", None).await;
        assert!(ana_now.to_string().contains("\"planner\""), "a refused change changed nothing");

        // Removing ana ends her session; her scenario stays, without its author.
        let (status, _) = send(&app, "DELETE", &admin, &format!("/api/v1/users/{ana}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert_eq!(me_by_cookie(&app, &cookie).await, StatusCode::UNAUTHORIZED);
        assert!(sign_in(&app, "ana", "a long password").await.is_none());
        let (_, scenarios) = send(&app, "GET", &admin, "/api/v1/scenarios", None).await;
        let kept = scenarios.as_array().unwrap().iter().find(|s| s["name"] == "ana's").expect("her scenario stays");
        assert_eq!(kept["created_by"], Value::Null);
        let (status, _) = send(&app, "DELETE", &admin, &format!("/api/v1/users/{ana}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "removed once");
        app.stop().await;
    }
}

#[tokio::test]
async fn names_passwords_roles_and_expiries_are_checked_and_nothing_is_stored_partly() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        let before = people(&app, &admin).await;
        let long_password = "p".repeat(257);
        for (body, field) in [
            (json!({"name": "", "role": "viewer"}), "name"),
            (json!({"name": "   ", "role": "viewer"}), "name"),
            (json!({"name": "</textarea><script>alert(1)</script>", "role": "viewer"}), "name"),
            (json!({"name": "=HYPERLINK(\"http://x\")", "role": "viewer"}), "name"),
            (json!({"name": "-2+3", "role": "viewer"}), "name"),
            (json!({"name": "ana\u{0}", "role": "viewer"}), "name"),
            (json!({"name": "a\u{202e}b", "role": "viewer"}), "name"),
            (json!({"name": "x".repeat(65), "role": "viewer"}), "name"),
            // Look-alikes: Cyrillic "а" in "аdmin", a full-width "ａ".
            (json!({"name": "\u{430}dmin", "role": "viewer"}), "name"),
            (json!({"name": "\u{ff41}na", "role": "viewer"}), "name"),
            (json!({"name": "ok", "role": "superuser"}), "role"),
            (json!({"name": "ok", "role": "viewer", "password": "short"}), "password"),
            (json!({"name": "ok", "role": "viewer", "password": long_password}), "password"),
        ] {
            let (status, refused) = post(&app, Some(&admin), "/api/v1/users", body.to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {refused}");
            assert_eq!(refused["field"], field, "{body}: {refused}");
        }
        for (body, status) in [
            ("{", StatusCode::BAD_REQUEST),
            (r#"{"name": 7, "role": "viewer"}"#, StatusCode::UNPROCESSABLE_ENTITY),
            (r#"{"name": "ok", "role": "viewer", "admin": true}"#, StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let (got, answer) = post(&app, Some(&admin), "/api/v1/users", body).await;
            assert_eq!(got, status, "{body}: {answer}");
        }
        assert_eq!(people(&app, &admin).await, before, "nothing was added");

        // Tokens: no such user, out-of-range expiries, wrong types.
        let me = people(&app, &admin).await[0]["id"].as_str().unwrap().to_string();
        for (body, status, field) in [
            (json!({"user_id": "no-such-user"}), StatusCode::UNPROCESSABLE_ENTITY, Some("user_id")),
            (json!({"user_id": "u".repeat(10_000)}), StatusCode::UNPROCESSABLE_ENTITY, Some("user_id")),
            (json!({"user_id": me, "expires_in_days": 0}), StatusCode::UNPROCESSABLE_ENTITY, Some("expires_in_days")),
            (
                json!({"user_id": me, "expires_in_days": 3651}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("expires_in_days"),
            ),
            (json!({"user_id": me, "expires_in_days": -1}), StatusCode::UNPROCESSABLE_ENTITY, None),
            (json!({"user_id": me, "expires_in_days": 1.5}), StatusCode::UNPROCESSABLE_ENTITY, None),
        ] {
            let (got, answer) = post(&app, Some(&admin), "/api/v1/tokens", body.to_string()).await;
            assert_eq!(got, status, "{body}: {answer}");
            if let Some(field) = field {
                assert_eq!(answer["field"], field, "{body}: {answer}");
            }
            assert!(!answer.to_string().contains("uuuuuuuuuu"), "a long id is not echoed: {answer}");
        }
        let (_, tokens) = send(&app, "GET", &admin, "/api/v1/tokens", None).await;
        assert_eq!(tokens.as_array().unwrap().len(), 1, "only the admin's own token: {tokens}");

        // Agents: hostile names, a name in use without `replace`.
        for name in ["</script>", "=cmd|' /C calc'!A0", "", "node 7"] {
            let (status, answer) = post(&app, Some(&admin), "/api/v1/agents", json!({"name": name}).to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {answer}");
        }
        let (status, _) = post(&app, Some(&admin), "/api/v1/agents", json!({"name": "gpu-7"}).to_string()).await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, answer) = post(&app, Some(&admin), "/api/v1/agents", json!({"name": "gpu-7"}).to_string()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
        let (_, agents) = send(&app, "GET", &admin, "/api/v1/agents", None).await;
        assert_eq!(agents.as_array().unwrap().len(), 1, "{agents}");
        app.stop().await;
    }
}

#[tokio::test]
async fn tokens_issued_and_revoked_by_an_admin_work_and_stop_at_once() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        post(&app, Some(&admin), "/api/v1/users", json!({"name": "script", "role": "viewer"}).to_string()).await;
        let script = id_of(&app, &admin, "script").await;

        // One that never expires (NULL), then one that does: the same column, both ways.
        let mut secrets = Vec::new();
        for days in [None, Some(30)] {
            let (status, issued) = post(
                &app,
                Some(&admin),
                "/api/v1/tokens",
                json!({"user_id": script, "expires_in_days": days}).to_string(),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{issued}");
            assert_eq!(issued["acts_as"], "script");
            assert_eq!(issued["expires_at_ms"].is_null(), days.is_none(), "{issued}");
            let secret = issued["secret"].as_str().unwrap().to_string();
            let (status, me) = send(&app, "GET", &secret, "/api/v1/me", None).await;
            assert_eq!((status, me["name"].as_str()), (StatusCode::OK, Some("script")));
            secrets.push((issued["id"].as_str().unwrap().to_string(), secret));
        }
        let listed = people(&app, &admin).await.into_iter().find(|p| p["name"] == "script").unwrap();
        assert_eq!(listed["live_tokens"], 2);
        let (_, tokens) = send(&app, "GET", &admin, "/api/v1/tokens", None).await;
        assert!(!tokens.to_string().contains(&secrets[0].1), "secrets are never listed");

        // A viewer's token may not issue tokens, even for itself.
        let (status, _) =
            post(&app, Some(&secrets[0].1), "/api/v1/tokens", json!({"user_id": script}).to_string()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        let (id, secret) = &secrets[0];
        let (status, _) = send(&app, "DELETE", &admin, &format!("/api/v1/tokens/{id}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, _) = send(&app, "GET", secret, "/api/v1/me", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "revoked at once");
        let (status, _) = send(&app, "DELETE", &admin, &format!("/api/v1/tokens/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "revoked once");
        let (_, tokens) = send(&app, "GET", &admin, "/api/v1/tokens", None).await;
        let row = tokens.as_array().unwrap().iter().find(|t| t["id"] == id.as_str()).unwrap().clone();
        assert!(row["revoked_at_ms"].is_i64(), "kept, marked revoked: {row}");

        // Removing the person removes their other token too.
        let (status, _) = send(&app, "DELETE", &admin, &format!("/api/v1/users/{script}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, _) = send(&app, "GET", &secrets[1].1, "/api/v1/me", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);

        // An agent token issued here uploads; replaced, the old one stops.
        let (_, first) = post(&app, Some(&admin), "/api/v1/agents", json!({"name": "node-a"}).to_string()).await;
        let old = first["secret"].as_str().unwrap().to_string();
        let run = serde_json::to_string(&common::sample_run("node-a")).unwrap();
        let (status, _) = post(&app, Some(&old), "/api/v1/runs", run.clone()).await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, second) =
            post(&app, Some(&admin), "/api/v1/agents", json!({"name": "node-a", "replace": true}).to_string()).await;
        assert_eq!((status, second["replaced"].as_bool()), (StatusCode::CREATED, Some(true)));
        let (status, _) = post(&app, Some(&old), "/api/v1/runs", run).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        app.stop().await;
    }
}

#[tokio::test]
async fn the_last_admin_cannot_be_demoted_or_removed_through_the_api() {
    for db in databases().await {
        let app = spawn(&db).await;
        let first = app.user_token(Role::Admin).await;
        let (_, me) = send(&app, "GET", &first, "/api/v1/me", None).await;
        let first_id = id_of(&app, &first, me["name"].as_str().unwrap()).await;
        for (method, body) in [("PATCH", Some(json!({"role": "finance"}))), ("DELETE", None)] {
            let (status, refused) = send(&app, method, &first, &format!("/api/v1/users/{first_id}"), body).await;
            assert_eq!(status, StatusCode::CONFLICT, "{method}: {refused}");
            assert!(refused["error"].as_str().unwrap().contains("no admin"), "{refused}");
        }
        // Promoting an admin to admin is no demotion.
        let (status, _) =
            send(&app, "PATCH", &first, &format!("/api/v1/users/{first_id}"), Some(json!({"role": "admin"}))).await;
        assert_eq!(status, StatusCode::OK);

        // Two admins demote each other at the same moment: one wins. (Over HTTP the two rarely
        // overlap; `store::concurrent_demotions_always_leave_an_admin` is the test that fails
        // without the lock.)
        for round in 0..8 {
            let second = app.user_token(Role::Admin).await;
            let (_, me) = send(&app, "GET", &second, "/api/v1/me", None).await;
            let second_id = id_of(&app, &first, me["name"].as_str().unwrap()).await;
            let (path_a, path_b) = (format!("/api/v1/users/{second_id}"), format!("/api/v1/users/{first_id}"));
            let a = send(&app, "PATCH", &first, &path_a, Some(json!({"role": "viewer"})));
            let b = send(&app, "PATCH", &second, &path_b, Some(json!({"role": "viewer"})));
            let ((sa, _), (sb, _)) = tokio::join!(a, b);
            let admins = people(&app, if sb == StatusCode::OK { &second } else { &first })
                .await
                .into_iter()
                .filter(|p| p["role"] == "admin")
                .count();
            assert_eq!(admins, 1, "{}: round {round}: {sa} and {sb} left {admins} admins", app.backend);
            // Whoever won stays the first admin for the next round.
            if sb == StatusCode::OK {
                let (status, _) =
                    send(&app, "PATCH", &second, &format!("/api/v1/users/{first_id}"), Some(json!({"role": "admin"})))
                        .await;
                assert_eq!(status, StatusCode::OK);
            }
            let (status, _) = send(&app, "DELETE", &first, &format!("/api/v1/users/{second_id}"), None).await;
            assert_eq!(status, StatusCode::NO_CONTENT);
        }
        app.stop().await;
    }
}

#[tokio::test]
async fn ids_no_store_hands_out_are_404_unechoed_on_every_backend() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        for id in ["%00", "a%00b", "%3Cscript%3E", "x%0D%0Ay", &"f".repeat(65)] {
            for (method, path) in [
                ("DELETE", format!("/api/v1/users/{id}")),
                ("DELETE", format!("/api/v1/tokens/{id}")),
                ("GET", format!("/api/v1/scenarios/{id}")),
                ("DELETE", format!("/api/v1/scenarios/{id}")),
                ("GET", format!("/api/v1/reports/{id}")),
                ("GET", format!("/api/v1/reports/{id}.csv")),
            ] {
                let (status, answer) = send(&app, method, &admin, &path, None).await;
                assert_eq!(status, StatusCode::NOT_FOUND, "{}: {method} {path}: {answer}", app.backend);
                assert!(!answer.to_string().contains("script"), "{answer}");
            }
            let (status, answer) =
                send(&app, "PATCH", &admin, &format!("/api/v1/users/{id}"), Some(json!({"role": "viewer"}))).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{}: PATCH {id}: {answer}", app.backend);
        }
        let (status, answer) =
            post(&app, Some(&admin), "/api/v1/tokens", json!({"user_id": "a\u{0}b"}).to_string()).await;
        assert_eq!((status, answer["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_id")), "{answer}");
        app.stop().await;
    }
}

#[tokio::test]
async fn two_admins_issuing_the_same_new_agent_at_once_get_one_token_and_one_conflict() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        for round in 0..10 {
            let body = json!({"name": format!("race-{round}")}).to_string();
            let (a, b) = tokio::join!(
                post(&app, Some(&admin), "/api/v1/agents", body.clone()),
                post(&app, Some(&admin), "/api/v1/agents", body)
            );
            let mut statuses = [a.0, b.0];
            statuses.sort();
            assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT], "{}: round {round}", app.backend);
            // The token handed out is the one that works.
            let issued = if a.0 == StatusCode::CREATED { &a.1 } else { &b.1 };
            let run = serde_json::to_string(&common::sample_run(&format!("race-node-{round}"))).unwrap();
            let (status, _) = post(&app, issued["secret"].as_str(), "/api/v1/runs", run).await;
            assert_eq!(status, StatusCode::CREATED, "{}: round {round}", app.backend);
        }
        app.stop().await;
    }
}
