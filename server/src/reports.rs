//! Monthly cost reports: per deployment, what serving and amortized training cost over a
//! period, what each open recommendation would save, and where every figure came from (the
//! price catalog version and row date, the benchmark runs). Money is integer micro-dollars
//! from input to total; it becomes dollars only in the exported files. The table is a polars
//! DataFrame, written as CSV and Parquet by polars and as XLSX by rust_xlsxwriter.

use std::collections::{BTreeMap, HashMap};

use model::FieldError;
use model::calendar::{DAYS_PER_MONTH, Date, SECONDS_PER_MONTH};
use model::money::{MicroUsd, format_usd, from_usd, parse_usd, to_usd};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::grid::GridRow;
use crate::prices::PriceRow;
use model::plan::carbon;
pub use model::plan::chargeback::IdlePolicy;
use model::plan::chargeback::{Line, charge_idle, idle_replicas};
use model::plan::forecast;
pub use model::plan::owned::PowerSource;

/// Most deployments in one report.
pub const MAX_DEPLOYMENTS: usize = 100_000;
/// Most requests a deployment may serve in a month (a quadrillion).
pub const MAX_REQUESTS_PER_MONTH: u64 = 1_000_000_000_000_000;

/// An amount of US dollars: a decimal string (`"1234.56"`, exact) or a JSON number (rounded to
/// the micro-dollar).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Amount {
    Text(String),
    Number(f64),
}

impl Amount {
    pub fn micros(&self, field: &str) -> Result<MicroUsd, FieldError> {
        match self {
            Amount::Text(t) => parse_usd(t).map_err(|reason| FieldError::new(field, reason)),
            Amount::Number(n) if *n >= 0.0 => {
                from_usd(*n).ok_or_else(|| FieldError::new(field, "must be a finite amount below 9 trillion USD"))
            }
            Amount::Number(_) => Err(FieldError::new(field, "must not be negative")),
        }
    }
}

/// What a report covers.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    pub name: String,
    /// First day, `YYYY-MM-DD`.
    pub from: String,
    /// Last day, included.
    pub to: String,
    pub deployments: Vec<DeploymentInput>,
    /// Who pays for idle replicas: `owner` (default) or `proportional`.
    #[serde(default)]
    pub idle_policy: IdlePolicy,
}

/// A model served on a configuration at a request volume.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentInput {
    pub name: String,
    #[serde(default)]
    pub team: Option<String>,
    /// The cost centre the team's charge is booked to, where finance needs one.
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// Priced from the catalog with `replicas`; or give `serving_cost_per_request_usd` instead.
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default = "on_demand")]
    pub purchase_option: String,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub replicas: Option<u32>,
    /// The replicas the volume needs at its SLO, as entered (e.g. Right-sizing's answer); the
    /// rest of `replicas` is idle. Or give `sizing` to have it computed.
    #[serde(default)]
    pub needed_replicas: Option<u32>,
    /// The service and SLO to size the needed replicas from (M/G/c at the peak rate).
    #[serde(default)]
    pub sizing: Option<Sizing>,
    #[serde(default)]
    pub serving_cost_per_request_usd: Option<Amount>,
    pub requests_per_month: u64,
    /// Growth of the volume a month, as a fraction (0.05: 5 % a month), for the forecast.
    #[serde(default)]
    pub growth_per_month: f64,
    #[serde(default)]
    pub training_cost_usd: Option<Amount>,
    #[serde(default)]
    pub retrains_per_month: f64,
    /// Benchmark runs behind this configuration.
    #[serde(default)]
    pub run_ids: Vec<Uuid>,
    /// The saved scenario this deployment was planned in, where there is one.
    #[serde(default)]
    pub scenario_id: Option<String>,
    #[serde(default)]
    pub recommendations: Vec<RecommendationInput>,
    /// One replica's average power draw, for the deployment's energy and emissions (with
    /// `instance_type` and `replicas`).
    #[serde(default)]
    pub power_watts: Option<f64>,
    /// Where `power_watts` came from: `measured`, `rated` (an upper bound) or `entered` (the
    /// default).
    #[serde(default)]
    pub power_source: Option<PowerSource>,
    /// The facility's PUE; by default the grid-intensity table's for the catalog row's provider
    /// and region.
    #[serde(default)]
    pub pue: Option<f64>,
    /// The grid's g CO2e per kWh; by default the grid-intensity table's for the catalog row's
    /// provider and region.
    #[serde(default)]
    pub grid_g_co2e_per_kwh: Option<f64>,
}

/// Most characters in a deployment's team or cost centre.
pub const MAX_TEAM: usize = 200;

/// Checks a team's, cost centre's or budget's name: at most [`MAX_TEAM`] characters of text
/// that prints as itself (no control, invisible or direction-changing characters), as budgets
/// match reports by it.
pub fn team_name(field: &str, value: &str) -> Result<(), FieldError> {
    if value.chars().count() > MAX_TEAM {
        return Err(FieldError::new(field, format!("must be at most {MAX_TEAM} characters")));
    }
    model::wire::validate::text(field, value, false)
}

/// What one replica's service takes and the SLO it must meet: the needed replicas are the
/// fewest that hold the SLO at `peak_to_average` × the deployment's average rate
/// (`requests_per_month` over a 730-hour month) and at most `max_utilization` busy, as the
/// Planner's Capacity card sizes them (`model::plan::queue::size_replicas`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Sizing {
    /// Mean service time of one request on one replica, seconds.
    pub service_time_s: f64,
    /// Its coefficient of variation (1 = exponential, the default).
    #[serde(default = "one")]
    pub service_time_cv: f64,
    pub slo_latency_s: f64,
    /// 0.99 (the default) for a p99 SLO.
    #[serde(default = "p99")]
    pub slo_quantile: f64,
    /// Highest planned utilization per replica, in (0, 1); default 0.9.
    #[serde(default = "ninety_percent")]
    pub max_utilization: f64,
    /// The peak rate over the average; default 1.
    #[serde(default = "one")]
    pub peak_to_average: f64,
}

fn one() -> f64 {
    1.0
}

fn p99() -> f64 {
    0.99
}

fn ninety_percent() -> f64 {
    0.9
}

/// Most deployments of one report sized from `sizing`: sizing one takes up to about 5 ms at an
/// SLO on its service time's own tail, so this bounds a report's sizing to seconds.
pub const MAX_SIZED: usize = 1_000;

fn on_demand() -> String {
    "on_demand".into()
}

/// Kinds of open recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    RightSizing,
    Quantization,
    Distillation,
    Transport,
}

/// A change that would lower the cost, in one of three forms: another configuration
/// (`instance_type` and/or `replicas`, priced from the catalog), a cheaper-to-serve model
/// (`serving_saving_fraction`, less `extra_training_cost_usd` per retrain), or fewer cores
/// (`cores_saved`, priced per vCPU of the deployment's instance type).
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecommendationInput {
    pub kind: Kind,
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub replicas: Option<u32>,
    #[serde(default)]
    pub serving_saving_fraction: Option<f64>,
    #[serde(default)]
    pub extra_training_cost_usd: Option<Amount>,
    #[serde(default)]
    pub cores_saved: Option<f64>,
    #[serde(default)]
    pub run_ids: Vec<Uuid>,
}

impl RecommendationInput {
    /// Another configuration: `replicas` of `instance_type`, priced from the catalog.
    pub fn alternative(kind: Kind, instance_type: &str, replicas: u32) -> Self {
        RecommendationInput {
            kind,
            instance_type: Some(instance_type.to_string()),
            replicas: Some(replicas),
            serving_saving_fraction: None,
            extra_training_cost_usd: None,
            cores_saved: None,
            run_ids: vec![],
        }
    }

    /// A model that serves for `fraction` less, for `extra_training_usd` more per retrain.
    pub fn cheaper_model(kind: Kind, fraction: f64, extra_training_usd: f64) -> Self {
        RecommendationInput {
            kind,
            instance_type: None,
            replicas: None,
            serving_saving_fraction: Some(fraction),
            extra_training_cost_usd: Some(Amount::Number(extra_training_usd)),
            cores_saved: None,
            run_ids: vec![],
        }
    }
}

/// One deployment's line of a report.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
pub struct ReportRow {
    pub deployment: String,
    pub team: String,
    /// `4 × g5.xlarge (on_demand, us-east-1)`, or `entered cost per request`.
    pub configuration: String,
    pub requests: u64,
    pub serving_micro_usd: MicroUsd,
    pub training_micro_usd: MicroUsd,
    pub total_micro_usd: MicroUsd,
    /// Savings by kind of recommendation, over the period.
    pub savings_micro_usd: BTreeMap<Kind, MicroUsd>,
    /// The catalog row's date, when the serving cost came from the catalog.
    pub price_as_of: Option<String>,
    pub price_source: String,
    pub run_ids: Vec<Uuid>,
    /// The saved scenario the deployment came from.
    #[serde(default)]
    pub scenario_id: Option<String>,
    /// The instance type it was priced as, when priced from the catalog (regression alerts
    /// price a regression of that class from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// Replicas provisioned, when priced by the replica.
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Replicas the volume needs at its SLO, when entered or sized.
    #[serde(default)]
    pub needed_replicas: Option<u32>,
    /// Where `needed_replicas` came from: `entered`, or the sizing that gave it.
    #[serde(default)]
    pub needed_from: Option<String>,
    /// The serving cost of the replicas beyond the needed ones (part of `serving_micro_usd`).
    #[serde(default)]
    pub idle_micro_usd: MicroUsd,
    /// The idle cost this deployment is charged under the report's policy.
    #[serde(default)]
    pub idle_charged_micro_usd: MicroUsd,
    #[serde(default)]
    pub growth_per_month: f64,
    /// Spend in each of the 12 months after the report's, serving and training (empty in
    /// reports stored before forecasts).
    #[serde(default)]
    pub forecast_micro_usd: Vec<MicroUsd>,
    /// Energy and emissions, where the deployment gave its power.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carbon: Option<RowCarbon>,
}

/// A deployment's energy and emissions over the report's period ([`model::plan::carbon`]).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
pub struct RowCarbon {
    pub power_watts: f64,
    pub power_source: PowerSource,
    pub pue: f64,
    pub grid_g_co2e_per_kwh: f64,
    /// `entered`, or the grid-intensity row it came from: provider, region, source and date.
    pub grid_from: String,
    pub energy_kwh: f64,
    pub co2e_kg: f64,
    /// None when the deployment served no request.
    pub co2e_g_per_1000_requests: Option<f64>,
}

impl ReportRow {
    /// What the deployment's team is charged: its total, less its own idle cost, plus the idle
    /// cost the policy gives it.
    pub fn chargeback_micro_usd(&self) -> MicroUsd {
        self.total_micro_usd - self.idle_micro_usd + self.idle_charged_micro_usd
    }
}

/// A built report.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
pub struct Report {
    pub id: String,
    pub name: String,
    pub from: String,
    pub to: String,
    pub days: u32,
    pub catalog_version: i64,
    /// When it was built (Unix milliseconds) and by whom; reports stored before these were
    /// recorded in the report itself take them from the store's record.
    #[serde(default)]
    pub generated_at_ms: i64,
    #[serde(default)]
    pub generated_by: String,
    /// Who pays for idle replicas (reports stored before it was chosen had no idle cost).
    #[serde(default)]
    pub idle_policy: IdlePolicy,
    /// The first month of the forecast, `YYYY-MM` (the month after the one `to` is in).
    #[serde(default)]
    pub forecast_from: String,
    /// The grid-intensity table version its emissions used (0: none, or stored before carbon).
    #[serde(default)]
    pub grid_version: i64,
    pub rows: Vec<ReportRow>,
}

impl Report {
    pub fn total_micro_usd(&self) -> MicroUsd {
        self.rows.iter().map(|r| r.total_micro_usd).sum()
    }

    pub fn saving_micro_usd(&self, kind: Kind) -> MicroUsd {
        self.rows.iter().map(|r| r.savings_micro_usd.get(&kind).copied().unwrap_or(0)).sum()
    }
}

/// A stored report's date (checked by [`build`], so never the fallback in practice).
fn day(text: &str) -> Date {
    Date::parse(text).unwrap_or(Date::EPOCH)
}

/// The catalog, looked up by (instance type, purchase option, region), and the grid-intensity
/// table the emissions use.
pub struct Prices<'a> {
    rows: HashMap<(&'a str, &'a str), Vec<&'a PriceRow>>,
    grid: HashMap<(&'a str, &'a str), &'a GridRow>,
    grid_version: i64,
}

impl<'a> Prices<'a> {
    pub fn new(catalog: &'a [PriceRow]) -> Self {
        let mut rows: HashMap<(&str, &str), Vec<&PriceRow>> = HashMap::new();
        for r in catalog {
            rows.entry((r.instance_type.as_str(), r.purchase_option.as_str())).or_default().push(r);
        }
        Prices { rows, grid: HashMap::new(), grid_version: 0 }
    }

    /// With the grid-intensity table `version`, for deployments that give their power.
    pub fn with_grid(mut self, rows: &'a [GridRow], version: i64) -> Self {
        self.grid = rows.iter().map(|r| ((r.provider.as_str(), r.region.as_str()), r)).collect();
        self.grid_version = version;
        self
    }

    fn find(&self, instance: &str, option: &str, region: Option<&str>) -> Result<&'a PriceRow, String> {
        let candidates = self.rows.get(&(instance, option)).map(Vec::as_slice).unwrap_or(&[]);
        match region {
            Some(region) => candidates
                .iter()
                .find(|r| r.region.as_deref() == Some(region))
                .copied()
                .ok_or_else(|| format!("{instance} ({option}) in {region} is not in the price catalog")),
            None => match candidates {
                [one] => Ok(*one),
                [] => Err(format!("{instance} ({option}) is not in the price catalog")),
                _ => Err(format!("{instance} ({option}) is priced in several regions; name the region")),
            },
        }
    }
}

/// Computes a report. `known_run` says whether a benchmark run is stored, `known_scenario`
/// whether a saved scenario is.
pub fn build(
    id: String,
    request: &ReportRequest,
    prices: &Prices<'_>,
    catalog_version: i64,
    known_run: &dyn Fn(&Uuid) -> bool,
    known_scenario: &dyn Fn(&str) -> bool,
) -> Result<Report, FieldError> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(FieldError::new("name", "must be 1 to 200 characters"));
    }
    let from = Date::parse(&request.from).map_err(|reason| FieldError::new("from", reason))?.days_since_epoch();
    let to = Date::parse(&request.to).map_err(|reason| FieldError::new("to", reason))?.days_since_epoch();
    if to < from || to - from >= 3660 {
        return Err(FieldError::new("to", "must be on or after `from`, within ten years"));
    }
    if request.deployments.is_empty() || request.deployments.len() > MAX_DEPLOYMENTS {
        return Err(FieldError::new("deployments", format!("must hold 1 to {MAX_DEPLOYMENTS} deployments")));
    }
    if let Some((i, _)) = request.deployments.iter().enumerate().filter(|(_, d)| d.sizing.is_some()).nth(MAX_SIZED) {
        return Err(FieldError::new(
            format!("deployments[{i}].sizing"),
            format!("at most {MAX_SIZED} deployments of a report may be sized; give needed_replicas for the others"),
        ));
    }
    let days = (to - from + 1) as u32;
    let hours = i64::from(days) * 24;
    let months = f64::from(days) / DAYS_PER_MONTH;
    let mut rows = request
        .deployments
        .iter()
        .enumerate()
        .map(|(i, d)| row(&format!("deployments[{i}]"), d, prices, hours, months, known_run, known_scenario))
        .collect::<Result<Vec<_>, _>>()?;
    // The totals the exports print must fit too.
    let mut total: MicroUsd = 0;
    let mut requests: u64 = 0;
    let mut forecast = [0 as MicroUsd; forecast::MONTHS as usize];
    let mut savings: BTreeMap<Kind, MicroUsd> = BTreeMap::new();
    // Energy and emissions, summed to the thousandth as the CSV shows them, must fit too.
    let (mut energy, mut co2e) = (0.0, 0.0);
    for (i, row) in rows.iter().enumerate() {
        if let Some(c) = &row.carbon {
            energy += c.energy_kwh;
            co2e += c.co2e_kg;
            if energy > MAX_CARBON_SUM || co2e > MAX_CARBON_SUM {
                return Err(FieldError::new(
                    format!("deployments[{i}].power_watts"),
                    "makes the report's energy or emissions larger than it can hold (a trillion kWh or kg)",
                ));
            }
        }
    }
    for row in &rows {
        total = add("deployments", total, row.total_micro_usd)?;
        requests = requests
            .checked_add(row.requests)
            .ok_or_else(|| FieldError::new("deployments", "serve more requests in all than a report can count"))?;
        for (sum, month) in forecast.iter_mut().zip(&row.forecast_micro_usd) {
            *sum = add("deployments", *sum, *month)?;
        }
        for (kind, saving) in &row.savings_micro_usd {
            let sum = savings.entry(*kind).or_default();
            *sum = add("deployments", *sum, *saving)?;
        }
    }
    // After the totals are known to fit: the idle pool is part of them.
    let lines: Vec<Line> =
        rows.iter().map(|r| Line { used: r.serving_micro_usd - r.idle_micro_usd, idle: r.idle_micro_usd }).collect();
    for (row, charged) in rows.iter_mut().zip(charge_idle(&lines, request.idle_policy)) {
        row.idle_charged_micro_usd = charged;
    }
    Ok(Report {
        id,
        name: name.to_string(),
        from: request.from.clone(),
        to: request.to.clone(),
        days,
        catalog_version,
        generated_at_ms: 0,
        generated_by: String::new(),
        idle_policy: request.idle_policy,
        forecast_from: day(&request.to).month_after(1),
        grid_version: if rows.iter().any(|r| r.carbon.as_ref().is_some_and(|c| c.grid_from != "entered")) {
            prices.grid_version
        } else {
            0
        },
        rows,
    })
}

/// The most kWh, or kg CO2e, a report sums (in thousandths, far inside an i64).
const MAX_CARBON_SUM: f64 = 1e12;

/// Why an amount is refused: it left the range a report can hold (i64 micro-dollars).
const TOO_LARGE: &str = "makes an amount larger than a report can hold (about 9.2 trillion USD)";

/// `value × fraction`, rounded half away from zero, in micro-dollars; refused for `field` when
/// the result leaves i64's range.
fn scaled(field: &str, value: MicroUsd, fraction: f64) -> Result<MicroUsd, FieldError> {
    let product = (value as f64 * fraction).round();
    // `as` would saturate silently: 2^63 is the first float past i64::MAX.
    if product.is_finite() && product.abs() < 9.223_372_036_854_775e18 {
        Ok(product as MicroUsd)
    } else {
        Err(FieldError::new(field, TOO_LARGE))
    }
}

/// `hourly × replicas × hours`, refused for `field` when it overflows.
fn rent(field: &str, hourly: MicroUsd, replicas: u32, hours: i64) -> Result<MicroUsd, FieldError> {
    hourly
        .checked_mul(i64::from(replicas))
        .and_then(|v| v.checked_mul(hours))
        .ok_or_else(|| FieldError::new(field, TOO_LARGE))
}

/// `a + b`, refused for `field` when it overflows.
fn add(field: &str, a: MicroUsd, b: MicroUsd) -> Result<MicroUsd, FieldError> {
    a.checked_add(b).ok_or_else(|| FieldError::new(field, TOO_LARGE))
}

fn row(
    at: &str,
    d: &DeploymentInput,
    prices: &Prices<'_>,
    hours: i64,
    months: f64,
    known_run: &dyn Fn(&Uuid) -> bool,
    known_scenario: &dyn Fn(&str) -> bool,
) -> Result<ReportRow, FieldError> {
    let field = |name: &str| format!("{at}.{name}");
    if d.name.trim().is_empty() {
        return Err(FieldError::new(field("name"), "must not be empty"));
    }
    for (name, value) in [("team", &d.team), ("cost_centre", &d.cost_centre)] {
        if let Some(value) = value {
            team_name(&field(name), value)?;
        }
    }
    if let Some(scenario) = &d.scenario_id {
        if !crate::store::could_be_id(scenario) {
            return Err(FieldError::new(field("scenario_id"), "is not a scenario id"));
        }
        if !known_scenario(scenario) {
            return Err(FieldError::new(field("scenario_id"), format!("no saved scenario {scenario}")));
        }
    }
    if !(d.retrains_per_month.is_finite() && d.retrains_per_month >= 0.0) {
        return Err(FieldError::new(field("retrains_per_month"), "must be a finite number, zero or more"));
    }
    for (j, run) in d.run_ids.iter().enumerate() {
        if !known_run(run) {
            return Err(FieldError::new(format!("{at}.run_ids[{j}]"), format!("no stored run {run}")));
        }
    }
    if d.requests_per_month > MAX_REQUESTS_PER_MONTH {
        return Err(FieldError::new(field("requests_per_month"), format!("must be at most {MAX_REQUESTS_PER_MONTH}")));
    }
    let requests = (d.requests_per_month as f64 * months).round() as u64;
    let (serving, configuration, price_as_of, price_source, price, provisioned, per_request) =
        match (&d.instance_type, &d.serving_cost_per_request_usd) {
            (Some(instance), None) => {
                let replicas = d
                    .replicas
                    .filter(|r| *r > 0)
                    .ok_or_else(|| FieldError::new(field("replicas"), "must be 1 or more with instance_type"))?;
                let p = prices
                    .find(instance, &d.purchase_option, d.region.as_deref())
                    .map_err(|reason| FieldError::new(field("instance_type"), reason))?;
                let serving = rent(&field("replicas"), p.hourly_micro_usd, replicas, hours)?;
                let config = format!(
                    "{replicas} × {instance} ({}{})",
                    d.purchase_option,
                    p.region.as_deref().map(|r| format!(", {r}")).unwrap_or_default()
                );
                (serving, config, Some(p.as_of.clone()), p.source.clone(), Some(p), Some(replicas), None)
            }
            (None, Some(per_request)) => {
                let micros = per_request.micros(&field("serving_cost_per_request_usd"))?;
                let serving = scaled(&field("serving_cost_per_request_usd"), micros, requests as f64)?;
                let entered = format!("entered: {} USD per request", format_usd(micros));
                (serving, entered, None, "entered".to_string(), None, None, Some(micros))
            }
            _ => {
                return Err(FieldError::new(
                    field("instance_type"),
                    "give either instance_type with replicas, or serving_cost_per_request_usd",
                ));
            }
        };
    let needed = needed_replicas(at, d, provisioned)?;
    let idle = match (price, provisioned, &needed) {
        (Some(p), Some(replicas), Some((needed, _))) => {
            rent(&field("replicas"), p.hourly_micro_usd, idle_replicas(replicas, *needed), hours)?
        }
        _ => 0,
    };
    let training_once =
        d.training_cost_usd.as_ref().map(|a| a.micros(&field("training_cost_usd"))).transpose()?.unwrap_or(0);
    let training = scaled(&field("training_cost_usd"), training_once, d.retrains_per_month * months)?;
    let pricing = match (price, provisioned, per_request) {
        (Some(p), Some(replicas), _) => {
            Pricing::Replicas { hourly: p.hourly_micro_usd, replicas, needed: needed.as_ref().map(|(n, _)| *n) }
        }
        (_, _, micros) => Pricing::PerRequest(micros.unwrap_or(0)),
    };
    let training_month = scaled(&field("training_cost_usd"), training_once, d.retrains_per_month)?;
    let forecast = forecast_of(at, d, &pricing, training_month)?;
    let mut savings: BTreeMap<Kind, MicroUsd> = BTreeMap::new();
    let mut run_ids = d.run_ids.clone();
    for (j, r) in d.recommendations.iter().enumerate() {
        let at = format!("{at}.recommendations[{j}]");
        let rf = |name: &str| format!("{at}.{name}");
        for (k, run) in r.run_ids.iter().enumerate() {
            if !known_run(run) {
                return Err(FieldError::new(format!("{at}.run_ids[{k}]"), format!("no stored run {run}")));
            }
            if !run_ids.contains(run) {
                run_ids.push(*run);
            }
        }
        let saving = if r.instance_type.is_some() || r.replicas.is_some() {
            let instance =
                r.instance_type.as_deref().or(d.instance_type.as_deref()).ok_or_else(|| {
                    FieldError::new(rf("instance_type"), "the deployment has no instance type to keep")
                })?;
            let replicas = r
                .replicas
                .or(d.replicas)
                .filter(|n| *n > 0)
                .ok_or_else(|| FieldError::new(rf("replicas"), "must be 1 or more"))?;
            let alt = prices
                .find(instance, &d.purchase_option, d.region.as_deref())
                .map_err(|reason| FieldError::new(rf("instance_type"), reason))?;
            let alternative = rent(&rf("replicas"), alt.hourly_micro_usd, replicas, hours)?;
            serving.checked_sub(alternative).ok_or_else(|| FieldError::new(rf("replicas"), TOO_LARGE))?
        } else if let Some(fraction) = r.serving_saving_fraction {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(FieldError::new(rf("serving_saving_fraction"), "must be between 0 and 1"));
            }
            let extra = r
                .extra_training_cost_usd
                .as_ref()
                .map(|a| a.micros(&rf("extra_training_cost_usd")))
                .transpose()?
                .unwrap_or(0);
            let kept = scaled(&rf("serving_saving_fraction"), serving, fraction)?;
            let extra = scaled(&rf("extra_training_cost_usd"), extra, d.retrains_per_month * months)?;
            kept.checked_sub(extra).ok_or_else(|| FieldError::new(rf("extra_training_cost_usd"), TOO_LARGE))?
        } else if let Some(cores) = r.cores_saved {
            let p = price.ok_or_else(|| {
                FieldError::new(rf("cores_saved"), "needs the deployment's instance type to price a core")
            })?;
            let vcpus = p
                .vcpus
                .filter(|v| *v > 0)
                .ok_or_else(|| FieldError::new(rf("cores_saved"), "the catalog row gives no vCPU count"))?;
            if !(cores.is_finite() && cores >= 0.0) {
                return Err(FieldError::new(rf("cores_saved"), "must be a finite number, zero or more"));
            }
            let instance_hours = rent(&rf("cores_saved"), p.hourly_micro_usd, 1, hours)?;
            scaled(&rf("cores_saved"), instance_hours, cores / f64::from(vcpus))?
        } else {
            return Err(FieldError::new(
                at.clone(),
                "give instance_type/replicas, serving_saving_fraction or cores_saved",
            ));
        };
        let total = savings.entry(r.kind).or_default();
        *total = add(&at, *total, saving)?;
    }
    Ok(ReportRow {
        deployment: d.name.trim().to_string(),
        team: d.team.as_deref().map(str::trim).unwrap_or_default().to_string(),
        configuration,
        requests,
        serving_micro_usd: serving,
        training_micro_usd: training,
        total_micro_usd: add(&field("training_cost_usd"), serving, training)?,
        savings_micro_usd: savings,
        price_as_of,
        price_source,
        run_ids,
        scenario_id: d.scenario_id.clone(),
        instance_type: price.and(d.instance_type.as_deref()).map(|t| t.trim().to_string()),
        cost_centre: d.cost_centre.as_deref().map(str::trim).filter(|c| !c.is_empty()).map(str::to_string),
        replicas: provisioned,
        needed_replicas: needed.as_ref().map(|(n, _)| *n),
        needed_from: needed.map(|(_, from)| from),
        idle_micro_usd: idle,
        idle_charged_micro_usd: 0,
        growth_per_month: d.growth_per_month,
        forecast_micro_usd: forecast,
        carbon: carbon_of(at, d, prices, price, provisioned, hours, requests)?,
    })
}

/// The deployment's energy and emissions over `hours`, when it gives its power: its
/// provisioned replicas (idle ones draw power too) at the entered draw, with the facility's
/// PUE and the grid's intensity entered or from the grid-intensity table for the catalog row's
/// provider and region.
fn carbon_of(
    at: &str,
    d: &DeploymentInput,
    prices: &Prices<'_>,
    price: Option<&PriceRow>,
    provisioned: Option<u32>,
    hours: i64,
    requests: u64,
) -> Result<Option<RowCarbon>, FieldError> {
    let field = |name: &str| format!("{at}.{name}");
    let Some(watts) = d.power_watts else {
        for (name, given) in [("pue", d.pue.is_some()), ("grid_g_co2e_per_kwh", d.grid_g_co2e_per_kwh.is_some())] {
            if given {
                return Err(FieldError::new(field(name), "needs power_watts, the replicas' average draw"));
            }
        }
        return Ok(None);
    };
    let (Some(p), Some(replicas)) = (price, provisioned) else {
        return Err(FieldError::new(
            field("power_watts"),
            "needs instance_type with replicas: energy is counted by the replica-hour",
        ));
    };
    let listed = p.region.as_deref().and_then(|region| prices.grid.get(&(p.provider.as_str(), region)).copied());
    let unlisted = |name: &str, what: &str| {
        let region = p.region.as_deref().unwrap_or("(no region)");
        FieldError::new(field(name), format!("{} {region} is not in the grid-intensity table; give {what}", p.provider))
    };
    let grid = match (d.grid_g_co2e_per_kwh, listed) {
        (Some(g), _) => g,
        (None, Some(row)) => row.g_co2e_per_kwh,
        (None, None) => return Err(unlisted("grid_g_co2e_per_kwh", "the grid's g CO2e per kWh")),
    };
    let pue = match (d.pue, listed) {
        (Some(pue), _) => pue,
        (None, Some(row)) => row.pue,
        (None, None) => return Err(unlisted("pue", "the facility's PUE")),
    };
    // Which figures came from the table, and which row of which version.
    let grid_from = match (listed, d.grid_g_co2e_per_kwh.is_none(), d.pue.is_none()) {
        (Some(row), grid_listed, pue_listed) if grid_listed || pue_listed => format!(
            "{} from {} {} grid-intensity v{}: {} (as of {})",
            match (grid_listed, pue_listed) {
                (true, true) => "grid and PUE",
                (true, false) => "grid (PUE entered)",
                _ => "PUE (grid entered)",
            },
            row.provider,
            row.region,
            prices.grid_version,
            row.source,
            row.as_of
        ),
        _ => "entered".to_string(),
    };
    let named = |e: model::ModelError| {
        let name = match e.field.as_str() {
            "grid_g_co2e_per_kwh" | "pue" | "power_watts" => e.field.clone(),
            _ => "power_watts".to_string(),
        };
        FieldError::new(field(&name), e.reason)
    };
    let replica_hours = f64::from(replicas) * hours as f64;
    let energy_kwh = carbon::facility_kwh(watts, pue, replica_hours).map_err(named)?;
    let co2e_g = carbon::co2e_g(energy_kwh, grid).map_err(named)?;
    Ok(Some(RowCarbon {
        power_watts: watts,
        power_source: d.power_source.unwrap_or(PowerSource::Entered),
        pue,
        grid_g_co2e_per_kwh: grid,
        grid_from,
        energy_kwh,
        co2e_kg: co2e_g / 1000.0,
        co2e_g_per_1000_requests: (requests > 0).then(|| co2e_g / requests as f64 * 1000.0),
    }))
}

/// The replicas deployment `d` needs at its SLO and where that came from: entered, or sized
/// from `d.sizing` at its peak rate. `None` when it says neither.
/// A fleet that needs more than it runs says so where its need is shown.
fn needed_replicas(
    at: &str,
    d: &DeploymentInput,
    provisioned: Option<u32>,
) -> Result<Option<(u32, String)>, FieldError> {
    let field = |name: &str| format!("{at}.{name}");
    let Some(provisioned) = provisioned else {
        if d.needed_replicas.is_some() || d.sizing.is_some() {
            let name = if d.sizing.is_some() { "sizing" } else { "needed_replicas" };
            return Err(FieldError::new(field(name), "needs instance_type with replicas: only replicas can be idle"));
        }
        return Ok(None);
    };
    let (needed, from) = match (d.needed_replicas, &d.sizing) {
        (Some(_), Some(_)) => return Err(FieldError::new(field("sizing"), "give needed_replicas or sizing, not both")),
        (None, None) => return Ok(None),
        (Some(n), None) => {
            if n == 0 && d.requests_per_month > 0 {
                return Err(FieldError::new(
                    field("needed_replicas"),
                    "must be 1 or more for a deployment that serves requests",
                ));
            }
            if n > model::plan::queue::MAX_REPLICAS {
                let most = model::plan::queue::MAX_REPLICAS;
                return Err(FieldError::new(field("needed_replicas"), format!("must be at most {most}")));
            }
            (n, "entered".to_string())
        }
        (None, Some(s)) => {
            // A deployment that serves nothing needs none; its sizing is still checked, at one
            // request a month.
            let needed = s.replicas_for(at, d.requests_per_month.max(1) as f64)?;
            (if d.requests_per_month == 0 { 0 } else { needed }, s.describe())
        }
    };
    let from = if needed > provisioned {
        format!("{from}; more than the {provisioned} provisioned: none idle, and the forecast runs the need")
    } else {
        from
    };
    Ok(Some((needed, from)))
}

impl Sizing {
    /// The fewest replicas that hold the SLO for `requests_per_month` (errors name the fields
    /// of deployment `at`).
    fn replicas_for(&self, at: &str, requests_per_month: f64) -> Result<u32, FieldError> {
        let sizing = |reason: String, name: &str| FieldError::new(format!("{at}.sizing.{name}"), reason);
        if !(self.peak_to_average.is_finite() && (1.0..=1000.0).contains(&self.peak_to_average)) {
            return Err(sizing("must be between 1 and 1000".into(), "peak_to_average"));
        }
        let input = model::plan::queue::ReplicaInput {
            arrival_rate_rps: model::units::PerSecond(requests_per_month / SECONDS_PER_MONTH),
            service_time_mean_s: model::units::Seconds(self.service_time_s),
            service_time_cv: self.service_time_cv,
            slo_latency_s: model::units::Seconds(self.slo_latency_s),
            slo_quantile: self.slo_quantile,
            max_utilization: self.max_utilization,
            burst_factor: self.peak_to_average,
        };
        let plan = model::plan::queue::size_replicas(&input).map_err(|e| {
            // The model names its own inputs; say them as this request does.
            let name = match e.field.as_str() {
                "service_time_mean_s" => "service_time_s",
                "burst_factor" => "peak_to_average",
                "arrival_rate_rps" => return FieldError::new(format!("{at}.requests_per_month"), e.reason),
                other => other,
            };
            sizing(e.reason, name)
        })?;
        Ok(plan.replicas)
    }

    /// How the needed replicas were sized, as the exports say it.
    fn describe(&self) -> String {
        format!(
            "M/G/c: {} ≤ {} s at {}× the average rate, ≤ {}% busy, service {} s (cv {})",
            model::plan::queue::quantile_name(self.slo_quantile),
            self.slo_latency_s,
            self.peak_to_average,
            (self.max_utilization * 1000.0).round() / 10.0,
            self.service_time_s,
            self.service_time_cv
        )
    }
}

/// What a deployment is priced by, for its forecast.
enum Pricing {
    /// An hourly price for each of `replicas`, of which the volume needs `needed` (when known).
    Replicas {
        hourly: MicroUsd,
        replicas: u32,
        needed: Option<u32>,
    },
    PerRequest(MicroUsd),
}

/// Spend in each of the [`forecast::MONTHS`] months after the report's (module
/// `model::plan::forecast`): serving at the month's volume plus training.
fn forecast_of(
    at: &str,
    d: &DeploymentInput,
    pricing: &Pricing,
    training_month: MicroUsd,
) -> Result<Vec<MicroUsd>, FieldError> {
    let field = format!("{at}.growth_per_month");
    let g = forecast::growth(&field, d.growth_per_month)?;
    let refused = |m: u32, what: &str| FieldError::new(&field, format!("month {m} of the forecast {what}"));
    (1..=forecast::MONTHS)
        .map(|m| {
            let too_large = || refused(m, TOO_LARGE);
            let serving = match *pricing {
                Pricing::PerRequest(micros) => {
                    let volume = forecast::volume(d.requests_per_month as f64, g, m);
                    scaled(&field, micros, volume).map_err(|_| too_large())?
                }
                Pricing::Replicas { hourly, replicas, needed } => {
                    let (base, spare) = match needed {
                        Some(needed) => (needed, replicas.saturating_sub(needed)),
                        None => (replicas, 0),
                    };
                    let running = forecast::scaled(base, g, m)
                        .and_then(|n| n.checked_add(spare))
                        .ok_or_else(|| refused(m, "needs more replicas than a count holds"))?;
                    rent(&field, hourly, running, model::calendar::HOURS_PER_MONTH as i64).map_err(|_| too_large())?
                }
            };
            serving.checked_add(training_month).ok_or_else(too_large)
        })
        .collect()
}

pub const KINDS: [Kind; 4] = [Kind::RightSizing, Kind::Quantization, Kind::Distillation, Kind::Transport];

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::RightSizing => "right_sizing",
        Kind::Quantization => "quantization",
        Kind::Distillation => "distillation",
        Kind::Transport => "transport",
    }
}

/// The report's table: one row per deployment, money in USD (exact conversions of the integer
/// micro-dollars), dates as dates.
pub fn frame(report: &Report) -> PolarsResult<DataFrame> {
    frame_of(report, &report.rows)
}

/// [`frame`] over `rows` of `report` (none: the columns alone).
fn frame_of(report: &Report, rows: &[ReportRow]) -> PolarsResult<DataFrame> {
    let n = rows.len();
    let usd = |f: &dyn Fn(&ReportRow) -> MicroUsd| -> Vec<f64> { rows.iter().map(|r| to_usd(f(r))).collect() };
    let text = |f: &dyn Fn(&ReportRow) -> String| -> Vec<String> { rows.iter().map(f).collect() };
    let (from, to) = (day(&report.from).days_since_epoch(), day(&report.to).days_since_epoch());
    let date = |name: &str, day: i32| -> PolarsResult<Column> {
        Ok(Series::new(name.into(), vec![day; n]).cast(&DataType::Date)?.into_column())
    };
    let mut columns = vec![
        Column::new("deployment".into(), text(&|r| r.deployment.clone())),
        Column::new("team".into(), text(&|r| r.team.clone())),
        Column::new("configuration".into(), text(&|r| r.configuration.clone())),
        date("period_from", from)?,
        date("period_to", to)?,
        Column::new("requests".into(), rows.iter().map(|r| r.requests).collect::<Vec<u64>>()),
        Column::new("serving_usd".into(), usd(&|r| r.serving_micro_usd)),
        Column::new("training_usd".into(), usd(&|r| r.training_micro_usd)),
        Column::new("total_usd".into(), usd(&|r| r.total_micro_usd)),
        Column::new(
            "cost_per_request_usd".into(),
            report
                .rows
                .iter()
                .map(|r| if r.requests == 0 { None } else { Some(to_usd(r.total_micro_usd) / r.requests as f64) })
                .collect::<Vec<Option<f64>>>(),
        ),
    ];
    for kind in KINDS {
        columns.push(Column::new(
            format!("saving_{}_usd", kind_name(kind)).into(),
            usd(&|r| r.savings_micro_usd.get(&kind).copied().unwrap_or(0)),
        ));
    }
    columns.extend([
        Column::new("price_catalog_version".into(), vec![report.catalog_version; n]),
        Column::new("price_as_of".into(), rows.iter().map(|r| r.price_as_of.clone()).collect::<Vec<Option<String>>>()),
        Column::new("price_source".into(), text(&|r| r.price_source.clone())),
        Column::new(
            "benchmark_run_ids".into(),
            text(&|r| r.run_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(" ")),
        ),
        Column::new("scenario_id".into(), rows.iter().map(|r| r.scenario_id.clone()).collect::<Vec<Option<String>>>()),
        Column::new("report_id".into(), vec![report.id.clone(); n]),
        Column::new("generated_at".into(), vec![model::format::utc_iso(report.generated_at_ms); n]),
        Column::new("generated_by".into(), vec![report.generated_by.clone(); n]),
        Column::new("cost_centre".into(), rows.iter().map(|r| r.cost_centre.clone()).collect::<Vec<Option<String>>>()),
        Column::new("replicas".into(), rows.iter().map(|r| r.replicas).collect::<Vec<Option<u32>>>()),
        Column::new("needed_replicas".into(), rows.iter().map(|r| r.needed_replicas).collect::<Vec<Option<u32>>>()),
        Column::new("needed_from".into(), rows.iter().map(|r| r.needed_from.clone()).collect::<Vec<Option<String>>>()),
        Column::new("idle_usd".into(), usd(&|r| r.idle_micro_usd)),
        Column::new("idle_charged_usd".into(), usd(&|r| r.idle_charged_micro_usd)),
        Column::new("chargeback_usd".into(), usd(&|r| r.chargeback_micro_usd())),
        Column::new("idle_policy".into(), vec![report.idle_policy.name().to_string(); n]),
    ]);
    let carbon =
        |f: &dyn Fn(&RowCarbon) -> f64| -> Vec<Option<f64>> { rows.iter().map(|r| r.carbon.as_ref().map(f)).collect() };
    let carbon_text = |f: &dyn Fn(&RowCarbon) -> String| -> Vec<Option<String>> {
        rows.iter().map(|r| r.carbon.as_ref().map(f)).collect()
    };
    columns.extend([
        Column::new("power_watts".into(), carbon(&|c| c.power_watts)),
        Column::new("power_source".into(), carbon_text(&|c| c.power_source.describe().to_string())),
        Column::new("pue".into(), carbon(&|c| c.pue)),
        Column::new("grid_g_co2e_per_kwh".into(), carbon(&|c| c.grid_g_co2e_per_kwh)),
        Column::new("grid_from".into(), carbon_text(&|c| c.grid_from.clone())),
        Column::new("energy_kwh".into(), carbon(&|c| c.energy_kwh)),
        Column::new("co2e_kg".into(), carbon(&|c| c.co2e_kg)),
        Column::new(
            "co2e_g_per_1000_requests".into(),
            rows.iter().map(|r| r.carbon.as_ref().and_then(|c| c.co2e_g_per_1000_requests)).collect::<Vec<_>>(),
        ),
    ]);
    DataFrame::new(n, columns)
}

/// How the emissions columns are computed, as the workbook's About sheet says it.
pub const CARBON_METHOD: &str = "location-based: provisioned replicas × power per replica × hours × PUE = \
     energy; × the grid's g CO2e per kWh = emissions; embodied emissions not counted";

/// A quantity in thousandths, as the CSV shows it and sums it (so the TOTAL line adds up as
/// shown): kWh to the Wh, kg to the gram.
fn thousandths(x: f64) -> i64 {
    (x * 1000.0).round() as i64
}

fn show_thousandths(t: i64) -> String {
    format!("{}{}.{:03}", if t < 0 { "-" } else { "" }, t.unsigned_abs() / 1000, t.unsigned_abs() % 1000)
}

/// The label finance reads for a column of [`frame`] (whose names stay machine names in
/// Parquet).
pub(crate) fn label(column: &str) -> String {
    let fixed = match column {
        "deployment" => "Deployment",
        "team" => "Team",
        "configuration" => "Configuration",
        "period_from" => "Period from",
        "period_to" => "Period to",
        "requests" => "Requests",
        "serving_usd" => "Serving (USD)",
        "training_usd" => "Training (USD)",
        "total_usd" => "Total (USD)",
        "cost_per_request_usd" => "Cost per request (USD)",
        "total_exact_micro_usd" => "Total (exact micro-USD)",
        "price_catalog_version" => "Price catalog version",
        "price_as_of" => "Price as of",
        "price_source" => "Price source",
        "benchmark_run_ids" => "Benchmark run ids",
        "scenario_id" => "Scenario id",
        "report_id" => "Report id",
        "generated_at" => "Generated at (UTC)",
        "generated_by" => "Generated by",
        "cost_centre" => "Cost centre",
        "replicas" => "Replicas",
        "needed_replicas" => "Needed replicas",
        "needed_from" => "Needed from",
        "idle_usd" => "Idle (USD)",
        "idle_charged_usd" => "Idle charged (USD)",
        "chargeback_usd" => "Chargeback (USD)",
        "idle_policy" => "Idle cost policy",
        "deployments" => "Deployments",
        "used_serving_usd" => "Used serving (USD)",
        "chargeback_exact_micro_usd" => "Chargeback (exact micro-USD)",
        "scope" => "Scope",
        "name" => "Name",
        "month" => "Month",
        "spend_usd" => "Spend (USD)",
        "spend_exact_micro_usd" => "Spend (exact micro-USD)",
        "budget_usd" => "Budget (USD)",
        "over_budget" => "Over budget",
        "power_watts" => "Power per replica (W)",
        "power_source" => "Power source",
        "pue" => "PUE",
        "grid_g_co2e_per_kwh" => "Grid (g CO2e per kWh)",
        "grid_from" => "Grid intensity from",
        "energy_kwh" => "Energy (kWh)",
        "co2e_kg" => "Emissions (kg CO2e)",
        "co2e_g_per_1000_requests" => "g CO2e per 1,000 requests",
        other => {
            return match other.strip_prefix("saving_").and_then(|k| k.strip_suffix("_usd")) {
                Some(kind) => format!("Saving from {} (USD)", kind.replace('_', "-")),
                None => other.to_string(),
            };
        }
    };
    fixed.to_string()
}

/// The table as CSV for finance: a header row of labels, money in cents (a row's total is its
/// serving plus its training as shown), an exact micro-dollar total beside it, text cells neutralised against formulas, then a `TOTAL` line whose cent
/// columns are the sums of the cents above (so the file adds up as shown) and whose exact
/// column is the exact total.
pub fn to_csv(report: &Report) -> PolarsResult<Vec<u8>> {
    let text = |t: &str| crate::csv_cell::neutral(t).into_owned();
    let per_request = |micros: MicroUsd, requests: u64| {
        if requests == 0 {
            String::new()
        } else {
            let usd = to_usd(micros) / requests as f64;
            format!("{usd:.10}").trim_end_matches('0').trim_end_matches('.').to_string()
        }
    };
    let mut header: Vec<String> =
        frame(&Report { rows: vec![], ..report.clone() })?.get_column_names().iter().map(|n| label(n)).collect();
    // The exact total sits after the savings, before the provenance columns.
    header.insert(10 + KINDS.len(), label("total_exact_micro_usd"));
    let provenance = [report.id.clone(), model::format::utc_iso(report.generated_at_ms), text(&report.generated_by)];
    let mut out = csv::Writer::from_writer(Vec::new());
    let fail = |e: csv::Error| PolarsError::ComputeError(e.to_string().into());
    out.write_record(&header).map_err(fail)?;
    let mut sums = [0i64; 3 + KINDS.len()];
    // Idle, idle charged and chargeback, in cents as shown.
    let mut idle_sums = [0i64; 3];
    let cents = |c: i64| model::money::format_cents(c.saturating_mul(10_000));
    let shown_idle = crate::chargeback::idle_cents(report);
    // Energy and emissions in thousandths, as shown.
    let mut carbon_sums = [0i64; 2];
    for (r, &(idle, charged)) in report.rows.iter().zip(&shown_idle) {
        let money = [r.serving_micro_usd, r.training_micro_usd, r.total_micro_usd]
            .into_iter()
            .chain(KINDS.iter().map(|k| r.savings_micro_usd.get(k).copied().unwrap_or(0)));
        let mut money: Vec<i64> = money.map(model::money::cents).collect();
        // A row reads across: its total is its serving plus its training as shown.
        money[2] = money[0].saturating_add(money[1]);
        for (sum, c) in sums.iter_mut().zip(&money) {
            *sum = sum.saturating_add(*c);
        }
        let mut record = vec![
            text(&r.deployment),
            text(&r.team),
            text(&r.configuration),
            report.from.clone(),
            report.to.clone(),
            r.requests.to_string(),
        ];
        record.extend(money[..3].iter().map(|c| cents(*c)));
        record.push(per_request(r.total_micro_usd, r.requests));
        record.extend(money[3..].iter().map(|c| cents(*c)));
        record.extend([
            r.total_micro_usd.to_string(),
            report.catalog_version.to_string(),
            r.price_as_of.clone().unwrap_or_default(),
            text(&r.price_source),
            r.run_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(" "),
            text(r.scenario_id.as_deref().unwrap_or_default()),
        ]);
        record.extend(provenance.iter().cloned());
        // The chargeback reads across too: the total shown, less the idle, plus the charge.
        let idle_cents = [idle, charged, money[2].saturating_sub(idle).saturating_add(charged)];
        for (sum, c) in idle_sums.iter_mut().zip(&idle_cents) {
            *sum = sum.saturating_add(*c);
        }
        record.extend([
            text(r.cost_centre.as_deref().unwrap_or_default()),
            r.replicas.map(|n| n.to_string()).unwrap_or_default(),
            r.needed_replicas.map(|n| n.to_string()).unwrap_or_default(),
            text(r.needed_from.as_deref().unwrap_or_default()),
        ]);
        record.extend(idle_cents.iter().map(|c| cents(*c)));
        record.push(report.idle_policy.name().to_string());
        match &r.carbon {
            Some(c) => {
                let (energy, co2e) = (thousandths(c.energy_kwh), thousandths(c.co2e_kg));
                carbon_sums[0] = carbon_sums[0].saturating_add(energy);
                carbon_sums[1] = carbon_sums[1].saturating_add(co2e);
                record.extend([
                    c.power_watts.to_string(),
                    c.power_source.describe().to_string(),
                    c.pue.to_string(),
                    c.grid_g_co2e_per_kwh.to_string(),
                    text(&c.grid_from),
                    show_thousandths(energy),
                    show_thousandths(co2e),
                    c.co2e_g_per_1000_requests.map(|g| format!("{g:.4}")).unwrap_or_default(),
                ]);
            }
            None => record.extend(std::iter::repeat_n(String::new(), 8)),
        }
        out.write_record(&record).map_err(fail)?;
    }
    let requests: u64 = report.rows.iter().map(|r| r.requests).sum();
    let mut total = vec![
        "TOTAL".to_string(),
        String::new(),
        String::new(),
        report.from.clone(),
        report.to.clone(),
        requests.to_string(),
    ];
    total.extend(sums[..3].iter().map(|c| cents(*c)));
    total.push(per_request(report.total_micro_usd(), requests));
    total.extend(sums[3..].iter().map(|c| cents(*c)));
    total.extend([
        report.total_micro_usd().to_string(),
        report.catalog_version.to_string(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]);
    total.extend(provenance.iter().cloned());
    total.extend([String::new(), String::new(), String::new(), String::new()]);
    total.extend(idle_sums.iter().map(|c| cents(*c)));
    total.push(report.idle_policy.name().to_string());
    total.extend(std::iter::repeat_n(String::new(), 5));
    let any_carbon = report.rows.iter().any(|r| r.carbon.is_some());
    total.extend(carbon_sums.iter().map(|t| if any_carbon { show_thousandths(*t) } else { String::new() }));
    total.push(String::new());
    out.write_record(&total).map_err(fail)?;
    out.into_inner().map_err(|e| PolarsError::ComputeError(e.to_string().into()))
}

/// The table as Parquet (rows only; sum a column for its total).
pub fn to_parquet(report: &Report) -> PolarsResult<Vec<u8>> {
    parquet_of(frame(report)?)
}

/// A table as Parquet.
pub(crate) fn parquet_of(mut df: DataFrame) -> PolarsResult<Vec<u8>> {
    let mut out = Vec::new();
    ParquetWriter::new(&mut out).finish(&mut df)?;
    Ok(out)
}

/// The About sheet of every workbook made from `report`: where it came from, then `more`.
pub(crate) fn about_sheet(
    book: &mut rust_xlsxwriter::Workbook,
    report: &Report,
    more: &[(&str, String)],
) -> Result<(), rust_xlsxwriter::XlsxError> {
    let bold = rust_xlsxwriter::Format::new().set_bold();
    let about = book.add_worksheet().set_name("About")?;
    let lines = [
        ("Report", report.name.clone()),
        ("Period", format!("{} to {} ({} days)", report.from, report.to, report.days)),
        ("Report id", report.id.clone()),
        ("Generated at (UTC)", model::format::utc_iso(report.generated_at_ms)),
        ("Generated by", report.generated_by.clone()),
        ("Price catalog version", report.catalog_version.to_string()),
    ];
    for (i, (k, v)) in lines.iter().map(|(k, v)| (*k, v)).chain(more.iter().map(|(k, v)| (*k, v))).enumerate() {
        about.write_string_with_format(i as u32, 0, k, &bold)?;
        about.write_string(i as u32, 1, v)?;
    }
    Ok(())
}

/// The table as an XLSX workbook: numbers as numbers (money formatted as USD), dates as dates,
/// a `TOTAL` row, and a second sheet saying where the figures came from.
pub fn to_xlsx(report: &Report) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
    use rust_xlsxwriter::{ExcelDateTime, Format, Formula, Workbook};
    let df = frame(report).map_err(|e| rust_xlsxwriter::XlsxError::ParameterError(e.to_string()))?;
    let mut book = Workbook::new();
    let money = Format::new().set_num_format("$#,##0.00");
    let tiny = Format::new().set_num_format("$0.000000");
    let date = Format::new().set_num_format("yyyy-mm-dd");
    let bold = Format::new().set_bold();
    let thousandth = Format::new().set_num_format("#,##0.000");
    let ten_thousandth = Format::new().set_num_format("0.0000");
    let sheet = book.add_worksheet().set_name("Report")?;
    let names: Vec<String> = df.get_column_names().iter().map(|n| n.to_string()).collect();
    for (c, name) in names.iter().enumerate() {
        sheet.write_string_with_format(0, c as u16, label(name), &bold)?;
    }
    let excel = |text: &str| -> Result<ExcelDateTime, rust_xlsxwriter::XlsxError> {
        let (y, m, d) = day(text).ymd();
        ExcelDateTime::from_ymd(y as u16, m as u8, d as u8)
    };
    let (from, to) = (excel(&report.from)?, excel(&report.to)?);
    for (i, r) in report.rows.iter().enumerate() {
        let row = i as u32 + 1;
        sheet.write_string(row, 0, &r.deployment)?;
        sheet.write_string(row, 1, &r.team)?;
        sheet.write_string(row, 2, &r.configuration)?;
        sheet.write_datetime_with_format(row, 3, &from, &date)?;
        sheet.write_datetime_with_format(row, 4, &to, &date)?;
        sheet.write_number(row, 5, r.requests as f64)?;
        sheet.write_number_with_format(row, 6, to_usd(r.serving_micro_usd), &money)?;
        sheet.write_number_with_format(row, 7, to_usd(r.training_micro_usd), &money)?;
        sheet.write_number_with_format(row, 8, to_usd(r.total_micro_usd), &money)?;
        if r.requests > 0 {
            sheet.write_number_with_format(row, 9, to_usd(r.total_micro_usd) / r.requests as f64, &tiny)?;
        }
        for (k, kind) in KINDS.iter().enumerate() {
            let v = r.savings_micro_usd.get(kind).copied().unwrap_or(0);
            sheet.write_number_with_format(row, 10 + k as u16, to_usd(v), &money)?;
        }
        sheet.write_number(row, 14, report.catalog_version as f64)?;
        if let Some(as_of) = &r.price_as_of {
            sheet.write_datetime_with_format(row, 15, &excel(as_of)?, &date)?;
        }
        sheet.write_string(row, 16, &r.price_source)?;
        sheet.write_string(row, 17, r.run_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(" "))?;
        sheet.write_string(row, 18, r.scenario_id.as_deref().unwrap_or_default())?;
        sheet.write_string(row, 19, &report.id)?;
        sheet.write_string(row, 20, model::format::utc_iso(report.generated_at_ms))?;
        sheet.write_string(row, 21, &report.generated_by)?;
        sheet.write_string(row, 22, r.cost_centre.as_deref().unwrap_or_default())?;
        for (column, n) in [(23, r.replicas), (24, r.needed_replicas)] {
            if let Some(n) = n {
                sheet.write_number(row, column, f64::from(n))?;
            }
        }
        sheet.write_string(row, 25, r.needed_from.as_deref().unwrap_or_default())?;
        sheet.write_number_with_format(row, 26, to_usd(r.idle_micro_usd), &money)?;
        sheet.write_number_with_format(row, 27, to_usd(r.idle_charged_micro_usd), &money)?;
        sheet.write_number_with_format(row, 28, to_usd(r.chargeback_micro_usd()), &money)?;
        sheet.write_string(row, 29, report.idle_policy.name())?;
        if let Some(c) = &r.carbon {
            sheet.write_number(row, 30, c.power_watts)?;
            sheet.write_string(row, 31, c.power_source.describe())?;
            sheet.write_number(row, 32, c.pue)?;
            sheet.write_number(row, 33, c.grid_g_co2e_per_kwh)?;
            sheet.write_string(row, 34, &c.grid_from)?;
            sheet.write_number_with_format(row, 35, c.energy_kwh, &thousandth)?;
            sheet.write_number_with_format(row, 36, c.co2e_kg, &thousandth)?;
            if let Some(g) = c.co2e_g_per_1000_requests {
                sheet.write_number_with_format(row, 37, g, &ten_thousandth)?;
            }
        }
    }
    // The TOTAL row is formulas over the rows, so a total follows an edited row; each carries
    // the exact micro-dollar sum as its cached result for readers that do not recalculate.
    let total = report.rows.len() as u32 + 1;
    let money_bold = Format::new().set_num_format("$#,##0.00").set_bold();
    sheet.write_string_with_format(total, 0, "TOTAL", &bold)?;
    let sum_of = |column: u16, value: f64| {
        let letter = rust_xlsxwriter::utility::column_number_to_name(column);
        Formula::new(format!("=SUM({letter}2:{letter}{total})")).set_result(value.to_string())
    };
    let requests = report.rows.iter().map(|r| r.requests).sum::<u64>() as f64;
    sheet.write_formula(total, 5, sum_of(5, requests))?;
    let sums = [
        report.rows.iter().map(|r| r.serving_micro_usd).sum::<MicroUsd>(),
        report.rows.iter().map(|r| r.training_micro_usd).sum(),
        report.total_micro_usd(),
    ];
    for (k, s) in sums.iter().enumerate() {
        let column = 6 + k as u16;
        sheet.write_formula_with_format(total, column, sum_of(column, to_usd(*s)), &money_bold)?;
    }
    for (k, kind) in KINDS.iter().enumerate() {
        let column = 10 + k as u16;
        sheet.write_formula_with_format(
            total,
            column,
            sum_of(column, to_usd(report.saving_micro_usd(*kind))),
            &money_bold,
        )?;
    }
    let idle_sums = [
        report.rows.iter().map(|r| r.idle_micro_usd).sum::<MicroUsd>(),
        report.rows.iter().map(|r| r.idle_charged_micro_usd).sum(),
        report.rows.iter().map(ReportRow::chargeback_micro_usd).sum(),
    ];
    for (k, s) in idle_sums.iter().enumerate() {
        let column = 26 + k as u16;
        sheet.write_formula_with_format(total, column, sum_of(column, to_usd(*s)), &money_bold)?;
    }
    if report.rows.iter().any(|r| r.carbon.is_some()) {
        let bold_thousandth = Format::new().set_num_format("#,##0.000").set_bold();
        let energy = report.rows.iter().filter_map(|r| r.carbon.as_ref()).map(|c| c.energy_kwh).sum::<f64>();
        let co2e = report.rows.iter().filter_map(|r| r.carbon.as_ref()).map(|c| c.co2e_kg).sum::<f64>();
        sheet.write_formula_with_format(total, 35, sum_of(35, energy), &bold_thousandth)?;
        sheet.write_formula_with_format(total, 36, sum_of(36, co2e), &bold_thousandth)?;
    }
    sheet.set_freeze_panes(1, 1)?;
    sheet.autofit();
    about_sheet(
        &mut book,
        report,
        &[
            ("Money", "computed in integer micro-dollars; shown rounded to cents".to_string()),
            ("Requests", format!("requests per month × days / {DAYS_PER_MONTH}")),
            ("Idle cost policy", format!("{}: {}", report.idle_policy.name(), report.idle_policy.describe())),
            ("Emissions", CARBON_METHOD.to_string()),
            (
                "Grid-intensity table version",
                if report.grid_version > 0 { report.grid_version.to_string() } else { "none used".to_string() },
            ),
        ],
    )?;
    book.save_to_buffer()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<PriceRow> {
        crate::prices::parse(crate::prices::DEFAULT_CATALOG).unwrap()
    }

    fn request(deployments: Vec<DeploymentInput>) -> ReportRequest {
        ReportRequest {
            name: "November".into(),
            from: "2026-11-01".into(),
            to: "2026-11-30".into(),
            deployments,
            idle_policy: IdlePolicy::Owner,
        }
    }

    fn deployment(instance: &str, replicas: u32) -> DeploymentInput {
        DeploymentInput {
            name: "ranker".into(),
            team: Some("search".into()),
            cost_centre: None,
            instance_type: Some(instance.into()),
            purchase_option: "on_demand".into(),
            region: None,
            replicas: Some(replicas),
            needed_replicas: None,
            sizing: None,
            serving_cost_per_request_usd: None,
            requests_per_month: 100_000_000,
            growth_per_month: 0.0,
            training_cost_usd: Some(Amount::Text("20000".into())),
            retrains_per_month: 1.0,
            run_ids: vec![],
            scenario_id: None,
            recommendations: vec![],
            power_watts: None,
            power_source: None,
            pue: None,
            grid_g_co2e_per_kwh: None,
        }
    }

    #[test]
    fn dates_round_trip() {
        let days = |text: &str| Date::parse(text).ok().map(Date::days_since_epoch);
        assert_eq!(days("1970-01-01"), Some(0));
        assert_eq!(days("2000-02-29"), Some(11_016));
        assert_eq!(days("2026-02-29"), None);
        assert_eq!(Date::parse("2026-11-30").unwrap().ymd(), (2026, 11, 30));
    }

    #[test]
    fn serving_is_price_times_replicas_times_hours_exactly() {
        let catalog = catalog();
        let mut d = deployment("g5.xlarge", 4);
        d.recommendations = vec![
            RecommendationInput::alternative(Kind::RightSizing, "g6.xlarge", 3),
            RecommendationInput::cheaper_model(Kind::Distillation, 0.25, 3000.0),
        ];
        let r = build("r".into(), &request(vec![d]), &Prices::new(&catalog), 1, &|_| true, &|_| true).unwrap();
        let row = &r.rows[0];
        // 1.006 USD × 4 replicas × 720 hours.
        assert_eq!(row.serving_micro_usd, 1_006_000 * 4 * 720);
        assert_eq!(row.total_micro_usd, row.serving_micro_usd + row.training_micro_usd);
        assert_eq!(row.savings_micro_usd[&Kind::RightSizing], (1_006_000 * 4 - 804_800 * 3) * 720);
        let months = 30.0 / DAYS_PER_MONTH;
        assert_eq!(row.training_micro_usd, (20_000_000_000.0 * months).round() as i64);
        let distill = (row.serving_micro_usd as f64 * 0.25).round() as i64 - (3_000_000_000.0 * months).round() as i64;
        assert_eq!(row.savings_micro_usd[&Kind::Distillation], distill);
        assert_eq!(row.price_as_of.as_deref(), Some("2024-06-01"));
    }

    /// Before checked arithmetic these panicked (debug) or wrapped/saturated (release).
    #[test]
    fn amounts_past_what_a_report_holds_name_the_field() {
        let catalog = catalog();
        let prices = Prices::new(&catalog);
        let refuse = |d: DeploymentInput, longer: bool| {
            let mut r = request(vec![d]);
            if longer {
                r.to = "2036-10-30".into();
            }
            build("r".into(), &r, &prices, 1, &|_| true, &|_| true).unwrap_err()
        };
        let err = refuse(deployment("p5.48xlarge", u32::MAX), true);
        assert_eq!(err.field, "deployments[0].replicas", "{err:?}");
        assert!(err.reason.contains("larger than a report can hold"), "{err:?}");

        let mut d = deployment("g5.xlarge", 1);
        d.training_cost_usd = Some(Amount::Number(9e12));
        d.retrains_per_month = 30.0;
        assert_eq!(refuse(d, false).field, "deployments[0].training_cost_usd");

        let mut d = deployment("g5.xlarge", 1);
        d.instance_type = None;
        d.replicas = None;
        d.serving_cost_per_request_usd = Some(Amount::Text("9000000".into()));
        d.requests_per_month = MAX_REQUESTS_PER_MONTH;
        assert_eq!(refuse(d, false).field, "deployments[0].serving_cost_per_request_usd");

        let mut d = deployment("g5.xlarge", 1);
        d.requests_per_month = u64::MAX;
        assert_eq!(refuse(d, false).field, "deployments[0].requests_per_month");

        let mut d = deployment("g5.xlarge", 1);
        d.recommendations = vec![RecommendationInput::alternative(Kind::RightSizing, "p5.48xlarge", u32::MAX)];
        assert_eq!(refuse(d, true).field, "deployments[0].recommendations[0].replicas");

        // Each row fits, the sum does not.
        let mut big = deployment("g5.xlarge", 1);
        big.training_cost_usd = Some(Amount::Text("4000000000000".into()));
        big.retrains_per_month = DAYS_PER_MONTH / 30.0;
        let err = build("r".into(), &request(vec![big.clone(), big.clone(), big]), &prices, 1, &|_| true, &|_| true)
            .unwrap_err();
        assert_eq!(err.field, "deployments", "{err:?}");
    }

    #[test]
    fn wrong_deployments_name_the_field() {
        let catalog = catalog();
        let prices = Prices::new(&catalog);
        let bad = |d: DeploymentInput| {
            build("r".into(), &request(vec![deployment("g5.xlarge", 1), d]), &prices, 1, &|_| false, &|_| true)
                .unwrap_err()
                .field
        };
        assert_eq!(bad(deployment("nope.large", 1)), "deployments[1].instance_type");
        assert_eq!(bad(deployment("g5.xlarge", 0)), "deployments[1].replicas");
        let mut d = deployment("g5.xlarge", 1);
        d.run_ids = vec![Uuid::nil()];
        assert_eq!(bad(d), "deployments[1].run_ids[0]");
        let mut d = deployment("g5.xlarge", 1);
        d.training_cost_usd = Some(Amount::Number(-1.0));
        assert_eq!(bad(d), "deployments[1].training_cost_usd");
    }

    #[test]
    fn a_report_sizes_at_most_max_sized_deployments_and_says_which_one_is_too_many() {
        let catalog = catalog();
        let sized = |n: usize| {
            let deployments = (0..n)
                .map(|_| DeploymentInput {
                    sizing: Some(Sizing {
                        service_time_s: 0.05,
                        service_time_cv: 1.0,
                        slo_latency_s: 1.0,
                        slo_quantile: 0.99,
                        max_utilization: 0.9,
                        peak_to_average: 1.0,
                    }),
                    ..deployment("g5.xlarge", 4)
                })
                .collect();
            build("r".into(), &request(deployments), &Prices::new(&catalog), 1, &|_| true, &|_| true)
        };
        let err = sized(MAX_SIZED + 1).unwrap_err();
        assert_eq!(err.field, format!("deployments[{MAX_SIZED}].sizing"), "{err:?}");
        // 100M requests a month is 38/s; at 50 ms that is 1.9 busy: 3 replicas at most 90 % busy
        // hold a p99 of 1 s, so the fourth is idle.
        let r = sized(3).unwrap();
        assert_eq!(r.rows[0].needed_replicas, Some(3));
        assert_eq!(r.rows[0].idle_micro_usd, 1_006_000 * 720);
        assert_eq!(r.forecast_from, "2026-12");
        // Flat volume: every month the same 4 replicas for 730 hours, and a retrain of 20,000 USD.
        assert_eq!(r.rows[0].forecast_micro_usd, vec![4 * 1_006_000 * 730 + 20_000_000_000; 12]);
    }

    /// Found by an attacker's review: seven equal shares of an idle pool each rounded to the
    /// same cent left the chargeback column three cents short of the total in the files.
    #[test]
    fn shared_idle_cents_add_up_to_the_total_shown_in_both_files() {
        let catalog = catalog();
        let mut deployments: Vec<DeploymentInput> = (0..7)
            .map(|i| DeploymentInput {
                name: format!("d{i}"),
                team: Some(format!("team-{i}")),
                training_cost_usd: None,
                ..deployment("g5.xlarge", 1)
            })
            .collect();
        deployments[0].replicas = Some(2);
        deployments[0].needed_replicas = Some(1);
        let mut req = request(deployments);
        req.idle_policy = IdlePolicy::Proportional;
        let r = build("r".into(), &req, &Prices::new(&catalog), 1, &|_| true, &|_| true).unwrap();
        let read = |bytes: Vec<u8>| {
            let mut reader = csv::Reader::from_reader(bytes.as_slice());
            let header = reader.headers().unwrap().clone();
            let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
            let total = records.last().unwrap().clone();
            let cents = move |name: &str| {
                let at = header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
                total[at].replace('.', "").parse::<i64>().unwrap()
            };
            (cents("Chargeback (USD)"), records.len())
        };
        let report_csv = to_csv(&r).unwrap();
        let mut reader = csv::Reader::from_reader(report_csv.as_slice());
        let header = reader.headers().unwrap().clone();
        let last = reader.records().map(Result::unwrap).last().unwrap();
        let total_cents =
            last[header.iter().position(|h| h == "Total (USD)").unwrap()].replace('.', "").parse::<i64>().unwrap();
        let (report_chargeback, _) = read(report_csv);
        assert_eq!(report_chargeback, total_cents, "the report's chargeback column adds up to its total");
        let (teams_chargeback, lines) = read(crate::chargeback::to_csv(&r).unwrap());
        assert_eq!(lines, 8, "seven teams and TOTAL");
        assert_eq!(teams_chargeback, total_cents, "the teams' file adds up to the report's total");
        // The exact shares: 724.32 USD of idle in sevenths, the leftover micro-dollars first.
        let charged: Vec<i64> = r.rows.iter().map(|row| row.idle_charged_micro_usd).collect();
        assert_eq!(charged.iter().sum::<i64>(), 1_006_000 * 720);
        assert!(charged.iter().all(|c| (103_474_285..=103_474_286).contains(c)), "{charged:?}");
    }

    #[test]
    fn a_need_of_none_for_a_deployment_that_serves_is_refused() {
        let catalog = catalog();
        let mut d = deployment("g5.xlarge", 4);
        d.needed_replicas = Some(0);
        let err = build("r".into(), &request(vec![d]), &Prices::new(&catalog), 1, &|_| true, &|_| true).unwrap_err();
        assert_eq!(err.field, "deployments[0].needed_replicas");
        // More than provisioned is taken, and said.
        let mut d = deployment("g5.xlarge", 4);
        d.needed_replicas = Some(6);
        let r = build("r".into(), &request(vec![d]), &Prices::new(&catalog), 1, &|_| true, &|_| true).unwrap();
        assert_eq!(r.rows[0].idle_micro_usd, 0);
        assert!(r.rows[0].needed_from.as_deref().unwrap().contains("more than the 4 provisioned"), "{:?}", r.rows[0]);
        assert_eq!(r.rows[0].forecast_micro_usd[0], 6 * 1_006_000 * 730 + 20_000_000_000);
    }

    #[test]
    fn every_format_totals_to_the_sum_of_its_rows() {
        let catalog = catalog();
        let deployments =
            (0..50).map(|i| deployment(if i % 2 == 0 { "g5.xlarge" } else { "p4d.24xlarge" }, 1 + i % 5)).collect();
        let r = build("r".into(), &request(deployments), &Prices::new(&catalog), 1, &|_| true, &|_| true).unwrap();
        let csv = String::from_utf8(to_csv(&r).unwrap()).unwrap();
        let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(csv.as_bytes());
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        let lines: Vec<Vec<&str>> = records.iter().map(|r| r.iter().collect()).collect();
        assert_eq!(lines.len(), 52, "header, 50 rows, total");
        assert_eq!((lines[0][8], lines[0][14]), ("Total (USD)", "Total (exact micro-USD)"));
        let last = &lines[51];
        assert_eq!(last[0], "TOTAL");
        // The cents add up as shown; the exact column is the exact total.
        let cents: i64 = lines[1..51].iter().map(|l| l[8].replace('.', "").parse::<i64>().unwrap()).sum();
        assert_eq!(last[8].replace('.', "").parse::<i64>().unwrap(), cents);
        let total: MicroUsd = r.rows.iter().map(|x| x.total_micro_usd).sum();
        assert_eq!(last[14], total.to_string());
        assert!(lines[1..].iter().all(|l| l[6].split('.').nth(1).map(str::len) == Some(2)), "money in cents");
        let c = |s: &str| s.replace('.', "").parse::<i64>().unwrap();
        assert!(lines[1..].iter().all(|l| c(l[6]) + c(l[7]) == c(l[8])), "serving + training = total, as shown");
    }

    #[test]
    fn emissions_are_the_replicas_power_over_the_period_on_the_regions_grid() {
        let catalog = catalog();
        let grid = crate::grid::parse(crate::grid::DEFAULT_TABLE).unwrap();
        let prices = Prices::new(&catalog).with_grid(&grid, 3);
        let mut d = deployment("g5.xlarge", 4);
        d.power_watts = Some(300.0);
        d.power_source = Some(PowerSource::Measured);
        let mut other = deployment("g6.xlarge", 2);
        other.name = "entered grid".into();
        other.power_watts = Some(100.0);
        other.pue = Some(1.5);
        other.grid_g_co2e_per_kwh = Some(50.0);
        let r =
            build("r".into(), &request(vec![d, other, deployment("g5.xlarge", 1)]), &prices, 1, &|_| true, &|_| true)
                .unwrap();
        assert_eq!(r.grid_version, 3);
        // 4 × 0.3 kW × 1.135 (AWS) × 720 h = 980.64 kWh; × 379.069 g (us-east-1) = 371.73 kg.
        let c = r.rows[0].carbon.as_ref().unwrap();
        assert!((c.energy_kwh - 980.64).abs() < 1e-9, "{c:?}");
        assert!((c.co2e_kg - 980.64 * 0.379069).abs() < 1e-9, "{c:?}");
        let per_1000 = c.co2e_kg * 1000.0 / r.rows[0].requests as f64 * 1000.0;
        assert!((c.co2e_g_per_1000_requests.unwrap() - per_1000).abs() < 1e-12);
        assert!(
            c.grid_from.starts_with("grid and PUE from aws us-east-1 grid-intensity v3: EPA eGRID2020"),
            "{}",
            c.grid_from
        );
        assert_eq!(c.power_source, PowerSource::Measured);
        let e = r.rows[1].carbon.as_ref().unwrap();
        assert_eq!((e.grid_from.as_str(), e.pue, e.power_source), ("entered", 1.5, PowerSource::Entered));
        assert!((e.co2e_kg - 2.0 * 0.1 * 1.5 * 720.0 * 0.05).abs() < 1e-9);
        assert!(r.rows[2].carbon.is_none(), "no power given, no figure");

        // The CSV's energy and emissions columns add up as shown.
        let csv = String::from_utf8(to_csv(&r).unwrap()).unwrap();
        let lines: Vec<csv::StringRecord> =
            csv::ReaderBuilder::new().from_reader(csv.as_bytes()).records().map(Result::unwrap).collect();
        let header: Vec<String> = frame(&Report { rows: vec![], ..r.clone() })
            .unwrap()
            .get_column_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        // The CSV has the exact total as an extra column after the savings.
        let at = |name: &str| header.iter().position(|h| h == name).unwrap() + 1;
        assert_eq!(&lines[0][at("energy_kwh")], "980.640");
        assert_eq!(&lines[0][at("power_source")], "measured");
        assert_eq!(&lines[2][at("energy_kwh")], "");
        let total = &lines[3];
        assert_eq!(&total[0], "TOTAL");
        let shown = |line: &csv::StringRecord, name: &str| line[at(name)].replace('.', "").parse::<i64>().unwrap_or(0);
        assert_eq!(shown(total, "co2e_kg"), shown(&lines[0], "co2e_kg") + shown(&lines[1], "co2e_kg"));
        assert!(to_xlsx(&r).is_ok() && to_parquet(&r).is_ok());

        // Refusals name the field.
        let refused = |f: &dyn Fn(&mut DeploymentInput)| {
            let mut d = deployment("g5.xlarge", 1);
            f(&mut d);
            build("r".into(), &request(vec![d]), &prices, 1, &|_| true, &|_| true).unwrap_err().field
        };
        assert_eq!(refused(&|d| d.power_watts = Some(f64::NAN)), "deployments[0].power_watts");
        assert_eq!(refused(&|d| d.power_watts = Some(-5.0)), "deployments[0].power_watts");
        assert_eq!(refused(&|d| d.pue = Some(1.2)), "deployments[0].pue");
        assert_eq!(
            refused(&|d| {
                d.power_watts = Some(300.0);
                d.grid_g_co2e_per_kwh = Some(9000.0)
            }),
            "deployments[0].grid_g_co2e_per_kwh"
        );
        assert_eq!(
            refused(&|d| {
                d.power_watts = Some(300.0);
                d.pue = Some(0.8)
            }),
            "deployments[0].pue"
        );
        assert_eq!(
            refused(&|d| {
                d.instance_type = None;
                d.serving_cost_per_request_usd = Some(Amount::Text("0.001".into()));
                d.power_watts = Some(300.0)
            }),
            "deployments[0].power_watts"
        );
        // A region the table does not list needs the grid's figure.
        let bare = Prices::new(&catalog);
        let mut d = deployment("g5.xlarge", 1);
        d.power_watts = Some(300.0);
        let err = build("r".into(), &request(vec![d]), &bare, 1, &|_| true, &|_| true).unwrap_err();
        assert_eq!(err.field, "deployments[0].grid_g_co2e_per_kwh");
        assert!(err.reason.contains("aws us-east-1 is not in the grid-intensity table"), "{}", err.reason);
        // An entered grid with the table's PUE says so, and the report records the table's version.
        let mut d = deployment("g5.xlarge", 1);
        d.power_watts = Some(300.0);
        d.grid_g_co2e_per_kwh = Some(10.0);
        let r = build("r".into(), &request(vec![d]), &prices, 1, &|_| true, &|_| true).unwrap();
        let c = r.rows[0].carbon.as_ref().unwrap();
        assert!(c.grid_from.starts_with("PUE (grid entered) from aws us-east-1 grid-intensity v3"), "{}", c.grid_from);
        assert_eq!((c.pue, r.grid_version), (1.135, 3));
        // Sums past what the exports hold are refused, naming the row.
        let huge = (0..3)
            .map(|_| DeploymentInput {
                power_watts: Some(100_000.0),
                grid_g_co2e_per_kwh: Some(2000.0),
                pue: Some(5.0),
                ..deployment("g5.xlarge", 4_000_000)
            })
            .collect();
        let long = ReportRequest { from: "2020-01-01".into(), to: "2029-12-01".into(), ..request(huge) };
        let err = build("r".into(), &long, &prices, 1, &|_| true, &|_| true).unwrap_err();
        assert_eq!(err.field, "deployments[0].power_watts", "{}", err.reason);
    }
}
