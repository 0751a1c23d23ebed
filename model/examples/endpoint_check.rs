//! Prints the queueing model's check against an endpoint run: each step's measured p50/p99
//! beside M/G/c's at the offered rate (closed-loop steps: the closed-loop model's at their
//! requests in flight), and the calibration, once for each way of fitting the
//! service time's variation (the histogram's two moments, and the tail, the product's default).
//! Beside each step, where its p99 would fall 90 times in 100 were the service the calibrated
//! queue (simulated steps of its size, `model::plan::endpoint::noise`): a measured p99 outside
//! that band is the model's error, not the step's noise. Last, a candidate model the product
//! does not use: one server at 1 ÷ the highest throughput behind a fixed delay.
//!
//! `measurements-agent run endpoint … --json > run.json; cargo run -p model --example endpoint_check -- run.json`

use model::RunUpload;
use model::plan::endpoint::{
    Band, COUNTED_BELOW_UTILIZATION, DEFAULT_FIT, Fit, Step, calibrate, check_with, noise, steps,
};
use model::plan::queue::Queue;

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
    print_bottleneck(&steps);
}

fn print_check(steps: &[Step], fit: Fit) {
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
        "| step | offered/s (in flight) | achieved/s | util | p50 meas ms | p50 model ms | p99 meas ms | p99 model ms | p99 error | p99 if the model held, 5–95 % | counted |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let ms = |v: Option<f64>| v.map_or("unbounded".to_string(), |v| format!("{:.2}", v * 1e3));
    for (p, s) in check.predictions.iter().zip(steps) {
        println!(
            "| {} | {:.1}{} | {:.1} | {:.0} % | {} | {} | {} | {} | {} | {} | {} |",
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
            band(&c, s),
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

/// Where the step's p99 would fall, 90 times in 100, were the service the calibrated queue
/// (100 simulated steps of its size, seeded as the run page's `bands` are), and whether the
/// measured p99 does.
fn band(calibration: &model::plan::endpoint::Calibration, step: &Step) -> String {
    match (noise(calibration, step, 100, u64::from(step.step) << 32), step.p99) {
        (Some((low, high)), Some(p99)) => {
            let side = Band { step: step.step, low, high }.side(p99);
            format!("{:.2}–{:.2} ms ({side})", low * 1e3, high * 1e3)
        }
        _ => "–".into(),
    }
}

/// The candidate: one server whose service time is 1 ÷ the highest throughput (the CPU a
/// request costs a one-process server), behind a fixed delay that makes up the calibration
/// step's mean (client, network, wake-ups), the server's cv fitted so that delay + M/G/1 has
/// that step's p99. Not in the product: the Planner's inputs have no fixed delay.
fn print_bottleneck(steps: &[Step]) {
    let Some(c) = calibrate(steps) else { return };
    let Some(base) = steps.iter().find(|s| s.step == c.base_step) else { return };
    let server = 1.0 / c.saturation_rps;
    let delay = c.service_mean - server;
    let at = |rate: f64, cv: f64, q: f64| Queue::new(rate, server, cv, 1).map(|queue| delay + queue.quantile(q));
    let p99_at = |rate: f64, cv: f64| at(rate, cv, 0.99);
    let (Some(base_p99), true) = (base.p99, delay > 0.0 && c.saturation_measured) else {
        println!("\n### candidate: no saturated step, or the service time is below 1 ÷ throughput");
        return;
    };
    // The cv at which the calibration step's p99 is met, by bisection on its log.
    let (mut lo, mut hi) = (0.05f64.ln(), 5.0f64.ln());
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if p99_at(base.offered, mid.exp()).is_some_and(|p| p < base_p99) { lo = mid } else { hi = mid }
    }
    let cv = (0.5 * (lo + hi)).exp();
    println!("\n### candidate, not in the product: one server behind a fixed delay\n");
    println!("server {:.3} ms (1 ÷ {:.1}/s, cv {cv:.2}), delay {:.3} ms", server * 1e3, c.saturation_rps, delay * 1e3);
    println!(
        "| step | offered/s | util | p50 meas ms | p50 model ms | p99 meas ms | p99 model ms | p99 error | counted |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut errors = Vec::new();
    for s in steps.iter().filter(|s| s.in_flight.is_none()) {
        let utilization = s.offered * server;
        let p99 = p99_at(s.offered, cv);
        let error = p99.zip(s.p99).map(|(p, m)| (p - m) / m);
        let counted = s.trusted() && !s.saturated && utilization < COUNTED_BELOW_UTILIZATION && s.step != c.base_step;
        if let (true, Some(e)) = (counted, error) {
            errors.push(e.abs());
        }
        println!(
            "| {} | {:.1} | {:.0} % | {} | {} | {} | {} | {} | {} |",
            s.step,
            s.offered,
            utilization * 100.0,
            s.p50.map_or("–".into(), |v| format!("{:.2}", v * 1e3)),
            at(s.offered, cv, 0.5).map_or("unbounded".into(), |v| format!("{:.2}", v * 1e3)),
            s.p99.map_or("–".into(), |v| format!("{:.2}", v * 1e3)),
            p99.map_or("unbounded".into(), |v| format!("{:.2}", v * 1e3)),
            error.map_or("–".into(), |e| format!("{:+.0} %", e * 100.0)),
            if counted { "yes" } else { "no" }
        );
    }
    if !errors.is_empty() {
        let worst = errors.iter().copied().fold(0.0, f64::max);
        println!(
            "p99 error below {:.0} % utilisation: mean {:.0} %, worst {:.0} %",
            COUNTED_BELOW_UTILIZATION * 100.0,
            errors.iter().sum::<f64>() / errors.len() as f64 * 100.0,
            worst * 100.0
        );
    }
}
