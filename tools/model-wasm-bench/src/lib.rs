//! Entry points for timing the planning model as the browser runs it: compiled to wasm32 and
//! called from JavaScript (`run.mjs`), which does the timing.

use model::cost::{AmortizationInput, amortize};
use model::uncertainty::{Dist, UncertaintyInput, simulate};
use model::units::{PerMonth, Usd};
use wasm_bindgen::prelude::wasm_bindgen;

/// Baseline: the amortization formula over `n` inputs; returns a sum so nothing is optimized away.
#[wasm_bindgen]
pub fn amortize_many(n: u32) -> f64 {
    (0..n)
        .map(|i| {
            let input = AmortizationInput {
                training_cost_usd: Usd(1000.0 + f64::from(i)),
                retrains_per_month: PerMonth(1.0),
                requests_per_month: PerMonth(1e6 + f64::from(i)),
                serving_cost_per_request_usd: Usd(1e-4),
            };
            amortize(&input).map(|a| a.total_cost_per_request_usd.0).unwrap_or(0.0)
        })
        .sum()
}

/// The planner's uncertainty mode: `samples` draws of six inputs; returns the P50 cost per request.
#[wasm_bindgen]
pub fn monte_carlo(samples: u32) -> f64 {
    let input = UncertaintyInput {
        training_cost_usd: Dist::Triangular { low: 10_000.0, mode: 20_000.0, high: 40_000.0 },
        retrains_per_month: Dist::Uniform { low: 0.5, high: 2.0 },
        requests_per_month: Dist::LogNormal { p10: 5e7, p90: 2e8 },
        serving_cost_per_request_usd: Dist::Normal { mean: 1e-4, sd: 1e-5 },
        extra_training_cost_usd: Some(Dist::Uniform { low: 1_000.0, high: 5_000.0 }),
        serving_saving_fraction: Some(Dist::Triangular { low: 0.1, mode: 0.25, high: 0.4 }),
        samples,
        seed: 7,
    };
    simulate(&input).map(|u| u.cost_per_request_usd.p50).unwrap_or(f64::NAN)
}
