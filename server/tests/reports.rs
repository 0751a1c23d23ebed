//! Finance reports through the real router on SQLite and Postgres: built from the price
//! catalog and stored runs, exported as CSV, Parquet and XLSX, and each file read back with the
//! usual readers (csv, polars, calamine) to check values, types and totals.

mod common;

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx, open_workbook_from_rs};
use common::{databases, post, sample_run, spawn};
use headroom_server::auth::Role;
use polars::prelude::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn get(app: &common::TestApp, token: &str, path: &str) -> (StatusCode, Vec<u8>) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

fn request(run_id: &str) -> Value {
    json!({
        "name": "November 2026",
        "from": "2026-11-01",
        "to": "2026-11-30",
        "deployments": [
            {"name": "ranker", "team": "search", "instance_type": "g5.xlarge", "replicas": 4,
             "requests_per_month": 120000000, "training_cost_usd": "20000", "retrains_per_month": 1,
             "run_ids": [run_id],
             "recommendations": [
                {"kind": "right_sizing", "instance_type": "g6.xlarge", "replicas": 3, "run_ids": [run_id]},
                {"kind": "transport", "cores_saved": 1.5}
             ]},
            {"name": "embedder", "team": "search", "serving_cost_per_request_usd": 0.00002,
             "requests_per_month": 900000000, "training_cost_usd": 5000, "retrains_per_month": 2,
             "recommendations": [{"kind": "distillation", "serving_saving_fraction": 0.3, "extra_training_cost_usd": "1500"}]},
            {"name": "llm", "team": "assist", "instance_type": "p5.48xlarge", "replicas": 2, "requests_per_month": 3000000}
        ]
    })
}

#[tokio::test]
async fn a_report_reads_back_the_same_in_every_format() {
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-a").await;
        let run = sample_run("node-r");
        let (status, _) = post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
        assert_eq!(status, StatusCode::CREATED);
        let finance = app.user_token(Role::Finance).await;
        let planner = app.user_token(Role::Planner).await;
        let scenario = json!({"kind": "planner", "name": "embedder plan", "inputs": {}}).to_string();
        let (status, scenario) = post(&app, Some(&planner), "/api/v1/scenarios", scenario).await;
        assert_eq!(status, StatusCode::CREATED);
        let scenario_id = scenario["id"].as_str().unwrap().to_string();
        let mut body = request(&run.run_id.to_string());
        body["deployments"][1]["scenario_id"] = json!(scenario_id);
        let before = headroom_server::store::now_ms();
        let (status, record) = post(&app, Some(&finance), "/api/v1/reports", body.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{record}");
        assert_eq!(record["deployment_count"], 3);
        assert_eq!(record["catalog_version"], 1);
        let id = record["id"].as_str().unwrap().to_string();
        let total = record["total_micro_usd"].as_i64().unwrap();

        let (status, body) = get(&app, &finance, &format!("/api/v1/reports/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        let report: Value = serde_json::from_slice(&body).unwrap();
        let ranker = &report["rows"][0];
        // 1.006 USD an hour × 4 replicas × 720 hours, exactly.
        assert_eq!(ranker["serving_micro_usd"], 1_006_000i64 * 4 * 720);
        assert_eq!(ranker["savings_micro_usd"]["right_sizing"], (1_006_000i64 * 4 - 804_800 * 3) * 720);
        assert_eq!(ranker["price_as_of"], "2024-06-01");
        assert_eq!(ranker["run_ids"][0], run.run_id.to_string());
        assert_eq!(report["rows"][1]["price_source"], "entered");
        // Who built it and when, and the scenario a row was planned in.
        let finance_name = record["created_by"].as_str().unwrap().to_string();
        assert!(finance_name.starts_with("finance-"));
        assert_eq!(report["generated_by"], finance_name);
        let at = report["generated_at_ms"].as_i64().unwrap();
        assert!(at >= before && at <= headroom_server::store::now_ms(), "{at}");
        let at_iso = model::format::utc_iso(at);
        assert_eq!(report["rows"][1]["scenario_id"], scenario_id);
        assert_eq!(report["rows"][0]["scenario_id"], Value::Null);

        // CSV: labelled columns, every row in cents with its exact micro-dollars beside it, then a
        // TOTAL line whose cents are the sum of the cents shown and whose exact column is exact.
        let (status, csv_bytes) = get(&app, &finance, &format!("/api/v1/reports/{id}.csv")).await;
        assert_eq!(status, StatusCode::OK);
        let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
        let header = reader.headers().unwrap().clone();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), 4);
        let exact = |r: &csv::StringRecord| r[col("Total (exact micro-USD)")].parse::<i64>().unwrap();
        let cents = |r: &csv::StringRecord| {
            let shown = &r[col("Total (USD)")];
            assert_eq!(shown.split('.').nth(1).map(str::len), Some(2), "{shown} is in cents");
            shown.replace('.', "").parse::<i64>().unwrap()
        };
        assert_eq!(&records[3][0], "TOTAL");
        assert_eq!(records[..3].iter().map(exact).sum::<i64>(), total);
        assert_eq!(exact(&records[3]), total);
        assert_eq!(records[..3].iter().map(cents).sum::<i64>(), cents(&records[3]));
        assert!((cents(&records[3]) * 10_000 - total).abs() <= 3 * 5_000, "the cents round the exact total");
        assert_eq!(&records[0][col("Period from")], "2026-11-01");
        assert_eq!(&records[0][col("Price catalog version")], "1");
        for r in &records {
            assert_eq!(&r[col("Report id")], id);
            assert_eq!(&r[col("Generated at (UTC)")], at_iso);
            assert_eq!(&r[col("Generated by")], finance_name);
        }
        assert_eq!(&records[1][col("Scenario id")], scenario_id);
        assert_eq!(&records[0][col("Scenario id")], "");

        // Parquet: typed columns; the sum of total_usd is the report's total.
        let (status, parquet) = get(&app, &finance, &format!("/api/v1/reports/{id}.parquet")).await;
        assert_eq!(status, StatusCode::OK);
        let df = ParquetReader::new(Cursor::new(parquet)).finish().unwrap();
        assert_eq!(df.height(), 3);
        assert_eq!(df.column("period_from").unwrap().dtype(), &DataType::Date);
        assert_eq!(df.column("requests").unwrap().dtype(), &DataType::UInt64);
        assert_eq!(df.column("total_usd").unwrap().dtype(), &DataType::Float64);
        let sum: f64 = df.column("total_usd").unwrap().f64().unwrap().iter().flatten().sum();
        assert!((sum - total as f64 / 1e6).abs() < 1e-6, "{sum} vs {total}");
        let text = |name: &str, row: usize| df.column(name).unwrap().str().unwrap().get(row).map(str::to_string);
        assert_eq!(text("scenario_id", 1), Some(scenario_id.clone()));
        assert_eq!(text("scenario_id", 0), None);
        assert_eq!(text("generated_by", 2), Some(finance_name.clone()));
        assert_eq!(text("generated_at", 2), Some(at_iso.clone()));
        assert_eq!(text("report_id", 0), Some(id.clone()));

        // XLSX: numbers are numbers, dates are dates, and the TOTAL row adds up.
        let (status, xlsx) = get(&app, &finance, &format!("/api/v1/reports/{id}.xlsx")).await;
        assert_eq!(status, StatusCode::OK);
        let mut book: Xlsx<_> = open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
        let sheet = book.worksheet_range("Report").unwrap();
        assert_eq!(sheet.get((0, 8)), Some(&Data::String("Total (USD)".into())), "labels, not machine names");
        assert_eq!(sheet.get((0, 18)), Some(&Data::String("Scenario id".into())));
        assert_eq!(sheet.get((2, 18)), Some(&Data::String(scenario_id.clone())));
        assert_eq!(sheet.get((1, 21)), Some(&Data::String(finance_name.clone())));
        let about = book.worksheet_range("About").unwrap();
        let about_value = |key: &str| {
            (0..about.height())
                .find(|&r| about.get((r, 0)) == Some(&Data::String(key.into())))
                .and_then(|r| about.get((r, 1)).cloned())
        };
        assert_eq!(about_value("Generated by"), Some(Data::String(finance_name.clone())));
        assert_eq!(about_value("Generated at (UTC)"), Some(Data::String(at_iso.clone())));
        assert_eq!(about_value("Report id"), Some(Data::String(id.clone())));
        assert!(matches!(sheet.get((1, 3)), Some(Data::DateTime(_))), "{:?}", sheet.get((1, 3)));
        let money = |row: usize| match sheet.get((row, 8)) {
            Some(Data::Float(v)) => *v,
            other => panic!("row {row} total is {other:?}"),
        };
        assert_eq!(sheet.get((4, 0)), Some(&Data::String("TOTAL".into())));
        assert!((money(1) + money(2) + money(3) - money(4)).abs() < 1e-6);
        assert!((money(4) - total as f64 / 1e6).abs() < 1e-6);
        assert!(matches!(sheet.get((1, 5)), Some(Data::Float(_))), "requests are a number");
        // The totals are formulas over the rows (the values above are their cached results).
        let formulas = book.worksheet_formula("Report").unwrap();
        assert_eq!(formulas.get_value((4, 8)).map(String::as_str), Some("SUM(I2:I4)"));
        assert_eq!(formulas.get_value((4, 5)).map(String::as_str), Some("SUM(F2:F4)"));

        let (status, _) = get(&app, &finance, &format!("/api/v1/reports/{id}.pdf")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn wrong_reports_name_the_field_and_store_nothing() {
    for db in databases().await {
        let app = spawn(&db).await;
        let finance = app.user_token(Role::Finance).await;
        let planner = app.user_token(Role::Planner).await;
        let unknown_run = uuid::Uuid::new_v4().to_string();
        let mut bad_instance = request(&unknown_run);
        bad_instance["deployments"][0]["run_ids"] = json!([]);
        bad_instance["deployments"][0]["recommendations"] = json!([]);
        bad_instance["deployments"][2]["instance_type"] = json!("x9.mega");
        let mut huge_replicas = request(&unknown_run);
        huge_replicas["deployments"][0]["run_ids"] = json!([]);
        huge_replicas["deployments"][0]["recommendations"] = json!([]);
        let mut huge_amount = huge_replicas.clone();
        // 4,294,967,295 × 98.32 USD × 720 hours.
        huge_replicas["deployments"][2]["replicas"] = json!(u32::MAX);
        huge_amount["deployments"][0]["training_cost_usd"] = json!(9e12);
        let mut unknown_scenario = huge_amount.clone();
        unknown_scenario["deployments"][0]["training_cost_usd"] = json!(1);
        let mut long_team = unknown_scenario.clone();
        unknown_scenario["deployments"][1]["scenario_id"] = json!("no-such-scenario");
        long_team["deployments"][0]["team"] = json!("t".repeat(201));
        let cases = [
            (unknown_scenario, "deployments[1].scenario_id"),
            (long_team, "deployments[0].team"),
            (huge_replicas, "deployments[2].replicas"),
            (huge_amount, "deployments[0].training_cost_usd"),
            (request(&unknown_run), "deployments[0].run_ids[0]"),
            (bad_instance, "deployments[2].instance_type"),
            (json!({"name": "x", "from": "2026-02-30", "to": "2026-03-01", "deployments": []}), "from"),
            (json!({"name": "x", "from": "2026-03-01", "to": "2026-02-01", "deployments": []}), "to"),
            (json!({"name": "x", "from": "2026-03-01", "to": "2026-03-31", "deployments": []}), "deployments"),
        ];
        for (body, field) in cases {
            let (status, answer) = post(&app, Some(&finance), "/api/v1/reports", body.to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["field"], field, "{answer}");
        }
        let (status, answer) = post(&app, Some(&finance), "/api/v1/reports", r#"{"name": "x", "from": 1}"#).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        let (status, _) = post(&app, Some(&planner), "/api/v1/reports", request(&unknown_run).to_string()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, list) = get(&app, &finance, "/api/v1/reports").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(serde_json::from_slice::<Value>(&list).unwrap(), json!([]), "nothing stored");
        assert_eq!(get(&app, &planner, "/api/v1/reports").await.0, StatusCode::FORBIDDEN);
        app.stop().await;
        db.drop_database().await;
    }
}
