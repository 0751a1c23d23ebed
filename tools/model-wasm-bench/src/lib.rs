//! Entry points for timing the planning model as the browser runs it: compiled to wasm32 and
//! called from JavaScript (`run.mjs`), which does the timing.

use model::plan::cost::{AmortizationInput, amortize};
use model::plan::uncertainty::{UncertaintyInput, simulate};
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
    let input = UncertaintyInput::example(samples);
    simulate(&input).map(|u| u.cost_per_request_usd.p50).unwrap_or(f64::NAN)
}
