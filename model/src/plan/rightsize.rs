//! Right-sizing: search instance type × precision × batch size × replicas for the cheapest
//! configuration that meets a latency SLO, fits in memory and loses no more accuracy than
//! allowed; return it, the Pareto front of monthly cost against latency, and why each
//! rejected family (instance type × precision) failed.
//!
//! A batch of b requests is one job: batches arrive at λ/b and take the measured batch service
//! time. A request also waits for its batch to fill, at most (b − 1)/λ; that whole fill time
//! is added to the latency, which is conservative. Replicas are sized with [`crate::plan::queue`].

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::carbon;
use crate::plan::checks::{ModelError, between, finite, non_negative, open_unit, positive, utilization_cap};
use crate::plan::memory::{KvCache, Precision};
use crate::plan::owned::PUE_RANGE;
use crate::plan::queue::{Queue, Service, erlang_b};
use crate::units::{Bytes, HOURS_PER_MONTH, PerSecond, Seconds, UsdPerHour, UsdPerMonth};

/// Where a candidate's figures came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// Service times measured by agents, in these runs.
    Measured { run_ids: Vec<String> },
    /// Entered by hand or taken from the price catalog without measurements.
    Catalog,
}

/// Measured (or entered) performance of one precision and batch size on one instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PerfPoint {
    pub precision: Precision,
    pub batch_size: u32,
    /// Time to serve one batch.
    pub service_time_mean_s: Seconds,
    pub service_time_cv: f64,
    /// Change in task accuracy against the full-precision model (negative is a loss).
    pub accuracy_delta: f64,
    /// Batches one replica serves at once (its workers, or a service's effective concurrency as
    /// the endpoint suite measured it): each replica is this many servers of the queue.
    #[serde(default = "one")]
    pub concurrency: u32,
}

fn one() -> u32 {
    1
}

/// The most batches one replica serves at once (as [`crate::plan::endpoint::MAX_CONCURRENCY`]).
pub const MAX_CONCURRENCY: u32 = crate::plan::endpoint::MAX_CONCURRENCY;

/// One instance type that could serve the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    pub instance_type: String,
    pub hourly_usd: UsdPerHour,
    /// Memory of the device that holds the model.
    pub device_memory_bytes: Bytes,
    pub source: Source,
    pub perf: Vec<PerfPoint>,
    /// One replica's average power draw, where known (measured, rated or entered): its
    /// configurations then carry their emissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_watts: Option<f64>,
}

/// The grid the replicas draw from, for their emissions ([`crate::plan::carbon`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Grid {
    pub g_co2e_per_kwh: f64,
    pub pue: f64,
}

/// The model being served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    pub parameters: f64,
    pub activation_bytes_per_sample: Bytes,
    #[serde(default)]
    pub kv_cache: KvCache,
}

/// Inputs of [`right_size`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RightSizeInput {
    pub arrival_rate_rps: PerSecond,
    pub slo_latency_s: Seconds,
    pub slo_quantile: f64,
    pub max_utilization: f64,
    /// Largest accepted accuracy loss, e.g. 0.01 for one point.
    pub accuracy_loss_limit: f64,
    pub model: ModelShape,
    /// Allocator headroom as a fraction of memory use.
    #[serde(default = "default_headroom")]
    pub headroom_fraction: f64,
    /// Most replicas of one configuration.
    #[serde(default = "default_max_replicas")]
    pub max_replicas: u32,
    pub hardware: Vec<Hardware>,
    /// With a grid, configurations of hardware whose power is known carry their emissions, and
    /// the one that emits least is named beside the cheapest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Grid>,
}

/// Most perf points (over all hardware) one search considers; with [`crate::plan::queue::MAX_REPLICAS`]
/// this bounds the work of one request.
pub const MAX_PERF_POINTS: usize = 2_000;

fn default_headroom() -> f64 {
    0.1
}

fn default_max_replicas() -> u32 {
    1000
}

/// A configuration that meets every constraint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Configuration {
    pub instance_type: String,
    pub precision: Precision,
    pub batch_size: u32,
    pub replicas: u32,
    pub monthly_cost_usd: UsdPerMonth,
    /// Latency at the SLO quantile, batch fill included.
    pub latency_at_quantile_s: Seconds,
    pub utilization: f64,
    pub accuracy_delta: f64,
    pub source: Source,
    /// kg CO2e a month of its replicas, where the hardware's power and the grid are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub co2e_kg_per_month: Option<f64>,
}

/// Why an instance type × precision produced no configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rejection {
    pub instance_type: String,
    pub precision: Precision,
    pub reason: String,
}

/// Result of [`right_size`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RightSizing {
    pub cheapest: Option<Configuration>,
    /// The feasible configuration that emits least (among hardware whose power is known; the
    /// cheaper of equals), when a grid is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_emissions: Option<Configuration>,
    /// Configurations no other beats on both monthly cost and latency, cheapest first.
    pub pareto: Vec<Configuration>,
    pub feasible: u64,
    /// Instance type × precision × batch × replica counts examined.
    pub evaluated: u64,
    pub rejected: Vec<Rejection>,
}

pub fn right_size(input: &RightSizeInput) -> Result<RightSizing, ModelError> {
    let lambda = positive("arrival_rate_rps", input.arrival_rate_rps.0)?;
    let slo = positive("slo_latency_s", input.slo_latency_s.0)?;
    let q = open_unit("slo_quantile", input.slo_quantile)?;
    let max_util = utilization_cap("max_utilization", input.max_utilization)?;
    let loss_limit = non_negative("accuracy_loss_limit", input.accuracy_loss_limit)?;
    positive("model.parameters", input.model.parameters)?;
    non_negative("model.activation_bytes_per_sample", input.model.activation_bytes_per_sample.0)?;
    let headroom = non_negative("headroom_fraction", input.headroom_fraction)?;
    if input.hardware.is_empty() {
        return Err(FieldError::new("hardware", "must list at least one instance type"));
    }
    if input.max_replicas == 0 || input.max_replicas > crate::plan::queue::MAX_REPLICAS {
        let most = crate::plan::queue::MAX_REPLICAS;
        return Err(FieldError::new("max_replicas", format!("must be between 1 and {most}")));
    }
    let points: usize = input.hardware.iter().map(|hw| hw.perf.len()).sum();
    if points > MAX_PERF_POINTS {
        return Err(FieldError::new("hardware", format!("more than {MAX_PERF_POINTS} perf points in all")));
    }
    let per_sample = input.model.activation_bytes_per_sample + input.model.kv_cache.bytes_per_sample();
    if let Some(grid) = &input.grid {
        carbon::grid_intensity("grid.g_co2e_per_kwh", grid.g_co2e_per_kwh)?;
        between("grid.pue", grid.pue, PUE_RANGE.0, PUE_RANGE.1)?;
    }
    for (h, hw) in input.hardware.iter().enumerate() {
        if let Some(watts) = hw.power_watts {
            between(&format!("hardware[{h}].power_watts"), watts, 0.0, carbon::MAX_WATTS)?;
        }
    }
    let mut result = RightSizing {
        cheapest: None,
        lowest_emissions: None,
        pareto: Vec::new(),
        feasible: 0,
        evaluated: 0,
        rejected: Vec::new(),
    };
    let mut feasible = Vec::new();
    let mut unit_quantiles = UnitQuantiles::new(q);
    for (h, hw) in input.hardware.iter().enumerate() {
        non_negative(&format!("hardware[{h}].hourly_usd"), hw.hourly_usd.0)?;
        positive(&format!("hardware[{h}].device_memory_bytes"), hw.device_memory_bytes.0)?;
        let mut families: Vec<(Precision, Option<String>)> = Vec::new();
        for (p, point) in hw.perf.iter().enumerate() {
            let at = format!("hardware[{h}].perf[{p}]");
            positive(&format!("{at}.service_time_mean_s"), point.service_time_mean_s.0)?;
            finite(&format!("{at}.service_time_cv"), point.service_time_cv)?;
            finite(&format!("{at}.accuracy_delta"), point.accuracy_delta)?;
            if point.batch_size == 0 {
                return Err(FieldError::new(format!("{at}.batch_size"), "must be at least 1"));
            }
            if !(1..=MAX_CONCURRENCY).contains(&point.concurrency) {
                return Err(FieldError::new(
                    format!("{at}.concurrency"),
                    format!("must be between 1 and {MAX_CONCURRENCY}"),
                ));
            }
            let limits = Limits { lambda, slo, q, max_util, loss_limit, headroom, per_sample };
            let outcome = evaluate(input, (h, p), &limits, &mut unit_quantiles, &mut result.evaluated);
            match outcome {
                Ok(candidate) => {
                    families.retain(|(prec, _)| *prec != point.precision);
                    families.push((point.precision, None));
                    feasible.push(candidate);
                }
                Err(reason) => {
                    if !families.iter().any(|(prec, _)| *prec == point.precision) {
                        families.push((point.precision, Some(reason)));
                    }
                }
            }
        }
        for (precision, reason) in families {
            if let Some(reason) = reason {
                result.rejected.push(Rejection { instance_type: hw.instance_type.clone(), precision, reason });
            }
        }
    }
    result.feasible = feasible.len() as u64;
    let emissions = |c: &Candidate| emissions(input, c.hardware, c.replicas);
    let greenest = feasible
        .iter()
        .filter_map(|c| Some((emissions(c)?, c)))
        .min_by(|(a, x), (b, y)| a.total_cmp(b).then(x.monthly_cost.total_cmp(&y.monthly_cost)))
        .map(|(_, c)| c.clone());
    result.lowest_emissions = greenest.map(|c| c.resolve(input, q));
    // Cheapest first; among equal costs, the lowest latency bound first. The exact quantile is
    // computed only where the cheap lower bound says a candidate could join the front.
    feasible.sort_by(|a, b| a.monthly_cost.total_cmp(&b.monthly_cost).then(a.lower_bound.total_cmp(&b.lower_bound)));
    let mut best_latency = f64::INFINITY;
    for candidate in feasible {
        if candidate.lower_bound >= best_latency {
            continue;
        }
        let config = candidate.resolve(input, q);
        if result.cheapest.is_none() {
            result.cheapest = Some(config.clone());
        }
        if config.latency_at_quantile_s.0 < best_latency {
            best_latency = config.latency_at_quantile_s.0;
            result.pareto.push(config);
        }
    }
    Ok(result)
}

/// kg CO2e a month of `replicas` of hardware `h`, where its power and the grid are known.
fn emissions(input: &RightSizeInput, h: usize, replicas: u32) -> Option<f64> {
    let (grid, watts) = (input.grid?, input.hardware[h].power_watts?);
    let kwh = carbon::facility_kwh(watts, grid.pue, f64::from(replicas) * HOURS_PER_MONTH).ok()?;
    carbon::co2e_g(kwh, grid.g_co2e_per_kwh).ok().map(|g| g / 1000.0)
}

/// A feasible configuration (hardware and perf point by index) whose exact latency is not
/// computed yet.
#[derive(Clone)]
struct Candidate {
    hardware: usize,
    point: usize,
    /// Replicas (each of the point's concurrency in servers).
    replicas: u32,
    monthly_cost: f64,
    queue: Queue,
    fill: f64,
    /// Batch fill plus the service time's own quantile: no replica count does better.
    lower_bound: f64,
}

impl Candidate {
    fn resolve(self, input: &RightSizeInput, q: f64) -> Configuration {
        let hw = &input.hardware[self.hardware];
        let point = &hw.perf[self.point];
        let queue = &self.queue;
        let co2e_kg_per_month = emissions(input, self.hardware, self.replicas);
        Configuration {
            co2e_kg_per_month,
            instance_type: hw.instance_type.clone(),
            precision: point.precision,
            batch_size: point.batch_size,
            replicas: self.replicas,
            monthly_cost_usd: UsdPerMonth(self.monthly_cost),
            latency_at_quantile_s: Seconds(self.fill + queue.quantile(q)),
            utilization: queue.utilization(),
            accuracy_delta: point.accuracy_delta,
            source: hw.source.clone(),
        }
    }
}

/// The validated constraints every candidate is checked against.
struct Limits {
    lambda: f64,
    slo: f64,
    q: f64,
    max_util: f64,
    loss_limit: f64,
    headroom: f64,
    per_sample: Bytes,
}

/// The q-quantile of a unit-mean service time depends only on its cv, so one computation
/// serves every candidate with that cv (a service time's quantile is its mean times this).
struct UnitQuantiles {
    q: f64,
    known: Vec<(f64, f64)>,
}

impl UnitQuantiles {
    fn new(q: f64) -> Self {
        UnitQuantiles { q, known: Vec::new() }
    }

    fn get(&mut self, cv: f64) -> f64 {
        if let Some((_, quantile)) = self.known.iter().find(|(c, _)| *c == cv) {
            return *quantile;
        }
        // A cv the inputs' checks let through always has a distribution; one that has none
        // meets no SLO.
        let quantile = match Service::new(1.0, cv) {
            Ok(unit) => unit.quantile(self.q),
            Err(_) => f64::INFINITY,
        };
        self.known.push((cv, quantile));
        quantile
    }
}

fn evaluate(
    input: &RightSizeInput,
    (h, p): (usize, usize),
    limits: &Limits,
    unit_quantiles: &mut UnitQuantiles,
    evaluated: &mut u64,
) -> Result<Candidate, String> {
    let Limits { lambda, slo, q, max_util, loss_limit, headroom, per_sample } = *limits;
    let hw = &input.hardware[h];
    let point = &hw.perf[p];
    let batch = f64::from(point.batch_size);
    let needed =
        (Bytes(input.model.parameters * point.precision.bytes_per_value()) + per_sample * batch) * (1.0 + headroom);
    if needed.0 > hw.device_memory_bytes.0 {
        *evaluated += 1;
        return Err(format!(
            "memory: batch {} needs {:.1} GB, the device has {:.1} GB",
            point.batch_size,
            needed.0 / 1e9,
            hw.device_memory_bytes.0 / 1e9
        ));
    }
    if -point.accuracy_delta > loss_limit {
        *evaluated += 1;
        return Err(format!(
            "accuracy: loses {:.2} points, the limit is {:.2}",
            -point.accuracy_delta * 100.0,
            loss_limit * 100.0
        ));
    }
    let fill = (batch - 1.0) / lambda;
    let budget = slo - fill;
    let mean = point.service_time_mean_s.0;
    let cv = point.service_time_cv.clamp(0.0, 10.0);
    let service_quantile = mean * unit_quantiles.get(cv);
    if budget <= 0.0 || service_quantile > budget {
        *evaluated += 1;
        return Err(format!(
            "latency: batch {} alone takes longer than the SLO at {}",
            point.batch_size,
            crate::plan::queue::quantile_name(q)
        ));
    }
    let batches = lambda / batch;
    let load = batches * mean;
    // Replicas r of k servers each: the queue has r·k servers, and r·k must exceed the load.
    let k = point.concurrency;
    let most_servers = crate::plan::queue::MAX_REPLICAS;
    // In floating point first: a huge (or infinite) load must not wrap a u32 count.
    let least = (load / (max_util * f64::from(k))).ceil().max(1.0);
    if least * f64::from(k) > f64::from(most_servers) {
        *evaluated += 1;
        return Err(format!("latency: more than {most_servers} servers would be needed at batch {}", point.batch_size));
    }
    let mut r = least as u32;
    if f64::from(r) * f64::from(k) <= load {
        r += 1;
    }
    let mut c = r * k;
    let mut b = erlang_b(c, load);
    while r <= input.max_replicas && c <= most_servers {
        *evaluated += 1;
        let Some(queue) = Queue::new_with_erlang_b(batches, mean, cv, c, b) else {
            return Err("latency: the load is more than these servers can take".into());
        };
        if queue.tail(budget) <= 1.0 - q {
            let monthly_cost = (hw.hourly_usd * f64::from(r)).per_month().0;
            return Ok(Candidate {
                hardware: h,
                point: p,
                replicas: r,
                monthly_cost,
                queue,
                fill,
                lower_bound: fill + service_quantile,
            });
        }
        r += 1;
        for _ in 0..k {
            c += 1;
            b = load * b / (f64::from(c) + load * b);
        }
    }
    if c > most_servers {
        return Err(format!("latency: more than {most_servers} servers would be needed at batch {}", point.batch_size));
    }
    Err(format!("latency: more than {} replicas would be needed at batch {}", input.max_replicas, point.batch_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(precision: Precision, batch: u32, ms: f64, delta: f64) -> PerfPoint {
        PerfPoint {
            precision,
            batch_size: batch,
            service_time_mean_s: Seconds(ms / 1000.0),
            service_time_cv: 0.3,
            accuracy_delta: delta,
            concurrency: 1,
        }
    }

    fn input() -> RightSizeInput {
        RightSizeInput {
            arrival_rate_rps: PerSecond(400.0),
            slo_latency_s: Seconds(0.2),
            slo_quantile: 0.99,
            max_utilization: 0.8,
            accuracy_loss_limit: 0.01,
            model: ModelShape {
                parameters: 7e9,
                activation_bytes_per_sample: Bytes(50e6),
                kv_cache: KvCache::default(),
            },
            headroom_fraction: 0.1,
            max_replicas: 1000,
            hardware: vec![
                Hardware {
                    instance_type: "big-gpu".into(),
                    hourly_usd: UsdPerHour(4.0),
                    device_memory_bytes: Bytes(80e9),
                    source: Source::Measured { run_ids: vec!["r1".into()] },
                    perf: vec![
                        point(Precision::Bf16, 1, 20.0, 0.0),
                        point(Precision::Bf16, 8, 60.0, 0.0),
                        point(Precision::Int8, 8, 35.0, -0.004),
                    ],
                    power_watts: None,
                },
                Hardware {
                    instance_type: "small-gpu".into(),
                    hourly_usd: UsdPerHour(1.0),
                    // bf16 weights alone are 14 GB.
                    device_memory_bytes: Bytes(12e9),
                    source: Source::Catalog,
                    perf: vec![
                        point(Precision::Bf16, 1, 45.0, 0.0),
                        point(Precision::Int8, 4, 60.0, -0.004),
                        point(Precision::Int4, 8, 50.0, -0.03),
                    ],
                    power_watts: None,
                },
            ],
            grid: None,
        }
    }

    #[test]
    fn the_cheapest_meets_every_constraint_and_rejections_say_why() {
        let result = right_size(&input()).unwrap();
        let best = result.cheapest.clone().expect("a feasible configuration");
        assert!(best.latency_at_quantile_s.0 <= 0.2);
        assert!(best.utilization <= 0.8);
        assert!(-best.accuracy_delta <= 0.01);
        let small_bf16 =
            result.rejected.iter().find(|r| r.instance_type == "small-gpu" && r.precision == Precision::Bf16).unwrap();
        assert!(small_bf16.reason.starts_with("memory"), "{}", small_bf16.reason);
        let int4 = result.rejected.iter().find(|r| r.precision == Precision::Int4).unwrap();
        assert!(int4.reason.starts_with("accuracy"), "{}", int4.reason);
        // The Pareto front starts at the cheapest and gets faster as it gets dearer.
        assert_eq!(result.pareto[0], best);
        assert!(result.pareto.windows(2).all(|w| w[0].monthly_cost_usd.0 <= w[1].monthly_cost_usd.0
            && w[0].latency_at_quantile_s.0 > w[1].latency_at_quantile_s.0));
        assert!(result.evaluated >= 6);
    }

    #[test]
    fn with_a_grid_each_configuration_says_its_emissions_and_the_lowest_is_named() {
        let mut case = input();
        // The big GPU draws 700 W, the small one 72 W; on a 400 g/kWh grid at PUE 1.2.
        case.hardware[0].power_watts = Some(700.0);
        case.hardware[1].power_watts = Some(72.0);
        let plain = right_size(&case).unwrap();
        assert_eq!(plain.lowest_emissions, None, "no grid, no emissions");
        assert!(plain.pareto.iter().all(|c| c.co2e_kg_per_month.is_none()));
        case.grid = Some(Grid { g_co2e_per_kwh: 400.0, pue: 1.2 });
        let result = right_size(&case).unwrap();
        let kg = |c: &Configuration, watts: f64| f64::from(c.replicas) * watts / 1000.0 * 1.2 * 730.0 * 0.4;
        for c in &result.pareto {
            let watts = if c.instance_type == "big-gpu" { 700.0 } else { 72.0 };
            assert!((c.co2e_kg_per_month.unwrap() - kg(c, watts)).abs() < 1e-9, "{c:?}");
        }
        let greenest = result.lowest_emissions.clone().unwrap();
        assert!(greenest.latency_at_quantile_s.0 <= 0.2 && -greenest.accuracy_delta <= 0.01);
        // No feasible configuration emits less (every replica count of either kind was tried).
        let cheapest = result.cheapest.unwrap();
        assert!(greenest.co2e_kg_per_month.unwrap() <= cheapest.co2e_kg_per_month.unwrap());
        assert!(result.pareto.iter().all(|c| greenest.co2e_kg_per_month <= c.co2e_kg_per_month));
        // Hardware without a power figure is never the lowest: it has no figure to compare.
        case.hardware[1].power_watts = None;
        let result = right_size(&case).unwrap();
        assert_eq!(result.lowest_emissions.unwrap().instance_type, "big-gpu");
        // Bad figures are named.
        case.hardware[0].power_watts = Some(f64::NAN);
        assert_eq!(right_size(&case).unwrap_err().field, "hardware[0].power_watts");
        case.hardware[0].power_watts = Some(700.0);
        case.grid = Some(Grid { g_co2e_per_kwh: 400.0, pue: 0.9 });
        assert_eq!(right_size(&case).unwrap_err().field, "grid.pue");
        case.grid = Some(Grid { g_co2e_per_kwh: -1.0, pue: 1.2 });
        assert_eq!(right_size(&case).unwrap_err().field, "grid.g_co2e_per_kwh");
    }

    proptest::proptest! {
        /// Whatever the hardware, every returned configuration meets the constraints, the
        /// cheapest costs no more than any on the front, and no front point is beaten on both axes.
        #[test]
        fn results_meet_constraints_and_the_front_is_not_dominated(
            rate in 1.0..5_000.0f64,
            slo_ms in 20.0..2_000.0f64,
            specs in proptest::collection::vec((0.2..40.0f64, 8.0..160.0f64, 1.0..200.0f64, 0usize..5, 0u32..6, 0.0..2.0f64), 1..12),
        ) {
            let mut case = input();
            case.arrival_rate_rps = PerSecond(rate);
            case.slo_latency_s = Seconds(slo_ms / 1000.0);
            case.hardware = specs.iter().enumerate().map(|(i, (price, gb, ms, p, b, cv))| Hardware {
                instance_type: format!("hw-{i}"),
                hourly_usd: UsdPerHour(*price),
                device_memory_bytes: Bytes(gb * 1e9),
                source: Source::Catalog,
                perf: vec![PerfPoint {
                    precision: Precision::ALL[*p],
                    batch_size: 1 << b,
                    service_time_mean_s: Seconds(ms / 1000.0),
                    service_time_cv: *cv,
                    accuracy_delta: -0.002 * *p as f64,
                    concurrency: 1,
                }],
                power_watts: None,
            }).collect();
            let result = right_size(&case).unwrap();
            for config in &result.pareto {
                proptest::prop_assert!(config.latency_at_quantile_s.0 <= case.slo_latency_s.0 * (1.0 + 1e-6));
                proptest::prop_assert!(config.utilization <= case.max_utilization + 1e-9);
                proptest::prop_assert!(-config.accuracy_delta <= case.accuracy_loss_limit + 1e-12);
                let cheapest = result.cheapest.as_ref().unwrap();
                proptest::prop_assert!(cheapest.monthly_cost_usd.0 <= config.monthly_cost_usd.0);
                for other in &result.pareto {
                    let dominates = other.monthly_cost_usd.0 <= config.monthly_cost_usd.0
                        && other.latency_at_quantile_s.0 < config.latency_at_quantile_s.0
                        && other.monthly_cost_usd.0 < config.monthly_cost_usd.0;
                    proptest::prop_assert!(!dominates, "{other:?} dominates {config:?}");
                }
            }
            proptest::prop_assert_eq!(result.feasible == 0, result.cheapest.is_none());
        }
    }

    #[test]
    fn a_replica_that_serves_several_at_once_is_that_many_servers() {
        // 400 batches/s of 20 ms need 8 busy servers: 10 replicas of one at 80 % at least, or
        // 3 of four (12 servers, 67 %); the queue behind either is the same M/G/c.
        let sized = |concurrency: u32| {
            let mut case = input();
            case.hardware.truncate(1);
            case.hardware[0].perf = vec![PerfPoint { concurrency, ..point(Precision::Fp16, 1, 20.0, 0.0) }];
            right_size(&case).unwrap().cheapest.unwrap()
        };
        let (single, quad) = (sized(1), sized(4));
        assert!(single.replicas >= 10, "{single:?}");
        assert_eq!(quad.replicas, single.replicas.div_ceil(4).max(3), "{quad:?}");
        let servers = |c: &Configuration, k: u32| f64::from(c.replicas * k);
        assert!((quad.utilization - 8.0 / servers(&quad, 4)).abs() < 1e-9, "utilization is per server");
        assert!(
            (quad.monthly_cost_usd.0 / single.monthly_cost_usd.0
                - f64::from(quad.replicas) / f64::from(single.replicas))
            .abs()
                < 1e-9,
            "priced per replica"
        );
        assert!(quad.latency_at_quantile_s.0 <= 0.2);
        // A load no count of servers holds is a reason, not a wrapped counter or a panic.
        for rate in [1e13, f64::MAX] {
            let mut huge = input();
            huge.arrival_rate_rps = PerSecond(rate);
            huge.hardware[0].perf[0].concurrency = 7;
            let result = right_size(&huge).unwrap();
            assert!(result.cheapest.is_none(), "{result:?}");
            assert!(result.rejected.iter().any(|r| r.reason.contains("servers would be needed")), "{result:?}");
        }
        let mut bad = input();
        bad.hardware[0].perf[0].concurrency = 0;
        assert_eq!(right_size(&bad).unwrap_err().field, "hardware[0].perf[0].concurrency");
    }

    #[test]
    fn no_hardware_is_named_as_the_problem() {
        let mut bad = input();
        bad.hardware.clear();
        assert_eq!(right_size(&bad).unwrap_err().field, "hardware");
    }
}
