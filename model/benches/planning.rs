//! `cargo bench -p model`: how long right-sizing, the Monte Carlo and the LLM model take, as a
//! table with each figure's ratio to a baseline measured in the same run (the amortization
//! formula over 100 000 inputs), so a noisy machine still gives comparable numbers.

use std::hint::black_box;
use std::time::{Duration, Instant};

use model::RunUpload;
use model::plan::cost::{AmortizationInput, amortize};
use model::plan::llm::fit::{check, steps};
use model::plan::llm::sizing::{LlmSizingInput, RENDER_WORK, size, size_within};
use model::plan::llm::{Engine, Load, predict};
use model::plan::memory::{KvCache, Precision};
use model::plan::rightsize::{Hardware, ModelShape, PerfPoint, RightSizeInput, Source, right_size};
use model::plan::uncertainty::{UncertaintyInput, simulate};
use model::units::{Bytes, PerMonth, PerSecond, Seconds, Usd, UsdPerHour};

/// Median wall time of `runs` runs.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

/// 20 instance types × 5 precisions × 20 batch sizes = 2 000 perf points, the most
/// `right_size` accepts ([`model::plan::rightsize::MAX_PERF_POINTS`]).
fn search_space(cv: f64) -> RightSizeInput {
    let hardware = (0..20)
        .map(|i| {
            let speed = 0.5 + (i % 37) as f64 / 10.0;
            Hardware {
                instance_type: format!("type-{i}"),
                hourly_usd: UsdPerHour(0.5 + (i % 53) as f64 * 0.4),
                device_memory_bytes: Bytes((16 + 8 * (i % 10)) as f64 * 1e9),
                source: Source::Catalog,
                perf: Precision::ALL
                    .iter()
                    .flat_map(|&precision| {
                        (1..=20u32).map(move |batch| PerfPoint {
                            precision,
                            batch_size: batch,
                            service_time_mean_s: Seconds(
                                (0.004 + 0.002 * f64::from(batch)) * precision.bytes_per_value() / 2.0 / speed,
                            ),
                            service_time_cv: cv,
                            accuracy_delta: -0.001 * (4.0 - precision.bytes_per_value()),
                            concurrency: 1,
                        })
                    })
                    .collect(),
                power_watts: None,
            }
        })
        .collect();
    RightSizeInput {
        arrival_rate_rps: PerSecond(2_000.0),
        slo_latency_s: Seconds(0.15),
        slo_quantile: 0.99,
        max_utilization: 0.8,
        accuracy_loss_limit: 0.005,
        model: ModelShape { parameters: 7e9, activation_bytes_per_sample: Bytes(100e6), kv_cache: KvCache::default() },
        headroom_fraction: 0.1,
        max_replicas: 1000,
        hardware,
        grid: None,
    }
}

fn main() {
    let inputs: Vec<AmortizationInput> = (0..100_000)
        .map(|i| AmortizationInput {
            training_cost_usd: Usd(1000.0 + f64::from(i)),
            retrains_per_month: PerMonth(1.0),
            requests_per_month: PerMonth(1e6 + f64::from(i)),
            serving_cost_per_request_usd: Usd(1e-4),
        })
        .collect();
    let baseline = time(21, || inputs.iter().map(|i| amortize(i).unwrap().total_cost_per_request_usd.0).sum::<f64>());

    let mut rows: Vec<(String, Duration, String)> = Vec::new();
    for cv in [1.0, 0.3] {
        let space = search_space(cv);
        let result = right_size(&space).unwrap();
        let took = time(5, || right_size(&space).unwrap());
        rows.push((
            format!("right-size 2 000 perf points (the most accepted), cv {cv}"),
            took,
            format!("{} replica counts examined, {} feasible, goal < 50 ms", result.evaluated, result.feasible),
        ));
    }
    let input = UncertaintyInput::example(100_000);
    let took = time(11, || simulate(&input).unwrap());
    rows.push(("Monte Carlo 100 000 samples, 6 inputs".into(), took, "native; goal < 100 ms in the browser".into()));

    // The LLM model: one prediction, a replica search, and the fit of a real run (which
    // predicts at every step again and again).
    let cpu =
        Engine { fixed: Seconds(0.0006), per_sequence: Seconds(0.0001), per_prompt_token: Seconds(0.0003), slots: 8 };
    let gpu =
        Engine { fixed: Seconds(0.012), per_sequence: Seconds(0.0002), per_prompt_token: Seconds(0.00005), slots: 256 };
    for (name, engine, input, output) in
        [("8 slots (llama.cpp on a CPU)", cpu, 260.0, 32.0), ("256 slots (a GPU)", gpu, 500.0, 200.0)]
    {
        let load = Load {
            rate: 0.8 * engine.capacity(input, output),
            input_tokens: input,
            input_cv: 0.5,
            output_tokens: output,
        };
        let took = time(51, || predict(&engine, &load).unwrap().unwrap());
        rows.push((format!("LLM predict at 80 % of capacity, {name}"), took, "TTFT and ITL percentiles".into()));
        let sizing = LlmSizingInput {
            engine,
            load: Load { rate: 40.0 * load.rate, ..load },
            ttft_p99_slo: Some(Seconds(2.0)),
            itl_p99_slo: Some(Seconds(0.2)),
            replica_hourly: UsdPerHour(4.0),
        };
        let sized = size(&sizing).unwrap();
        let took = time(11, || size(&sizing).unwrap());
        rows.push((format!("LLM replicas for 40× that, {name}"), took, format!("{} replicas", sized.replicas)));
    }
    // What a link chosen to be slow costs /llm's server render, which stops the sizing at
    // RENDER_WORK (the page's most slots, 38,000 ten-token requests a second of cv 5, two-token
    // answers), against the whole sizing the browser then does.
    let slow = LlmSizingInput {
        engine: Engine { slots: 4096, ..gpu },
        load: Load { rate: 38_000.0, input_tokens: 10.0, input_cv: 5.0, output_tokens: 2.0 },
        ttft_p99_slo: Some(Seconds(1.0)),
        itl_p99_slo: Some(Seconds(0.05)),
        replica_hourly: UsdPerHour(12.0),
    };
    assert_eq!(size_within(&slow, RENDER_WORK).unwrap(), None, "the render gives it up");
    let took = time(5, || size_within(&slow, RENDER_WORK).unwrap());
    rows.push(("LLM replicas, a slow link, as the server renders it".into(), took, "stopped at its budget".into()));
    let took = time(3, || size(&slow).unwrap());
    rows.push(("LLM replicas, the same, whole (in the browser)".into(), took, "4,096 slots".into()));
    let run: RunUpload =
        serde_json::from_str(include_str!("../examples/llama-runs/2026-12-07-high-load-1.json")).expect("a stored run");
    let measured = steps(&run.measurements);
    let took = time(5, || check(&measured, 8).expect("the run fits"));
    rows.push((
        "LLM fit and check of a real 4-step run".into(),
        took,
        "what storing an LLM run costs the server".into(),
    ));

    println!("{:<56} {:>12} {:>10}  notes", "benchmark", "median", "× baseline");
    println!(
        "{:<56} {:>12} {:>10}  the reference in this run",
        "baseline: amortize 100 000 inputs",
        format!("{:.2?}", baseline),
        "1.0"
    );
    for (name, took, note) in rows {
        println!(
            "{:<56} {:>12} {:>10.1}  {note}",
            name,
            format!("{took:.2?}"),
            took.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
