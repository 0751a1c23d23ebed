//! `cargo bench -p headroom-server --bench reports`: a monthly report of 10,000 deployments
//! (`HEADROOM_BENCH_DEPLOYMENTS` changes it), each priced from the shipped catalog with two
//! recommendations, each saying the replicas its volume needs (a tenth sized from the queue
//! model, the most a report may size), so idle cost, shared proportionally, is computed: compute, the polars table, each export and the chargeback. Median of 7; ratios are to the
//! compute step in the same run. The target is the whole build, compute and all three files,
//! under 2 s.

use std::time::{Duration, Instant};

use headroom_server::chargeback;
use headroom_server::prices::{DEFAULT_CATALOG, parse};
use headroom_server::reports::{
    self, Amount, DeploymentInput, IdlePolicy, Kind, Prices, RecommendationInput, ReportRequest, Sizing,
};

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..7)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[3]
}

fn main() {
    let n: usize = std::env::var("HEADROOM_BENCH_DEPLOYMENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let catalog = parse(DEFAULT_CATALOG).expect("catalog");
    let instances: Vec<&str> = catalog.iter().map(|r| r.instance_type.as_str()).collect();
    let deployments = (0..n)
        .map(|i| DeploymentInput {
            name: format!("model-{i}"),
            team: Some(format!("team-{}", i % 40)),
            cost_centre: Some(format!("cc-{}", i % 7)),
            instance_type: Some(instances[i % instances.len()].to_string()),
            purchase_option: "on_demand".into(),
            region: None,
            replicas: Some(1 + (i % 16) as u32),
            // One in ten sized from the queue model (the most a report may size), the others
            // with an entered need, so idle cost is part of what is measured.
            needed_replicas: (i % 10 != 0).then_some((i % 16) as u32 / 2 + 1),
            sizing: (i % 10 == 0).then_some(Sizing {
                service_time_s: 0.002 + (i % 10) as f64 * 0.01,
                service_time_cv: 0.5,
                slo_latency_s: 0.5,
                slo_quantile: 0.99,
                max_utilization: 0.8,
                peak_to_average: 2.0,
            }),
            serving_cost_per_request_usd: None,
            requests_per_month: 1_000_000 + (i as u64 * 7919) % 500_000_000,
            growth_per_month: (i % 5) as f64 * 0.02,
            training_cost_usd: Some(Amount::Text(format!("{}.25", 1000 + i % 50_000))),
            retrains_per_month: (i % 4) as f64 * 0.5,
            run_ids: vec![],
            scenario_id: None,
            recommendations: vec![
                RecommendationInput::alternative(
                    Kind::RightSizing,
                    instances[(i + 3) % instances.len()],
                    1 + (i % 8) as u32,
                ),
                RecommendationInput::cheaper_model(Kind::Distillation, 0.25, 2500.0),
            ],
            // Half with their power, so emissions are part of what is measured.
            power_watts: (i % 2 == 0).then_some(300.0 + (i % 7) as f64 * 100.0),
            power_source: None,
            pue: None,
            grid_g_co2e_per_kwh: None,
        })
        .collect();
    let request = ReportRequest {
        name: "bench".into(),
        from: "2026-11-01".into(),
        to: "2026-11-30".into(),
        deployments,
        idle_policy: IdlePolicy::Proportional,
    };
    let grid = headroom_server::grid::parse(headroom_server::grid::DEFAULT_TABLE).expect("grid table");
    let prices = Prices::new(&catalog).with_grid(&grid, 1);
    let build = || reports::build("bench".into(), &request, &prices, 1, &|_| true, &|_| true).expect("report");
    let report = build();
    let mut sizes = Vec::new();
    let rows: Vec<(&str, Duration)> = vec![
        ("compute (integer micro-dollars)", median(|| drop(build()))),
        ("polars DataFrame", median(|| drop(reports::frame(&report).unwrap()))),
        ("CSV", median(|| sizes.push(("CSV", reports::to_csv(&report).unwrap().len())))),
        ("Parquet", median(|| sizes.push(("Parquet", reports::to_parquet(&report).unwrap().len())))),
        ("XLSX", median(|| sizes.push(("XLSX", reports::to_xlsx(&report).unwrap().len())))),
        ("chargeback by team, CSV", median(|| drop(chargeback::to_csv(&report).unwrap()))),
        (
            "whole build: compute + CSV + Parquet + XLSX",
            median(|| {
                let r = build();
                drop((reports::to_csv(&r), reports::to_parquet(&r), reports::to_xlsx(&r)));
            }),
        ),
    ];
    let base = rows[0].1.as_secs_f64();
    println!("report of {n} deployments (median of 7)");
    println!("{:<46} {:>10} {:>12}", "step", "time", "× compute");
    for (name, t) in &rows {
        println!("{name:<46} {:>8.1}ms {:>12.1}", t.as_secs_f64() * 1e3, t.as_secs_f64() / base);
    }
    sizes.dedup_by_key(|s| s.0);
    for (name, bytes) in sizes {
        println!("{name} file: {:.1} MiB", bytes as f64 / (1 << 20) as f64);
    }
    let whole = rows.last().unwrap().1;
    println!(
        "target: whole build under 2 s: {} ({:.2} s)",
        if whole < Duration::from_secs(2) { "met" } else { "MISSED" },
        whole.as_secs_f64()
    );
}
