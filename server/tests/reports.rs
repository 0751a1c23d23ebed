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

/// Chargeback with idle cost on both databases: replicas beyond what the volume needs at its
/// SLO (sized by the queue model, or entered) are priced, shared as the report's policy says,
/// and the team files add up to the report's total in every format.
#[tokio::test]
async fn idle_replicas_are_charged_by_the_stated_policy_and_the_team_files_add_up() {
    // 2,628,000,000 requests a month is 1,000/s; at twice that peak a 0.1 s service is 200
    // servers busy, which a 50 % cap turns into 400 replicas (the p99 SLO of 10 s is loose).
    let body = |policy: &str| {
        json!({
            "name": "Chargeback", "from": "2026-11-01", "to": "2026-11-30", "idle_policy": policy,
            "deployments": [
                {"name": "ranker", "team": "search", "cost_centre": "CC-1", "instance_type": "g5.xlarge",
                 "replicas": 450, "requests_per_month": 2628000000u64,
                 "sizing": {"service_time_s": 0.1, "slo_latency_s": 10, "max_utilization": 0.5, "peak_to_average": 2}},
                {"name": "chat", "team": "=HYPERLINK(\"x\")", "instance_type": "g5.xlarge", "replicas": 2,
                 "needed_replicas": 2, "requests_per_month": 1000000},
                {"name": "embedder", "team": "search", "cost_centre": "CC-1", "serving_cost_per_request_usd": "0.00001",
                 "requests_per_month": 300000000, "training_cost_usd": "1000", "retrains_per_month": 1}
            ]
        })
    };
    let hourly = 1_006_000i64; // g5.xlarge on demand, micro-dollars.
    for db in databases().await {
        let app = spawn(&db).await;
        let finance = app.user_token(Role::Finance).await;
        let planner = app.user_token(Role::Planner).await;
        let mut totals = Vec::new();
        for policy in ["owner", "proportional"] {
            let (status, record) = post(&app, Some(&finance), "/api/v1/reports", body(policy).to_string()).await;
            assert_eq!(status, StatusCode::CREATED, "{record}");
            let id = record["id"].as_str().unwrap().to_string();
            let total = record["total_micro_usd"].as_i64().unwrap();
            totals.push(total);
            let (status, report) = get(&app, &finance, &format!("/api/v1/reports/{id}")).await;
            assert_eq!(status, StatusCode::OK);
            let report: Value = serde_json::from_slice(&report).unwrap();
            assert_eq!(report["idle_policy"], policy);
            let ranker = &report["rows"][0];
            assert_eq!(ranker["needed_replicas"], 400, "{ranker}");
            assert_eq!(ranker["replicas"], 450);
            assert!(ranker["needed_from"].as_str().unwrap().starts_with("M/G/c: p99 ≤ 10 s at 2× the average rate"));
            let idle = hourly * 50 * 720;
            assert_eq!(ranker["idle_micro_usd"], idle);
            assert_eq!(report["rows"][1]["idle_micro_usd"], 0, "needs all it has");
            assert_eq!(report["rows"][1]["needed_from"], "entered");

            let (status, teams) = get(&app, &finance, &format!("/api/v1/reports/{id}/chargeback")).await;
            assert_eq!(status, StatusCode::OK);
            let teams: Vec<Value> = serde_json::from_slice(&teams).unwrap();
            assert_eq!(teams.len(), 2, "{teams:?}");
            let charged: i64 = teams.iter().map(|t| t["chargeback_micro_usd"].as_i64().unwrap()).sum();
            assert_eq!(charged, total, "the teams' charges add up to the report's total");
            let (hyperlink, search) = (&teams[0], &teams[1]);
            assert_eq!(search["team"], "search");
            assert_eq!(search["cost_centre"], "CC-1");
            assert_eq!(search["deployments"], 2);
            assert_eq!(search["idle_micro_usd"], idle);
            let used = |t: &Value| t["used_serving_micro_usd"].as_i64().unwrap();
            match policy {
                "owner" => {
                    assert_eq!(search["idle_charged_micro_usd"], idle);
                    assert_eq!(hyperlink["idle_charged_micro_usd"], 0);
                }
                _ => {
                    // The pool follows used serving: each team within a micro-dollar of its share.
                    let all = (used(search) + used(hyperlink)) as i128;
                    for t in [search, hyperlink] {
                        let exact = idle as i128 * used(t) as i128;
                        let got = t["idle_charged_micro_usd"].as_i64().unwrap() as i128;
                        assert!((got * all - exact).abs() < all, "{t}");
                    }
                    assert!(hyperlink["idle_charged_micro_usd"].as_i64().unwrap() > 0);
                }
            }

            // CSV: labelled, in cents that add up across and down, the policy on every line, and
            // a team that looks like a formula neutralised.
            let (status, csv_bytes) = get(&app, &finance, &format!("/api/v1/reports/{id}/chargeback.csv")).await;
            assert_eq!(status, StatusCode::OK);
            let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
            let header = reader.headers().unwrap().clone();
            let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
            let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
            assert_eq!(records.len(), 3, "two teams and TOTAL");
            let cents = |r: &csv::StringRecord, name: &str| r[col(name)].replace('.', "").parse::<i64>().unwrap();
            for r in &records {
                assert_eq!(&r[col("Idle cost policy")], policy);
                assert_eq!(&r[col("Report id")], id);
                assert_eq!(
                    cents(r, "Used serving (USD)") + cents(r, "Idle charged (USD)") + cents(r, "Training (USD)"),
                    cents(r, "Chargeback (USD)")
                );
            }
            assert_eq!(&records[0][col("Team")], "'=HYPERLINK(\"x\")");
            assert_eq!(&records[2][0], "TOTAL");
            assert_eq!(
                cents(&records[0], "Chargeback (USD)") + cents(&records[1], "Chargeback (USD)"),
                cents(&records[2], "Chargeback (USD)")
            );
            assert_eq!(records[2][col("Chargeback (exact micro-USD)")].parse::<i64>().unwrap(), total);

            let (status, parquet) = get(&app, &finance, &format!("/api/v1/reports/{id}/chargeback.parquet")).await;
            assert_eq!(status, StatusCode::OK);
            let df = ParquetReader::new(Cursor::new(parquet)).finish().unwrap();
            assert_eq!(df.height(), 2);
            let sum: f64 = df.column("chargeback_usd").unwrap().f64().unwrap().iter().flatten().sum();
            assert!((sum - total as f64 / 1e6).abs() < 1e-6, "{sum} vs {total}");
            assert_eq!(df.column("idle_policy").unwrap().str().unwrap().get(0), Some(policy));

            let (status, xlsx) = get(&app, &finance, &format!("/api/v1/reports/{id}/chargeback.xlsx")).await;
            assert_eq!(status, StatusCode::OK);
            let mut book: Xlsx<_> = open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
            let sheet = book.worksheet_range("Chargeback").unwrap();
            assert_eq!(sheet.get((0, 8)), Some(&Data::String("Chargeback (USD)".into())));
            assert_eq!(sheet.get((3, 0)), Some(&Data::String("TOTAL".into())));
            match sheet.get((3, 8)) {
                Some(Data::Float(v)) => assert!((v - total as f64 / 1e6).abs() < 1e-6),
                other => panic!("TOTAL is {other:?}"),
            }
            let formulas = book.worksheet_formula("Chargeback").unwrap();
            assert_eq!(formulas.get_value((3, 8)).map(String::as_str), Some("SUM(I2:I3)"));
            let about = book.worksheet_range("About").unwrap();
            let stated = (0..about.height()).any(|r| {
                about.get((r, 0)) == Some(&Data::String("Idle cost policy".into()))
                    && matches!(about.get((r, 1)), Some(Data::String(s)) if s.starts_with(policy))
            });
            assert!(stated, "the policy is in the file");

            // The deployment table carries the idle columns too; the report's XLSX total row
            // reaches past column Z.
            let (_, csv_bytes) = get(&app, &finance, &format!("/api/v1/reports/{id}.csv")).await;
            let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
            let header = reader.headers().unwrap().clone();
            let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
            let at = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
            assert_eq!(&records[0][at("Needed replicas")], "400");
            assert_eq!(&records[0][at("Idle (USD)")], format!("{}.00", idle / 1_000_000));
            assert_eq!(&records[3][at("Idle cost policy")], policy);
            let (status, xlsx) = get(&app, &finance, &format!("/api/v1/reports/{id}.xlsx")).await;
            assert_eq!(status, StatusCode::OK);
            let mut book: Xlsx<_> = open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
            let formulas = book.worksheet_formula("Report").unwrap();
            assert_eq!(formulas.get_value((4, 28)).map(String::as_str), Some("SUM(AC2:AC4)"));

            for (path, want) in [
                (format!("/api/v1/reports/{id}/chargeback.pdf"), StatusCode::NOT_FOUND),
                (format!("/api/v1/reports/{id}/teams.csv"), StatusCode::NOT_FOUND),
                ("/api/v1/reports/not-an-id/chargeback".to_string(), StatusCode::NOT_FOUND),
                (format!("/api/v1/reports/{}/chargeback", uuid::Uuid::new_v4()), StatusCode::NOT_FOUND),
            ] {
                assert_eq!(get(&app, &finance, &path).await.0, want, "{path}");
            }
            assert_eq!(
                get(&app, &planner, &format!("/api/v1/reports/{id}/chargeback.csv")).await.0,
                StatusCode::FORBIDDEN
            );
        }
        assert_eq!(totals[0], totals[1], "the policy moves charges between teams, not the total");

        // Wrong sizing names the field and stores nothing.
        let (_, before) = get(&app, &finance, "/api/v1/reports").await;
        let with = |edit: &dyn Fn(&mut Value)| {
            let mut b = body("owner");
            edit(&mut b);
            b
        };
        let cases = [
            (
                with(&|b| b["deployments"][0]["sizing"]["slo_latency_s"] = json!(0.01)),
                "deployments[0].sizing.slo_latency_s",
            ),
            (
                with(&|b| b["deployments"][0]["sizing"]["peak_to_average"] = json!(0.5)),
                "deployments[0].sizing.peak_to_average",
            ),
            (
                with(&|b| b["deployments"][0]["sizing"]["service_time_s"] = json!(-1)),
                "deployments[0].sizing.service_time_s",
            ),
            (with(&|b| b["deployments"][0]["needed_replicas"] = json!(3)), "deployments[0].sizing"),
            (with(&|b| b["deployments"][2]["needed_replicas"] = json!(3)), "deployments[2].needed_replicas"),
            (with(&|b| b["deployments"][1]["cost_centre"] = json!("c".repeat(201))), "deployments[1].cost_centre"),
        ];
        for (b, field) in cases {
            let (status, answer) = post(&app, Some(&finance), "/api/v1/reports", b.to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["field"], field, "{answer}");
        }
        for b in [
            with(&|b| b["idle_policy"] = json!("everyone")),
            with(&|b| b["deployments"][0]["sizing"]["nope"] = json!(1)),
        ] {
            let (status, answer) = post(&app, Some(&finance), "/api/v1/reports", b.to_string()).await;
            assert!(status.is_client_error(), "{status} {answer}");
        }
        assert_eq!(get(&app, &finance, "/api/v1/reports").await.1, before, "nothing stored");
        app.stop().await;
        db.drop_database().await;
    }
}

async fn put_budget(app: &common::TestApp, token: &str, body: Value) -> (StatusCode, Value) {
    let response = app
        .http
        .put(app.url("/api/v1/budgets"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null))
}

/// Budgets on both databases, and a report's 12-month forecast against them: a fleet growing
/// 10 % a month crosses its team's budget in the month its replicas do, a flat deployment over
/// its own budget is over from the first month, and every file says so.
#[tokio::test]
async fn a_forecast_crosses_each_budget_in_the_month_its_spend_does() {
    let body = json!({
        "name": "November", "from": "2026-11-01", "to": "2026-11-30",
        "deployments": [
            {"name": "ranker", "team": "search", "instance_type": "g5.xlarge", "replicas": 4,
             "requests_per_month": 100000000, "growth_per_month": 0.1},
            {"name": "chat", "serving_cost_per_request_usd": "0.00001", "requests_per_month": 1000000000,
             "training_cost_usd": "1000", "retrains_per_month": 1}
        ]
    });
    for db in databases().await {
        let app = spawn(&db).await;
        let finance = app.user_token(Role::Finance).await;
        let planner = app.user_token(Role::Planner).await;
        // Set twice: the second replaces the first. The team with no name has a budget too.
        for amount in [json!(1), json!("4000")] {
            let (status, b) =
                put_budget(&app, &finance, json!({"scope": "team", "name": "search", "monthly_usd": amount})).await;
            assert_eq!(status, StatusCode::OK, "{b}");
        }
        let (status, _) =
            put_budget(&app, &finance, json!({"scope": "team", "name": "", "monthly_usd": "20000"})).await;
        assert_eq!(status, StatusCode::OK);
        let (status, chat) =
            put_budget(&app, &finance, json!({"scope": "deployment", "name": "chat", "monthly_usd": "10999.99"})).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(chat["monthly_micro_usd"], 10_999_990_000i64);
        assert!(chat["updated_by"].as_str().unwrap().starts_with("finance-"), "{chat}");
        let (_, list) = get(&app, &finance, "/api/v1/budgets").await;
        let list: Vec<Value> = serde_json::from_slice(&list).unwrap();
        assert_eq!(list.len(), 3, "{list:?}");
        assert_eq!((list[0]["scope"].as_str(), list[1]["name"].as_str()), (Some("team"), Some("search")));
        assert_eq!(list[1]["monthly_micro_usd"], 4_000_000_000i64);

        let (status, record) = post(&app, Some(&finance), "/api/v1/reports", body.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{record}");
        let id = record["id"].as_str().unwrap().to_string();
        let (status, forecast) = get(&app, &finance, &format!("/api/v1/reports/{id}/forecast")).await;
        assert_eq!(status, StatusCode::OK);
        let forecast: Value = serde_json::from_slice(&forecast).unwrap();
        let months: Vec<&str> = forecast["months"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        assert_eq!((months.len(), months[0], months[11]), (12, "2026-12", "2027-11"));
        let line = |scope: &str, name: &str| {
            forecast["lines"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["scope"] == scope && l["name"] == name)
                .unwrap()
                .clone()
        };
        // ⌈4 × 1.1ᵐ⌉ replicas: 5, 5, 6 … at 1.006 USD for 730 hours each.
        let search = line("team", "search");
        let spend = |l: &Value, m: usize| l["spend_micro_usd"][m].as_i64().unwrap();
        assert_eq!(spend(&search, 0), 5 * 1_006_000 * 730);
        assert_eq!(spend(&search, 1), 5 * 1_006_000 * 730);
        assert_eq!(spend(&search, 2), 6 * 1_006_000 * 730);
        assert_eq!(spend(&search, 11), 13 * 1_006_000 * 730, "4 × 1.1¹² = 12.55");
        assert_eq!(search["first_over"], 3, "4,406.28 USD in month 3 is over 4,000");
        let chat = line("deployment", "chat");
        assert_eq!(spend(&chat, 0), 10_000_000_000 + 1_000_000_000, "flat: serving plus training");
        assert_eq!(chat["first_over"], 1);
        assert_eq!(line("team", "")["first_over"], Value::Null, "11,000 USD a month is within 20,000");
        assert_eq!(line("deployment", "ranker")["budget_micro_usd"], Value::Null);

        let (status, csv_bytes) = get(&app, &finance, &format!("/api/v1/reports/{id}/forecast.csv")).await;
        assert_eq!(status, StatusCode::OK);
        let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
        let header = reader.headers().unwrap().clone();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), 4 * 12, "two teams and two deployments, 12 months each");
        let over: Vec<&str> = records
            .iter()
            .filter(|r| &r[col("Scope")] == "team" && &r[col("Name")] == "search")
            .map(|r| r.get(col("Over budget")).unwrap())
            .collect();
        assert_eq!(&over[..4], ["no", "no", "yes", "yes"]);
        let first = &records[0];
        assert_eq!(&first[col("Report id")], id);
        assert_eq!(&first[col("Month")], "2026-12");
        let (status, parquet) = get(&app, &finance, &format!("/api/v1/reports/{id}/forecast.parquet")).await;
        assert_eq!(status, StatusCode::OK);
        let df = ParquetReader::new(Cursor::new(parquet)).finish().unwrap();
        assert_eq!(df.height(), 48);
        assert_eq!(df.column("budget_usd").unwrap().null_count(), 12, "ranker has no budget of its own");
        let (status, xlsx) = get(&app, &finance, &format!("/api/v1/reports/{id}/forecast.xlsx")).await;
        assert_eq!(status, StatusCode::OK);
        let mut book: Xlsx<_> = open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
        let sheet = book.worksheet_range("Forecast").unwrap();
        let row = (1..sheet.height())
            .find(|&r| sheet.get((r, 1)) == Some(&Data::String("search".into())))
            .expect("a line for search");
        assert_eq!(sheet.get((row, 4)), Some(&Data::String("2027-02".into())), "first month over");
        assert_eq!(sheet.get((0, 5)), Some(&Data::String("2026-12".into())));
        assert!(matches!(sheet.get((row, 7)), Some(Data::Float(v)) if (v - 4406.28).abs() < 1e-6));

        // Deleting a budget takes it off the forecast.
        let id_of_chat = list.iter().find(|b| b["name"] == "chat").unwrap()["id"].as_str().unwrap().to_string();
        let delete = |token: String, id: String| {
            let request = app.http.delete(app.url(&format!("/api/v1/budgets/{id}"))).bearer_auth(token);
            async move { request.send().await.unwrap().status() }
        };
        assert_eq!(delete(planner.clone(), id_of_chat.clone()).await, StatusCode::FORBIDDEN);
        assert_eq!(delete(finance.clone(), id_of_chat.clone()).await, StatusCode::NO_CONTENT);
        assert_eq!(delete(finance.clone(), id_of_chat.clone()).await, StatusCode::NOT_FOUND);
        let (_, forecast) = get(&app, &finance, &format!("/api/v1/reports/{id}/forecast")).await;
        let forecast: Value = serde_json::from_slice(&forecast).unwrap();
        let chat = forecast["lines"].as_array().unwrap().iter().find(|l| l["name"] == "chat").unwrap().clone();
        assert_eq!(chat["budget_micro_usd"], Value::Null);

        // Wrong budgets name the field; nothing else changes.
        for (b, field) in [
            (json!({"scope": "org", "name": "x", "monthly_usd": 1}), "scope"),
            (json!({"scope": "deployment", "name": " ", "monthly_usd": 1}), "name"),
            (json!({"scope": "team", "name": "x", "monthly_usd": -5}), "monthly_usd"),
            (json!({"scope": "team", "name": "x", "monthly_usd": "1e9"}), "monthly_usd"),
            (json!({"scope": "team", "name": "t".repeat(201), "monthly_usd": 1}), "name"),
        ] {
            let (status, answer) = put_budget(&app, &finance, b).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["field"], field, "{answer}");
        }
        let (status, _) = put_budget(&app, &planner, json!({"scope": "team", "name": "x", "monthly_usd": 1})).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) =
            put_budget(&app, &finance, json!({"scope": "team", "name": "x".repeat(5000), "monthly_usd": 1})).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let (_, after) = get(&app, &finance, "/api/v1/budgets").await;
        assert_eq!(serde_json::from_slice::<Vec<Value>>(&after).unwrap().len(), 2);

        // The Budgets page shows the costliest 50 teams and 50 deployments of a large report;
        // the rest are counted and left to the files.
        let many: Vec<Value> = (0..60)
            .map(|i| {
                json!({"name": format!("d{i}"), "team": format!("t{i}"), "instance_type": "g5.xlarge",
                            "replicas": 1 + i, "requests_per_month": 1000})
            })
            .collect();
        let big = json!({"name": "Many", "from": "2026-11-01", "to": "2026-11-30", "deployments": many});
        let (status, _) = post(&app, Some(&finance), "/api/v1/reports", big.to_string()).await;
        assert_eq!(status, StatusCode::CREATED);
        let page =
            app.http.post(app.url("/srv/budgets")).bearer_auth(&finance).form(&[("", "")][..0]).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let page: Value = page.json().await.unwrap();
        let lines = page["lines"].as_array().unwrap();
        assert_eq!(lines.len(), 100, "50 teams and 50 deployments");
        assert_eq!(page["others"], 20);
        assert_eq!(
            (lines[0]["name"].as_str(), lines[50]["name"].as_str()),
            (Some("t59"), Some("d59")),
            "costliest first"
        );
        assert!(
            lines[..50].iter().all(|l| l["scope"] == "team") && lines[50..].iter().all(|l| l["scope"] == "deployment")
        );

        // A growth the forecast cannot take is refused by name.
        let mut wrong = body.clone();
        wrong["deployments"][0]["growth_per_month"] = json!(2.5);
        let (status, answer) = post(&app, Some(&finance), "/api/v1/reports", wrong.to_string()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(answer["field"], "deployments[0].growth_per_month");
        app.stop().await;
        db.drop_database().await;
    }
}
