//! The continuous-batching model's TTFT and ITL p99 beside the scheduler it approximates,
//! simulated, for an engine and a workload given on the command line, at shares of the engine's
//! capacity: the approximation's own error, with no server in the way.
//!
//! `cargo run --release -p model --example llm_vs_scheduler -- FIXED_MS PER_SEQUENCE_MS
//! PROMPT_TOKENS_PER_S SLOTS INPUT_TOKENS INPUT_CV OUTPUT_TOKENS [SHARE ...]`, e.g. the LLM page's
//! default engine with 1,000-token prompts: `-- 6 0.06 30000 110 1000 0.5 250 0.4 0.55 0.7`.

use model::plan::llm::simulate::{Simulated, simulate};
use model::plan::llm::{Engine, Load, predict};
use model::plan::rng::Rng;
use model::units::Seconds;

fn main() {
    const USAGE: &str = "usage: llm_vs_scheduler FIXED_MS PER_SEQUENCE_MS PROMPT_TOKENS_PER_S SLOTS INPUT_TOKENS INPUT_CV OUTPUT_TOKENS [SHARE ...]";
    let args: Vec<f64> = std::env::args().skip(1).map(|a| a.parse().expect(USAGE)).collect();
    assert!(args.len() >= 7, "{USAGE}");
    let engine = Engine {
        fixed: Seconds(args[0] / 1e3),
        per_sequence: Seconds(args[1] / 1e3),
        per_prompt_token: Seconds(1.0 / args[2]),
        slots: args[3] as u32,
    };
    let (input, cv, output) = (args[4], args[5], args[6]);
    let shares = if args.len() > 7 { args[7..].to_vec() } else { vec![0.1, 0.3, 0.5, 0.7] };
    let capacity = engine.capacity(input, output);
    println!("{engine:?}; prompts of {input} tokens (cv {cv}), answers of {output}; capacity {capacity:.2}/s");
    println!(
        "| of capacity | TTFT p99 model / scheduler ms | error | ITL p99 model / scheduler ms | error | checked range |"
    );
    println!("|---|---|---|---|---|---|");
    for share in shares {
        let load = Load { rate: share * capacity, input_tokens: input, input_cv: cv, output_tokens: output };
        let Ok(Some(l)) = predict(&engine, &load) else {
            println!("| {:.0} % | past capacity | | | | |", share * 100.0);
            continue;
        };
        let sim = simulate(&engine, &load, 20_000, 2_000, &mut Rng::seeded(3));
        let p99 = |values: &[f64]| {
            let mut sorted = values.to_vec();
            sorted.sort_by(f64::total_cmp);
            Simulated::quantile(&sorted, 0.99)
        };
        let (ttft, itl) = (p99(&sim.ttft), p99(&sim.itl));
        println!(
            "| {:.0} % | {:.1} / {:.1} | {:+.0} % | {:.2} / {:.2} | {:+.0} % | {} |",
            share * 100.0,
            l.ttft_p99.0 * 1e3,
            ttft * 1e3,
            (l.ttft_p99.0 - ttft) / ttft * 100.0,
            l.itl_p99.0 * 1e3,
            itl * 1e3,
            (l.itl_p99.0 - itl) / itl * 100.0,
            if l.validated { "inside" } else { "outside" },
        );
    }
}
