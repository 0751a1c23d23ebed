//! Prints the queueing model's check against an endpoint run: each step's measured p50/p99
//! beside M/G/c's at the offered rate (closed-loop steps: the closed-loop model's at their
//! requests in flight), and the calibration, once for each way of fitting the
//! service time's variation (the histogram's two moments, and the tail, the product's default).
//!
//! `measurements-agent run endpoint … --json > run.json; cargo run -p model --example endpoint_check -- run.json`

use model::RunUpload;
use model::plan::endpoint::{COUNTED_BELOW_UTILIZATION, DEFAULT_FIT, Fit, check_with, steps};

fn main() {
    let path = std::env::args().nth(1).expect("usage: endpoint_check RUN.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let run: RunUpload = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not a run: {e}"));
    let steps = steps(&run.measurements);
    for fit in [Fit::Moments, Fit::Tail] {
        let default = if fit == DEFAULT_FIT { " (the default)" } else { "" };
        println!("\n### variation fitted to the {}{default}\n", if fit == Fit::Tail { "p99" } else { "two moments" });
        print_check(&steps, fit);
    }
}

fn print_check(steps: &[model::plan::endpoint::Step], fit: Fit) {
    let Some(check) = check_with(steps, fit) else {
        eprintln!("no trusted step with a successful request: nothing to calibrate");
        std::process::exit(1);
    };
    let c = check.calibration;
    println!(
        "calibration: service time {:.3} ms (cv {:.2}, histogram's {:.2}, step {}), concurrency {}{}, highest throughput {:.1}/s",
        c.service_mean * 1e3,
        c.service_cv,
        c.measured_cv,
        c.base_step,
        c.concurrency,
        if c.saturation_measured { "" } else { " (at least: no step saturated)" },
        c.saturation_rps
    );
    println!(
        "| step | offered/s (in flight) | achieved/s | util | p50 meas ms | p50 model ms | p99 meas ms | p99 model ms | p99 error | counted |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let ms = |v: Option<f64>| v.map_or("unbounded".to_string(), |v| format!("{:.2}", v * 1e3));
    for (p, s) in check.predictions.iter().zip(steps) {
        println!(
            "| {} | {:.1}{} | {:.1} | {:.0} % | {} | {} | {} | {} | {} | {} |",
            p.step,
            p.offered,
            p.in_flight.map(|n| format!(" ({n})")).unwrap_or_default(),
            s.achieved,
            p.utilization * 100.0,
            ms(p.measured_p50),
            ms(p.p50),
            ms(p.measured_p99),
            ms(p.p99),
            p.error_p99.map_or("–".into(), |e| format!("{:+.0} %", e * 100.0)),
            if p.counted { "yes" } else { "no" }
        );
    }
    match (check.mape_p99, check.worst_p99) {
        (Some(mape), Some(worst)) if check.closed_loop() => {
            println!("p99 error of the closed-loop model: mean {:.0} %, worst {:.0} %", mape * 100.0, worst * 100.0)
        }
        (Some(mape), Some(worst)) => println!(
            "p99 error below {:.0} % utilisation: mean {:.0} %, worst {:.0} %",
            COUNTED_BELOW_UTILIZATION * 100.0,
            mape * 100.0,
            worst * 100.0
        ),
        _ => println!("no step to check the model on below {:.0} % utilisation", COUNTED_BELOW_UTILIZATION * 100.0),
    }
}
