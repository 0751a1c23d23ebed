//! What a request costs: training amortized over the requests it serves, plus serving.

use serde::{Deserialize, Serialize};

use crate::checks::{ModelError, non_negative, positive};
use crate::units::{PerMonth, PerSecond, Usd, UsdPerHour, UsdPerMonth};

/// Inputs of [`amortize`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AmortizationInput {
    /// Cost of one (re)training.
    pub training_cost_usd: Usd,
    pub retrains_per_month: PerMonth,
    pub requests_per_month: PerMonth,
    pub serving_cost_per_request_usd: Usd,
}

/// Result of [`amortize`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Amortization {
    pub training_cost_per_request_usd: Usd,
    pub total_cost_per_request_usd: Usd,
    pub monthly_training_usd: UsdPerMonth,
    pub monthly_serving_usd: UsdPerMonth,
    pub monthly_total_usd: UsdPerMonth,
}

/// Cost per request = C_train · f / R + C_serve, where C_train is the cost of one training,
/// f retrains per month and R requests per month. Monthly training spend = C_train · f,
/// monthly serving spend = C_serve · R.
pub fn amortize(input: &AmortizationInput) -> Result<Amortization, ModelError> {
    non_negative("training_cost_usd", input.training_cost_usd.0)?;
    non_negative("retrains_per_month", input.retrains_per_month.0)?;
    positive("requests_per_month", input.requests_per_month.0)?;
    non_negative("serving_cost_per_request_usd", input.serving_cost_per_request_usd.0)?;
    let monthly_training = input.training_cost_usd * input.retrains_per_month;
    let monthly_serving = input.serving_cost_per_request_usd * input.requests_per_month;
    let training_per_request = monthly_training / input.requests_per_month;
    Ok(Amortization {
        training_cost_per_request_usd: training_per_request,
        total_cost_per_request_usd: training_per_request + input.serving_cost_per_request_usd,
        monthly_training_usd: monthly_training,
        monthly_serving_usd: monthly_serving,
        monthly_total_usd: monthly_training + monthly_serving,
    })
}

/// Inputs of [`break_even`]: spend more on each training to serve each request cheaper.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BreakEvenInput {
    /// Extra cost paid at every retrain (distillation, quantization-aware training, …).
    pub extra_training_cost_usd: Usd,
    pub retrains_per_month: PerMonth,
    pub requests_per_month: PerMonth,
    pub baseline_serving_cost_per_request_usd: Usd,
    pub optimized_serving_cost_per_request_usd: Usd,
    /// Change in task accuracy of the optimized model (e.g. -0.004 for 0.4 points lost);
    /// carried into the result, never hidden.
    #[serde(default)]
    pub accuracy_delta: Option<f64>,
}

/// Result of [`break_even`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BreakEven {
    pub saving_per_request_usd: Usd,
    /// Requests per retrain period that repay one extra training; none when nothing is saved.
    pub break_even_requests_per_retrain: Option<f64>,
    pub monthly_saving_usd: UsdPerMonth,
    pub monthly_extra_training_usd: UsdPerMonth,
    pub monthly_net_usd: UsdPerMonth,
    /// Months until the first extra spend is repaid; none when it never is.
    pub months_to_pay_back: Option<f64>,
    pub worth_it: bool,
    pub accuracy_delta: Option<f64>,
    /// One sentence a manager can read.
    pub reason: String,
}

/// With saving per request s = C_base − C_opt, extra cost E per retrain, f retrains and R
/// requests per month: break-even requests per retrain = E / s; monthly saving = s · R;
/// monthly extra training = E · f; net = s · R − E · f; months to repay the first extra
/// spend = E / (s · R). It is worth it when net > 0, which is the same as repaying each extra
/// spend before the next retrain (E / (s · R) < 1 / f).
pub fn break_even(input: &BreakEvenInput) -> Result<BreakEven, ModelError> {
    non_negative("extra_training_cost_usd", input.extra_training_cost_usd.0)?;
    non_negative("retrains_per_month", input.retrains_per_month.0)?;
    positive("requests_per_month", input.requests_per_month.0)?;
    non_negative("baseline_serving_cost_per_request_usd", input.baseline_serving_cost_per_request_usd.0)?;
    non_negative("optimized_serving_cost_per_request_usd", input.optimized_serving_cost_per_request_usd.0)?;
    if let Some(delta) = input.accuracy_delta {
        crate::checks::finite("accuracy_delta", delta)?;
    }
    let saving = input.baseline_serving_cost_per_request_usd - input.optimized_serving_cost_per_request_usd;
    let monthly_saving = saving * input.requests_per_month;
    let monthly_extra = input.extra_training_cost_usd * input.retrains_per_month;
    let net = monthly_saving - monthly_extra;
    let saves = saving.0 > 0.0;
    let extra = input.extra_training_cost_usd.0;
    let months_to_pay_back = saves.then(|| extra / monthly_saving.0);
    let worth_it = net.0 > 0.0;
    let reason = if !saves {
        "The optimized model does not serve a request more cheaply, so the extra training never pays back.".to_string()
    } else if worth_it {
        format!(
            "Each extra training is repaid in {:.2} months, before the next retrain in {:.2} months; net saving {:.2} USD per month.",
            months_to_pay_back.unwrap_or(0.0),
            retrain_interval(input.retrains_per_month),
            net.0
        )
    } else {
        format!(
            "Each extra training needs {:.2} months of savings but the model is retrained every {:.2} months; net cost {:.2} USD per month.",
            months_to_pay_back.unwrap_or(f64::INFINITY),
            retrain_interval(input.retrains_per_month),
            -net.0
        )
    };
    Ok(BreakEven {
        saving_per_request_usd: saving,
        break_even_requests_per_retrain: saves.then(|| extra / saving.0),
        monthly_saving_usd: monthly_saving,
        monthly_extra_training_usd: monthly_extra,
        monthly_net_usd: net,
        months_to_pay_back,
        worth_it,
        accuracy_delta: input.accuracy_delta,
        reason,
    })
}

fn retrain_interval(retrains: PerMonth) -> f64 {
    if retrains.0 > 0.0 { 1.0 / retrains.0 } else { f64::INFINITY }
}

/// Serving cost per request = hourly price × replicas / requests per hour.
pub fn serving_cost_per_request(price: UsdPerHour, replicas: u32, rate: PerSecond) -> Result<Usd, ModelError> {
    non_negative("hourly_usd", price.0)?;
    positive("arrival_rate_rps", rate.0)?;
    if replicas == 0 {
        return Err(crate::FieldError::new("replicas", "must be at least 1"));
    }
    Ok((price * f64::from(replicas)) / rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn amortization(train: f64, retrains: f64, requests: f64, serve: f64) -> AmortizationInput {
        AmortizationInput {
            training_cost_usd: Usd(train),
            retrains_per_month: PerMonth(retrains),
            requests_per_month: PerMonth(requests),
            serving_cost_per_request_usd: Usd(serve),
        }
    }

    #[test]
    fn worked_example() {
        // 20 000 USD per training, twice a month, 100 M requests, 0.0001 USD to serve each.
        let a = amortize(&amortization(20_000.0, 2.0, 1e8, 1e-4)).unwrap();
        assert!((a.training_cost_per_request_usd.0 - 4e-4).abs() < 1e-15);
        assert!((a.total_cost_per_request_usd.0 - 5e-4).abs() < 1e-15);
        assert_eq!(a.monthly_training_usd, UsdPerMonth(40_000.0));
        assert!((a.monthly_total_usd.0 - 50_000.0).abs() < 1e-6);
    }

    #[test]
    fn meaningless_inputs_name_their_field() {
        assert_eq!(amortize(&amortization(1.0, 1.0, 0.0, 1.0)).unwrap_err().field, "requests_per_month");
        assert_eq!(amortize(&amortization(-1.0, 1.0, 1.0, 1.0)).unwrap_err().field, "training_cost_usd");
        assert_eq!(amortize(&amortization(1.0, f64::NAN, 1.0, 1.0)).unwrap_err().field, "retrains_per_month");
    }

    #[test]
    fn break_even_worked_example() {
        // Distillation costs 5 000 USD more per monthly retrain and saves 0.00002 USD on each
        // of 400 M requests: 8 000 USD saved a month, repaid in 0.625 months.
        let b = break_even(&BreakEvenInput {
            extra_training_cost_usd: Usd(5_000.0),
            retrains_per_month: PerMonth(1.0),
            requests_per_month: PerMonth(4e8),
            baseline_serving_cost_per_request_usd: Usd(5e-5),
            optimized_serving_cost_per_request_usd: Usd(3e-5),
            accuracy_delta: Some(-0.004),
        })
        .unwrap();
        assert!((b.monthly_saving_usd.0 - 8_000.0).abs() < 1e-6);
        assert!((b.break_even_requests_per_retrain.unwrap() - 2.5e8).abs() < 1.0);
        assert!((b.months_to_pay_back.unwrap() - 0.625).abs() < 1e-12);
        assert!(b.worth_it);
        assert_eq!(b.accuracy_delta, Some(-0.004));
    }

    proptest! {
        /// Serving cost × requests in a month = the replicas' monthly bill.
        #[test]
        fn serving_cost_recovers_the_monthly_bill(price in 0.0..100.0f64, replicas in 1u32..1000, rps in 0.01..1e5f64) {
            let per_request = serving_cost_per_request(UsdPerHour(price), replicas, PerSecond(rps)).unwrap();
            let bill = (UsdPerHour(price) * f64::from(replicas)).per_month();
            let recovered = per_request * PerSecond(rps).per_month();
            prop_assert!((recovered.0 - bill.0).abs() <= 1e-9 * bill.0.max(1.0));
        }

        /// Monthly total = cost per request × requests, and the parts add up.
        #[test]
        fn amortization_is_consistent(train in 0.0..1e7f64, retrains in 0.0..60.0f64, requests in 1.0..1e12f64, serve in 0.0..1.0f64) {
            let a = amortize(&amortization(train, retrains, requests, serve)).unwrap();
            let total = a.total_cost_per_request_usd.0 * requests;
            prop_assert!((total - a.monthly_total_usd.0).abs() <= 1e-9 * a.monthly_total_usd.0.max(1.0));
            prop_assert!((a.monthly_training_usd.0 + a.monthly_serving_usd.0 - a.monthly_total_usd.0).abs() <= 1e-9 * a.monthly_total_usd.0.max(1.0));
            prop_assert!(a.total_cost_per_request_usd >= a.training_cost_per_request_usd);
        }

        /// More requests never raise the cost per request.
        #[test]
        fn volume_only_lowers_cost_per_request(train in 0.0..1e7f64, retrains in 0.0..60.0f64, requests in 1.0..1e11f64, serve in 0.0..1.0f64, more in 1.0..100.0f64) {
            let low = amortize(&amortization(train, retrains, requests, serve)).unwrap();
            let high = amortize(&amortization(train, retrains, requests * more, serve)).unwrap();
            prop_assert!(high.total_cost_per_request_usd.0 <= low.total_cost_per_request_usd.0 * (1.0 + 1e-12));
        }

        /// Worth it exactly when the first extra spend is repaid before the next retrain,
        /// and break-even volume per retrain matches the repayment time.
        #[test]
        fn break_even_agrees_with_itself(extra in 0.0..1e6f64, retrains in 0.01..30.0f64, requests in 1.0..1e10f64, base in 0.0..1e-2f64, cut in 0.0..1.0f64) {
            let input = BreakEvenInput {
                extra_training_cost_usd: Usd(extra),
                retrains_per_month: PerMonth(retrains),
                requests_per_month: PerMonth(requests),
                baseline_serving_cost_per_request_usd: Usd(base),
                optimized_serving_cost_per_request_usd: Usd(base * (1.0 - cut)),
                accuracy_delta: None,
            };
            let b = break_even(&input).unwrap();
            if let (Some(months), true) = (b.months_to_pay_back, b.monthly_net_usd.0.abs() > 1e-6) {
                prop_assert_eq!(b.worth_it, months < 1.0 / retrains);
                let per_retrain = requests / retrains;
                prop_assert_eq!(b.worth_it, per_retrain > b.break_even_requests_per_retrain.unwrap());
            }
            prop_assert!(b.monthly_net_usd.0.is_finite());
        }
    }
}
