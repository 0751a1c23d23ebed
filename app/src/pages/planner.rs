//! The Planner: what a request costs with training amortized over the requests it serves, and
//! whether spending more on training (distillation, quantization-aware training) to serve more
//! cheaply pays back. Everything is computed in the browser by the `model` crate as people type.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{count, grouped, points, usd};
use model::plan::carbon::{Carbon, CarbonInput, carbon};
use model::plan::cost::{
    Amortization, AmortizationInput, BreakEven, BreakEvenInput, CapacityCost, CapacityInput, LatencySlo, SizedBy,
    amortize, break_even, capacity_cost,
};
use model::plan::owned::{OwnedCost, OwnedFleet, OwnedInput, PowerSource, fleet_over, owned_cost};
use model::plan::purchase::{
    CommitmentOffer, CommitmentPlan, PurchaseInput, PurchasePlan, SpotOffer, purchase, replica_hours,
};
use model::plan::uncertainty::{Dist, Uncertainty, UncertaintyInput, simulate};
use model::units::{HOURS_PER_MONTH, PerMonth, PerSecond, Seconds, Usd, UsdPerHour};

use crate::components::charts::{Band, LineChart, Rule as ChartRule, Series, line_chart, tornado};
use crate::components::form::{ChoiceField, FieldSpec, FlagField, Form, NumberField, Rule};
use crate::components::grid_picker::{self, GridPicker, significant};
use crate::components::service_picker::ServicePicker;
use crate::data::{MeasuredNode, MeasuredService};
use crate::pages::scenarios::SaveScenario;

pub const KIND: &str = "planner";

/// Where a replica's power figure came from, as the carbon fields offer it.
const POWER_SOURCES: &[&str] = &["entered", "rated", "measured"];
const POWER_SOURCE_LABELS: &[&str] =
    &["entered", "the datasheet's rated power (an upper bound)", "measured on the node"];

pub const FIELDS: &[FieldSpec] = &[
    FieldSpec { key: "requests", label: "Requests per month", unit: "requests", default: "50M", rule: Rule::Positive },
    FieldSpec { key: "growth", label: "Growth per month", unit: "%", default: "5", rule: Rule::Any },
    FieldSpec {
        key: "retrains",
        label: "Retrains per month",
        unit: "per month",
        default: "1",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "training",
        label: "Cost of one training",
        unit: "USD",
        default: "20000",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "derive", label: "Derive serving cost from hardware", unit: "", default: "0", rule: Rule::Flag },
    FieldSpec {
        key: "serving",
        label: "Serving cost per request",
        unit: "USD",
        default: "0.0001",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "node", label: "Measured node", unit: "", default: "", rule: Rule::Text },
    FieldSpec {
        key: "hourly",
        label: "Price of one replica",
        unit: "USD / hour",
        default: "2.50",
        rule: Rule::Positive,
    },
    FieldSpec {
        key: "throughput",
        label: "Throughput of one replica",
        unit: "requests / s",
        default: "400",
        rule: Rule::Positive,
    },
    FieldSpec {
        key: "concurrency",
        label: "Requests one replica serves at once",
        unit: "requests",
        default: "1",
        rule: Rule::Positive,
    },
    FieldSpec { key: "service", label: "Your service (measured)", unit: "", default: "", rule: Rule::Text },
    FieldSpec { key: "utilization", label: "Target utilization", unit: "%", default: "60", rule: Rule::Percent },
    FieldSpec {
        key: "min_replicas",
        label: "Minimum replicas",
        unit: "replicas",
        default: "1",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "slo_ms",
        label: "Latency SLO (p99)",
        unit: "ms, 0 for none",
        default: "0",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "cv",
        label: "Service time variation (cv)",
        unit: "std dev ÷ mean",
        default: "1",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "commit1",
        label: "1-year commitment discount",
        unit: "% off on demand",
        default: "30",
        rule: Rule::Percent,
    },
    FieldSpec {
        key: "commit3",
        label: "3-year commitment discount",
        unit: "% off on demand",
        default: "50",
        rule: Rule::Percent,
    },
    FieldSpec { key: "spot", label: "Spot discount", unit: "% off on demand", default: "60", rule: Rule::Percent },
    FieldSpec {
        key: "interruptions",
        label: "Spot interruptions per replica",
        unit: "per month",
        default: "2",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "lost_minutes",
        label: "Work lost per interruption",
        unit: "minutes",
        default: "10",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "own", label: "Compare owning the servers", unit: "", default: "0", rule: Rule::Flag },
    FieldSpec {
        key: "own_price",
        label: "Price of one server",
        unit: "USD, net of resale",
        default: "30000",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "own_life", label: "Its life", unit: "months", default: "36", rule: Rule::Positive },
    FieldSpec { key: "own_watts", label: "Its average power draw", unit: "W", default: "700", rule: Rule::NonNegative },
    FieldSpec { key: "own_kwh", label: "Electricity", unit: "USD / kWh", default: "0.12", rule: Rule::NonNegative },
    FieldSpec { key: "own_pue", label: "Facility PUE", unit: "≥ 1", default: "1.4", rule: Rule::Positive },
    FieldSpec {
        key: "own_hosting",
        label: "Hosting and support",
        unit: "USD / month",
        default: "150",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "power_w",
        label: "Average power of one replica",
        unit: "W",
        default: "300",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "power_source",
        label: "That power figure is",
        unit: "",
        default: "entered",
        rule: Rule::Choice(POWER_SOURCES),
    },
    grid_picker::CARBON,
    grid_picker::REGION,
    grid_picker::GRID,
    grid_picker::PUE,
    FieldSpec { key: "optimize", label: "Consider distillation or QAT", unit: "", default: "1", rule: Rule::Flag },
    FieldSpec {
        key: "extra",
        label: "Extra training cost per retrain",
        unit: "USD",
        default: "3000",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "saving", label: "Serving cost saved", unit: "%", default: "25", rule: Rule::Percent },
    FieldSpec { key: "accuracy", label: "Accuracy change", unit: "points", default: "-0.3", rule: Rule::Any },
    FieldSpec { key: "uncertain", label: "Uncertainty: enter ranges", unit: "", default: "0", rule: Rule::Flag },
    FieldSpec {
        key: "requests_pm", label: "Requests per month, ±", unit: "%", default: "30", rule: Rule::NonNegative
    },
    FieldSpec {
        key: "training_pm",
        label: "Cost of one training, ±",
        unit: "%",
        default: "25",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "serving_pm",
        label: "Serving cost per request, ±",
        unit: "%",
        default: "25",
        rule: Rule::NonNegative,
    },
    FieldSpec { key: "saving_pm", label: "Serving cost saved, ±", unit: "%", default: "40", rule: Rule::NonNegative },
];

/// Everything the page shows, from one set of inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub requests: f64,
    pub growth: f64,
    pub serving: f64,
    /// How the serving cost was found.
    pub serving_note: String,
    /// Serving bought by the replica-hour, when derived from hardware: the replicas, their
    /// utilization and idle spend at today's volume, and the inputs to price other volumes.
    pub capacity: Option<(CapacityCost, CapacityInput)>,
    /// Where the p99 shown with the capacity comes from and how far to trust it.
    pub latency_note: String,
    pub baseline: Amortization,
    pub optimized: Option<(Amortization, BreakEven)>,
    pub uncertainty: Option<Uncertainty>,
    /// (month, P10, P50, P90) of the baseline's monthly spend.
    pub spend_band: Vec<(f64, f64, f64, f64)>,
    /// The replicas' energy and emissions, when counted, and how they were found.
    pub carbon: Option<(Carbon, String)>,
}

/// The plan for these inputs, or every reason it cannot be made.
pub fn plan(form: &Form, nodes: &[MeasuredNode]) -> Result<Plan, Vec<String>> {
    plan_with(form, nodes, &[])
}

/// [`plan`] knowing the measured services "your service" may name.
pub fn plan_with(form: &Form, nodes: &[MeasuredNode], services: &[MeasuredService]) -> Result<Plan, Vec<String>> {
    let mut c = Collect { form, errors: Vec::new() };
    let requests = c.num("requests");
    let growth = c.num("growth") / 100.0;
    let retrains = c.num("retrains");
    let training = c.num("training");
    let mut latency_note = String::new();
    let (serving, serving_note, capacity) = if form.flag("derive") {
        let hourly = c.num("hourly");
        let throughput = c.num("throughput");
        let utilization = c.num("utilization") / 100.0;
        if utilization == 0.0 {
            c.errors.push("Target utilization: must be greater than zero".into());
        }
        let min_replicas = c.num("min_replicas");
        if min_replicas.fract() != 0.0 {
            c.errors.push("Minimum replicas: must be a whole number".into());
        }
        let slo_ms = c.num("slo_ms");
        let cv = c.num("cv");
        let concurrency = c.num("concurrency");
        if concurrency < 1.0 || concurrency.fract() != 0.0 {
            c.errors.push("Requests one replica serves at once: must be a whole number, at least 1".into());
        }
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        let input = CapacityInput {
            requests_per_month: PerMonth(requests),
            replica_price: UsdPerHour(hourly),
            replica_throughput_rps: PerSecond(throughput),
            max_utilization: utilization,
            min_replicas: min_replicas.min(f64::from(u32::MAX)) as u32,
            slo: (slo_ms > 0.0).then_some(LatencySlo {
                latency_s: Seconds(slo_ms / 1e3),
                quantile: 0.99,
                service_time_cv: cv,
            }),
            concurrency: concurrency.clamp(1.0, f64::from(u32::MAX)) as u32,
        };
        let cost = capacity_cost(&input).map_err(|e| vec![format!("{}: {}", label_of(&e.field), e.reason)])?;
        let node = form.text("node");
        let service = form.text("service");
        let measured = services.iter().find(|m| !service.is_empty() && m.run_id == service);
        let from = match measured {
            Some(m) => format!(
                "; service time, variation and concurrency measured for {} in run {} ({})",
                m.name(),
                short(&m.run_id),
                m.error_words()
            ),
            None => nodes
                .iter()
                .find(|n| n.node_id == node)
                .map(|n| {
                    format!(
                        "; throughput of the agent's reference model (not yours) measured on {} in run {}",
                        n.hostname,
                        short(&n.run_id)
                    )
                })
                .unwrap_or_default(),
        };
        latency_note = match measured {
            Some(m) => format!("M/G/c model calibrated on {}; {}", m.name(), m.error_words()),
            None => "M/G/c model with the service time and variation entered".into(),
        };
        let replicas = if cost.replicas == 1 { "1 replica".to_string() } else { format!("{} replicas", cost.replicas) };
        let sized_by = match cost.sized_by {
            SizedBy::Minimum => "the minimum kept running".to_string(),
            SizedBy::Utilization => format!("{:.0} % target utilization", utilization * 100.0),
            SizedBy::LatencySlo => format!("the p99 SLO of {slo_ms} ms"),
        };
        let note = format!(
            "{replicas} × {} per hour × {HOURS_PER_MONTH:.0} hours = {} a month, ÷ {} requests; \
             replicas set by {sized_by}{from}",
            usd(hourly),
            usd(cost.monthly_serving_usd.0),
            count(requests),
        );
        (cost.serving_cost_per_request_usd.0, note, Some((cost, input)))
    } else {
        (c.num("serving"), "entered".to_string(), None)
    };
    let carbon = match &capacity {
        Some((cost, _)) if form.flag("carbon") => Some(carbon_of(&mut c, cost.replicas, requests)?),
        _ => None,
    };
    let optimize = form.flag("optimize");
    let (extra, saving, accuracy) =
        if optimize { (c.num("extra"), c.num("saving") / 100.0, c.num("accuracy") / 100.0) } else { (0.0, 0.0, 0.0) };
    let spreads = form.flag("uncertain").then(|| {
        let r = c.num("requests_pm") / 100.0;
        let t = c.num("training_pm") / 100.0;
        let s = c.num("serving_pm") / 100.0;
        let v = if optimize { c.num("saving_pm") / 100.0 } else { 0.0 };
        if optimize && saving * (1.0 + v) >= 1.0 {
            c.errors.push(format!(
                "Serving cost saved, ±: {:.0} % + {:.0} % of it reaches 100 %; make the range narrower",
                saving * 100.0,
                v * 100.0
            ));
        }
        (r, t, s, v)
    });
    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    let model_error = |e: model::ModelError| vec![format!("{}: {}", label_of(&e.field), e.reason)];
    let baseline = amortize(&AmortizationInput {
        training_cost_usd: Usd(training),
        retrains_per_month: PerMonth(retrains),
        requests_per_month: PerMonth(requests),
        serving_cost_per_request_usd: Usd(serving),
    })
    .map_err(model_error)?;
    let optimized = if optimize {
        let optimized_serving = serving * (1.0 - saving);
        let amortized = amortize(&AmortizationInput {
            training_cost_usd: Usd(training + extra),
            retrains_per_month: PerMonth(retrains),
            requests_per_month: PerMonth(requests),
            serving_cost_per_request_usd: Usd(optimized_serving),
        })
        .map_err(model_error)?;
        let verdict = break_even(&BreakEvenInput {
            extra_training_cost_usd: Usd(extra),
            retrains_per_month: PerMonth(retrains),
            requests_per_month: PerMonth(requests),
            baseline_serving_cost_per_request_usd: Usd(serving),
            optimized_serving_cost_per_request_usd: Usd(optimized_serving),
            accuracy_delta: Some(accuracy),
        })
        .map_err(model_error)?;
        Some((amortized, verdict))
    } else {
        None
    };
    let (uncertainty, spend_band) = match spreads {
        None => (None, vec![]),
        Some((r, t, s, v)) => {
            // Each range is centred on the value entered above, so the simulation answers the
            // same question as the point figures beside it.
            let input = |requests: f64, samples| UncertaintyInput {
                training_cost_usd: Dist::around(training, t),
                retrains_per_month: Dist::Fixed { value: retrains },
                requests_per_month: Dist::around(requests, r),
                serving_cost_per_request_usd: Dist::around(serving, s),
                extra_training_cost_usd: optimize.then_some(Dist::Fixed { value: extra }),
                serving_saving_fraction: optimize.then(|| Dist::around(saving, v)),
                samples,
                seed: 7,
            };
            let now = simulate(&input(requests, 20_000)).map_err(model_error)?;
            let mut band = Vec::with_capacity(12);
            for month in 0..12 {
                let u = simulate(&input(requests * (1.0 + growth).powi(month), 2_000)).map_err(model_error)?;
                band.push((
                    f64::from(month + 1),
                    u.monthly_total_usd.p10,
                    u.monthly_total_usd.p50,
                    u.monthly_total_usd.p90,
                ));
            }
            (Some(now), band)
        }
    };
    Ok(Plan {
        requests,
        growth,
        serving,
        serving_note,
        capacity,
        latency_note,
        baseline,
        optimized,
        uncertainty,
        spend_band,
        carbon,
    })
}

/// The energy and emissions of `replicas` serving `requests` a month, from the carbon fields,
/// with the sentence that says how.
fn carbon_of(c: &mut Collect<'_>, replicas: u32, requests: f64) -> Result<(Carbon, String), Vec<String>> {
    let watts = c.num("power_w");
    let grid = c.num("grid");
    let pue = c.num("pue");
    if !c.errors.is_empty() {
        return Err(std::mem::take(&mut c.errors));
    }
    let power_source = match c.form.text("power_source").as_str() {
        "rated" => PowerSource::Rated,
        "measured" => PowerSource::Measured,
        _ => PowerSource::Entered,
    };
    let input = CarbonInput {
        replicas: f64::from(replicas),
        power_watts: watts,
        power_source,
        pue,
        grid_g_co2e_per_kwh: grid,
        requests_per_month: requests,
    };
    let label = |field: &str| match field {
        "power_watts" => "Average power of one replica",
        "pue" => "Data centre PUE",
        "grid_g_co2e_per_kwh" => "Grid emissions",
        _ => "Emissions",
    };
    let figure = carbon(&input).map_err(|e| vec![format!("{}: {}", label(&e.field), e.reason)])?;
    let source = power_source.describe();
    let region = c.form.text("grid_region");
    let grid_from = if region.is_empty() { "entered".to_string() } else { region };
    let note = format!(
        "{replicas} replica{} × {} W ({source}) × PUE {pue} × {HOURS_PER_MONTH:.0} hours, on a grid of {} g CO2e per kWh ({grid_from}). \
         Idle replicas draw power too; making the servers (embodied emissions) is not counted.",
        if replicas == 1 { "" } else { "s" },
        watts,
        significant(grid),
    );
    Ok((figure, note))
}

impl Plan {
    /// The fraction of the serving cost the optimization keeps (1 without one).
    fn kept(&self) -> f64 {
        match &self.optimized {
            Some((_, be)) if self.serving > 0.0 => 1.0 - be.saving_per_request_usd.0 / self.serving,
            _ => 1.0,
        }
    }

    /// Serving cost per request at another monthly volume: the same figure when it was entered
    /// per request; with capacity, the replicas that volume needs, priced by the hour.
    pub fn serving_at(&self, requests: f64) -> f64 {
        match &self.capacity {
            None => self.serving,
            Some((_, input)) => capacity_cost(&CapacityInput { requests_per_month: PerMonth(requests), ..*input })
                .map(|c| c.serving_cost_per_request_usd.0)
                .unwrap_or(f64::NAN),
        }
    }
}

/// How far ahead purchase options are compared: the longest commitment term.
pub const HORIZON_MONTHS: u32 = 36;

/// The plan's replicas bought on demand, committed for one or three years, or on spot, each
/// always running (as the capacity above is paid for).
#[derive(Clone, Debug, PartialEq)]
pub struct Buying {
    pub on_demand_hourly: f64,
    /// Replicas needed in each month of [`HORIZON_MONTHS`], at the growth rate.
    pub replicas: Vec<u32>,
    pub spot_hourly: f64,
    pub interruptions_per_month: f64,
    pub lost_minutes: f64,
    pub plan: PurchasePlan,
    /// With "compare owning": a server's hourly cost in parts, and the fleet bought for the
    /// peak of its life.
    pub owned: Option<(OwnedCost, OwnedFleet)>,
}

/// What the Buying card recommends.
#[derive(Clone, Debug, PartialEq)]
pub enum BuyingVerdict<'a> {
    /// Owning saves more a month than any commitment: this saving against on demand over the
    /// servers' life, of that much on demand.
    Own {
        fleet: OwnedFleet,
        saving: f64,
        on_demand: f64,
    },
    Commit(&'a CommitmentPlan),
    StayOnDemand,
}

impl Buying {
    /// On demand's cost over the first `months`.
    pub fn on_demand_over(&self, months: usize) -> f64 {
        replica_hours(&self.replicas, months) * self.on_demand_hourly
    }

    /// The commitment that saves most a month on average over its term, if any saves a cent.
    pub fn best(&self) -> Option<&CommitmentPlan> {
        let monthly = |c: &CommitmentPlan| c.saving_usd.0 / f64::from(c.term_months);
        self.plan
            .commitments
            .iter()
            .filter(|c| c.replicas > 0 && c.saving_usd.0 >= 0.005)
            .max_by(|a, b| monthly(a).total_cmp(&monthly(b)))
    }

    /// Owning, where compared, against the best commitment: whichever saves more a month; on
    /// demand where neither saves a cent.
    pub fn verdict(&self) -> BuyingVerdict<'_> {
        let best = self.best();
        let best_monthly = best.map_or(0.0, |c| c.saving_usd.0 / f64::from(c.term_months));
        let owning = self.owned.and_then(|(_, fleet)| {
            let on_demand = self.on_demand_over(fleet.months as usize);
            let saving = on_demand - fleet.total_usd;
            (saving >= 0.005 && saving / f64::from(fleet.months) > best_monthly).then_some(BuyingVerdict::Own {
                fleet,
                saving,
                on_demand,
            })
        });
        owning.or(best.map(BuyingVerdict::Commit)).unwrap_or(BuyingVerdict::StayOnDemand)
    }
}

/// The replicas each month of the next three years needs (the capacity model at that month's
/// volume, at least the minimum kept running) and the price of one; `None` without capacity.
pub fn monthly_replicas(p: &Plan) -> Option<Result<(Vec<u32>, f64), String>> {
    let (_, input) = p.capacity.as_ref()?;
    let mut replicas = Vec::with_capacity(HORIZON_MONTHS as usize);
    for month in 0..HORIZON_MONTHS {
        // A volume that shrinks to nothing (growth of −100 %) keeps the minimum running.
        let volume = (input.requests_per_month.0 * (1.0 + p.growth).powi(month as i32)).max(1e-9);
        match capacity_cost(&CapacityInput { requests_per_month: PerMonth(volume), ..*input }) {
            Ok(cost) => replicas.push(cost.replicas),
            Err(e) => {
                return Some(Err(format!(
                    "At {:.0} % growth a month, month {} ({} requests) cannot be sized: {}",
                    p.growth * 100.0,
                    month + 1,
                    count(volume),
                    e.reason
                )));
            }
        }
    }
    Some(Ok((replicas, input.replica_price.0)))
}

/// What each way of buying `replicas` (one a month, [`monthly_replicas`]) at `hourly` on demand
/// costs, with the discounts entered ([`model::plan::purchase`]); every bad field named.
pub fn buying(form: &Form, replicas: &[u32], hourly: f64) -> Result<Buying, String> {
    let mut c = Collect { form, errors: Vec::new() };
    let (one_year, three_year, spot) = (c.num("commit1") / 100.0, c.num("commit3") / 100.0, c.num("spot") / 100.0);
    let (interruptions, lost_minutes) = (c.num("interruptions"), c.num("lost_minutes"));
    let owned_input = form.flag("own").then(|| OwnedInput {
        purchase_usd: c.num("own_price"),
        life_months: c.num("own_life"),
        power_watts: c.num("own_watts"),
        power_source: PowerSource::Entered,
        electricity_usd_per_kwh: c.num("own_kwh"),
        pue: c.num("own_pue"),
        hosting_usd_per_month: c.num("own_hosting"),
    });
    if !c.errors.is_empty() {
        return Err(c.errors.join("; "));
    }
    let owned = match owned_input {
        None => None,
        Some(input) => {
            let cost = owned_cost(&input).map_err(|e| format!("{}: {}", owned_label(&e.field), e.reason))?;
            if input.life_months.fract() != 0.0 {
                return Err("Its life: must be a whole number of months".into());
            }
            Some((cost, fleet_over(replicas, input.life_months as u32, &cost)))
        }
    };
    let commitment = |name: &str, term_months: u32, off: f64| CommitmentOffer {
        name: name.into(),
        term_months,
        hourly_usd: UsdPerHour(hourly * (1.0 - off)),
    };
    let spot_hourly = hourly * (1.0 - spot);
    let plan = purchase(&PurchaseInput {
        on_demand_hourly_usd: UsdPerHour(hourly),
        replicas_by_month: replicas.to_vec(),
        running_share: 1.0,
        commitments: vec![
            commitment("1-year commitment", 12, one_year),
            commitment("3-year commitment", 36, three_year),
        ],
        spot: Some(SpotOffer {
            hourly_usd: UsdPerHour(spot_hourly),
            interruptions_per_hour: interruptions / HOURS_PER_MONTH,
            hours_lost_per_interruption: lost_minutes / 60.0,
        }),
    })
    .map_err(|e| format!("{}: {}", e.field, e.reason))?;
    Ok(Buying {
        on_demand_hourly: hourly,
        replicas: replicas.to_vec(),
        spot_hourly,
        interruptions_per_month: interruptions,
        lost_minutes,
        plan,
        owned,
    })
}

/// The Planner's label of an owned-server input the model names.
fn owned_label(field: &str) -> &'static str {
    match field {
        "purchase_usd" => "Price of one server",
        "life_months" => "Its life",
        "power_watts" => "Its average power draw",
        "electricity_usd_per_kwh" => "Electricity",
        "pue" => "Facility PUE",
        "hosting_usd_per_month" => "Hosting and support",
        _ => "Owned server",
    }
}

/// Reads fields, keeping every reason one is wrong.
struct Collect<'a> {
    form: &'a Form,
    errors: Vec<String>,
}

impl Collect<'_> {
    fn num(&mut self, key: &str) -> f64 {
        self.form.num(key).unwrap_or_else(|e| {
            self.errors.push(e);
            f64::NAN
        })
    }
}

fn label_of(field: &str) -> &'static str {
    match field {
        "requests_per_month" => "Requests per month",
        "training_cost_usd" => "Cost of one training",
        "retrains_per_month" => "Retrains per month",
        "serving_cost_per_request_usd" | "baseline_serving_cost_per_request_usd" => "Serving cost per request",
        "extra_training_cost_usd" => "Extra training cost per retrain",
        "optimized_serving_cost_per_request_usd" => "Serving cost saved",
        "serving_saving_fraction" => "Serving cost saved",
        "replica_price" => "Price of one replica",
        "replica_throughput_rps" => "Throughput of one replica",
        "max_utilization" => "Target utilization",
        "min_replicas" => "Minimum replicas",
        "slo_latency_s" => "Latency SLO (p99)",
        "service_time_cv" => "Service time variation (cv)",
        _ => "Input",
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// Cost per request against monthly volume, baseline and optimized, with the break-even marked.
pub fn volume_chart(p: &Plan, training: f64, retrains: f64) -> String {
    let volumes: Vec<f64> = (0..=40).map(|i| p.requests * 10f64.powf(-2.0 + 4.0 * f64::from(i) / 40.0)).collect();
    // Serving at each volume, scaled by what the optimization keeps of it.
    let per_request = |train: f64, kept: f64| -> Vec<(f64, f64)> {
        volumes.iter().map(|&r| (r, train * retrains / r + p.serving_at(r) * kept)).collect()
    };
    let mut chart =
        LineChart::new("Cost per request vs monthly volume", "requests per month (log)", "USD per request (log)");
    chart.x_log = true;
    chart.y_log = true;
    chart.x_format = count;
    chart.y_format = usd;
    chart.series.push(Series::new("baseline", per_request(training, 1.0)));
    if let Some((_, be)) = &p.optimized {
        let extra = be.monthly_extra_training_usd.0 / retrains.max(f64::MIN_POSITIVE);
        chart.series.push(Series::new("distilled / QAT", per_request(training + extra, p.kept())));
        if let Some(per_retrain) = be.break_even_requests_per_retrain {
            let monthly = per_retrain * retrains;
            if monthly.is_finite() && monthly > 0.0 {
                chart.x_rules.push(ChartRule { at: monthly, label: format!("break-even {}", count(monthly)) });
            }
        }
    }
    chart.x_rules.push(ChartRule { at: p.requests, label: "today".into() });
    line_chart(&chart)
}

/// Monthly spend over the next 12 months at the growth rate, baseline and optimized.
pub fn spend_chart(p: &Plan, training: f64, retrains: f64) -> String {
    let month_volume = |m: i32| p.requests * (1.0 + p.growth).powi(m);
    let spend = |train: f64, kept: f64| -> Vec<(f64, f64)> {
        (0..12)
            .map(|m| (f64::from(m + 1), train * retrains + p.serving_at(month_volume(m)) * kept * month_volume(m)))
            .collect()
    };
    let mut chart = LineChart::new("Monthly spend, next 12 months", "month", "USD per month");
    chart.x_format = |v| format!("{v:.0}");
    chart.y_format = usd;
    chart.series.push(Series::new("baseline", spend(training, 1.0)));
    if let Some((_, be)) = &p.optimized {
        let extra = be.monthly_extra_training_usd.0 / retrains.max(f64::MIN_POSITIVE);
        chart.series.push(Series::new("distilled / QAT", spend(training + extra, p.kept())));
    }
    if !p.spend_band.is_empty() {
        chart.bands.push(Band {
            name: "baseline P10–P90".into(),
            points: p.spend_band.iter().map(|&(m, lo, _, hi)| (m, lo, hi)).collect(),
        });
        chart.series.push(Series::new("baseline P50", p.spend_band.iter().map(|&(m, _, mid, _)| (m, mid)).collect()));
    }
    line_chart(&chart)
}

fn tornado_chart(u: &Uncertainty) -> String {
    let rows: Vec<(String, f64, f64)> =
        u.tornado.iter().map(|s| (pretty_input(&s.input).to_string(), s.at_p10, s.at_p90)).collect();
    tornado(
        "What moves the cost per request (input at its P10 → P90)",
        "USD per request",
        u.cost_per_request_usd.p50,
        &rows,
        usd,
    )
}

fn pretty_input(name: &str) -> &str {
    match name {
        "training_cost_usd" => "training cost",
        "retrains_per_month" => "retrains",
        "requests_per_month" => "requests",
        "serving_cost_per_request_usd" => "serving cost",
        "extra_training_cost_usd" => "extra training",
        "serving_saving_fraction" => "serving saved",
        other => other,
    }
}

#[component]
pub fn PlannerPage() -> impl IntoView {
    let query = use_query_map();
    let form = Form::new(FIELDS, &query.get_untracked());
    // Only the "derive from hardware" option needs the measured nodes: fetch them after
    // hydration, so the plan itself never waits for the server.
    let nodes = LocalResource::new(crate::data::measured_nodes);
    let node_list = move || nodes.get().and_then(Result::ok).map(|n| n.nodes).unwrap_or_default();
    let service_list = move || nodes.get().and_then(Result::ok).map(|n| n.services).unwrap_or_default();
    let result = Memo::new(move |_| plan_with(&form, &node_list(), &service_list()));
    // Buying the replicas: sized month by month when the plan changes, priced again when only
    // the discounts do; an error in those fields stays in its card.
    let months = Memo::new(move |_| result.get().ok().and_then(|p| monthly_replicas(&p)));
    let buying_card =
        Memo::new(move |_| months.get().map(|m| m.and_then(|(replicas, hourly)| buying(&form, &replicas, hourly))));
    view! {
        <Title text="Planner · Headroom"/>
        <h1>"Planner"</h1>
        <p class="lede">"What a request costs once training is spread over the requests it serves, and whether a cheaper-to-serve model pays for its extra training. Numbers update as you type; "<code>"50M"</code>", "<code>"1.2k"</code>" and "<code>"20,000"</code>" all work. Serving a language model? "<a href="/llm">"LLM serving"</a>" plans it in tokens, TTFT and ITL."</p>
        <div class="planner">
            // Before the bundle hydrates this is a plain GET form (Enter or "Update" reloads the
            // page with what was typed); after, the page answers as you type and submitting does nothing.
            <form class="inputs card" method="get" action="/planner" on:submit=|ev| ev.prevent_default()>
                <button type="submit" class="before-hydration">"Update"</button>
                {view! {
                <fieldset>
                    <legend>"Volume and training"</legend>
                    <NumberField form key="requests"/>
                    <NumberField form key="growth" hint="Compounded monthly in the spend chart."/>
                    <NumberField form key="retrains"/>
                    <NumberField form key="training"/>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Serving"</legend>
                    <FlagField form key="derive"/>
                    <Show when=move || !form.flag("derive")>
                        <NumberField form key="serving"/>
                    </Show>
                    <Show when=move || form.flag("derive")>
                        <ServicePicker form services=Signal::derive(service_list) none="— none —"
                            idle_hint="Fills throughput, concurrency and variation from a load test of your own service."
                            on_pick=Callback::new(move |picked: Option<MeasuredService>| {
                                if let Some(m) = picked {
                                    form.signal("throughput").set(significant(m.throughput_rps()));
                                    form.signal("concurrency").set(m.concurrency.to_string());
                                    form.signal("cv").set(format!("{:.2}", m.service_cv));
                                    form.signal("node").set(String::new());
                                }
                            })/>
                        <NodePicker form nodes=Signal::derive(node_list)/>
                        <NumberField form key="hourly"/>
                        <NumberField form key="throughput"/>
                        <NumberField form key="concurrency" hint="1 unless the server batches or runs several workers; measured by the endpoint suite."/>
                        <NumberField form key="utilization"/>
                        <NumberField form key="min_replicas" hint="Kept running at any volume; you pay for them busy or idle."/>
                        <NumberField form key="slo_ms" hint="Adds replicas until the p99 latency (M/G/c queueing model) is within it."/>
                        <Show when=move || form.num("slo_ms").is_ok_and(|v| v > 0.0)>
                            <NumberField form key="cv" hint="1 for exponential service times; 0 for constant."/>
                        </Show>
                    </Show>
                </fieldset>
                }.into_any()}
                {view! {
                <Show when=move || form.flag("derive")>
                <fieldset>
                    <legend>"Buying the replicas"</legend>
                    <p class="hint">"Your offers, as discounts off the price of one replica above: they vary by instance type, region and term. Picking a measured node fills them from the price catalog where it lists its type under one_year, three_year or spot. A commitment is paid for every hour of its term."</p>
                    <NumberField form key="commit1"/>
                    <NumberField form key="commit3"/>
                    <NumberField form key="spot"/>
                    <NumberField form key="interruptions" hint="Per month a replica runs on spot."/>
                    <NumberField form key="lost_minutes" hint="Until a replacement serves again, or the batch redone."/>
                    <FlagField form key="own"/>
                    <Show when=move || form.flag("own")>
                        <NumberField form key="own_price"/>
                        <NumberField form key="own_life" hint="Months it serves before it is replaced; its price is spread over them."/>
                        <NumberField form key="own_watts" hint="The datasheet's rated power is an upper bound; a measured average is better."/>
                        <NumberField form key="own_kwh"/>
                        <NumberField form key="own_pue" hint="The facility's energy over the servers': 1.1 for the best data centres, 1.5 to 2 for a server room."/>
                        <NumberField form key="own_hosting" hint="Rack space, network, support contract and staff time, per server."/>
                    </Show>
                </fieldset>
                </Show>
                }.into_any()}
                {view! {
                <Show when=move || form.flag("derive")>
                <fieldset>
                    <legend>"Carbon"</legend>
                    <FlagField form key="carbon"/>
                    <Show when=move || form.flag("carbon")>
                        <NumberField form key="power_w" hint="One replica's average draw, GPUs and host together; idle replicas draw power too."/>
                        <ChoiceField form key="power_source" labels=POWER_SOURCE_LABELS/>
                        <GridPicker form/>
                        <NumberField form key="grid"/>
                        <NumberField form key="pue" hint="The facility's energy over the servers': about 1.1 to 1.2 for the large clouds, 1.5 to 2 for a server room."/>
                    </Show>
                </fieldset>
                </Show>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Distillation or quantization-aware training"</legend>
                    <FlagField form key="optimize"/>
                    <Show when=move || form.flag("optimize")>
                        <NumberField form key="extra"/>
                        <NumberField form key="saving"/>
                        <NumberField form key="accuracy" hint="Negative is a loss, e.g. -0.3 for 0.3 points."/>
                    </Show>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Uncertainty"</legend>
                    <FlagField form key="uncertain"/>
                    <Show when=move || form.flag("uncertain")>
                        <p class="hint">"How far each value above may be off: ±30 % means 80 % sure it lies between the value ÷ 1.3 and × 1.3. The model draws 20,000 log-normal samples centred on the values entered."</p>
                        <SpreadField form key="requests_pm" value=Signal::derive(move || form.num("requests").ok()) show=count/>
                        <SpreadField form key="training_pm" value=Signal::derive(move || form.num("training").ok()) show=usd/>
                        // The serving cost the plan used, entered or derived from hardware.
                        <SpreadField form key="serving_pm" value=Signal::derive(move || result.get().ok().map(|p| p.serving)) show=usd/>
                        <Show when=move || form.flag("optimize")>
                            <SpreadField form key="saving_pm" value=Signal::derive(move || form.num("saving").ok()) show=|v| format!("{v:.1} %")/>
                        </Show>
                    </Show>
                </fieldset>
                }.into_any()}
                <SaveScenario kind=KIND path="/planner" form/>
            </form>
            <section class="outputs" aria-live="polite">
                {move || match result.get() {
                    Err(errors) => view! {
                        <div class="card problems" role="alert">
                            <h2>"Fix the marked fields"</h2>
                            <ul>{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul>
                        </div>
                    }.into_any(),
                    Ok(p) => view! { <PlanView p form buying=buying_card/> }.into_any(),
                }}
            </section>
        </div>
    }
}

/// A "±" field with the P10–P90 range it gives the value it qualifies.
#[component]
fn SpreadField(form: Form, key: &'static str, value: Signal<Option<f64>>, show: fn(f64) -> String) -> impl IntoView {
    let range = move || {
        let (lo, hi) = Dist::around(value.get()?, form.num(key).ok()? / 100.0).range()?;
        Some(format!("P10–P90: {} – {}", show(lo), show(hi)))
    };
    view! { <NumberField form key live_hint=Signal::derive(move || range().unwrap_or_default())/> }
}

/// A quantity as people read it: three significant digits below 100, whole and grouped above.
fn quantity(x: f64) -> String {
    if x.abs() < 100.0 { significant(x) } else { grouped(x) }
}

/// Picks a service the endpoint suite measured: its throughput per replica, concurrency and
/// service-time variation fill the fields below.
#[component]
fn NodePicker(form: Form, nodes: Signal<Vec<MeasuredNode>>) -> impl IntoView {
    let node = form.signal("node");
    let pick = move |id: String| {
        node.set(id.clone());
        if let Some(n) = nodes.get_untracked().into_iter().find(|n| n.node_id == id) {
            // The reference model is not a measured service of yours: one at a time.
            form.signal("service").set(String::new());
            form.signal("concurrency").set("1".into());
            if let Some(t) = n.best_throughput_rps {
                form.signal("throughput").set(format!("{t:.0}"));
            }
            if let Some(h) = n.hourly_usd {
                form.signal("hourly").set(format!("{h}"));
            }
            // Its power under load where the node measured it (CPUs, and GPUs on a GPU node); else the
            // fields' defaults, rather than keep another node's "measured" figure.
            match n.power.as_ref().and_then(|(p, _)| p.busy_watts) {
                Some(watts) => {
                    form.signal("power_w").set(format!("{watts:.0}"));
                    form.signal("power_source").set("measured".into());
                }
                None => {
                    for key in ["power_w", "power_source"] {
                        form.signal(key).set(form.spec(key).default.to_string());
                    }
                }
            }
            // The catalog's commitment and spot prices for its type, as discounts off the price
            // just put in "Price of one replica" (the operator's, else the catalog's on demand),
            // so the Planner prices them as Right-sizing does; an option it does not list goes
            // back to the field's default rather than keep another node's.
            let base = n.hourly_usd.filter(|b| *b > 0.0).or(n.offer("on_demand").map(|o| o.hourly_usd));
            for (key, option) in [("commit1", "one_year"), ("commit3", "three_year"), ("spot", "spot")] {
                let off = match (base.filter(|b| *b > 0.0), n.offer(option)) {
                    // An offer dearer than that price counts as no discount.
                    (Some(base), Some(offer)) => {
                        format!("{:.1}", ((1.0 - offer.hourly_usd / base) * 100.0).clamp(0.0, 99.9))
                    }
                    _ => form.spec(key).default.to_string(),
                };
                form.signal(key).set(off);
            }
        }
    };
    view! {
        <div class="field" data-field="node">
            <label for="f-node">"Measured node"</label>
            <select id="f-node" name="node" on:change=move |ev| pick(event_target_value(&ev))>
                <option value="" selected=move || node.get().is_empty()>"— enter by hand —"</option>
                {move || nodes.get().into_iter().map(|n| {
                    let id = n.node_id.clone();
                    let label = format!("{} · {}", n.hostname, n.best_throughput_rps.map(|t| format!("{} req/s measured", grouped(t))).unwrap_or_else(|| "no throughput".into()));
                    view! { <option value=id.clone() selected=move || node.get() == id>{label}</option> }
                }).collect_view()}
            </select>
            <p class="hint">"Fills the throughput from the node's latest quantization run (the agent's reference model, FP32, best batch size), its price where one is known, its power under load where its latest system run could read it (RAPL: CPU packages and DRAM under every core copying memory, so a lower bound for the whole server; never for a node with GPUs), and the discounts under “Buying the replicas” from the price catalog's commitment and spot prices for its instance type where it lists them (their defaults where not; an offer dearer than the price counts as no discount)."</p>
        </div>
    }
}

#[component]
fn PlanView(p: Plan, form: Form, buying: Memo<Option<Result<Buying, String>>>) -> impl IntoView {
    // Read once for the charts: this view is rebuilt whenever the plan changes.
    let untracked = |key: &str| form.spec(key).check(&form.text_untracked(key)).unwrap_or(0.0);
    let (training, retrains) = (untracked("training"), untracked("retrains"));
    let volume_svg = volume_chart(&p, training, retrains);
    let spend_svg = spend_chart(&p, training, retrains);
    let b = p.baseline;
    view! {
        <div class="cards">
            <div class="card metric">
                <h2>"Cost per request"</h2>
                <p class="big" data-out="cost-per-request">{usd(b.total_cost_per_request_usd.0)}</p>
                <p class="sub">{format!("{} training + {} serving", usd(b.training_cost_per_request_usd.0), usd(p.serving))}</p>
            </div>
            <div class="card metric">
                <h2>"Monthly spend"</h2>
                <p class="big" data-out="monthly-spend">{usd(b.monthly_total_usd.0)}</p>
                <p class="sub">{format!("{} training + {} serving at {} requests", usd(b.monthly_training_usd.0), usd(b.monthly_serving_usd.0), count(p.requests))}</p>
            </div>
            {p.optimized.clone().map(|(o, be)| view! { <Verdict o be/> })}
        </div>
        {p.capacity.clone().map(|(c, _)| view! { <Capacity c note=p.latency_note.clone()/> })}
        {p.carbon.clone().map(|(c, note)| view! { <Emissions c note/> })}
        {move || buying.get().map(|b| view! { <PurchaseOptions b/> })}
        <p class="note" data-out="serving-note">{format!("Serving cost per request: {} — {}.", usd(p.serving), p.serving_note)}</p>
        {p.uncertainty.clone().map(|u| view! {
            <div class="card">
                <h2>"With uncertainty"</h2>
                <div tabindex="0" class="table-wrap"><table class="band">
                    <thead><tr><th></th><th class="num">"P10"</th><th class="num">"P50"</th><th class="num">"P90"</th></tr></thead>
                    <tbody>
                        <tr><th>"Cost per request"</th><td class="num">{usd(u.cost_per_request_usd.p10)}</td><td class="num" data-out="p50-cost">{usd(u.cost_per_request_usd.p50)}</td><td class="num">{usd(u.cost_per_request_usd.p90)}</td></tr>
                        <tr><th>"Monthly spend"</th><td class="num">{usd(u.monthly_total_usd.p10)}</td><td class="num">{usd(u.monthly_total_usd.p50)}</td><td class="num">{usd(u.monthly_total_usd.p90)}</td></tr>
                    </tbody>
                </table></div>
                {u.probability_break_even.map(|pr| view! { <p data-out="probability">{format!("Probability the optimization saves money each month: {:.0} %", pr * 100.0)}</p> })}
                <div class="chart" inner_html=tornado_chart(&u)></div>
            </div>
        })}
        <div class="chart card" data-chart="volume" inner_html=volume_svg></div>
        <div class="chart card" data-chart="spend" inner_html=spend_svg></div>
    }
}

/// Capacity bought by the replica-hour: how many, how busy, and what idles.
#[component]
fn Capacity(c: CapacityCost, note: String) -> impl IntoView {
    view! {
        <div class="card metric" data-card="capacity">
            <h2>"Capacity"</h2>
            <p class="big" data-out="replicas">{if c.replicas == 1 { "1 replica".to_string() } else { format!("{} replicas", grouped(f64::from(c.replicas))) }}</p>
            <dl>
                <dt>"Serving spend"</dt>
                <dd data-out="capacity-monthly">{format!("{} a month", usd(c.monthly_serving_usd.0))}</dd>
                <dt>"Utilization"</dt>
                <dd data-out="utilization">{format!("{:.1} %", c.utilization * 100.0)}</dd>
                <dt>"Paid for idle capacity"</dt>
                <dd data-out="idle">{format!("{} a month", usd(c.monthly_idle_usd.0))}</dd>
                {c.latency_at_quantile_s.map(|l| view! { <dt>"Latency at p99 (model)"</dt><dd data-out="p99">{model::format::seconds(l.0)}</dd><dd class="sub" data-out="p99-note">{note.clone()}</dd> })}
            </dl>
        </div>
    }
}

/// The replicas' energy and emissions, per 1,000 requests and a month.
#[component]
fn Emissions(c: Carbon, note: String) -> impl IntoView {
    let per_1000 =
        c.co2e_g_per_1000_requests.map(|g| format!("{} g CO2e", significant(g))).unwrap_or_else(|| "—".into());
    view! {
        <div class="card metric" data-card="carbon">
            <h2>"Emissions per 1,000 requests"</h2>
            <p class="big" data-out="co2e-per-1000">{per_1000}</p>
            <dl>
                <dt>"A month"</dt>
                <dd data-out="co2e-month">{format!("{} kg CO2e", quantity(c.co2e_kg_per_month))}</dd>
                <dt>"Energy a month"</dt>
                <dd data-out="energy-month">{format!("{} kWh", quantity(c.facility_kwh_per_month))}</dd>
                {c.wh_per_request.map(|wh| view! { <dt>"Per request"</dt><dd data-out="wh-per-request">{format!("{} Wh", significant(wh))}</dd> })}
            </dl>
            <p class="sub" data-out="carbon-note">{note}</p>
        </div>
    }
}

/// On demand, committed or spot: each option's price, what to commit and what it saves, each
/// against on demand over the same months.
#[component]
fn PurchaseOptions(b: Result<Buying, String>) -> impl IntoView {
    let b = match b {
        Ok(b) => b,
        Err(why) => {
            return view! {
                <div class="card" data-card="purchase">
                    <h2>"Buying the replicas"</h2>
                    <p class="problems" role="alert" data-out="purchase-verdict">{why}</p>
                </div>
            }
            .into_any();
        }
    };
    let verdict = match b.verdict() {
        BuyingVerdict::Own { fleet, saving, on_demand } => format!(
            "Own {} for {} months: saves {} over them{} against on demand.",
            if fleet.servers == 1 {
                "1 server".to_string()
            } else {
                format!("{} servers", grouped(f64::from(fleet.servers)))
            },
            fleet.months,
            usd(saving),
            share(saving, on_demand),
        ),
        BuyingVerdict::Commit(c) => format!(
            "Commit {} for {} months: saves {} over the term{} against on demand.",
            if c.replicas == 1 {
                "1 replica".to_string()
            } else {
                format!("{} replicas", grouped(f64::from(c.replicas)))
            },
            c.term_months,
            usd(c.saving_usd.0),
            share(c.saving_usd.0, c.on_demand_term_cost_usd.0),
        ),
        BuyingVerdict::StayOnDemand => {
            "Stay on demand: no commitment saves anything at these volumes and discounts.".to_string()
        }
    };
    let break_even = b
        .plan
        .commitments
        .iter()
        .map(|c| format!("{:.0} % of the hours of a {}", c.break_even_utilization * 100.0, c.name))
        .collect::<Vec<_>>()
        .join(" or ");
    let rows = b
        .plan
        .commitments
        .iter()
        .map(|c| {
            let months = c.term_months;
            view! {
                <PurchaseRow key=months.to_string() name=c.name.clone() months
                    hourly=usd(c.break_even_utilization * b.on_demand_hourly) hourly_note=None
                    commit=grouped(f64::from(c.replicas)) total=c.term_cost_usd.0 on_demand=c.on_demand_term_cost_usd.0/>
            }
        })
        .collect_view();
    const SPOT_MONTHS: u32 = 12;
    let spot = b.plan.spot.map(|s| match (s.useful_hourly_usd, s.interruption_hourly_usd) {
        (Some(useful), Some(lost)) => view! {
            <PurchaseRow key="spot".into() name="Spot".into() months=SPOT_MONTHS
                hourly=usd(useful.0) hourly_note=Some(format!("{} of it lost", usd(lost.0)))
                commit="—".into() total=replica_hours(&b.replicas, SPOT_MONTHS as usize) * useful.0
                on_demand=b.on_demand_over(SPOT_MONTHS as usize)/>
        }
        .into_any(),
        _ => view! {
            <tr data-option="spot"><th>"Spot"</th><td colspan="4" data-out="hourly-spot">"Never finishes: each hour paid loses at least an hour to interruptions."</td></tr>
        }
        .into_any(),
    });
    let owned_note = b.owned.map(|(c, fleet)| {
        let months = fleet.months;
        let held = if months > HORIZON_MONTHS {
            format!(" Past month {HORIZON_MONTHS}, month {HORIZON_MONTHS}'s replicas are held for the rest of its {months} months.")
        } else {
            String::new()
        };
        format!(
            "Owned: {} an hour per server = {} of its price over its life + {} of energy ({} kWh a month at the facility, power as entered) + {} of hosting and support; bought for the most replicas its life needs, busy or not.{held}",
            usd(c.hourly_usd.0),
            usd(c.amortization_hourly_usd.0),
            usd(c.energy_hourly_usd.0),
            grouped(c.facility_kwh_per_month),
            usd(c.hosting_hourly_usd.0),
        )
    });
    let owned_row = b.owned.map(|(c, fleet)| {
        view! {
            <PurchaseRow key="owned".into() name="Owned servers".into() months=fleet.months
                hourly=usd(c.hourly_usd.0) hourly_note=None commit=format!("{} bought", grouped(f64::from(fleet.servers)))
                total=fleet.total_usd on_demand=b.on_demand_over(fleet.months as usize)/>
        }
    });
    view! {
        <div class="card" data-card="purchase">
            <h2>"Buying the replicas"</h2>
            <p class="big" data-out="purchase-verdict">{verdict}</p>
            <div tabindex="0" class="table-wrap"><table class="purchase">
                <thead><tr>
                    <th>"Option"</th><th class="num">"Per replica-hour"</th><th class="num">"Commit"</th>
                    <th class="num">"A month"<br/><small>"(on demand)"</small></th><th class="num">"Saving"</th>
                </tr></thead>
                <tbody>{rows}{spot}{owned_row}</tbody>
            </table></div>
            <p class="sub" data-out="purchase-note">{format!(
                "Replicas needed month by month at the growth rate: {} now, {} in month 36, each always running, at {} an hour on demand. A committed replica is paid for every hour of its term and pays off where the fleet would otherwise run it on demand for more than {break_even}. Spot: {} an hour plus {} interruptions a month of {} minutes lost each; a fleet holding an SLO on spot also needs spare replicas while one is replaced, which this does not add.",
                b.replicas.first().copied().unwrap_or(0),
                b.replicas.last().copied().unwrap_or(0),
                usd(b.on_demand_hourly),
                usd(b.spot_hourly),
                plain(b.interruptions_per_month),
                plain(b.lost_minutes),
            )}</p>
            {owned_note.map(|note| view! { <p class="sub" data-out="owned-note">{note}</p> })}
        </div>
    }
    .into_any()
}

/// One way of buying the replicas, over `months`: what it costs a month against on demand over
/// the same months, and the saving. `key` names its cells for the tests: `commit-{key}`, …
#[component]
fn PurchaseRow(
    key: String,
    name: String,
    months: u32,
    hourly: String,
    hourly_note: Option<String>,
    commit: String,
    total: f64,
    on_demand: f64,
) -> impl IntoView {
    let saving = on_demand - total;
    let per_month = |x: f64| usd(x / f64::from(months.max(1)));
    view! {
        <tr data-option=key.clone()>
            <th>{name}<br/><small>{format!("{months} months")}</small></th>
            <td class="num" data-out=format!("hourly-{key}")>{hourly}{hourly_note.map(|n| view! { <br/><small>{n}</small> })}</td>
            <td class="num" data-out=format!("commit-{key}")>{commit}</td>
            <td class="num">{per_month(total)}<br/><small data-out=format!("on-demand-{key}")>{format!("({})", per_month(on_demand))}</small></td>
            <td class="num" data-out=format!("saving-{key}")>{usd(saving)}<br/><small>{percent_of(saving, on_demand)}</small></td>
        </tr>
    }
}

/// A figure as typed, to three decimals at most (1.1k parses to 1100.0000000000002).
fn plain(x: f64) -> String {
    format!("{}", (x * 1e3).round() / 1e3)
}

/// "30 %": `saving` as a share of `of`; nothing when there is nothing to share.
fn percent_of(saving: f64, of: f64) -> Option<String> {
    (of > 0.0).then(|| format!("{} %", signed(saving / of * 100.0)))
}

/// " (30 %)", after an amount.
fn share(saving: f64, of: f64) -> String {
    percent_of(saving, of).map(|p| format!(" ({p})")).unwrap_or_default()
}

/// A percentage with a true minus sign, as `usd` writes negative amounts.
fn signed(x: f64) -> String {
    let text = format!("{x:.0}");
    match text.strip_prefix('-') {
        Some(rest) if rest != "0" => format!("−{rest}"),
        Some(_) => "0".into(),
        None => text,
    }
}

#[component]
fn Verdict(o: Amortization, be: BreakEven) -> impl IntoView {
    let class = if be.worth_it { "card metric verdict good" } else { "card metric verdict bad" };
    view! {
        <div class=class>
            <h2>"Distillation / QAT"</h2>
            <p class="big" data-out="verdict">{if be.worth_it { "Worth it" } else { "Not worth it" }}</p>
            <p class="sub">{format!("{} per request", usd(o.total_cost_per_request_usd.0))}</p>
            <dl>
                <dt>"Serving saved"</dt>
                <dd data-out="gross-saving">{format!("{} a month", usd(be.monthly_saving_usd.0))}</dd>
                <dt>"Extra training"</dt>
                <dd data-out="extra-training">{format!("{} a month", usd(be.monthly_extra_training_usd.0))}</dd>
                <dt>"Net"</dt>
                <dd data-out="net">{format!("{} a month", usd(be.monthly_net_usd.0))}</dd>
                <dt>"Break-even"</dt>
                <dd data-out="break-even">{be.break_even_requests_per_retrain.map(|r| format!("{} requests per retrain", count(r))).unwrap_or_else(|| "never".into())}</dd>
                {be.months_to_pay_back.filter(|m| be.worth_it && m.is_finite()).map(|m| view! {
                    <dt>"Pays back in"</dt>
                    <dd data-out="pays-back">{format!("{m:.2} months")}</dd>
                })}
                <dt>"Accuracy"</dt>
                <dd>{be.accuracy_delta.map(points).unwrap_or_else(|| "not given".into())}</dd>
            </dl>
            <p class="reason">{be.reason.clone()}</p>
        </div>
    }
}

// Signals outside a browser need the server build's runtime (`cargo test --workspace` enables
// it through the server crate).
#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::components::form::testing::owned;

    fn form(pairs: &[(&str, &str)]) -> Form {
        crate::components::form::testing::form(FIELDS, pairs)
    }

    #[test]
    fn the_plan_is_the_models_amortization() {
        owned(|| {
            let p = plan(&form(&[("requests", "50M"), ("training", "20,000"), ("serving", "0.0001")]), &[]).unwrap();
            assert!((p.baseline.total_cost_per_request_usd.0 - (20_000.0 / 50e6 + 1e-4)).abs() < 1e-15);
            let (_, be) = p.optimized.unwrap();
            // 25 % of 0.0001 saved on 50M requests against 3,000 extra: 1,250 saved, 1,750 short.
            assert!(!be.worth_it);
            assert!((be.monthly_net_usd.0 + 1_750.0).abs() < 1e-6);
        })
    }

    #[test]
    fn every_bad_field_is_named() {
        owned(|| {
            let errors = plan(&form(&[("requests", "-1"), ("training", "lots")]), &[]).unwrap_err();
            assert!(errors.contains(&"Requests per month: must be greater than zero".to_string()), "{errors:?}");
            assert!(errors.iter().any(|e| e.starts_with("Cost of one training: “lots”")), "{errors:?}");
        })
    }

    #[test]
    fn a_measured_service_sizes_replicas_as_servers_and_says_where_its_p99_comes_from() {
        owned(|| {
            let service = MeasuredService {
                run_id: "0b5e7a2c-0000-4000-8000-000000000000".into(),
                started_at_ms: 0,
                hostname: "loadgen".into(),
                target: "http://10.0.0.5:8080".into(),
                protocol: "kserve-v2".into(),
                model: Some("digits".into()),
                service_mean_s: 0.040,
                service_cv: 0.5,
                concurrency: 4,
                saturation_rps: 100.0,
                saturation_measured: true,
                mape_p99: Some(0.12),
            };
            assert!((service.throughput_rps() - 100.0).abs() < 1e-9);
            assert_eq!(
                (significant(0.04237), significant(12.54), significant(1250.4)),
                ("0.0424".into(), "12.5".into(), "1250".into())
            );
            // 1,000/s (2,628M a month) with a p99 of 200 ms: replicas of 4 servers of 40 ms.
            let f = form(&[
                ("derive", "1"),
                ("requests", "2628M"),
                ("service", &service.run_id),
                ("throughput", "100"),
                ("concurrency", "4"),
                ("cv", "0.5"),
                ("slo_ms", "200"),
                ("utilization", "90"),
            ]);
            let p = plan_with(&f, &[], std::slice::from_ref(&service)).unwrap();
            let (c, input) = p.capacity.clone().unwrap();
            assert_eq!(input.concurrency, 4);
            assert!(c.latency_at_quantile_s.unwrap().0 <= 0.2);
            assert!(
                p.serving_note.contains("measured for digits at http://10.0.0.5:8080 in run 0b5e7a2c"),
                "{}",
                p.serving_note
            );
            assert!(p.latency_note.contains("off by 12 % on average"), "{}", p.latency_note);
            // Without the service list the same inputs are the user's, and say so.
            let p = plan(&f, &[]).unwrap();
            assert!(p.latency_note.contains("entered"), "{}", p.latency_note);
            let bad = form(&[("derive", "1"), ("concurrency", "2.5")]);
            assert!(plan(&bad, &[]).unwrap_err()[0].starts_with("Requests one replica serves at once"));
        })
    }

    #[test]
    fn derived_serving_cost_is_replicas_by_the_hour() {
        owned(|| {
            // One replica at $2.50/h is $1,825 a month whatever it serves: 1M requests pay
            // $0.001825 each, not the $0.0000029 a per-request price at 400 requests/s implies.
            let f = form(&[("derive", "1"), ("requests", "1M"), ("hourly", "2.50"), ("throughput", "400")]);
            let p = plan(&f, &[]).unwrap();
            assert!((p.serving - 0.001_825).abs() < 1e-15, "{}", p.serving);
            let (c, _) = p.capacity.clone().unwrap();
            assert_eq!(c.replicas, 1);
            assert!(
                p.serving_note.starts_with("1 replica × $2.50 per hour × 730 hours = $1,825.00 a month"),
                "{}",
                p.serving_note
            );
            // At 2,628M requests (1,000/s) and 60 %: 5 replicas.
            let f = form(&[("derive", "1"), ("requests", "2628M"), ("hourly", "2.50"), ("throughput", "400")]);
            let p = plan(&f, &[]).unwrap();
            assert_eq!(p.capacity.as_ref().unwrap().0.replicas, 5);
            // A minimum of three replicas costs three replicas at 1M requests.
            let f = form(&[
                ("derive", "1"),
                ("requests", "1M"),
                ("hourly", "2.50"),
                ("throughput", "400"),
                ("min_replicas", "3"),
            ]);
            let p = plan(&f, &[]).unwrap();
            assert!((p.serving - 3.0 * 0.001_825).abs() < 1e-15);
            assert!((p.serving_at(2e6) - 3.0 * 0.001_825 / 2.0).abs() < 1e-15, "volume spreads the same spend");
            let bad = form(&[("derive", "1"), ("min_replicas", "1.5")]);
            assert_eq!(plan(&bad, &[]).unwrap_err(), vec!["Minimum replicas: must be a whole number".to_string()]);
            let unreachable = form(&[("derive", "1"), ("throughput", "400"), ("slo_ms", "0.1")]);
            assert!(plan(&unreachable, &[]).unwrap_err()[0].starts_with("Latency SLO (p99): is below"));
        })
    }

    #[test]
    fn emissions_are_the_replicas_power_on_the_grid() {
        owned(|| {
            // 5 replicas (1,000 requests/s at 400 a replica, 60 %) × 300 W × 1.2 × 730 h =
            // 1,314 kWh a month; × 400 g = 525.6 kg over 2,628M requests = 0.2 g per 1,000.
            let base = [("derive", "1"), ("requests", "2628M"), ("hourly", "2.50"), ("throughput", "400")];
            let with = |more: &[(&'static str, &'static str)]| {
                let pairs: Vec<(&str, &str)> = base.iter().chain(more).copied().collect();
                plan(&form(&pairs), &[])
            };
            assert!(with(&[]).unwrap().carbon.is_none(), "not counted unless asked");
            let p = with(&[
                ("carbon", "1"),
                ("power_w", "300"),
                ("pue", "1.2"),
                ("grid", "400"),
                ("power_source", "rated"),
            ])
            .unwrap();
            let (c, note) = p.carbon.unwrap();
            assert!((c.facility_kwh_per_month - 1314.0).abs() < 1e-9, "{c:?}");
            assert!((c.co2e_kg_per_month - 525.6).abs() < 1e-9);
            assert!((c.co2e_g_per_1000_requests.unwrap() - 0.2).abs() < 1e-12);
            assert!(note.starts_with("5 replicas × 300 W (rated, an upper bound) × PUE 1.2"), "{note}");
            assert!(note.contains("400 g CO2e per kWh (entered)"), "{note}");
            let err = with(&[("carbon", "1"), ("pue", "0.5")]).unwrap_err();
            assert_eq!(err, vec!["Data centre PUE: must be between 1 and 5".to_string()]);
            let err = with(&[("carbon", "1"), ("grid", "abc")]).unwrap_err();
            assert!(err[0].starts_with("Grid emissions:"), "{err:?}");
            // Without hardware there are no replicas to count.
            assert!(plan(&form(&[("carbon", "1")]), &[]).unwrap().carbon.is_none());
        })
    }

    #[test]
    fn buying_the_replicas_commits_what_each_term_needs_throughout() {
        owned(|| {
            // 1,000 requests/s at 400 a replica and 60 %: 5 replicas now; 5 % growth a month makes
            // 6 from month 5, 7 from month 9, 8 in month 12.
            let at = |extra: &[(&str, &str)]| {
                let mut pairs = vec![("derive", "1"), ("requests", "2628M"), ("hourly", "2.50"), ("throughput", "400")];
                pairs.extend_from_slice(extra);
                let f = form(&pairs);
                let (replicas, hourly) = monthly_replicas(&plan(&f, &[]).unwrap()).unwrap()?;
                buying(&f, &replicas, hourly)
            };
            let b = at(&[]).unwrap();
            assert_eq!(&b.replicas[..12], [5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8]);
            let one_year = &b.plan.commitments[0];
            // 30 % off: a committed replica must be needed over 70 % of the year; the sixth is
            // needed 8 months of 12 (67 %), so five, each saving $0.75 × 8,760 hours.
            assert_eq!((one_year.term_months, one_year.replicas), (12, 5));
            assert!((one_year.saving_usd.0 - 5.0 * 0.75 * 8_760.0).abs() < 1e-6, "{one_year:?}");
            assert!((b.on_demand_over(12) - one_year.on_demand_term_cost_usd.0).abs() < 1e-6);
            assert!(b.best().is_some());
            // Spot at 60 % off, 2 interruptions a month of 10 minutes: 1/2,190 of the hours lost.
            let spot = b.plan.spot.unwrap();
            assert!((spot.useful_hourly_usd.unwrap().0 - 1.0 / (1.0 - 1.0 / 2_190.0)).abs() < 1e-12, "{spot:?}");

            assert_eq!(b.owned, None, "owning is compared only when asked");
            // Owned: $30,000 over 36 × 730 hours, 0.7 kW × 1.4 × $0.12, $150 a month; bought for
            // the peak of its life, 23 replicas in month 36.
            let b = at(&[("own", "1")]).unwrap();
            let (cost, fleet) = b.owned.unwrap();
            let hourly = 30_000.0 / 26_280.0 + 0.7 * 1.4 * 0.12 + 150.0 / 730.0;
            assert!((cost.hourly_usd.0 - hourly).abs() < 1e-12, "{cost:?}");
            assert_eq!((fleet.servers, fleet.months), (*b.replicas.iter().max().unwrap(), 36));
            assert_eq!(fleet.servers, 23);
            assert!((fleet.total_usd - 23.0 * hourly * 730.0 * 36.0).abs() < 1e-6);
            let bad = at(&[("own", "1"), ("own_pue", "0.5")]).unwrap_err();
            assert_eq!(bad, "Facility PUE: must be between 1 and 5");
            assert_eq!(
                at(&[("own", "1"), ("own_life", "36.5")]).unwrap_err(),
                "Its life: must be a whole number of months"
            );

            // No discount: nothing is committed and the verdict stays on demand.
            let b = at(&[("commit1", "0"), ("commit3", "0")]).unwrap();
            assert!(b.plan.commitments.iter().all(|c| c.replicas == 0), "{:?}", b.plan);
            assert!(b.best().is_none());
            // A bad discount is named in the card; the plan itself still answers.
            let f = form(&[("derive", "1"), ("commit3", "100")]);
            let p = plan(&f, &[]).unwrap();
            let (replicas, hourly) = monthly_replicas(&p).unwrap().unwrap();
            assert_eq!(
                buying(&f, &replicas, hourly).unwrap_err(),
                "3-year commitment discount: must be from 0 to below 100 %"
            );
            // Growth past what can be sized within three years says so instead of a table.
            let why = at(&[("growth", "200")]).unwrap_err();
            assert!(why.starts_with("At 200 % growth a month, month "), "{why}");
            // A volume that shrinks to nothing keeps the minimum running.
            assert_eq!(&at(&[("growth", "-100")]).unwrap().replicas[1..3], [1, 1]);
            // Without capacity there is nothing to buy by the hour.
            assert_eq!(monthly_replicas(&plan(&form(&[]), &[]).unwrap()), None);
        })
    }

    #[test]
    fn uncertainty_gives_a_band_for_each_month_centred_on_the_entered_values() {
        owned(|| {
            let p = plan(&form(&[("uncertain", "1")]), &[]).unwrap();
            let u = p.uncertainty.unwrap();
            assert!(u.cost_per_request_usd.p10 < u.cost_per_request_usd.p90);
            let point = p.baseline.total_cost_per_request_usd.0;
            assert!(
                (u.cost_per_request_usd.p50 / point - 1.0).abs() < 0.03,
                "{} vs {point}",
                u.cost_per_request_usd.p50
            );
            assert_eq!(p.spend_band.len(), 12);
            assert!(p.spend_band.iter().all(|&(_, lo, mid, hi)| lo <= mid && mid <= hi));
            // The verdict and the probability agree: the seed's worked distillation (net $4,000
            // a month on $9,000 gross) saves money in most draws.
            let f = form(&[
                ("uncertain", "1"),
                ("requests", "1M"),
                ("training", "1000"),
                ("serving", "0.01"),
                ("extra", "5000"),
                ("saving", "90"),
                ("saving_pm", "5"),
            ]);
            let p = plan(&f, &[]).unwrap();
            assert!(p.optimized.as_ref().unwrap().1.worth_it);
            assert!(p.uncertainty.unwrap().probability_break_even.unwrap() > 0.5);
            let wide = plan(&form(&[("uncertain", "1"), ("saving", "90"), ("saving_pm", "20")]), &[]);
            assert!(wide.unwrap_err()[0].starts_with("Serving cost saved, ±: 90 % + 20 % of it reaches 100 %"));
        })
    }
}
