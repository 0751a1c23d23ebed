//! Right-sizing: the cheapest instance type × precision × batch size × replica count that meets
//! a latency SLO, with the Pareto front of monthly cost against latency. It sizes either the
//! team's own service, as the endpoint suite load-tested it (service time, variation and
//! concurrency calibrated by [`model::plan::endpoint`]), or, where no service is picked, the agent's
//! reference model as the quantization suite measured it on each node, labelled as such; a
//! candidate entered by hand can join either.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{bytes, points, seconds, usd, utc_minute};
use model::plan::memory::Precision;
use model::plan::rightsize::{
    Configuration, Grid, Hardware, ModelShape, PerfPoint, RightSizeInput, RightSizing, Source, right_size,
};
use model::units::{Bytes, PerSecond, Seconds, UsdPerHour};
use model::wire::view::PURCHASE_OPTIONS;

use crate::components::charts::{LineChart, Rule as ChartRule, Series, line_chart};
use crate::components::form::{ChoiceField, FieldSpec, FlagField, Form, NumberField, Rule};
use crate::components::grid_picker::{self, GridPicker};
use crate::components::service_picker::ServicePicker;
use crate::data::{MeasuredNode, MeasuredService};
use crate::pages::scenarios::SaveScenario;

pub const KIND: &str = "right_sizing";

const PRECISIONS: &[&str] = &["fp32", "fp16", "bf16", "int8"];

/// The names of the price catalog's purchase options ([`PURCHASE_OPTIONS`]), in its order.
const PURCHASE_LABELS: &[&str] = &["On demand", "Spot", "1-year commitment", "3-year commitment"];

pub const FIELDS: &[FieldSpec] = &[
    FieldSpec { key: "rate", label: "Request rate", unit: "requests / s", default: "2000", rule: Rule::Positive },
    FieldSpec { key: "slo", label: "Latency SLO", unit: "ms", default: "5", rule: Rule::Positive },
    FieldSpec { key: "quantile", label: "SLO quantile", unit: "%", default: "99", rule: Rule::Percent },
    FieldSpec { key: "utilization", label: "Most utilization", unit: "%", default: "80", rule: Rule::Percent },
    FieldSpec { key: "loss", label: "Accuracy loss allowed", unit: "points", default: "0.5", rule: Rule::NonNegative },
    FieldSpec { key: "parameters", label: "Model parameters", unit: "", default: "10M", rule: Rule::Positive },
    FieldSpec {
        key: "activation",
        label: "Activation memory per request",
        unit: "bytes",
        default: "64k",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "scale",
        label: "Service time vs the measured reference model",
        unit: "×",
        default: "1",
        rule: Rule::Positive,
    },
    FieldSpec {
        key: "option",
        label: "Purchase option",
        unit: "",
        default: "on_demand",
        rule: Rule::Choice(&PURCHASE_OPTIONS),
    },
    FieldSpec {
        key: "fallback_price",
        label: "Price of a measured node without one",
        unit: "USD / hour",
        default: "1.00",
        rule: Rule::Positive,
    },
    FieldSpec { key: "service", label: "Your service (measured)", unit: "", default: "", rule: Rule::Text },
    FieldSpec {
        key: "svc_type",
        label: "Instance type it runs on",
        unit: "",
        default: "your instance",
        rule: Rule::Text,
    },
    FieldSpec {
        key: "svc_price",
        label: "Price of one replica",
        unit: "USD / hour",
        default: "1.00",
        rule: Rule::Positive,
    },
    FieldSpec { key: "manual", label: "Add a candidate by hand", unit: "", default: "0", rule: Rule::Flag },
    FieldSpec { key: "m_name", label: "Instance type", unit: "", default: "g5.xlarge", rule: Rule::Text },
    FieldSpec { key: "m_price", label: "Price", unit: "USD / hour", default: "1.006", rule: Rule::Positive },
    FieldSpec { key: "m_memory", label: "Device memory", unit: "GiB", default: "24", rule: Rule::Positive },
    FieldSpec { key: "m_precision", label: "Precision", unit: "", default: "fp16", rule: Rule::Choice(PRECISIONS) },
    FieldSpec {
        key: "m_latency",
        label: "Service time of one request",
        unit: "ms",
        default: "2",
        rule: Rule::Positive,
    },
    FieldSpec { key: "m_cv", label: "Service-time variation (cv)", unit: "", default: "0.3", rule: Rule::NonNegative },
    FieldSpec {
        key: "m_power",
        label: "Average power of one replica",
        unit: "W, 0 if unknown",
        default: "0",
        rule: Rule::NonNegative,
    },
    grid_picker::CARBON,
    grid_picker::REGION,
    grid_picker::GRID,
    grid_picker::PUE,
    FieldSpec { key: "objective", label: "Recommend", unit: "", default: "cost", rule: Rule::Choice(OBJECTIVES) },
];

/// What the headline recommendation minimises, once emissions are counted.
const OBJECTIVES: &[&str] = &["cost", "emissions"];
const OBJECTIVE_LABELS: &[&str] = &["the cheapest configuration", "the configuration that emits least"];

/// The candidates and the search over them.
#[derive(Clone, Debug, PartialEq)]
pub struct Sizing {
    pub hardware: Vec<(Hardware, String)>,
    pub result: RightSizing,
    pub slo_s: f64,
    pub quantile: f64,
    /// The measured service sized, when one was picked.
    pub service: Option<MeasuredService>,
    /// Whether the headline is the configuration that emits least rather than the cheapest.
    pub greenest: bool,
}

/// Memory is not checked for a measured service: it was measured whole, as deployed.
const MEMORY_NOT_CHECKED: f64 = f64::MAX;

/// Why there is nothing to size yet: not a mistake in the fields, so not shown as one.
pub const NOTHING_MEASURED: &str = "No node has a quantization run yet.";

pub fn size(form: &Form, nodes: &[MeasuredNode]) -> Result<Sizing, Vec<String>> {
    size_with(form, nodes, &[])
}

/// [`size`] knowing the measured services the `service` field may name.
pub fn size_with(form: &Form, nodes: &[MeasuredNode], services: &[MeasuredService]) -> Result<Sizing, Vec<String>> {
    let mut errors = Vec::new();
    let mut num = |key: &str| {
        form.num(key).unwrap_or_else(|e| {
            errors.push(e);
            f64::NAN
        })
    };
    let rate = num("rate");
    let slo = num("slo") / 1e3;
    let quantile = num("quantile") / 100.0;
    let utilization = num("utilization") / 100.0;
    let loss = num("loss") / 100.0;
    let parameters = num("parameters");
    let activation = num("activation");
    let scale = num("scale");
    let fallback = num("fallback_price");
    // The option's place in PURCHASE_OPTIONS (an unknown one is an error below).
    let option_at = num("option");
    let picked = form.text("service");
    let service = services.iter().find(|m| !picked.is_empty() && m.run_id == picked).cloned();
    let service_price = service.as_ref().map(|_| num("svc_price"));
    let manual = form.flag("manual").then(|| {
        let price = num("m_price");
        let memory = num("m_memory") * 1024f64.powi(3);
        let latency = num("m_latency") / 1e3;
        let cv = num("m_cv");
        let power = Some(num("m_power")).filter(|w| *w > 0.0);
        (price, memory, latency, cv, power)
    });
    let grid = form.flag("carbon").then(|| Grid { g_co2e_per_kwh: num("grid"), pue: num("pue") });
    if !picked.is_empty() && service.is_none() {
        // Not a silent fall-back to the reference model: the sizing would not be of the service.
        errors.push(NO_SUCH_SERVICE.into());
    }
    if quantile == 0.0 {
        errors.push("SLO quantile: must be greater than zero".into());
    }
    if utilization == 0.0 {
        errors.push("Most utilization: must be greater than zero".into());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let at = (option_at as usize).min(PURCHASE_OPTIONS.len() - 1);
    let (option, option_label) = (PURCHASE_OPTIONS[at], PURCHASE_LABELS[at]);
    let reference_nodes = if service.is_some() { &[][..] } else { nodes };
    let mut hardware: Vec<(Hardware, String)> = reference_nodes
        .iter()
        .map(|n| {
            // The option picked where the catalog lists it for this type; else what is known,
            // saying so.
            let offer = n.offer(option).filter(|_| option != "on_demand");
            let (price, note) = match (offer, n.hourly_usd) {
                (Some(offer), _) => (offer.hourly_usd, format!("{option_label} price from {}", offer.source)),
                (None, Some(p)) if option != "on_demand" => (
                    p,
                    format!("the catalog lists no {option_label} price for this type: price from {}", n.price_source),
                ),
                (None, Some(p)) => (p, format!("price from {}", n.price_source)),
                (None, None) => (fallback, "no known price: the fallback price entered here".to_string()),
            };
            let mut hw = n.hardware.clone();
            hw.hourly_usd = UsdPerHour(price);
            // Its power under load where the agent could read it: CPU packages and DRAM (RAPL),
            // and on a GPU node its GPUs (NVML, the gemm suite).
            let measured = n.power.as_ref().and_then(|(p, run)| Some((p.busy_watts?, p, run)));
            hw.power_watts = measured.map(|(w, _, _)| w);
            let power = match (measured, grid.is_some()) {
                (Some((w, p, run)), true) => {
                    let what = if p.gpus.is_some() { p.zones.as_str() } else { "RAPL" };
                    format!(
                        "; power {w:.0} W measured under load ({what}; power supplies and fans not counted; run {})",
                        &run[..8.min(run.len())]
                    )
                }
                (None, true) => "; power not measured (no RAPL on the node, or a GPU node without a gemm run that \
                                 read NVML): emissions unknown"
                    .into(),
                (_, false) => String::new(),
            };
            for p in &mut hw.perf {
                p.service_time_mean_s = Seconds(p.service_time_mean_s.0 * scale);
            }
            let newest_of = match n.others_of_type {
                0 => String::new(),
                others => format!(", the newest of {} nodes of this type", others + 1),
            };
            let note = format!(
                "the agent's reference model (not yours) measured on {}{newest_of} (run {}, {}); {note}{power}",
                n.hostname,
                &n.run_id[..8.min(n.run_id.len())],
                utc_minute(n.run_started_at_ms)
            );
            (hw, note)
        })
        .collect();
    if let (Some(m), Some(price)) = (&service, service_price) {
        let name = form.text("svc_type");
        let note = format!(
            "your service {}, load-tested in run {} ({}): {} at once, {} each, cv {:.2}; {}; price entered here",
            m.name(),
            &m.run_id[..8.min(m.run_id.len())],
            utc_minute(m.started_at_ms),
            m.concurrency,
            seconds(m.service_mean_s),
            m.service_cv,
            m.error_words()
        );
        hardware.push((
            Hardware {
                instance_type: if name.trim().is_empty() { "your instance".into() } else { name.trim().to_string() },
                hourly_usd: UsdPerHour(price),
                device_memory_bytes: Bytes(MEMORY_NOT_CHECKED),
                source: Source::Measured { run_ids: vec![m.run_id.clone()] },
                perf: vec![PerfPoint {
                    precision: Precision::Fp32,
                    batch_size: 1,
                    service_time_mean_s: Seconds(m.service_mean_s),
                    service_time_cv: m.service_cv,
                    accuracy_delta: 0.0,
                    concurrency: m.concurrency.max(1),
                }],
                power_watts: None,
            },
            note,
        ));
    }
    if let Some((price, memory, latency, cv, power)) = manual {
        let precision = Precision::parse(&form.text("m_precision")).unwrap_or(Precision::Fp32);
        let name = form.text("m_name");
        hardware.push((
            Hardware {
                instance_type: if name.trim().is_empty() { "entered".into() } else { name.trim().to_string() },
                hourly_usd: UsdPerHour(price),
                device_memory_bytes: Bytes(memory),
                source: Source::Catalog,
                perf: vec![PerfPoint {
                    precision,
                    batch_size: 1,
                    service_time_mean_s: Seconds(latency),
                    service_time_cv: cv,
                    accuracy_delta: 0.0,
                    concurrency: 1,
                }],
                power_watts: power,
            },
            match (power, grid.is_some()) {
                (Some(w), true) => format!("entered by hand; power {w} W entered"),
                _ => "entered by hand".to_string(),
            },
        ));
    }
    if hardware.is_empty() {
        return Err(vec![NOTHING_MEASURED.into()]);
    }
    let input = RightSizeInput {
        arrival_rate_rps: PerSecond(rate),
        slo_latency_s: Seconds(slo),
        slo_quantile: quantile,
        max_utilization: utilization,
        accuracy_loss_limit: loss,
        model: ModelShape { parameters, activation_bytes_per_sample: Bytes(activation), kv_cache: Default::default() },
        headroom_fraction: 0.1,
        max_replicas: 1000,
        hardware: hardware.iter().map(|(h, _)| h.clone()).collect(),
        grid,
    };
    let label = |field: &str| match field {
        "grid.pue" => "Data centre PUE".to_string(),
        "grid.g_co2e_per_kwh" => "Grid emissions".to_string(),
        f if f.ends_with(".power_watts") => "Average power of one replica".to_string(),
        f => f.to_string(),
    };
    let result = right_size(&input).map_err(|e| vec![format!("{}: {}", label(&e.field), e.reason)])?;
    let greenest = form.text("objective") == "emissions" && grid.is_some();
    Ok(Sizing { hardware, result, slo_s: slo, quantile, service, greenest })
}

/// Monthly cost against latency at the SLO quantile, one series per instance type.
pub fn pareto_chart(s: &Sizing) -> String {
    let mut chart = LineChart::new(
        "Pareto front: monthly cost vs latency",
        "monthly cost (USD)",
        format!("latency at P{} (log)", quantile_label(s.quantile)),
    );
    chart.points_only = true;
    chart.y_log = true;
    chart.x_format = usd;
    chart.y_format = seconds;
    let mut types: Vec<&str> = s.result.pareto.iter().map(|c| c.instance_type.as_str()).collect();
    types.dedup();
    types.sort();
    types.dedup();
    for t in types {
        let pts = s
            .result
            .pareto
            .iter()
            .filter(|c| c.instance_type == t)
            .map(|c| (c.monthly_cost_usd.0, c.latency_at_quantile_s.0))
            .collect();
        chart.series.push(Series::new(t, pts));
    }
    chart.y_rules.push(ChartRule { at: s.slo_s, label: format!("SLO {}", seconds(s.slo_s)) });
    line_chart(&chart)
}

fn quantile_label(q: f64) -> String {
    let p = q * 100.0;
    if (p - p.round()).abs() < 1e-9 { format!("{p:.0}") } else { format!("{p}") }
}

fn source_label(source: &Source) -> String {
    match source {
        Source::Measured { run_ids } => {
            format!("measured (run {})", run_ids.iter().map(|r| &r[..8.min(r.len())]).collect::<Vec<_>>().join(", "))
        }
        Source::Catalog => "entered".into(),
    }
}

/// Whether a configuration is of the measured service (rather than a reference-model node or a
/// candidate entered by hand).
fn is_service(c: &Configuration, service: &MeasuredService) -> bool {
    matches!(&c.source, Source::Measured { run_ids } if run_ids.len() == 1 && run_ids[0] == service.run_id)
}

/// A measured service's precision is whatever it was deployed with.
fn precision_label(s: &Sizing, c: &Configuration) -> String {
    match &s.service {
        Some(m) if is_service(c, m) => "as deployed".into(),
        _ => c.precision.as_str().into(),
    }
}

/// Picks a service the endpoint suite load-tested; the reference-model nodes then leave the
/// search (they time the agent's model, not yours).
#[component]
pub fn RightSizingPage() -> impl IntoView {
    let query = use_query_map();
    let form = Form::new(FIELDS, &query.get_untracked());
    let nodes = Resource::new(|| (), |_| crate::data::measured_nodes());
    view! {
        <Title text="Right-sizing · Headroom"/>
        <h1>"Right-sizing"</h1>
        <p class="lede">"The cheapest configuration that meets your latency SLO, from service times measured on your nodes. Every configuration on the Pareto front is one no other beats on both cost and latency. For a language model, "<a href="/llm">"LLM serving"</a>" compares the catalog's GPUs by KV cache, TTFT and ITL."</p>
        // One Suspense reads the measured nodes for both the service list and the answer: one
        // Resource read under two Suspense boundaries now and then leaves the SSR stream open
        // forever (leptos-rs/leptos#4851). (The CI timeouts on this page were another cause,
        // routes listed while a page rendered: see `routes` in the server's `web.rs`.)
        <Suspense fallback=|| view! { <p>"Loading measured nodes…"</p> }>
        {move || Suspend::new(async move {
        let fleet = nodes.await;
        let services = fleet.as_ref().map(|fleet| fleet.services.clone()).unwrap_or_default();
        view! {
        <div class="planner">
            // Before the bundle hydrates this is a plain GET form (Enter or "Update" reloads the
            // page with what was typed); after, the page answers as you type and submitting does nothing.
            <form class="inputs card" method="get" action="/right-sizing" on:submit=|ev| ev.prevent_default()>
                <button type="submit" class="before-hydration">"Update"</button>
                {view! {
                <fieldset>
                    <legend>"Load and SLO"</legend>
                    <NumberField form key="rate"/>
                    <NumberField form key="slo"/>
                    <NumberField form key="quantile"/>
                    <NumberField form key="utilization"/>
                    <NumberField form key="loss" hint="Largest accuracy drop against FP32 you accept."/>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Your service"</legend>
                    <ServicePicker form services none="— none: the reference model on each node —"
                        idle_hint="Sizes replicas of your own service from its load test, instead of the reference model."/>
                    <Show when=move || !form.text("service").is_empty()>
                        <TextField form key="svc_type"/>
                        <NumberField form key="svc_price" hint="What one replica of your service costs an hour, as deployed."/>
                    </Show>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Model"</legend>
                    <NumberField form key="parameters"/>
                    <NumberField form key="activation"/>
                    <NumberField form key="scale" hint="The agents time a reference model; if yours takes 40× its time per request, enter 40."/>
                    <NumberField form key="fallback_price"/>
                    <ChoiceField form key="option" labels=PURCHASE_LABELS/>
                    <p class="hint">"Prices each measured node at the price catalog's row for its instance type under this option, where it lists one (each node says where its price came from). A commitment is paid for every hour of its term. Spot is priced as listed, without its interruptions (the Planner's Buying card counts them), and a fleet holding an SLO on it needs spare replicas this does not add."</p>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Candidate entered by hand"</legend>
                    <FlagField form key="manual"/>
                    <Show when=move || form.flag("manual")>
                        <TextField form key="m_name"/>
                        <NumberField form key="m_price"/>
                        <NumberField form key="m_memory"/>
                        <ChoiceField form key="m_precision" labels=&["FP32", "FP16", "BF16", "INT8"]/>
                        <NumberField form key="m_latency"/>
                        <NumberField form key="m_cv"/>
                        <Show when=move || form.flag("carbon")>
                            <NumberField form key="m_power" hint="Its average draw, to count its emissions."/>
                        </Show>
                    </Show>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Carbon"</legend>
                    <FlagField form key="carbon"/>
                    <Show when=move || form.flag("carbon")>
                        <GridPicker form/>
                        <NumberField form key="grid"/>
                        <NumberField form key="pue"/>
                        <ChoiceField form key="objective" labels=OBJECTIVE_LABELS/>
                        <p class="hint">"Emissions count where a candidate's power is known: measured under load on a node without GPUs (RAPL), or entered for a candidate by hand. Idle replicas draw power too; making the servers is not counted."</p>
                    </Show>
                </fieldset>
                }.into_any()}
                <SaveScenario kind=KIND path="/right-sizing" form/>
            </form>
            <section class="outputs" aria-live="polite">
                {match fleet {
                    Err(err) => view! { <p class="error">{format!("Could not load the measured nodes: {}", crate::pages::scenarios::clean(&err))}</p> }.into_any(),
                    Ok(fleet) => view! { <Outputs form nodes=fleet.nodes services=fleet.services/> }.into_any(),
                }}
            </section>
        </div>
        }
        })}
        </Suspense>
    }
}

#[component]
fn TextField(form: Form, key: &'static str) -> impl IntoView {
    let spec = form.spec(key);
    let value = form.signal(key);
    let id = format!("f-{key}");
    view! {
        <div class="field" data-field=key>
            <label for=id.clone()>{spec.label}</label>
            <div class="input-row">
                <input id=id name=key type="text" value=value.get_untracked() prop:value=move || value.get() on:input=move |ev| value.set(event_target_value(&ev))/>
            </div>
        </div>
    }
}

/// The error for a `service` run id that no stored plain load test has.
const NO_SUCH_SERVICE: &str = "Your service: no stored load test has that run id (one of a streamed LLM server is sized on the LLM page); pick another, or none";

#[component]
fn Outputs(form: Form, nodes: Vec<MeasuredNode>, services: Vec<MeasuredService>) -> impl IntoView {
    let result = Memo::new(move |_| size_with(&form, &nodes, &services));
    move || {
        match result.get() {
        Err(errors) if errors.iter().any(|e| e == NOTHING_MEASURED) => view! {
            <div class="card notice" data-out="nothing-measured">
                <h2>"Nothing measured yet"</h2>
                <p>"Right-sizing needs measured service times. Load-test your own service from any node:"</p>
                <pre><code>"measurements-agent run endpoint --target SERVICE_URL --protocol kserve-v2 --model NAME --sweep --server URL --token TOKEN"</code></pre>
                <p>"or time the agent's reference model on each node you could serve from:"</p>
                <pre><code>"measurements-agent run quant --server URL --token TOKEN"</code></pre>
                <p>"with this server's address as URL and an agent token from "<code>"headroom-server admin create-agent-token --name NODE"</code>". Or tick “Add a candidate by hand” above."</p>
            </div>
        }
        .into_any(),
        Err(errors) => {
            // A link naming an LLM server's run (a saved one, or one edited by hand) goes on
            // to the LLM page, which sizes those, and says so there if it is not one either.
            let llm = errors.iter().any(|e| e == NO_SUCH_SERVICE).then(|| {
                let run = form.text_untracked("service");
                let query = crate::components::form::to_query(&[("run".to_string(), run)].into_iter().collect());
                view! { <p data-out="to-llm"><a href=format!("/llm?{query}")>"Open this run on the LLM serving page"</a>", if it is a load test of a streamed LLM server."</p> }
            });
            view! {
                <div class="card problems" role="alert">
                    <h2>"Fix the marked fields"</h2>
                    <ul>{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul>
                    {llm}
                </div>
            }
            .into_any()
        }
        Ok(s) => view! { <SizingView s/> }.into_any(),
    }
    }
}

#[component]
fn SizingView(s: Sizing) -> impl IntoView {
    let chart = pareto_chart(&s);
    let q = quantile_label(s.quantile);
    let cheapest = s.result.cheapest.clone();
    let greenest = s.result.lowest_emissions.clone();
    let service = s.service.clone();
    let counted = s.hardware.iter().any(|(h, _)| h.power_watts.is_some());
    let carbon = s.result.pareto.iter().any(|c| c.co2e_kg_per_month.is_some()) || greenest.is_some();
    let headline = match (s.greenest, greenest.clone()) {
        (true, Some(g)) => Some((g, true)),
        _ => cheapest.clone().map(|c| (c, false)),
    };
    // The other objective's answer, where it differs.
    let other = match (&headline, &cheapest, &greenest) {
        (Some((h, true)), Some(c), _) if c != h => Some((c.clone(), false)),
        (Some((h, false)), _, Some(g)) if g != h => Some((g.clone(), true)),
        _ => None,
    };
    view! {
        {(s.greenest && greenest.is_none() && cheapest.is_some()).then(|| view! {
            <p class="note" data-out="no-emissions">{if counted { "No feasible configuration has a known power, so the cheapest is shown." } else { "No candidate's power is known (measured on a node without GPUs, or entered by hand), so the cheapest is shown." }}</p>
        })}
        {match headline {
            Some((c, green)) => view! { <Recommendation c q=q.clone() service=service.clone() green/> }.into_any(),
            None => view! {
                <div class="card verdict bad" role="status">
                    <h2>"No configuration meets every constraint"</h2>
                    <p>"Loosen the SLO, allow more accuracy loss, or add hardware. Why each candidate failed is listed below."</p>
                </div>
            }.into_any(),
        }}
        {other.map(|(c, green)| view! { <Recommendation c q=q.clone() service green/> })}
        <div class="chart card" data-chart="pareto" inner_html=chart></div>
        <div class="card">
            <h2>"Alternatives on the Pareto front"</h2>
            <div tabindex="0" class="table-wrap">
                <table class="stack wide alternatives">
                    <thead><tr><th>"Instance"</th><th>"Precision"</th><th class="num">"Batch"</th><th class="num">"Replicas"</th><th class="num">"Monthly cost"</th><th class="num">{format!("P{q} latency")}</th><th class="num">"Utilization"</th><th class="num">"Accuracy"</th>{carbon.then(|| view! { <th class="num">"kg CO2e / month"</th> })}<th>"Figures"</th></tr></thead>
                    <tbody>
                        {s.result.pareto.iter().map(|c| view! {
                            <tr>
                                <td data-label="Instance">{c.instance_type.clone()}</td>
                                <td data-label="Precision">{precision_label(&s, c)}</td>
                                <td data-label="Batch" class="num">{c.batch_size}</td>
                                <td data-label="Replicas" class="num">{c.replicas}</td>
                                <td data-label="Monthly cost" class="num">{usd(c.monthly_cost_usd.0)}</td>
                                <td data-label="Latency" class="num">{seconds(c.latency_at_quantile_s.0)}</td>
                                <td data-label="Utilization" class="num">{format!("{:.0} %", c.utilization * 100.0)}</td>
                                <td data-label="Accuracy" class="num">{points(c.accuracy_delta)}</td>
                                {carbon.then(|| view! { <td data-label="kg CO2e / month" class="num">{emissions_text(c)}</td> })}
                                <td data-label="Figures">{source_label(&c.source)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="note">{format!(
                "{} examined, {} every constraint.",
                if s.result.evaluated == 1 { "1 configuration".to_string() } else { format!("{} configurations", s.result.evaluated) },
                if s.result.feasible == 1 { "1 meets".to_string() } else { format!("{} meet", s.result.feasible) }
            )}</p>
        </div>
        <div class="card">
            <h2>"Hardware considered"</h2>
            <div tabindex="0" class="table-wrap">
                <table class="stack hardware">
                    <thead><tr><th>"Instance"</th><th class="num">"Price"</th><th class="num">"Memory"</th><th>"Where the figures come from"</th></tr></thead>
                    <tbody>
                        {s.hardware.iter().map(|(h, note)| view! {
                            <tr>
                                <td data-label="Instance">{h.instance_type.clone()}</td>
                                <td data-label="Price" class="num">{format!("{}/h", usd(h.hourly_usd.0))}</td>
                                <td data-label="Memory" class="num">{if h.device_memory_bytes.0 == MEMORY_NOT_CHECKED { "not checked".to_string() } else { bytes(h.device_memory_bytes.0) }}</td>
                                <td data-label="Where the figures come from">{note.clone()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            {(!s.result.rejected.is_empty()).then(|| view! {
                <h3>"Rejected"</h3>
                <ul class="rejected">
                    {s.result.rejected.iter().map(|r| view! { <li>{format!("{} at {}: {}", r.instance_type, r.precision.as_str(), r.reason)}</li> }).collect_view()}
                </ul>
            })}
        </div>
    }
}

/// A configuration's emissions a month, or why there is no figure.
fn emissions_text(c: &Configuration) -> String {
    match c.co2e_kg_per_month {
        Some(kg) if kg < 100.0 => format!("{kg:.1}"),
        Some(kg) => model::format::grouped(kg),
        None => "power unknown".into(),
    }
}

#[component]
fn Recommendation(c: Configuration, q: String, service: Option<MeasuredService>, green: bool) -> impl IntoView {
    let yours = service.as_ref().filter(|m| is_service(&c, m));
    let out = if green { "greenest" } else { "recommendation" };
    let precision = if yours.is_some() { "as deployed".to_string() } else { c.precision.as_str().to_string() };
    let latency = match yours {
        Some(m) => format!("{} (the M/G/c model's; {})", seconds(c.latency_at_quantile_s.0), m.error_words()),
        None => seconds(c.latency_at_quantile_s.0),
    };
    view! {
        <div class="card metric verdict good" data-out=out>
            <h2>{match (green, yours.is_some()) {
                (false, true) => "Cheapest configuration of your service",
                (false, false) => "Cheapest configuration",
                (true, true) => "Lowest-emission configuration of your service",
                (true, false) => "Lowest-emission configuration",
            }}</h2>
            <p class="big">{format!("{} × {}", c.replicas, c.instance_type)}</p>
            <dl>
                <dt>"Precision"</dt><dd>{precision}</dd>
                <dt>"Batch size"</dt><dd>{c.batch_size}</dd>
                <dt>"Monthly cost"</dt><dd data-out="monthly-cost">{usd(c.monthly_cost_usd.0)}</dd>
                <dt>{format!("P{q} latency")}</dt><dd data-out="latency">{latency}</dd>
                <dt>"Utilization"</dt><dd>{format!("{:.0} %", c.utilization * 100.0)}</dd>
                <dt>"Accuracy"</dt><dd>{points(c.accuracy_delta)}</dd>
                {c.co2e_kg_per_month.is_some().then(|| view! { <dt>"Emissions"</dt><dd data-out="co2e">{format!("{} kg CO2e a month", emissions_text(&c))}</dd> })}
                <dt>"Figures"</dt><dd>{source_label(&c.source)}</dd>
            </dl>
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
    fn a_measured_service_is_sized_in_replicas_of_its_concurrency_and_priced_by_the_hour() {
        owned(|| {
            let service = MeasuredService {
                run_id: "0b5e7a2c-0000-4000-8000-000000000000".into(),
                started_at_ms: 0,
                hostname: "loadgen".into(),
                target: "http://10.0.0.5:8081".into(),
                protocol: "kserve-v2-grpc".into(),
                model: Some("digits".into()),
                service_mean_s: 0.040,
                service_cv: 0.5,
                concurrency: 4,
                saturation_rps: 100.0,
                saturation_measured: true,
                mape_p99: Some(0.12),
            };
            // 250/s of 40 ms keep 10 servers busy: at most 80 % of 4 per replica is 4 replicas.
            let pairs = [
                ("rate", "250"),
                ("slo", "500"),
                ("service", service.run_id.as_str()),
                ("svc_type", "g5.xlarge"),
                ("svc_price", "2.00"),
            ];
            let s = size_with(&form(&pairs), &[], std::slice::from_ref(&service)).unwrap();
            let best = s.result.cheapest.clone().unwrap();
            assert_eq!((best.replicas, best.instance_type.as_str()), (4, "g5.xlarge"));
            assert!((best.monthly_cost_usd.0 - 4.0 * 2.0 * 730.0).abs() < 1e-6, "{best:?}");
            assert!((best.utilization - 10.0 / 16.0).abs() < 1e-9);
            assert_eq!(precision_label(&s, &best), "as deployed");
            let (_, note) = &s.hardware[0];
            assert!(
                note.contains("your service digits at http://10.0.0.5:8081, load-tested in run 0b5e7a2c"),
                "{note}"
            );
            assert!(note.contains("off by 12 % on average"), "{note}");
            // Not picked: the reference-model nodes (none here) are all there is.
            assert_eq!(size(&form(&pairs[..2]), &[]).unwrap_err(), vec![NOTHING_MEASURED.to_string()]);
            let bad = [("service", service.run_id.as_str()), ("svc_price", "free")];
            let errors = size_with(&form(&bad), &[], std::slice::from_ref(&service)).unwrap_err();
            assert!(errors.iter().any(|e| e.starts_with("Price of one replica")), "{errors:?}");
            let gone = [("service", "0b5e7a2c-ffff-4000-8000-000000000000")];
            let errors = size_with(&form(&gone), &[], std::slice::from_ref(&service)).unwrap_err();
            assert!(errors[0].starts_with("Your service: no stored load test"), "{errors:?}");
        })
    }

    /// A node that measured the reference model at 1 ms a request (FP32, batch 1), priced at
    /// `price` an hour by its operator.
    fn measured(name: &str, price: f64) -> MeasuredNode {
        MeasuredNode {
            node_id: format!("id-{name}"),
            hostname: name.into(),
            run_id: "1c0ffee0-0000-4000-8000-000000000000".into(),
            run_started_at_ms: 0,
            hourly_usd: Some(price),
            price_source: "the node's operator".into(),
            best_throughput_rps: Some(1000.0),
            others_of_type: 0,
            hardware: Hardware {
                instance_type: name.into(),
                hourly_usd: UsdPerHour(price),
                device_memory_bytes: Bytes(16.0 * 1024f64.powi(3)),
                source: Source::Measured { run_ids: vec![] },
                perf: vec![PerfPoint {
                    precision: Precision::Fp32,
                    batch_size: 1,
                    service_time_mean_s: Seconds(0.001),
                    service_time_cv: 0.5,
                    accuracy_delta: 0.0,
                    concurrency: 1,
                }],
                power_watts: None,
            },
            offers: vec![],
            power: None,
        }
    }

    #[test]
    fn a_purchase_option_prices_each_node_from_the_catalog_where_it_lists_one() {
        use model::wire::view::PriceOffer;
        owned(|| {
            let node = |name: &str, offers: &[(&str, f64)]| MeasuredNode {
                price_source: "price catalog v3 (list, as of 2026-11-01)".into(),
                offers: offers
                    .iter()
                    .map(|(o, p)| PriceOffer {
                        purchase_option: o.to_string(),
                        hourly_usd: *p,
                        source: format!("price catalog v3 ({o} sheet, as of 2026-11-01)"),
                    })
                    .collect(),
                ..measured(name, 1.0)
            };
            let nodes = [node("c7i.2xlarge", &[("on_demand", 1.0), ("one_year", 0.6)]), node("c7g.2xlarge", &[])];
            let priced = |option: &str| {
                let s = size(&form(&[("option", option)]), &nodes).unwrap();
                s.hardware.iter().map(|(h, note)| (h.hourly_usd.0, note.clone())).collect::<Vec<_>>()
            };
            let one_year = priced("one_year");
            assert_eq!(one_year[0].0, 0.6);
            let listed = "1-year commitment price from price catalog v3 (one_year sheet, as of 2026-11-01)";
            assert!(one_year[0].1.ends_with(listed), "{one_year:?}");
            assert_eq!(one_year[1].0, 1.0, "not listed: the price known for it");
            assert!(
                one_year[1].1.contains("the catalog lists no 1-year commitment price for this type"),
                "{one_year:?}"
            );
            let s = size(&form(&[("option", "one_year")]), &nodes).unwrap();
            assert_eq!(s.result.cheapest.unwrap().instance_type, "c7i.2xlarge");
            assert!(priced("on_demand").iter().all(|(p, note)| *p == 1.0 && !note.contains("commitment")));
            let errors = size(&form(&[("option", "reserved")]), &nodes).unwrap_err();
            assert!(errors[0].starts_with("Purchase option: must be one of"), "{errors:?}");
        })
    }

    #[test]
    fn with_emissions_counted_the_headline_can_be_the_configuration_that_emits_least() {
        use model::wire::measured::PowerDigest;
        owned(|| {
            let node = |name: &str, price: f64, watts: Option<f64>| MeasuredNode {
                power: watts.map(|w| {
                    let power = PowerDigest {
                        idle_watts: Some(w / 3.0),
                        busy_watts: Some(w),
                        zones: "package-0".into(),
                        gpus: None,
                    };
                    (power, "5e1f0000-aaaa".into())
                }),
                ..measured(name, price)
            };
            let nodes = [node("hot", 1.0, Some(300.0)), node("cool", 1.5, Some(50.0)), node("unknown", 0.5, None)];
            let carbon = [("carbon", "1"), ("grid", "400"), ("pue", "1.2"), ("scale", "1"), ("fallback_price", "1")];
            let s = size(&form(&carbon), &nodes).unwrap();
            assert!(!s.greenest, "the cheapest unless asked");
            assert_eq!(s.result.cheapest.as_ref().unwrap().instance_type, "unknown");
            let green = s.result.lowest_emissions.clone().unwrap();
            assert_eq!(green.instance_type, "cool");
            // Its replicas × 50 W × 1.2 × 730 h × 0.4 kg/kWh.
            let kg = f64::from(green.replicas) * 0.05 * 1.2 * 730.0 * 0.4;
            assert!((green.co2e_kg_per_month.unwrap() - kg).abs() < 1e-9);
            assert!(
                s.hardware[0].1.ends_with(
                    "; power 300 W measured under load (RAPL; power supplies and fans not counted; run 5e1f0000)"
                ),
                "{}",
                s.hardware[0].1
            );
            assert!(s.hardware[2].1.contains("power not measured"), "{}", s.hardware[2].1);
            // A GPU node's figure says what it is made of.
            let zones = "GPUs (NVML): 8 GPUs, each drawing what GPU 0 (H100) did; CPUs not measured (no RAPL)";
            let mut gpu = node("gpu", 9.0, Some(5600.0));
            if let Some((power, _)) = gpu.power.as_mut() {
                (power.zones, power.gpus) = (zones.into(), Some(8));
            }
            let with_gpu = size(&form(&carbon), &[gpu]).unwrap();
            assert!(
                with_gpu.hardware[0].1.ends_with(&format!(
                    "; power 5600 W measured under load ({zones}; power supplies and fans not counted; run 5e1f0000)"
                )),
                "{}",
                with_gpu.hardware[0].1
            );
            let asked: Vec<(&str, &str)> = carbon.iter().copied().chain([("objective", "emissions")]).collect();
            assert!(size(&form(&asked), &nodes).unwrap().greenest);
            // Without counting emissions no figure is given, and a bad PUE is named.
            let plain = size(&form(&[("scale", "1")]), &nodes).unwrap();
            assert!(
                plain.result.lowest_emissions.is_none() && plain.hardware.iter().all(|(_, n)| !n.contains("power"))
            );
            let bad: Vec<(&str, &str)> =
                carbon.iter().map(|&(k, v)| if k == "pue" { (k, "0.5") } else { (k, v) }).collect();
            assert_eq!(
                size(&form(&bad), &nodes).unwrap_err(),
                vec!["Data centre PUE: must be between 1 and 5".to_string()]
            );
        })
    }
}
