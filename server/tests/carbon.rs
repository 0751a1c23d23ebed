//! Carbon through the real router on SQLite and Postgres: the shipped grid-intensity table on
//! first start, CSV export and import as new versions (every wrong cell located, nothing half
//! imported, roles), and a report's emissions priced from the table in force, in every export.

mod common;

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx, open_workbook_from_rs};
use common::{databases, post, spawn};
use headroom_server::auth::Role;
use headroom_server::grid::DEFAULT_TABLE;
use polars::prelude::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn export(app: &common::TestApp, token: &str) -> (StatusCode, String, String) {
    common::csv_get(app, token, "/api/v1/grid-intensity", "x-grid-version").await
}

async fn import(app: &common::TestApp, token: &str, csv: &str) -> (StatusCode, Value) {
    common::csv_post(app, token, "/api/v1/grid-intensity", csv).await
}

async fn get(app: &common::TestApp, token: &str, path: &str) -> (StatusCode, Vec<u8>) {
    let response = app.http.get(app.url(path)).bearer_auth(token).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

fn report(name: &str) -> Value {
    json!({
        "name": name,
        "from": "2026-11-01",
        "to": "2026-11-30",
        "deployments": [
            {"name": "ranker", "team": "search", "instance_type": "g5.xlarge", "replicas": 4,
             "requests_per_month": 120000000, "power_watts": 300, "power_source": "measured"},
            {"name": "embedder", "team": "search", "instance_type": "g6.xlarge", "replicas": 2,
             "requests_per_month": 0, "power_watts": 100, "pue": 1.5, "grid_g_co2e_per_kwh": 50},
            {"name": "llm", "team": "assist", "instance_type": "p5.48xlarge", "replicas": 1, "requests_per_month": 3000000}
        ]
    })
}

#[tokio::test]
async fn a_reports_emissions_come_from_the_grid_table_in_force_and_every_export_carries_them() {
    for db in databases().await {
        let app = spawn(&db).await;
        let viewer = app.user_token(Role::Viewer).await;
        let finance = app.user_token(Role::Finance).await;
        let (status, version, csv) = export(&app, &viewer).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!((version.as_str(), csv.as_str()), ("1", DEFAULT_TABLE), "{}: shipped on first start", db.backend);

        // Version 1: us-east-1 at 379.069 g and AWS's 1.135. 4 × 0.3 kW × 1.135 × 720 h.
        let (status, record) = post(&app, Some(&finance), "/api/v1/reports", report("v1").to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{record}");
        let id = record["id"].as_str().unwrap().to_string();
        let (_, body) = get(&app, &finance, &format!("/api/v1/reports/{id}")).await;
        let built: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(built["grid_version"], 1);
        let ranker = &built["rows"][0]["carbon"];
        let energy = 4.0 * 0.3 * 1.135 * 720.0;
        assert!((ranker["energy_kwh"].as_f64().unwrap() - energy).abs() < 1e-9, "{ranker}");
        assert!((ranker["co2e_kg"].as_f64().unwrap() - energy * 0.379069).abs() < 1e-9, "{ranker}");
        assert_eq!(ranker["power_source"], "measured");
        assert!(
            ranker["grid_from"]
                .as_str()
                .unwrap()
                .starts_with("grid and PUE from aws us-east-1 grid-intensity v1: EPA eGRID2020")
        );
        let embedder = &built["rows"][1]["carbon"];
        assert_eq!((embedder["grid_from"].as_str(), embedder["pue"].as_f64()), (Some("entered"), Some(1.5)));
        assert_eq!(embedder["co2e_g_per_1000_requests"], Value::Null, "no request served");
        assert_eq!(built["rows"][2].get("carbon"), None, "no power given");

        // Finance imports a cleaner figure for us-east-1: version 2, and the next report uses it
        // while the first keeps what it was built with.
        let cleaner = csv.replace("aws,us-east-1,\"Virginia, US\",379.069,", "aws,us-east-1,\"Virginia, US\",200,");
        assert_ne!(cleaner, csv);
        let (status, body) = import(&app, &finance, &cleaner).await;
        assert_eq!((status, body["version"].as_i64()), (StatusCode::CREATED, Some(2)), "{body}");
        assert_eq!(export(&app, &viewer).await.1, "2");
        let (_, record) = post(&app, Some(&finance), "/api/v1/reports", report("v2").to_string()).await;
        let (_, body) = get(&app, &finance, &format!("/api/v1/reports/{}", record["id"].as_str().unwrap())).await;
        let rebuilt: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(rebuilt["grid_version"], 2);
        assert!((rebuilt["rows"][0]["carbon"]["co2e_kg"].as_f64().unwrap() - energy * 0.2).abs() < 1e-9);
        let (_, body) = get(&app, &finance, &format!("/api/v1/reports/{id}")).await;
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["grid_version"], 1, "a stored report is kept");

        // CSV: labelled columns, kg to the gram, and a TOTAL that adds up as shown.
        let (status, bytes) = get(&app, &finance, &format!("/api/v1/reports/{id}.csv")).await;
        assert_eq!(status, StatusCode::OK);
        let mut reader = csv::Reader::from_reader(bytes.as_slice());
        let header = reader.headers().unwrap().clone();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        let grams = |r: &csv::StringRecord| r[col("Emissions (kg CO2e)")].replace('.', "").parse::<i64>().unwrap_or(0);
        assert_eq!(&records[0][col("Energy (kWh)")], "980.640");
        assert_eq!(&records[0][col("Power source")], "measured");
        assert_eq!(&records[2][col("Emissions (kg CO2e)")], "");
        assert_eq!(&records[3][0], "TOTAL");
        assert_eq!(grams(&records[3]), grams(&records[0]) + grams(&records[1]));
        assert!(records[0][col("Grid intensity from")].contains("grid-intensity v1"));

        // Parquet: typed and nullable; XLSX: numbers, the TOTAL a formula, the method stated.
        let (_, parquet) = get(&app, &finance, &format!("/api/v1/reports/{id}.parquet")).await;
        let df = ParquetReader::new(Cursor::new(parquet)).finish().unwrap();
        let co2e = df.column("co2e_kg").unwrap().f64().unwrap();
        assert!((co2e.get(0).unwrap() - energy * 0.379069).abs() < 1e-9);
        assert_eq!(co2e.get(2), None);
        let (_, xlsx) = get(&app, &finance, &format!("/api/v1/reports/{id}.xlsx")).await;
        let mut book: Xlsx<_> = open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
        let sheet = book.worksheet_range("Report").unwrap();
        assert_eq!(sheet.get((0, 36)), Some(&Data::String("Emissions (kg CO2e)".into())));
        assert!(matches!(sheet.get((1, 36)), Some(Data::Float(v)) if (v - energy * 0.379069).abs() < 1e-9));
        let formulas = book.worksheet_formula("Report").unwrap();
        assert_eq!(formulas.get_value((4, 36)).map(String::as_str), Some("SUM(AK2:AK4)"));
        let about = book.worksheet_range("About").unwrap();
        let said = (0..about.height()).any(|r| {
            about.get((r, 0)) == Some(&Data::String("Grid-intensity table version".into()))
                && about.get((r, 1)) == Some(&Data::String("1".into()))
        });
        assert!(said, "the About sheet names the grid table's version");

        // A region the table does not list, and a figure out of range, are named.
        let mut bad = report("bad");
        bad["deployments"][0]["grid_g_co2e_per_kwh"] = json!(5000);
        let (status, body) = post(&app, Some(&finance), "/api/v1/reports", bad.to_string()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(body["field"], "deployments[0].grid_g_co2e_per_kwh", "{body}");
        let mut bad = report("bad");
        bad["deployments"][0]["power_watts"] = json!("lots");
        let (status, _) = post(&app, Some(&finance), "/api/v1/reports", bad.to_string()).await;
        assert!(status.is_client_error(), "{status}");
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_wrong_grid_table_is_refused_cell_by_cell_and_changes_nothing() {
    for db in databases().await {
        let app = spawn(&db).await;
        let admin = app.user_token(Role::Admin).await;
        let planner = app.user_token(Role::Planner).await;
        let (_, _, before) = export(&app, &admin).await;
        let mut lines: Vec<String> = before.lines().map(str::to_string).collect();
        lines[2] = lines[2].replacen(",1.135,", ",0.9,", 1);
        lines[3] = lines[3].replacen(",1.135,", ",1.135,=SUM(A1),", 1);
        let bad = lines.join("\n") + "\n";
        let (status, body) = import(&app, &admin, &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"], "2 problems in the table; nothing was imported");
        assert_eq!((body["errors"][0]["line"].as_i64(), body["errors"][0]["column"].as_str()), (Some(3), Some("pue")));
        assert!(body["errors"][1]["reason"].as_str().unwrap().contains("has 8 fields"), "{body}");
        assert_eq!(export(&app, &admin).await, (StatusCode::OK, "1".to_string(), before.clone()));

        // A formula in a text cell is stored as text and exported neutralised.
        let formula = before.replacen("Virginia, US", "=HYPERLINK(\"\"http://x\"\")", 1);
        assert_eq!(import(&app, &admin, &formula).await.0, StatusCode::CREATED);
        let (_, _, after) = export(&app, &admin).await;
        assert!(after.contains("\"'=HYPERLINK(\"\"http://x\"\")\""), "{}", &after[..400]);

        // Roles, media type, size; a viewer reads, no one unauthenticated does.
        assert_eq!(import(&app, &planner, &before).await.0, StatusCode::FORBIDDEN);
        let response = app.http.post(app.url("/api/v1/grid-intensity")).body(before.clone()).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let response = app.http.get(app.url("/api/v1/grid-intensity")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let response = app
            .http
            .post(app.url("/api/v1/grid-intensity"))
            .bearer_auth(&admin)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let huge = "x".repeat(2 * 1024 * 1024);
        assert_eq!(import(&app, &admin, &huge).await.0, StatusCode::PAYLOAD_TOO_LARGE);
        let versions: Value = app
            .http
            .get(app.url("/api/v1/grid-intensity/versions"))
            .bearer_auth(&planner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!((versions[0]["version"].as_i64(), versions[1]["origin"].as_str()), (Some(2), Some("default")));

        // A server restarted on the same database does not load the shipped table again.
        app.stop().await;
        let app = spawn(&db).await;
        let viewer = app.user_token(Role::Viewer).await;
        assert_eq!(export(&app, &viewer).await.1, "2");
        app.stop().await;
        db.drop_database().await;
    }
}

/// A node's power as the Planner and Right-sizing read it, through the real ingest and the
/// page-data call: a CPU node's from RAPL; a GPU node's only once a gemm run read a GPU through
/// NVML, then every GPU at that one's draw plus the CPUs.
#[tokio::test]
async fn a_gpu_nodes_power_is_its_gpus_as_nvml_read_one_and_its_cpus() {
    use model::{GpuInfo, Measurement, MeasurementStatus, Suite, Unit};
    let power = |suite: Suite, state: &str, watts: f64, extra: &[(&str, &str)]| Measurement {
        suite,
        case: "power".into(),
        parameters: [("state", state)].iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        unit: Unit::Watts,
        status: MeasurementStatus::Ok,
        reason: None,
        stats: Some(model::Stats::single(watts)),
        floor: None,
        histogram: None,
    };
    let rapl = [("source", "rapl"), ("zones", "package-0")];
    let nvml = [("source", "nvml"), ("zones", "GPU 0 (NVIDIA H100 80GB HBM3)"), ("gpus", "4")];
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-p").await;
        let viewer = app.user_token(Role::Viewer).await;
        // The quantization runs the pages size with are stored as they are (their made-up
        // figures include a negative accuracy change that ingest's checks refuse); the power
        // readings come through the real ingest.
        let store_agent = app.store.upsert_agent("agent-p", &headroom_server::auth::hash_token(&agent)).await.unwrap();
        let store = |run: model::RunUpload| {
            let (app, store_agent) = (&app, &store_agent);
            async move { app.store.insert_run(store_agent, &run).await.unwrap() }
        };
        let upload = |run: model::RunUpload| {
            let (app, agent) = (&app, &agent);
            async move {
                let (status, body) = post(app, Some(agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
                assert!(status.is_success(), "{status}: {body}");
            }
        };
        let fleet = || async {
            let fleet = common::measured_nodes(&app, &viewer).await;
            let of = |host: &str| {
                let nodes = fleet["nodes"].as_array().unwrap();
                nodes.iter().find(|n| n["hostname"] == host).unwrap_or_else(|| panic!("{host}: {fleet}")).clone()
            };
            (of("cpu-node"), of("gpu-node"))
        };
        let mut cpu = common::fleet_run("cpu-node", 1_796_000_000_000, 1.0);
        cpu.measurements.push(power(Suite::System, "busy", 120.0, &rapl));
        store(cpu).await;
        let mut gpu = common::fleet_run("gpu-node", 1_796_000_000_000, 1.0);
        gpu.node.instance_type = Some("p5.48xlarge".into());
        gpu.node.gpus = (0..4)
            .map(|_| GpuInfo {
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_bytes: 80 << 30,
                driver_version: None,
                cuda_version: None,
                pcie_generation: None,
                pcie_width: None,
            })
            .collect();
        gpu.measurements.push(power(Suite::System, "idle", 100.0, &rapl));
        gpu.measurements.push(power(Suite::System, "busy", 300.0, &rapl));
        store(gpu.clone()).await;

        let (cpu_node, gpu_node) = fleet().await;
        assert_eq!(cpu_node["power"][0]["busy_watts"], 120.0, "{}: {cpu_node}", db.backend);
        assert_eq!(gpu_node["power"], Value::Null, "RAPL alone is not a GPU node's power: {gpu_node}");

        // A gemm run read GPU 0 through NVML: the node draws 4 × 650 W and its CPUs' 300 W.
        let mut gemm = gpu.clone();
        gemm.run_id = uuid::Uuid::new_v4();
        gemm.started_at_ms += 60_000;
        gemm.finished_at_ms += 60_000;
        gemm.measurements = vec![power(Suite::Gemm, "idle", 70.0, &nvml), power(Suite::Gemm, "busy", 650.0, &nvml)];
        upload(gemm.clone()).await;
        let (_, gpu_node) = fleet().await;
        let (digest, run) = (&gpu_node["power"][0], &gpu_node["power"][1]);
        assert_eq!(
            (digest["idle_watts"].as_f64(), digest["busy_watts"].as_f64()),
            (Some(380.0), Some(2900.0)),
            "{}",
            db.backend
        );
        assert_eq!(digest["gpus"], 4);
        let cpu_run = &gpu.run_id.to_string()[..8];
        assert_eq!(
            digest["zones"],
            format!(
                "GPUs (NVML): 4 GPUs, each drawing what GPU 0 (NVIDIA H100 80GB HBM3) did; CPUs (RAPL, run {cpu_run}): package-0"
            )
        );
        assert_eq!(run, &Value::String(gemm.run_id.to_string()), "the run that read the GPU is named");

        // A newer gemm run where NVML listed two GPUs, not the inventory's four: one GPU's draw
        // no longer stands for the node's.
        let mut fewer = gemm.clone();
        fewer.run_id = uuid::Uuid::new_v4();
        fewer.started_at_ms += 60_000;
        fewer.finished_at_ms += 60_000;
        let two = [("source", "nvml"), ("zones", "GPU 0 (NVIDIA H100 80GB HBM3)"), ("gpus", "2")];
        fewer.measurements = vec![power(Suite::Gemm, "busy", 650.0, &two)];
        upload(fewer).await;
        let (_, gpu_node) = fleet().await;
        assert_eq!(gpu_node["power"], Value::Null, "{}: {gpu_node}", db.backend);
        app.stop().await;
        db.drop_database().await;
    }
}
