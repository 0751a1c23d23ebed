//! What a request costs: training amortized over the requests it serves, plus serving.

use serde::{Deserialize, Serialize};

use crate::plan::checks::{ModelError, non_negative, positive, utilization_cap};
use crate::plan::queue::{MAX_REPLICAS, Queue, ReplicaInput, size_replicas};
use crate::units::{PerMonth, PerSecond, SECONDS_PER_MONTH, Seconds, Usd, UsdPerHour, UsdPerMonth};

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
        crate::plan::checks::finite("accuracy_delta", delta)?;
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
            "Each extra training is repaid in {:.2} months, before the next retrain in {:.2} months; net saving {} a month.",
            months_to_pay_back.unwrap_or(0.0),
            retrain_interval(input.retrains_per_month),
            crate::format::usd(net.0)
        )
    } else {
        format!(
            "Each extra training needs {:.2} months of savings but the model is retrained every {:.2} months; net cost {} a month.",
            months_to_pay_back.unwrap_or(f64::INFINITY),
            retrain_interval(input.retrains_per_month),
            crate::format::usd(-net.0)
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

/// A latency objective: `quantile` (e.g. 0.99) of requests within `latency_s`, for a service
/// time whose standard deviation over mean is `service_time_cv` (1 = exponential).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LatencySlo {
    pub latency_s: Seconds,
    pub quantile: f64,
    pub service_time_cv: f64,
}

/// Inputs of [`capacity_cost`]: serving bought by the replica-hour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CapacityInput {
    pub requests_per_month: PerMonth,
    /// Price of one replica, paid every hour it runs, busy or not.
    pub replica_price: UsdPerHour,
    /// Requests per second one replica completes when it is always busy.
    pub replica_throughput_rps: PerSecond,
    /// Highest planned utilization per replica, in (0, 1].
    pub max_utilization: f64,
    /// Replicas kept running whatever the load (at least 1 is always kept).
    pub min_replicas: u32,
    /// The latency the replicas must also meet; `None` sizes by utilization alone.
    pub slo: Option<LatencySlo>,
    /// Requests one replica serves at once (the c of M/G/c per replica, as the endpoint suite
    /// measures it); each takes `concurrency ÷ replica_throughput_rps` seconds on average.
    #[serde(default = "one")]
    pub concurrency: u32,
}

fn one() -> u32 {
    1
}

/// Why a [`CapacityCost`] has the replicas it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SizedBy {
    /// The configured minimum (or one replica) is more than the load needs.
    Minimum,
    /// The utilization cap.
    Utilization,
    /// The latency objective needs more replicas than the utilization cap.
    LatencySlo,
}

/// Result of [`capacity_cost`], over an average month of [`HOURS_PER_MONTH`](crate::units::HOURS_PER_MONTH) hours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CapacityCost {
    pub replicas: u32,
    pub sized_by: SizedBy,
    /// Average busy fraction of the replicas at the monthly volume.
    pub utilization: f64,
    /// Replicas × hourly price × hours in the month.
    pub monthly_serving_usd: UsdPerMonth,
    /// The part of the monthly serving spend paid for idle capacity: spend × (1 − utilization).
    pub monthly_idle_usd: UsdPerMonth,
    /// Monthly serving spend ÷ requests.
    pub serving_cost_per_request_usd: Usd,
    /// The latency at the SLO's quantile with these replicas, when an SLO was given.
    pub latency_at_quantile_s: Option<Seconds>,
}

/// Serving cost of capacity: replicas = the fewest that keep utilization at or below the cap
/// and, given an SLO, meet it in the M/G/c queueing model ([`size_replicas`]); never fewer
/// than the minimum or one. Capacity is paid whether or not it is busy, so the monthly spend is
/// replicas × price × [`HOURS_PER_MONTH`](crate::units::HOURS_PER_MONTH) and the cost per request is that over the requests.
pub fn capacity_cost(input: &CapacityInput) -> Result<CapacityCost, ModelError> {
    positive("requests_per_month", input.requests_per_month.0)?;
    non_negative("replica_price", input.replica_price.0)?;
    let throughput = positive("replica_throughput_rps", input.replica_throughput_rps.0)?;
    let cap = utilization_cap("max_utilization", input.max_utilization)?;
    if input.min_replicas > MAX_REPLICAS {
        return Err(crate::FieldError::new("min_replicas", format!("must be at most {MAX_REPLICAS}")));
    }
    let rate = input.requests_per_month.0 / SECONDS_PER_MONTH;
    // Replicas' worth of load at the cap, fractional.
    let load = rate / (throughput * cap);
    if load.ceil() > f64::from(MAX_REPLICAS) {
        return Err(crate::FieldError::new(
            "requests_per_month",
            format!("needs more than {MAX_REPLICAS} replicas at this throughput"),
        ));
    }
    let by_utilization = (load.ceil() as u32).max(1);
    if input.concurrency == 0 || input.concurrency > crate::plan::endpoint::MAX_CONCURRENCY {
        return Err(crate::FieldError::new(
            "concurrency",
            format!("must be 1 to {}", crate::plan::endpoint::MAX_CONCURRENCY),
        ));
    }
    let concurrency = input.concurrency;
    // Each replica is `concurrency` servers, each taking this long per request.
    let service_mean = f64::from(concurrency) / throughput;
    let by_slo = match input.slo {
        None => 0,
        Some(slo) => {
            let servers = size_replicas(&ReplicaInput {
                arrival_rate_rps: PerSecond(rate),
                service_time_mean_s: Seconds(service_mean),
                service_time_cv: slo.service_time_cv,
                slo_latency_s: slo.latency_s,
                slo_quantile: slo.quantile,
                max_utilization: cap,
                burst_factor: 1.0,
            })?
            .replicas;
            servers.div_ceil(concurrency)
        }
    };
    let floor = input.min_replicas.max(1);
    let replicas = floor.max(by_utilization).max(by_slo);
    // The latency below is a queue of replicas × concurrency servers: keep it computable.
    if u64::from(replicas) * u64::from(concurrency) > u64::from(MAX_REPLICAS) {
        return Err(crate::FieldError::new(
            "concurrency",
            format!("replicas × requests at once above {MAX_REPLICAS} servers: more than this model sizes"),
        ));
    }
    let sized_by = if by_slo > by_utilization.max(floor) {
        SizedBy::LatencySlo
    } else if by_utilization < floor || load < 1.0 {
        SizedBy::Minimum
    } else {
        SizedBy::Utilization
    };
    let latency_at_quantile_s = input.slo.and_then(|slo| {
        Queue::new(rate, service_mean, slo.service_time_cv, replicas * concurrency)
            .map(|q| Seconds(q.quantile(slo.quantile)))
    });
    let utilization = rate / (throughput * f64::from(replicas));
    let monthly = (input.replica_price * f64::from(replicas)).per_month();
    Ok(CapacityCost {
        replicas,
        sized_by,
        utilization,
        monthly_serving_usd: monthly,
        monthly_idle_usd: monthly * (1.0 - utilization),
        serving_cost_per_request_usd: monthly / input.requests_per_month,
        latency_at_quantile_s,
    })
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

    fn capacity(requests: f64, hourly: f64, throughput: f64, cap: f64, min: u32) -> CapacityInput {
        CapacityInput {
            concurrency: 1,
            requests_per_month: PerMonth(requests),
            replica_price: UsdPerHour(hourly),
            replica_throughput_rps: PerSecond(throughput),
            max_utilization: cap,
            min_replicas: min,
            slo: None,
        }
    }

    #[test]
    fn capacity_is_paid_by_the_hour_busy_or_not() {
        // One replica at $2.50/h runs 730 h a month: $1,825, whatever the volume it serves.
        let c = capacity_cost(&capacity(1e6, 2.5, 400.0, 0.6, 1)).unwrap();
        assert_eq!(c.replicas, 1);
        assert_eq!(c.sized_by, SizedBy::Minimum);
        assert!((c.monthly_serving_usd.0 - 1_825.0).abs() < 1e-9);
        assert!((c.serving_cost_per_request_usd.0 - 0.001_825).abs() < 1e-15);
        // 1M requests a month is 0.38 requests/s: the replica is idle 99.9 % of the time.
        let busy = 1e6 / SECONDS_PER_MONTH / 400.0;
        assert!((c.utilization - busy).abs() < 1e-15);
        assert!((c.monthly_idle_usd.0 - 1_825.0 * (1.0 - busy)).abs() < 1e-9);
        // Ten times the volume on the same replica: the same spend, a tenth the cost per request.
        let c10 = capacity_cost(&capacity(1e7, 2.5, 400.0, 0.6, 1)).unwrap();
        assert_eq!(c10.monthly_serving_usd, c.monthly_serving_usd);
        assert!((c10.serving_cost_per_request_usd.0 * 10.0 - c.serving_cost_per_request_usd.0).abs() < 1e-15);
    }

    #[test]
    fn replicas_follow_the_utilization_cap_then_the_minimum() {
        // 2,628M requests a month = 1,000 requests/s; 400 per replica at 60 % → 4.17 → 5 replicas.
        let c = capacity_cost(&capacity(1_000.0 * SECONDS_PER_MONTH, 2.0, 400.0, 0.6, 1)).unwrap();
        assert_eq!((c.replicas, c.sized_by), (5, SizedBy::Utilization));
        assert!((c.utilization - 0.5).abs() < 1e-12);
        assert!((c.monthly_serving_usd.0 - 5.0 * 2.0 * 730.0).abs() < 1e-9);
        let floor = capacity_cost(&capacity(1_000.0 * SECONDS_PER_MONTH, 2.0, 400.0, 0.6, 8)).unwrap();
        assert_eq!((floor.replicas, floor.sized_by), (8, SizedBy::Minimum));
        assert!(capacity_cost(&capacity(1e6, 2.0, 0.0, 0.6, 1)).is_err());
        assert_eq!(capacity_cost(&capacity(1e6, 2.0, 400.0, 0.0, 1)).unwrap_err().field, "max_utilization");
        assert_eq!(capacity_cost(&capacity(1e30, 2.0, 1.0, 0.6, 1)).unwrap_err().field, "requests_per_month");
    }

    #[test]
    fn a_tight_latency_objective_buys_more_replicas_than_the_cap() {
        // 1,000 requests/s, 10 ms each (100/s per replica): the cap at 90 % needs 12 replicas;
        // a p99 of 48 ms (just above the service time's own p99, 46 ms) needs more.
        let mut input = capacity(1_000.0 * SECONDS_PER_MONTH, 1.0, 100.0, 0.9, 1);
        let loose = capacity_cost(&input).unwrap();
        assert_eq!((loose.replicas, loose.sized_by), (12, SizedBy::Utilization));
        input.slo = Some(LatencySlo { latency_s: Seconds(0.048), quantile: 0.99, service_time_cv: 1.0 });
        let tight = capacity_cost(&input).unwrap();
        assert!(tight.replicas > loose.replicas, "{tight:?}");
        assert_eq!(tight.sized_by, SizedBy::LatencySlo);
        assert!(tight.latency_at_quantile_s.unwrap().0 <= 0.048);
        let fewer = Queue::new(1_000.0, 0.01, 1.0, tight.replicas - 1).unwrap();
        assert!(fewer.quantile(0.99) > 0.048, "one replica fewer would meet it too");
        input.slo = Some(LatencySlo { latency_s: Seconds(0.001), quantile: 0.99, service_time_cv: 1.0 });
        assert_eq!(capacity_cost(&input).unwrap_err().field, "slo_latency_s");
    }

    #[test]
    fn a_replica_that_serves_several_at_once_is_sized_as_that_many_servers() {
        // 1,000 requests/s; a replica serves 4 at once, 40 ms each (100/s per replica).
        let mut input = capacity(1_000.0 * SECONDS_PER_MONTH, 1.0, 100.0, 0.9, 1);
        input.concurrency = 4;
        input.slo = Some(LatencySlo { latency_s: Seconds(0.2), quantile: 0.99, service_time_cv: 1.0 });
        let c = capacity_cost(&input).unwrap();
        // Its latency is the queue of replicas × 4 servers of 40 ms, not of 10 ms ones.
        let servers = c.replicas * 4;
        let q = Queue::new(1_000.0, 0.04, 1.0, servers).unwrap();
        assert!((c.latency_at_quantile_s.unwrap().0 - q.quantile(0.99)).abs() < 1e-12);
        assert!(c.latency_at_quantile_s.unwrap().0 <= 0.2);
        let fewer = Queue::new(1_000.0, 0.04, 1.0, servers - 4).map_or(f64::INFINITY, |q| q.quantile(0.99));
        assert!(fewer > 0.2 || c.sized_by != SizedBy::LatencySlo, "one replica fewer would meet it too");
        // A 40 ms service cannot have a p99 of 30 ms, whatever the replicas.
        input.slo = Some(LatencySlo { latency_s: Seconds(0.03), quantile: 0.99, service_time_cv: 1.0 });
        assert_eq!(capacity_cost(&input).unwrap_err().field, "slo_latency_s");
        input.concurrency = 0;
        assert_eq!(capacity_cost(&input).unwrap_err().field, "concurrency");
    }

    proptest! {
        #[test]
        fn capacity_spend_is_replicas_times_price_times_hours(
            requests in 1.0f64..1e12, hourly in 0.0f64..100.0, throughput in 0.1f64..1e5,
            cap in 0.05f64..1.0, min in 0u32..50,
        ) {
            let input = capacity(requests, hourly, throughput, cap, min);
            if let Ok(c) = capacity_cost(&input) {
                prop_assert!(c.replicas >= min.max(1));
                prop_assert!(c.utilization <= cap + 1e-12, "{c:?}");
                let spend = f64::from(c.replicas) * hourly * 730.0;
                prop_assert!((c.monthly_serving_usd.0 - spend).abs() <= 1e-9 * spend.max(1.0));
                prop_assert!((c.serving_cost_per_request_usd.0 * requests - spend).abs() <= 1e-9 * spend.max(1.0));
                prop_assert!(c.monthly_idle_usd.0 >= 0.0 && c.monthly_idle_usd.0 <= c.monthly_serving_usd.0);
                // One replica fewer would break the cap or the minimum.
                if c.replicas > min.max(1) {
                    prop_assert!(requests / SECONDS_PER_MONTH / (throughput * f64::from(c.replicas - 1)) > cap);
                }
            }
        }
    }
}
