//! Prints the continuous-batching model's check against an LLM endpoint run: the engine fitted
//! on the run, then each step's measured TTFT and ITL p50/p99 beside the model's at the offered
//! rate, with the p99 errors and their mean over the counted steps, where chance alone would put
//! each counted step's p99s (the bands the run page shows), and how far that mean moves from
//! sampling alone (the run simulated with the fitted engine, 200 times). Also, per step, the
//! rate as a share of the engine's capacity, the TTFT and ITL p99 predicted and in the scheduler
//! the model approximates (simulated with the fitted engine over 40,000 requests: the
//! approximation's own error, apart from the server's), and the ITL p50 and mean and the
//! sequences resident (by Little's law) measured, predicted and in that scheduler.
//!
//! `measurements-agent run endpoint --protocol openai-completions … --json > run.json;
//! cargo run -p model --example llm_check -- run.json [SLOTS]`: the slots the agent recorded
//! with the run (the server's, or `--slots`) unless SLOTS is given, else 256 assumed.

use model::RunUpload;
use model::plan::llm::fit::{LlmPrediction, check, slots, steps};
use model::plan::llm::simulate::{Simulated, bands, sampling, simulate};
use model::plan::rng::Rng;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: llm_check RUN.json [SLOTS]");
    let given: Option<u32> = args.next().map(|s| s.parse().expect("SLOTS is a whole number"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let run: RunUpload = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not a run: {e}"));
    let (recorded, from) = slots(&run.measurements);
    let slots = given.unwrap_or(recorded);
    eprintln!("{slots} slots, {}", if given.is_some() { "as given" } else { from.words() });
    let steps = steps(&run.measurements);
    let Some(check) = check(&steps, slots) else {
        eprintln!("no trusted LLM step with a successful request: nothing to fit");
        std::process::exit(1);
    };
    let c = check.calibration;
    let e = c.engine;
    println!(
        "engine: t0 {:.3} ms, d {:.3} ms per sequence{}, p {:.4} ms per prompt token ({:.0} tokens/s), {} slots; I {:.1}, O {:.1} tokens (step {})",
        e.fixed.0 * 1e3,
        e.per_sequence.0 * 1e3,
        c.batch_step.map_or(" (no batched step: 0)".to_string(), |s| format!(" (step {s})")),
        e.per_prompt_token.0 * 1e3,
        1.0 / e.per_prompt_token.0,
        e.slots,
        c.input_tokens,
        c.output_tokens,
        c.base_step,
    );
    println!(
        "| step | offered/s | busy | TTFT p50 meas / model ms | TTFT p99 meas / model ms | error | ITL p50 meas / model ms | ITL p99 meas / model ms | error | counted |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let ms = |v: Option<f64>| v.map_or("unbounded".to_string(), |v| format!("{:.2}", v * 1e3));
    let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:+.0} %", v * 100.0));
    for p in &check.predictions {
        println!(
            "| {} | {:.2} | {} | {:.2} / {} | {:.2} / {} | {} | {:.2} / {} | {:.2} / {} | {} | {} |",
            p.step,
            p.offered,
            p.busy.map_or("–".into(), |b| format!("{:.0} %", b * 100.0)),
            p.measured_ttft_p50 * 1e3,
            ms(p.ttft_p50),
            p.measured_ttft_p99 * 1e3,
            ms(p.ttft_p99),
            pct(p.error_ttft_p99),
            p.measured_itl_p50 * 1e3,
            ms(p.itl_p50),
            p.measured_itl_p99 * 1e3,
            ms(p.itl_p99),
            pct(p.error_itl_p99),
            if p.counted { "yes" } else { "no" },
        );
    }
    let pct = |v: Option<f64>| v.map_or("no counted step".to_string(), |v| format!("{:.0} %", v * 100.0));
    println!(
        "mean |error| of p99 over counted steps: TTFT {}, ITL {}",
        pct(check.mape_ttft_p99),
        pct(check.mape_itl_p99)
    );
    let counted: Vec<_> = check.predictions.iter().filter(|p| p.counted).collect();
    let within = |error: fn(&&LlmPrediction) -> Option<f64>| {
        counted.iter().filter(|p| error(p).is_some_and(|e| e.abs() <= 0.25)).count()
    };
    println!(
        "within ±25 %: TTFT p99 at {} of {n} counted steps, ITL p99 at {} of {n}",
        within(|p| p.error_ttft_p99),
        within(|p| p.error_itl_p99),
        n = counted.len()
    );
    // The scheduler the model approximates, simulated at each step's rate with the fitted
    // engine and many requests: where it and the measurement agree and the model does not,
    // the approximation is off, not the server.
    println!();
    let capacity = e.capacity(c.input_tokens, c.output_tokens);
    println!(
        "| step | of capacity | TTFT p99 model / scheduler ms | ITL p99 model / scheduler ms | ITL p50 meas / model / scheduler ms | ITL mean meas / model / scheduler ms | resident meas / model / scheduler |"
    );
    println!("|---|---|---|---|---|---|---|");
    for s in &steps {
        let load = c.load_at(s.step.offered);
        let Ok(Some(l)) = model::plan::llm::predict(&e, &load) else { continue };
        let sim = simulate(&e, &load, 40_000, 2_000, &mut Rng::seeded(u64::from(s.step.step)));
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let mut gaps = sim.itl.clone();
        gaps.sort_by(f64::total_cmp);
        let mut firsts = sim.ttft.clone();
        firsts.sort_by(f64::total_cmp);
        println!(
            "| {} | {:.0} % | {:.1} / {:.1} | {:.2} / {:.2} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} |",
            s.step.step,
            s.step.offered / capacity * 100.0,
            l.ttft_p99.0 * 1e3,
            Simulated::quantile(&firsts, 0.99) * 1e3,
            l.itl_p99.0 * 1e3,
            Simulated::quantile(&gaps, 0.99) * 1e3,
            s.itl.p50 * 1e3,
            l.itl_p50.0 * 1e3,
            Simulated::quantile(&gaps, 0.5) * 1e3,
            s.itl.mean * 1e3,
            l.itl_mean.0 * 1e3,
            mean(&sim.itl) * 1e3,
            s.step.achieved * s.step.mean.unwrap_or(0.0),
            l.mean_resident,
            s.step.offered * mean(&sim.e2e),
        );
    }
    println!();
    // Where chance alone would put each counted step's p99s, were the server the fitted engine.
    for b in bands(&check, &steps) {
        let p = check.predictions.iter().find(|p| p.step == b.step).expect("a band is of a step checked");
        println!(
            "step {}: TTFT p99 {:.2} ms, by chance {:.2}–{:.2} ms ({}); ITL p99 {:.2} ms, by chance {:.2}–{:.2} ms ({})",
            b.step,
            p.measured_ttft_p99 * 1e3,
            b.ttft.low * 1e3,
            b.ttft.high * 1e3,
            b.ttft.side(p.measured_ttft_p99),
            p.measured_itl_p99 * 1e3,
            b.itl.low * 1e3,
            b.itl.high * 1e3,
            b.itl.side(p.measured_itl_p99),
        );
    }
    // What sampling alone gives a run of these steps when the fitted engine is exactly right.
    let noise = sampling(&check, &steps, 200, 1);
    if let (Some(median), Some(p90), Some(worst)) =
        (noise.ttft_p99_error(0.5), noise.ttft_p99_error(0.9), noise.ttft_p99_error(1.0))
    {
        println!(
            "the same steps simulated {} times with the fitted engine, fitted and checked alike: mean |error| of TTFT p99 median {:.0} %, 90 % {:.0} %, largest {:.0} %",
            noise.mape_ttft_p99.len(),
            median * 100.0,
            p90 * 100.0,
            worst * 100.0
        );
    }
}
