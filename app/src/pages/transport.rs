//! Transport: for a payload size, a request rate and where the two ends run, what each measured
//! transport costs in latency and cores, and which one to use.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{bytes, seconds, usd, utc_minute};
use model::plan::transport::{Placement, TransportAdvice, TransportInput, advise_transport, transport_name};
use model::units::{PerSecond, Seconds, UsdPerHour};
use model::wire::measured::TransportPoint;

use crate::components::charts::{LineChart, Series, line_chart};
use crate::components::form::{ChoiceField, FieldSpec, Form, NumberField, Rule};
use crate::data::TransportRun;

const PLACEMENTS: &[&str] = &["same_node", "cross_node"];

pub const FIELDS: &[FieldSpec] = &[
    FieldSpec { key: "payload", label: "Payload size", unit: "bytes", default: "1024", rule: Rule::Positive },
    FieldSpec { key: "rate", label: "Request rate", unit: "requests / s", default: "5000", rule: Rule::Positive },
    FieldSpec {
        key: "placement",
        label: "Where the ends run",
        unit: "",
        default: "same_node",
        rule: Rule::Choice(PLACEMENTS),
    },
    FieldSpec {
        key: "core_hour",
        label: "Price of one core",
        unit: "USD / hour",
        default: "0.048",
        rule: Rule::NonNegative,
    },
    FieldSpec {
        key: "budget",
        label: "Latency the transport may add (P99)",
        unit: "µs",
        default: "500",
        rule: Rule::Positive,
    },
];

/// What the page shows for one run and one set of inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub payload_used: u64,
    /// The measured placement the figures come from.
    pub measured_placement: String,
    pub advice: TransportAdvice,
    pub points: Vec<TransportPoint>,
}

/// The measured placement that stands for a planned one: across nodes only what was measured
/// across nodes; on one node, client and server on different cores (how services run), else on
/// one core.
fn placement_for(points: &[TransportPoint], planned: Placement) -> Option<&'static str> {
    let has = |p: &str| points.iter().any(|x| x.placement == p);
    match planned {
        Placement::CrossNode => has("cross_node").then_some("cross_node"),
        Placement::SameNode => ["different_cores", "same_core"].into_iter().find(|p| has(p)),
    }
}

pub fn choose(form: &Form, run: &TransportRun) -> Result<Choice, Vec<String>> {
    let mut errors = Vec::new();
    let mut num = |key: &str| {
        form.num(key).unwrap_or_else(|e| {
            errors.push(e);
            f64::NAN
        })
    };
    let payload = num("payload");
    let rate = num("rate");
    let core_hour = num("core_hour");
    let budget = num("budget") / 1e6;
    if !errors.is_empty() {
        return Err(errors);
    }
    let planned = if form.text("placement") == "cross_node" { Placement::CrossNode } else { Placement::SameNode };
    let Some(measured) = placement_for(&run.points, planned) else {
        return Err(vec![format!(
            "{} has no cross-node measurements. Run `measurements-agent serve` on a second node and `measurements-agent run transport --peer HOST:PORT` here.",
            run.hostname
        )]);
    };
    let at_placement: Vec<TransportPoint> = run.points.iter().filter(|p| p.placement == measured).cloned().collect();
    let sizes: Vec<u64> = {
        let mut s: Vec<u64> = at_placement.iter().map(|p| p.payload_bytes).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    let nearest = sizes
        .iter()
        .copied()
        .min_by(|a, b| {
            let d = |x: u64| ((x as f64).ln() - payload.ln()).abs();
            d(*a).total_cmp(&d(*b))
        })
        .ok_or_else(|| vec!["This run measured no round trip.".to_string()])?;
    let input = TransportInput {
        requests_per_second: PerSecond(rate),
        placement: planned,
        core_hour_usd: UsdPerHour(core_hour),
        latency_budget_p99_s: Seconds(budget),
        measurements: at_placement
            .iter()
            .filter(|p| p.payload_bytes == nearest)
            .map(TransportPoint::to_model)
            .collect(),
    };
    let advice = advise_transport(&input).map_err(|e| vec![format!("{}: {}", e.field, e.reason)])?;
    Ok(Choice { payload_used: nearest, measured_placement: measured.to_string(), advice, points: at_placement })
}

/// P99 round trip against payload size per transport, with the physical floors.
pub fn latency_chart(points: &[TransportPoint], placement: &str) -> String {
    let mut chart = LineChart::new(
        format!("P99 round trip vs payload ({})", placement.replace('_', " ")),
        "payload (log)",
        "P99 round trip (log)",
    );
    chart.x_log = true;
    chart.y_log = true;
    chart.x_format = bytes;
    chart.y_format = seconds;
    let mut by_transport: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let mut floors: BTreeMap<String, BTreeMap<u64, f64>> = BTreeMap::new();
    for p in points {
        by_transport.entry(&p.transport).or_default().push((p.payload_bytes as f64, p.latency_p99_s));
        if let (Some(name), Some(v)) = (&p.floor_name, p.floor_s) {
            floors.entry(name.clone()).or_default().insert(p.payload_bytes, v);
        }
    }
    for (name, pts) in by_transport {
        chart.series.push(Series::new(transport_name(name), pts));
    }
    for (name, pts) in floors {
        chart.series.push(Series::new(
            format!("floor: {}", name.replace('_', " ")),
            pts.into_iter().map(|(x, y)| (x as f64, y)).collect(),
        ));
    }
    line_chart(&chart)
}

#[component]
pub fn TransportPage() -> impl IntoView {
    let query = use_query_map();
    let form = Form::new(FIELDS, &query.get_untracked());
    let runs = Resource::new(|| (), |_| crate::data::transport_runs());
    view! {
        <Title text="Transport · Headroom"/>
        <h1>"Transport"</h1>
        <p class="lede">"How to call your inference service: latency and CPU of each transport as measured by the agents, what the cores cost at your rate, and the cheapest one within your latency budget."</p>
        <div class="planner">
            // Before the bundle hydrates this is a plain GET form (Enter or "Update" reloads the
            // page with what was typed); after, the page answers as you type and submitting does nothing.
            <form class="inputs card" method="get" action="/transport" on:submit=|ev| ev.prevent_default()>
                <button type="submit" class="before-hydration">"Update"</button>
                <fieldset>
                    <legend>"Traffic"</legend>
                    <NumberField form key="payload" hint="The nearest measured size is used."/>
                    <NumberField form key="rate"/>
                    <ChoiceField form key="placement" labels=&["Same node", "Across nodes"]/>
                    <NumberField form key="core_hour"/>
                    <NumberField form key="budget"/>
                </fieldset>
            </form>
            <section class="outputs" aria-live="polite">
                <Suspense fallback=|| view! { <p>"Loading transport measurements…"</p> }>
                    {move || Suspend::new(async move {
                        match runs.await {
                            Err(err) => view! { <p class="error">{format!("Could not load transport runs: {}", crate::pages::scenarios::clean(&err))}</p> }.into_any(),
                            Ok(runs) if runs.is_empty() => view! {
                                <p class="notice">"No transport run stored yet. Run "<code>"measurements-agent run transport --server URL --token TOKEN"</code>" on a node."</p>
                            }.into_any(),
                            Ok(runs) => view! { <Runs form runs/> }.into_any(),
                        }
                    })}
                </Suspense>
            </section>
        </div>
    }
}

#[component]
fn Runs(form: Form, runs: Vec<TransportRun>) -> impl IntoView {
    let picked = RwSignal::new(0usize);
    let count = runs.len();
    let options = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, format!("{} · {}", r.hostname, utc_minute(r.started_at_ms))))
        .collect::<Vec<_>>();
    let runs = StoredValue::new(runs);
    let result = Memo::new(move |_| runs.with_value(|r| choose(&form, &r[picked.get().min(r.len() - 1)])));
    view! {
        <div class="field">
            <label for="transport-node">"Measured on"</label>
            <select id="transport-node" on:change=move |ev| picked.set(event_target_value(&ev).parse().unwrap_or(0))>
                {options.into_iter().map(|(i, label)| view! { <option value=i.to_string()>{label}</option> }).collect_view()}
            </select>
            {(count >= crate::data::TRANSPORT_NODES as usize).then(|| view! {
                <p class="hint">{format!("The {count} nodes measured last; every run stays on its node's runs in the Fleet.")}</p>
            })}
        </div>
        {move || match result.get() {
            Err(errors) => view! {
                <div class="card problems" role="alert"><ul>{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul></div>
            }.into_any(),
            Ok(c) => {
                let run_id = runs.with_value(|r| r[picked.get_untracked().min(r.len() - 1)].run_id.clone());
                view! { <ChoiceView c run_id/> }.into_any()
            }
        }}
    }
}

#[component]
fn ChoiceView(c: Choice, run_id: String) -> impl IntoView {
    let chart = latency_chart(&c.points, &c.measured_placement);
    let advice = c.advice.clone();
    view! {
        <div class=if advice.recommended.is_some() { "card verdict good" } else { "card verdict bad" }>
            <h2>"Recommendation"</h2>
            <p class="big" data-out="transport">{advice.recommended.as_deref().map(transport_name).unwrap_or_else(|| "none fits".into())}</p>
            <p class="reason">{advice.reason.clone()}</p>
            <p class="note">{format!("Figures for {} payloads measured with the ends on {}, run ", bytes(c.payload_used as f64), c.measured_placement.replace('_', " "))}<a href=format!("/runs/{run_id}")>{run_id[..8.min(run_id.len())].to_string()}</a>"."</p>
        </div>
        <div class="card">
            <div tabindex="0" class="table-wrap">
                <table class="transports stack">
                    <thead><tr><th>"Transport"</th><th class="num">"P99 round trip"</th><th class="num">"Cores at this rate"</th><th class="num">"Core cost per month"</th><th>"Note"</th></tr></thead>
                    <tbody>
                        {advice.options.iter().map(|o| view! {
                            <tr class:excluded=o.excluded.is_some()>
                                <td data-label="Transport">{transport_name(&o.transport)}</td>
                                <td class="num" data-label="P99 round trip">{seconds(o.latency_p99_s.0)}</td>
                                <td class="num" data-label="Cores at this rate">{format!("{:.2}", o.cores)}</td>
                                <td class="num" data-label="Core cost per month">{usd(o.monthly_core_usd.0)}</td>
                                <td data-label="Note">{o.excluded.clone().unwrap_or_default()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
        <div class="chart card" data-chart="transport" inner_html=chart></div>
    }
}
