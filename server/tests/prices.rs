//! The price catalog through the real router, on SQLite and Postgres: the shipped catalog on
//! first start, CSV export and import as new versions, every wrong cell located and nothing
//! half-imported, roles.

mod common;

use common::{databases, spawn};
use headroom_server::auth::Role;
use headroom_server::prices::DEFAULT_CATALOG;
use reqwest::StatusCode;
use serde_json::Value;

async fn export(app: &common::TestApp, token: &str) -> (StatusCode, String, String) {
    common::csv_get(app, token, "/api/v1/prices", "x-catalog-version").await
}

async fn import(app: &common::TestApp, token: &str, csv: &str) -> (StatusCode, Value) {
    common::csv_post(app, token, "/api/v1/prices", csv).await
}

#[tokio::test]
async fn the_shipped_catalog_is_there_on_first_start_and_imports_make_versions() {
    for db in databases().await {
        let app = spawn(&db).await;
        let viewer = app.user_token(Role::Viewer).await;
        let finance = app.user_token(Role::Finance).await;
        let (status, version, csv) = export(&app, &viewer).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(version, "1");
        assert_eq!(csv, DEFAULT_CATALOG, "exported as shipped (sorted the same way)");

        // A finance user raises one price; the export shows it exactly, as version 2.
        let changed = csv.replace("g5.xlarge,NVIDIA A10G,1,4,16,1.006,", "g5.xlarge,NVIDIA A10G,1,4,16,0.123457,");
        assert_ne!(changed, csv);
        let (status, body) = import(&app, &finance, &changed).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["version"], 2);
        let (_, version, after) = export(&app, &viewer).await;
        assert_eq!((version.as_str(), after.as_str()), ("2", changed.as_str()));
        let versions: Value = app
            .http
            .get(app.url("/api/v1/prices/versions"))
            .bearer_auth(&viewer)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(versions[0]["version"], 2);
        assert_eq!(versions[1]["origin"], "default");
        assert!(versions[0]["created_by"].as_str().unwrap().starts_with("finance-"));

        // A server restarted on the same database does not load the shipped catalog again.
        app.stop().await;
        let app = spawn(&db).await;
        let viewer = app.user_token(Role::Viewer).await;
        assert_eq!(export(&app, &viewer).await.1, "2");
        app.stop().await;
        db.drop_database().await;
    }
}

/// The Planner and Right-sizing read each measured node's catalog prices under every purchase
/// option its instance type is listed with, the newest row of each.
#[tokio::test]
async fn a_measured_node_carries_its_types_price_under_each_purchase_option() {
    for db in databases().await {
        let app = spawn(&db).await;
        let finance = app.user_token(Role::Finance).await;
        let viewer = app.user_token(Role::Viewer).await;
        let (_, _, csv) = export(&app, &viewer).await;
        let extra = "aws,c7i.2xlarge,,0,8,16,0.224,one_year,us-east-1,Test 1-year sheet,2026-11-01\n\
                     aws,c7i.2xlarge,,0,8,16,0.250,one_year,us-west-2,Older 1-year sheet,2025-11-01\n\
                     aws,c7i.2xlarge,,0,8,16,0.1071,spot,,Test spot history,2026-11-02\n\
                     aws,c7i.2xlarge,,0,8,16,0.1500,spot,us-east-1,Regional spot history,2026-11-02\n";
        let (status, body) = import(&app, &finance, &format!("{csv}{extra}")).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let agent = app.store.upsert_agent("agent-1", &headroom_server::auth::hash_token("s")).await.unwrap();
        let mut run = common::fleet_run("priced-by-catalog", 1_796_000_000_000, 1.0);
        run.node.hourly_usd = None;
        app.store.insert_run(&agent, &run).await.unwrap();
        let fleet = common::measured_nodes(&app, &viewer).await;
        let node = &fleet["nodes"][0];
        assert_eq!(node["hourly_usd"], 0.357, "{}: on demand, from the shipped rows: {fleet}", db.backend);
        let offers: Vec<(String, f64, String)> = node["offers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let text = |k: &str| o[k].as_str().unwrap().to_string();
                (text("purchase_option"), o["hourly_usd"].as_f64().unwrap(), text("source"))
            })
            .collect();
        let options: Vec<(&str, f64)> = offers.iter().map(|(o, p, _)| (o.as_str(), *p)).collect();
        assert_eq!(options, [("on_demand", 0.357), ("spot", 0.1071), ("one_year", 0.224)], "{}", db.backend);
        assert_eq!(offers[2].2, "price catalog v2 (Test 1-year sheet, as of 2026-11-01)");
        // Of two spot rows as new as each other, the one without a region, on either backend.
        assert_eq!(offers[1].2, "price catalog v2 (Test spot history, as of 2026-11-02)", "{}", db.backend);
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_wrong_catalog_is_refused_cell_by_cell_and_changes_nothing() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        let planner = app.user_token(Role::Planner).await;
        let (_, _, before) = export(&app, &admin).await;
        let mut lines: Vec<String> = before.lines().map(str::to_string).collect();
        let set = |line: &str, column: usize, value: &str| {
            let mut cells: Vec<&str> = line.split(',').collect();
            cells[column] = value;
            cells.join(",")
        };
        lines[2] = set(&lines[2], 6, "1.2.1");
        lines[4] = set(&lines[4], 7, "hourly");
        let bad = lines.join("\n") + "\n";
        let (status, body) = import(&app, &admin, &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"], "2 problems in the catalog; nothing was imported");
        assert_eq!(body["errors"][0]["line"], 3);
        assert_eq!(body["errors"][0]["column"], "hourly_usd");
        assert_eq!(body["errors"][1]["line"], 5);
        assert_eq!(body["errors"][1]["column"], "purchase_option");
        assert_eq!(export(&app, &admin).await.2, before, "nothing was imported");

        // Roles, media type, encoding, size.
        assert_eq!(import(&app, &planner, &before).await.0, StatusCode::FORBIDDEN);
        let response = app.http.post(app.url("/api/v1/prices")).body(before.clone()).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let response = app
            .http
            .post(app.url("/api/v1/prices"))
            .bearer_auth(&admin)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let response = app
            .http
            .post(app.url("/api/v1/prices"))
            .bearer_auth(&admin)
            .header("content-type", "text/csv")
            .body(vec![0xff, 0xfe, 0x00])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let huge = "x".repeat(9 * 1024 * 1024);
        assert_eq!(import(&app, &admin, &huge).await.0, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(export(&app, &admin).await.1, "1");
        app.stop().await;
        db.drop_database().await;
    }
}

/// Two replicas importing at the same instant (two servers on one database): both imports are
/// kept, as two versions in turn, and the newest is one of them whole. Postgres only: replicas
/// share Postgres; two servers on one SQLite file are not a deployment (the second writer gets
/// 503 and Retry-After).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_on_two_replicas_at_once_become_two_versions() {
    for db in databases().await.into_iter().filter(|db| db.backend == "postgres") {
        let (a, b) = (spawn(&db).await, spawn(&db).await);
        let (token_a, token_b) = (a.user_token(Role::Admin).await, b.user_token(Role::Admin).await);
        let first = DEFAULT_CATALOG.replacen("g5.xlarge", "g5.first", 1);
        let second = DEFAULT_CATALOG.replacen("g5.xlarge", "g5.second", 1);
        // Several rounds, so the two transactions overlap in some whatever the timing.
        for round in 0..8i64 {
            let ((status_a, body_a), (status_b, body_b)) =
                tokio::join!(import(&a, &token_a, &first), import(&b, &token_b, &second));
            assert_eq!(status_a, StatusCode::CREATED, "{} round {round}: {body_a}", db.backend);
            assert_eq!(status_b, StatusCode::CREATED, "{} round {round}: {body_b}", db.backend);
            let mut versions = vec![body_a["version"].as_i64().unwrap(), body_b["version"].as_i64().unwrap()];
            versions.sort();
            let expected = [2 + 2 * round, 3 + 2 * round];
            assert_eq!(versions, expected, "{}: the seeded catalog is 1, then one version each", db.backend);
            let (_, version, csv) = export(&a, &token_a).await;
            assert_eq!(version, expected[1].to_string());
            assert!(csv.contains("g5.first") != csv.contains("g5.second"), "one import whole, not a mix");
        }
        a.stop().await;
        b.stop().await;
        db.drop_database().await;
    }
}
