//! Uncertain inputs: each input is a distribution; a seeded Monte Carlo gives P10/P50/P90 of
//! the cost per request and the monthly spend, the probability that an optimization breaks
//! even, and a tornado table of which input moves the answer most.
//!
//! Each sample draws every input by inverse CDF from one uniform number (statrs' quantile
//! functions and our seeded [`crate::plan::rng::Rng`]), then applies [`crate::plan::cost::amortize`]'s
//! formula and, when an optimization is described (extra training cost per retrain and the
//! fraction of serving cost it saves), [`crate::plan::cost::break_even`]'s net monthly saving.
//! Draws below zero (possible for a normal) are taken as zero: volumes and prices are not
//! negative. The tornado sets one input at its P10 and then its P90, every other input at its
//! median, and ranks inputs by how far the cost per request moves.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, LogNormal, Normal, Triangular, Uniform};

use crate::FieldError;
use crate::plan::checks::{ModelError, finite};
use crate::plan::rng::Rng;

/// z of the 90th percentile of a standard normal.
const Z90: f64 = 1.281_551_565_544_600_5;

/// How uncertain one input is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Dist {
    Fixed {
        value: f64,
    },
    Normal {
        mean: f64,
        sd: f64,
    },
    /// A log-normal given by the range a person would state: 80% of outcomes in [p10, p90].
    LogNormal {
        p10: f64,
        p90: f64,
    },
    Uniform {
        low: f64,
        high: f64,
    },
    Triangular {
        low: f64,
        mode: f64,
        high: f64,
    },
}

/// A distribution ready to sample.
#[derive(Debug, Clone)]
enum Sampler {
    Fixed(f64),
    Normal(Normal),
    LogNormal(LogNormal),
    Uniform(Uniform),
    Triangular(Triangular),
}

impl Dist {
    /// An entered value with the uncertainty a person states as "± spread" (0.3 for ±30 %):
    /// a log-normal from `value ÷ (1 + spread)` (P10) to `value × (1 + spread)` (P90), whose
    /// median is the value itself, so the simulation is centred on the point answer. A zero
    /// spread or value is fixed.
    pub fn around(value: f64, spread: f64) -> Dist {
        if spread > 0.0 && value > 0.0 {
            Dist::LogNormal { p10: value / (1.0 + spread), p90: value * (1.0 + spread) }
        } else {
            Dist::Fixed { value }
        }
    }

    /// The P10 and P90 of a distribution made by [`Dist::around`] (the value twice if fixed).
    pub fn range(&self) -> Option<(f64, f64)> {
        match *self {
            Dist::Fixed { value } => Some((value, value)),
            Dist::LogNormal { p10, p90 } => Some((p10, p90)),
            _ => None,
        }
    }

    fn sampler(&self, field: &str) -> Result<Sampler, ModelError> {
        let bad = |reason: &str| FieldError::new(field, reason.to_string());
        let all_finite = match *self {
            Dist::Fixed { value } => value.is_finite(),
            Dist::Normal { mean, sd } => mean.is_finite() && sd.is_finite(),
            Dist::LogNormal { p10, p90 } => p10.is_finite() && p90.is_finite(),
            Dist::Uniform { low, high } => low.is_finite() && high.is_finite(),
            Dist::Triangular { low, mode, high } => low.is_finite() && mode.is_finite() && high.is_finite(),
        };
        if !all_finite {
            return Err(bad("every parameter must be a finite number"));
        }
        Ok(match *self {
            Dist::Fixed { value } => Sampler::Fixed(value),
            Dist::Normal { mean, sd } => {
                Sampler::Normal(Normal::new(mean, sd).map_err(|_| bad("sd must be greater than zero"))?)
            }
            Dist::LogNormal { p10, p90 } => {
                if !(p10 > 0.0 && p90 > p10) {
                    return Err(bad("needs 0 < p10 < p90"));
                }
                let (lo, hi) = (p10.ln(), p90.ln());
                Sampler::LogNormal(
                    LogNormal::new(0.5 * (lo + hi), (hi - lo) / (2.0 * Z90)).map_err(|_| bad("invalid range"))?,
                )
            }
            Dist::Uniform { low, high } => {
                Sampler::Uniform(Uniform::new(low, high).map_err(|_| bad("needs low < high"))?)
            }
            Dist::Triangular { low, mode, high } => Sampler::Triangular(
                Triangular::new(low, high, mode).map_err(|_| bad("needs low ≤ mode ≤ high and low < high"))?,
            ),
        })
    }
}

impl Sampler {
    /// The value at cumulative probability `p`, never negative.
    fn at(&self, p: f64) -> f64 {
        let x = match self {
            Sampler::Fixed(v) => *v,
            Sampler::Normal(d) => d.inverse_cdf(p),
            Sampler::LogNormal(d) => d.inverse_cdf(p),
            Sampler::Uniform(d) => d.inverse_cdf(p),
            Sampler::Triangular(d) => d.inverse_cdf(p),
        };
        x.max(0.0)
    }
}

/// Inputs of [`simulate`]. The optimization fields describe a distillation or QAT option; leave
/// them out to study cost alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UncertaintyInput {
    pub training_cost_usd: Dist,
    pub retrains_per_month: Dist,
    pub requests_per_month: Dist,
    pub serving_cost_per_request_usd: Dist,
    #[serde(default)]
    pub extra_training_cost_usd: Option<Dist>,
    /// Fraction of the serving cost the optimization saves, e.g. 0.3 for 30%.
    #[serde(default)]
    pub serving_saving_fraction: Option<Dist>,
    #[serde(default = "default_samples")]
    pub samples: u32,
    #[serde(default)]
    pub seed: u64,
}

impl UncertaintyInput {
    /// A planner's typical question: training 10–40 k USD about monthly, 50–200 M requests a
    /// month, and a distillation that saves 10–40% of serving for 1–5 k USD more per retrain.
    pub fn example(samples: u32) -> Self {
        UncertaintyInput {
            training_cost_usd: Dist::Triangular { low: 10_000.0, mode: 20_000.0, high: 40_000.0 },
            retrains_per_month: Dist::Uniform { low: 0.5, high: 2.0 },
            requests_per_month: Dist::LogNormal { p10: 5e7, p90: 2e8 },
            serving_cost_per_request_usd: Dist::Normal { mean: 1e-4, sd: 1e-5 },
            extra_training_cost_usd: Some(Dist::Uniform { low: 1_000.0, high: 5_000.0 }),
            serving_saving_fraction: Some(Dist::Triangular { low: 0.1, mode: 0.25, high: 0.4 }),
            samples,
            seed: 7,
        }
    }
}

fn default_samples() -> u32 {
    100_000
}

/// Most samples one call may ask for.
pub const MAX_SAMPLES: u32 = 2_000_000;

/// P10, P50 and P90 of one output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Band {
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
}

/// One input's swing in the tornado table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Swing {
    pub input: String,
    /// Cost per request with this input at its P10 (others at their medians).
    pub at_p10: f64,
    /// Cost per request with this input at its P90.
    pub at_p90: f64,
    pub spread: f64,
}

/// Result of [`simulate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Uncertainty {
    pub cost_per_request_usd: Band,
    pub monthly_total_usd: Band,
    /// Probability that the optimization's monthly net saving is positive.
    pub probability_break_even: Option<f64>,
    /// Largest swing first.
    pub tornado: Vec<Swing>,
    pub samples: u32,
}

struct Inputs {
    names: Vec<&'static str>,
    samplers: Vec<Sampler>,
}

/// Cost per request, monthly total and (if optimized) monthly net, from one draw of every input
/// in the order of [`Inputs::names`].
fn outcome(x: &[f64]) -> (f64, f64, Option<f64>) {
    let (train, retrains, requests, serve) = (x[0], x[1], x[2].max(1.0), x[3]);
    let monthly_training = train * retrains;
    let monthly_total = monthly_training + serve * requests;
    let net = (x.len() == 6).then(|| serve * x[5] * requests - x[4] * retrains);
    (monthly_total / requests, monthly_total, net)
}

pub fn simulate(input: &UncertaintyInput) -> Result<Uncertainty, ModelError> {
    if input.samples == 0 || input.samples > MAX_SAMPLES {
        return Err(FieldError::new("samples", format!("must be between 1 and {MAX_SAMPLES}")));
    }
    let mut inputs = Inputs {
        names: vec!["training_cost_usd", "retrains_per_month", "requests_per_month", "serving_cost_per_request_usd"],
        samplers: vec![
            input.training_cost_usd.sampler("training_cost_usd")?,
            input.retrains_per_month.sampler("retrains_per_month")?,
            input.requests_per_month.sampler("requests_per_month")?,
            input.serving_cost_per_request_usd.sampler("serving_cost_per_request_usd")?,
        ],
    };
    match (&input.extra_training_cost_usd, &input.serving_saving_fraction) {
        (Some(extra), Some(saving)) => {
            inputs.names.extend(["extra_training_cost_usd", "serving_saving_fraction"]);
            inputs.samplers.push(extra.sampler("extra_training_cost_usd")?);
            inputs.samplers.push(saving.sampler("serving_saving_fraction")?);
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err(FieldError::new("serving_saving_fraction", "required with extra_training_cost_usd"));
        }
        (None, Some(_)) => {
            return Err(FieldError::new("extra_training_cost_usd", "required with serving_saving_fraction"));
        }
    }
    let n = input.samples as usize;
    let mut rng = Rng::seeded(input.seed);
    let mut draw = vec![0.0; inputs.samplers.len()];
    let mut per_request = Vec::with_capacity(n);
    let mut monthly = Vec::with_capacity(n);
    let mut positive_net = 0u32;
    for _ in 0..n {
        for (slot, sampler) in draw.iter_mut().zip(&inputs.samplers) {
            *slot = sampler.at(rng.open01());
        }
        let (cost, total, net) = outcome(&draw);
        per_request.push(cost);
        monthly.push(total);
        positive_net += u32::from(net.is_some_and(|v| v > 0.0));
    }
    let medians: Vec<f64> = inputs.samplers.iter().map(|s| s.at(0.5)).collect();
    let mut tornado: Vec<Swing> = inputs
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut at = medians.clone();
            at[i] = inputs.samplers[i].at(0.1);
            let low = outcome(&at).0;
            at[i] = inputs.samplers[i].at(0.9);
            let high = outcome(&at).0;
            Swing { input: (*name).to_string(), at_p10: low, at_p90: high, spread: (high - low).abs() }
        })
        .collect();
    tornado.sort_by(|a, b| b.spread.total_cmp(&a.spread));
    let cost = band(&mut per_request);
    finite("cost_per_request_usd", cost.p90)
        .map_err(|_| FieldError::new("requests_per_month", "makes the cost per request unbounded"))?;
    Ok(Uncertainty {
        cost_per_request_usd: cost,
        monthly_total_usd: band(&mut monthly),
        probability_break_even: (inputs.samplers.len() == 6).then(|| f64::from(positive_net) / n as f64),
        tornado,
        samples: input.samples,
    })
}

fn band(values: &mut [f64]) -> Band {
    let at = |values: &mut [f64], q: f64| {
        let k = ((q * values.len() as f64) as usize).min(values.len() - 1);
        *values.select_nth_unstable_by(k, f64::total_cmp).1
    };
    Band { p10: at(values, 0.1), p50: at(values, 0.5), p90: at(values, 0.9) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fixed(value: f64) -> Dist {
        Dist::Fixed { value }
    }

    fn base() -> UncertaintyInput {
        UncertaintyInput {
            training_cost_usd: Dist::Triangular { low: 10_000.0, mode: 20_000.0, high: 40_000.0 },
            retrains_per_month: fixed(1.0),
            requests_per_month: Dist::LogNormal { p10: 5e7, p90: 2e8 },
            serving_cost_per_request_usd: Dist::Uniform { low: 8e-5, high: 1.2e-4 },
            extra_training_cost_usd: None,
            serving_saving_fraction: None,
            samples: 100_000,
            seed: 1,
        }
    }

    #[test]
    fn fixed_inputs_give_the_deterministic_answer() {
        let mut input = base();
        input.training_cost_usd = fixed(20_000.0);
        input.retrains_per_month = fixed(2.0);
        input.requests_per_month = fixed(1e8);
        input.serving_cost_per_request_usd = fixed(1e-4);
        input.samples = 1000;
        let result = simulate(&input).unwrap();
        assert!((result.cost_per_request_usd.p10 - 5e-4).abs() < 1e-15);
        assert!((result.cost_per_request_usd.p90 - 5e-4).abs() < 1e-15);
        assert!(result.tornado.iter().all(|s| s.spread < 1e-15));
    }

    #[test]
    fn log_normal_ranges_are_honoured_and_volume_leads_the_tornado() {
        let mut input = base();
        input.training_cost_usd = fixed(20_000.0);
        input.serving_cost_per_request_usd = fixed(1e-5);
        let result = simulate(&input).unwrap();
        // Monthly total = 20 000 + 1e-5 × R: its P10/P90 follow R's stated range.
        assert!((result.monthly_total_usd.p10 - (20_000.0 + 500.0)).abs() < 20.0, "{:?}", result.monthly_total_usd);
        assert!((result.monthly_total_usd.p90 - (20_000.0 + 2_000.0)).abs() < 40.0, "{:?}", result.monthly_total_usd);
        assert_eq!(result.tornado[0].input, "requests_per_month");
        assert!(result.tornado[0].at_p10 > result.tornado[0].at_p90, "more volume, cheaper requests");
    }

    #[test]
    fn break_even_probability_is_a_fraction_that_tracks_the_saving() {
        let mut input = base();
        // Saving 20–30% of about 1e-4 USD on about 1e8 requests (≈ 2 500 USD a month) against
        // 1 000–1 500 USD per monthly retrain: nearly always worth it. Saving 0–2%: almost never.
        input.extra_training_cost_usd = Some(Dist::Uniform { low: 1_000.0, high: 1_500.0 });
        input.serving_saving_fraction = Some(Dist::Uniform { low: 0.2, high: 0.3 });
        let likely = simulate(&input).unwrap().probability_break_even.unwrap();
        input.serving_saving_fraction = Some(Dist::Uniform { low: 0.0, high: 0.02 });
        let unlikely = simulate(&input).unwrap().probability_break_even.unwrap();
        assert!(likely > 0.8 && unlikely < 0.05, "{likely} {unlikely}");
        input.extra_training_cost_usd = None;
        assert_eq!(simulate(&input).unwrap_err().field, "extra_training_cost_usd");
    }

    #[test]
    fn bad_distributions_name_their_field() {
        let mut input = base();
        input.requests_per_month = Dist::LogNormal { p10: 5.0, p90: 1.0 };
        assert_eq!(simulate(&input).unwrap_err().field, "requests_per_month");
        let mut input = base();
        input.training_cost_usd = Dist::Normal { mean: f64::NAN, sd: 1.0 };
        assert_eq!(simulate(&input).unwrap_err().field, "training_cost_usd");
    }

    proptest! {
        /// Bands are ordered, and the same seed gives the same answer.
        #[test]
        fn bands_are_ordered_and_reproducible(seed in any::<u64>(), lo in 1e3..1e5f64, width in 1.0..10.0f64) {
            let mut input = base();
            input.training_cost_usd = Dist::Uniform { low: lo, high: lo * width };
            input.samples = 2_000;
            input.seed = seed;
            let a = simulate(&input).unwrap();
            prop_assert!(a.cost_per_request_usd.p10 <= a.cost_per_request_usd.p50);
            prop_assert!(a.cost_per_request_usd.p50 <= a.cost_per_request_usd.p90);
            prop_assert!(a.monthly_total_usd.p10 <= a.monthly_total_usd.p90);
            prop_assert_eq!(a, simulate(&input).unwrap());
        }
    }

    #[test]
    fn ranges_around_the_entered_values_centre_on_the_point_answer() {
        use crate::plan::cost::{AmortizationInput, amortize};
        use crate::units::{PerMonth, Usd};
        // The Planner's defaults: 50M requests ±30 %, 20,000 USD training ±25 %, 0.0001 USD
        // serving ±25 %, monthly retrains.
        let point = amortize(&AmortizationInput {
            training_cost_usd: Usd(20_000.0),
            retrains_per_month: PerMonth(1.0),
            requests_per_month: PerMonth(5e7),
            serving_cost_per_request_usd: Usd(1e-4),
        })
        .unwrap();
        let u = simulate(&UncertaintyInput {
            training_cost_usd: Dist::around(20_000.0, 0.25),
            retrains_per_month: Dist::Fixed { value: 1.0 },
            requests_per_month: Dist::around(5e7, 0.3),
            serving_cost_per_request_usd: Dist::around(1e-4, 0.25),
            extra_training_cost_usd: None,
            serving_saving_fraction: None,
            samples: 20_000,
            seed: 7,
        })
        .unwrap();
        let off = |p50: f64, point: f64| (p50 / point - 1.0).abs();
        assert!(off(u.cost_per_request_usd.p50, point.total_cost_per_request_usd.0) < 0.03, "{u:?}");
        assert!(off(u.monthly_total_usd.p50, point.monthly_total_usd.0) < 0.03, "{u:?}");
        assert!(u.cost_per_request_usd.p10 < point.total_cost_per_request_usd.0);
        assert!(u.cost_per_request_usd.p90 > point.total_cost_per_request_usd.0);
        assert_eq!(Dist::around(5.0, 0.0), Dist::Fixed { value: 5.0 });
        assert_eq!(Dist::around(130.0, 0.3).range(), Some((100.0, 169.0)));
    }
}
