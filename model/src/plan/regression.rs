//! Regression alerts: is a run's headline figure worse than the recent runs of the same
//! hardware class?
//!
//! The class's runs before this one, newest last, split into a *window* (the newest
//! [`WINDOW`] − 1, with this run: the recent runs) and a *baseline* (up to [`TRAILING`] before
//! the window, at least [`MIN_HISTORY`]). The baseline's median is m and its run-to-run noise
//! σ = 1.4826 · MAD (both robust: a bad run in it moves neither). A value v is worse by
//!
//! > w = m ÷ v − 1 where higher is better (a bandwidth, a throughput),
//! > w = v ÷ m − 1 where lower is better (a latency),
//!
//! the extra capacity the same volume needs where serving scales with the figure, and so the
//! share a month's spend on the class grows by ([`monthly_cost`]). A run alerts when either
//!
//! - **this run** is worse by more than the threshold and lies beyond K·σ of m in the worse
//!   direction (K = [`NOISE_MULTIPLE`]): a step as large as a regression can be at once; or
//! - **the window's median** is worse by more than the threshold and lies beyond K·σ_w of m,
//!   where σ_w = [`WINDOW_MEDIAN_SD`] · σ is the spread of a median of [`WINDOW`] runs: a shift
//!   that has lasted for half the window, found even where the noise hides it in any one run.
//!
//! Noise is measured in the figure's own units, so a throughput's reciprocal does not stretch
//! its lower tail. The constants were chosen by simulation (normal noise of 1 % to 30 % of the
//! median; the tests below hold them): at any noise the share of noise-only runs that alert
//! stays under 0.75 % (at most 0.2 % under 8 % noise, 0.6 % above); a 20 % regression under 3 %
//! noise is caught by its first run in over 99 % of trials, under 10 % noise within 20 runs in
//! over 99 %, and under 13 % within 40 runs in over 95 %. A regression seen only through the
//! window is found once most of the window has shifted: 8 runs after it began.

use serde::{Deserialize, Serialize};

use crate::plan::checks::ModelError;
use crate::{FieldError, NodeInfo, RunUpload};

/// Runs of the class the baseline is taken over.
pub const TRAILING: usize = 50;
/// Fewer baseline runs than this and no run is judged.
pub const MIN_HISTORY: usize = 10;
/// Runs in the window whose median is judged: this one and the ones just before it.
pub const WINDOW: usize = 15;
/// The class's runs a judgement reads: the window's others and the baseline.
pub const HISTORY: usize = TRAILING + WINDOW - 1;
/// K: how many standard deviations of noise a change must exceed.
pub const NOISE_MULTIPLE: f64 = 3.5;
/// The standard deviation of the median of [`WINDOW`] normal samples, in σ (0.320 by a
/// simulation of 100,000 medians; √(π ÷ 2n) gives 0.324).
pub const WINDOW_MEDIAN_SD: f64 = 0.320;
/// The smallest change that alerts, as a fraction, unless set.
pub const DEFAULT_THRESHOLD: f64 = 0.10;
/// MAD × this is σ for normal noise.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Which way a figure gets better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

impl Better {
    /// The direction of a figure in `unit` (as the wire writes units), if it has one.
    pub fn of_unit(unit: &str) -> Option<Better> {
        match unit {
            "bytes_per_second" | "flop_per_second" | "requests_per_second" | "tokens_per_second" => {
                Some(Better::Higher)
            }
            "seconds" => Some(Better::Lower),
            _ => None,
        }
    }
}

/// The trailing runs' median and noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Baseline {
    pub median: f64,
    /// σ = 1.4826 · MAD.
    pub noise: f64,
    pub runs: usize,
}

/// The median of `values` (not empty, no NaN).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// The baseline of `history` (its finite, positive values), or `None` with fewer than
/// [`MIN_HISTORY`] of them. Only the last [`TRAILING`] count: pass them oldest first.
pub fn baseline(history: &[f64]) -> Option<Baseline> {
    let mut values: Vec<f64> = history.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
    if values.len() > TRAILING {
        values.drain(..values.len() - TRAILING);
    }
    if values.len() < MIN_HISTORY {
        return None;
    }
    let m = median(&mut values);
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    Some(Baseline { median: m, noise: MAD_TO_SIGMA * median(&mut deviations), runs: values.len() })
}

/// A run's figure against its class's baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    pub value: f64,
    pub baseline: Baseline,
    pub better: Better,
    /// w of this run (negative: better than the median).
    pub worse_by: f64,
    /// What `worse_by` had to exceed: the threshold, or K·σ beyond m in w's terms.
    pub bound: f64,
    /// The median of the window (this run and the [`WINDOW`] − 1 before it) and its w.
    pub window_median: f64,
    pub window_worse_by: f64,
    /// What `window_worse_by` had to exceed.
    pub window_bound: f64,
    /// This run alone is beyond its bound.
    pub step: bool,
    /// The window's median is beyond its bound.
    pub sustained: bool,
    pub regressed: bool,
}

/// What an alert tells of a regressed verdict: this run's value where it is a step, else the
/// window's median; how much worse, and the bound it crossed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Told {
    /// `run` or `window`.
    pub judged_on: &'static str,
    pub value: f64,
    pub worse_by: f64,
    pub bound: f64,
}

impl Verdict {
    pub fn told(&self) -> Told {
        if self.step || !self.sustained {
            Told { judged_on: "run", value: self.value, worse_by: self.worse_by, bound: self.bound }
        } else {
            Told {
                judged_on: "window",
                value: self.window_median,
                worse_by: self.window_worse_by,
                bound: self.window_bound,
            }
        }
    }
}

/// Checks a threshold: a fraction from 0 to 10 (1000 %).
pub fn threshold(value: f64) -> Result<f64, ModelError> {
    if value.is_finite() && (0.0..=10.0).contains(&value) {
        Ok(value)
    } else {
        Err(FieldError::new("threshold", "must be a fraction from 0 to 10 (0.1 is 10 %)"))
    }
}

/// w of `value` against the median `m`.
fn worse_by(value: f64, m: f64, better: Better) -> f64 {
    match better {
        Better::Higher => m / value - 1.0,
        Better::Lower => value / m - 1.0,
    }
}

/// The w a value must exceed: the threshold, and `spread` (K standard deviations) beyond m in
/// the worse direction, in w's terms (infinite where a higher-is-better figure's noise reaches
/// zero: no value is beyond it).
fn bound(m: f64, spread: f64, better: Better, threshold: f64) -> f64 {
    let noise = match better {
        Better::Lower => spread / m,
        Better::Higher if m > spread => spread / (m - spread),
        Better::Higher => f64::INFINITY,
    };
    threshold.max(noise)
}

/// Judges `value` against `history` (the class's runs before it, oldest first, up to
/// [`HISTORY`] are read); `None` when the baseline is too short, the value is not a positive
/// number, or a figure of the judgement is not finite (values near the ends of the floats'
/// range, which an upload may carry: an alert is stored as JSON, which has no infinity).
pub fn judge(history: &[f64], value: f64, better: Better, threshold: f64) -> Option<Verdict> {
    if !(value.is_finite() && value > 0.0) {
        return None;
    }
    let usable: Vec<f64> = history.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
    let split = usable.len().checked_sub(WINDOW - 1)?;
    let baseline = baseline(&usable[..split])?;
    let mut window: Vec<f64> = usable[split..].to_vec();
    window.push(value);
    let window_median = median(&mut window);
    let m = baseline.median;
    let step_bound = bound(m, NOISE_MULTIPLE * baseline.noise, better, threshold);
    let window_bound = bound(m, NOISE_MULTIPLE * WINDOW_MEDIAN_SD * baseline.noise, better, threshold);
    let (w, window_w) = (worse_by(value, m, better), worse_by(window_median, m, better));
    if ![m, baseline.noise, window_median, w, window_w].iter().all(|x| x.is_finite()) {
        return None;
    }
    let (step, sustained) = (w > step_bound, window_w > window_bound);
    Some(Verdict {
        value,
        baseline,
        better,
        worse_by: w,
        bound: step_bound,
        window_median,
        window_worse_by: window_w,
        window_bound,
        step,
        sustained,
        regressed: step || sustained,
    })
}

/// The hardware class a node's runs are compared within: its instance type, else its CPU model;
/// `None` for a node that gives neither (it has no class to be judged in).
pub fn class_of(node: &NodeInfo) -> Option<&str> {
    [node.instance_type.as_deref(), Some(node.cpu_model.as_str())].into_iter().flatten().find(|t| !t.trim().is_empty())
}

/// What a run was measured with, kept beside its headline so an alert can say what changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunContext {
    pub agent: String,
    pub kernel: String,
    /// The first GPU's driver, on a node with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

impl RunContext {
    pub fn of(run: &RunUpload) -> RunContext {
        RunContext {
            agent: run.agent_version.clone(),
            kernel: run.node.kernel.clone(),
            driver: run.node.gpus.first().and_then(|g| g.driver_version.clone()),
        }
    }

    /// What differs from `before`: `agent 0.3.0 → 0.4.0`, one entry a difference.
    pub fn changes_since(&self, before: &RunContext) -> Vec<String> {
        let mut changes = Vec::new();
        let mut compare = |what: &str, was: Option<&str>, now: Option<&str>| {
            if was != now {
                changes.push(format!("{what} {} → {}", was.unwrap_or("none"), now.unwrap_or("none")));
            }
        };
        compare("agent", Some(&before.agent), Some(&self.agent));
        compare("kernel", Some(&before.kernel), Some(&self.kernel));
        compare("GPU driver", before.driver.as_deref(), self.driver.as_deref());
        changes
    }
}

/// What a month's spend on the class would grow by: spend × w, where serving scales with the
/// figure (the same volume needs 1 + w times the capacity).
pub fn monthly_cost(worse_by: f64, monthly_spend_usd: f64) -> f64 {
    monthly_spend_usd * worse_by.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::rng::Rng;
    use proptest::prelude::*;

    /// Normal noise around 1 with standard deviation `sigma` (Box–Muller).
    fn normal(rng: &mut Rng, sigma: f64) -> f64 {
        let (u, v) = (rng.open01(), rng.open01());
        1.0 + sigma * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    #[test]
    fn median_and_mad_of_a_known_history() {
        let b = baseline(&[1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, 9.0]).unwrap();
        assert_eq!(b.median, 5.5);
        // Deviations 4.5 3.5 2.5 1.5 94.5 0.5 0.5 1.5 2.5 3.5: median 2.5.
        assert!((b.noise - 1.4826 * 2.5).abs() < 1e-12);
        assert_eq!(b.runs, 10);
        assert_eq!(baseline(&[1.0; 9]), None, "too short");
        assert_eq!(baseline(&[[f64::NAN, -1.0, 0.0].as_slice(), &[1.0; 9]].concat()), None, "only 9 usable");
        // Only the newest TRAILING count.
        let long: Vec<f64> = (0..100).map(|i| if i < 70 { 1000.0 } else { 1.0 }).collect();
        assert_eq!(baseline(&long).unwrap().median, 1.0);
    }

    /// A history long enough to judge: baseline and window.
    const ENOUGH: usize = MIN_HISTORY + WINDOW - 1;

    #[test]
    fn direction_decides_what_worse_means() {
        let h = [100.0; ENOUGH];
        let slow = judge(&h, 125.0, Better::Lower, 0.1).unwrap();
        assert!((slow.worse_by - 0.25).abs() < 1e-12 && slow.step && !slow.sustained && slow.regressed);
        assert_eq!(slow.window_median, 100.0);
        let fast = judge(&h, 125.0, Better::Higher, 0.1).unwrap();
        assert!(fast.worse_by < 0.0 && !fast.regressed);
        let less = judge(&h, 80.0, Better::Higher, 0.1).unwrap();
        assert!((less.worse_by - 0.25).abs() < 1e-12 && less.regressed);
        // Within the threshold is not beyond it.
        assert!(!judge(&h, 109.0, Better::Lower, 0.1).unwrap().regressed);
        assert!(judge(&h, 111.0, Better::Lower, 0.1).unwrap().regressed);
        assert_eq!(judge(&h, 0.0, Better::Lower, 0.1), None);
        assert_eq!(judge(&h, f64::INFINITY, Better::Lower, 0.1), None);
        assert_eq!(judge(&h[1..], 125.0, Better::Lower, 0.1), None, "a baseline of 9 runs is too short");
        assert!(threshold(-0.1).is_err() && threshold(f64::NAN).is_err() && threshold(0.1) == Ok(0.1));
        assert_eq!(monthly_cost(0.25, 4000.0), 1000.0);
        assert_eq!(monthly_cost(-0.5, 4000.0), 0.0);
    }

    #[test]
    fn a_shift_that_lasts_half_the_window_alerts_where_no_single_run_does() {
        // Baseline 100 ± 10 (σ = 1.4826 × MAD of alternating 90/110 = 14.8): a run must reach
        // 100 + 3.5σ ≈ 152 alone, a window median 100 + 3.5 × 0.32σ ≈ 117.
        let mut h: Vec<f64> = (0..20).map(|i| if i % 2 == 0 { 90.0 } else { 110.0 }).collect();
        h.extend([100.0; 6]);
        h.extend([130.0; 8]);
        let v = judge(&h, 125.0, Better::Lower, 0.1).unwrap();
        assert!(!v.step && v.sustained && v.regressed, "{v:?}");
        assert_eq!(v.window_median, 130.0);
        let told = v.told();
        assert_eq!((told.judged_on, told.value), ("window", 130.0));
        assert!((told.worse_by - 0.3).abs() < 1e-12 && told.bound == v.window_bound);
        // With seven of the fifteen shifted, the median is not.
        h[26] = 100.0;
        assert!(!judge(&h, 100.0, Better::Lower, 0.1).unwrap().regressed);
    }

    #[test]
    fn figures_at_the_ends_of_the_float_range_are_not_judged() {
        let h = [100.0; ENOUGH];
        // m ÷ v overflows for the smallest positive double; v ÷ m for the largest.
        assert_eq!(judge(&h, 5e-324, Better::Higher, 0.1), None);
        assert_eq!(judge(&[0.5; ENOUGH], f64::MAX, Better::Lower, 0.1), None);
        // A median of two values near the largest double overflows.
        let huge: Vec<f64> = (0..ENOUGH).map(|i| if i % 2 == 0 { 1.7e308 } else { 1.75e308 }).collect();
        assert_eq!(judge(&huge, 1.0, Better::Higher, 0.1), None);
        // What is judged is finite, so it survives JSON.
        let v = judge(&h, 250.0, Better::Lower, 0.1).unwrap();
        let back: Verdict =
            serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap_or_else(|e| panic!("{e}: {v:?}"));
        assert_eq!(back.worse_by, v.worse_by);
    }

    #[test]
    fn changes_name_what_differs() {
        let before = RunContext { agent: "0.3.0".into(), kernel: "6.1".into(), driver: None };
        let now = RunContext { agent: "0.4.0".into(), kernel: "6.1".into(), driver: Some("550.54".into()) };
        assert_eq!(now.changes_since(&before), vec!["agent 0.3.0 → 0.4.0", "GPU driver none → 550.54"]);
        assert!(now.changes_since(&now).is_empty());
    }

    #[test]
    fn noisy_history_raises_the_bound() {
        // σ = 10 % of the median: a 25 % step is within 3.5σ.
        let mut rng = Rng::seeded(3);
        let h: Vec<f64> = (0..HISTORY).map(|_| 100.0 * normal(&mut rng, 0.10)).collect();
        let v = judge(&h, 125.0, Better::Lower, 0.1).unwrap();
        assert!(v.bound > 0.25, "{v:?}");
        assert!(!v.step);
    }

    /// Replays `runs` noise-only runs of standard deviation `sigma`, each judged against the
    /// ones before it: the share that alert.
    fn false_positive_rate(sigma: f64, better: Better, runs: usize, seed: u64) -> f64 {
        let mut rng = Rng::seeded(seed);
        let mut history: Vec<f64> = (0..HISTORY).map(|_| normal(&mut rng, sigma)).collect();
        let mut alerts = 0;
        for _ in 0..runs {
            let value = normal(&mut rng, sigma);
            if judge(&history, value, better, DEFAULT_THRESHOLD).is_some_and(|v| v.regressed) {
                alerts += 1;
            }
            history.remove(0);
            history.push(value);
        }
        alerts as f64 / runs as f64
    }

    #[test]
    fn noise_alone_alerts_under_one_percent_of_runs_at_any_noise() {
        for better in [Better::Higher, Better::Lower] {
            for sigma in [0.01, 0.03, 0.05, 0.08, 0.10, 0.15, 0.30] {
                let rate = false_positive_rate(sigma, better, 20_000, 7);
                eprintln!(
                    "{better:?}, noise σ {:.0} %: {:.2} % of 20,000 noise-only runs alert",
                    sigma * 100.0,
                    rate * 100.0
                );
                assert!(rate < 0.0075, "{better:?} σ {sigma}: {rate}");
            }
        }
    }

    /// Of `trials` classes whose runs spread by `sigma`, the share in which a loss of 20 % of a
    /// throughput is caught within `runs` runs.
    fn caught_within(sigma: f64, runs: usize, trials: usize, seed: u64) -> f64 {
        let mut rng = Rng::seeded(seed);
        let mut caught = 0;
        for _ in 0..trials {
            let mut history: Vec<f64> = (0..HISTORY).map(|_| normal(&mut rng, sigma)).collect();
            for _ in 0..runs {
                let value = 0.8 * normal(&mut rng, sigma);
                if judge(&history, value, Better::Higher, DEFAULT_THRESHOLD).unwrap().regressed {
                    caught += 1;
                    break;
                }
                history.push(value);
            }
        }
        caught as f64 / trials as f64
    }

    #[test]
    fn a_twenty_percent_regression_is_caught_at_once_under_small_noise_and_soon_under_large() {
        assert!(caught_within(0.03, 1, 2_000, 11) > 0.99);
        assert!(caught_within(0.10, 20, 1_000, 12) > 0.99);
        assert!(caught_within(0.13, 40, 1_000, 13) > 0.95);
    }

    proptest! {
        #[test]
        fn the_verdict_does_not_depend_on_the_scale_and_the_bounds_are_at_least_the_threshold(
            history in proptest::collection::vec(0.5f64..2.0, ENOUGH..70),
            value in 0.3f64..3.0,
            scale in 1e-6f64..1e9,
            limit in 0.0f64..1.0,
            higher in any::<bool>(),
        ) {
            let better = if higher { Better::Higher } else { Better::Lower };
            let a = judge(&history, value, better, limit).unwrap();
            let scaled: Vec<f64> = history.iter().map(|h| h * scale).collect();
            let b = judge(&scaled, value * scale, better, limit).unwrap();
            prop_assert!((a.worse_by - b.worse_by).abs() < 1e-9);
            prop_assert!((a.window_worse_by - b.window_worse_by).abs() < 1e-9);
            prop_assert!(a.bound >= limit && a.window_bound >= limit);
            prop_assert_eq!(a.regressed, a.step || a.sustained);
            // A value better than the median is never a step (the window may still have shifted).
            let good = match better { Better::Higher => a.baseline.median * 1.01, Better::Lower => a.baseline.median * 0.99 };
            prop_assert!(!judge(&history, good, better, limit).unwrap().step);
        }
    }
}
