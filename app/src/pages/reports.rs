//! The Reports page (finance and admin): every monthly cost report with its total, the newest
//! one's cost by deployment, the savings its recommendations would bring, and the downloads.

use leptos::prelude::*;
use leptos_meta::Title;
use model::calendar::Date;
use model::format::{grouped, usd, utc_minute};
use model::money::to_usd;

use crate::components::charts::stacked_bars;
use crate::data::{EmissionsView, ReportsView, TeamChargeView, report_from_scenarios, reports_page};
use crate::pages::scenarios::clean;

#[component]
pub fn ReportsPage() -> impl IntoView {
    let build = Action::new(|(name, team, from, to): &(String, String, String, String)| {
        report_from_scenarios(name.clone(), Some(team.clone()), from.clone(), to.clone())
    });
    let data = Resource::new(move || build.version().get(), |_| reports_page());
    view! {
        <Title text="Reports · Headroom"/>
        <h1>"Reports"</h1>
        <p class="lede">"What each deployment costs over a period and what each open recommendation would save, with the price-catalog version and benchmark runs behind every figure. Money is computed in whole micro-dollars and rounded only when shown."</p>
        <Suspense fallback=|| view! { <p>"Loading reports…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(err) => view! { <p class="error">{format!("Could not load reports: {}", clean(&err))}</p> }.into_any(),
                    Ok(v) => view! { <Reports v builder=build/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

type Build = Action<(String, String, String, String), Result<crate::data::ReportSummaryView, ServerFnError>>;

#[component]
fn Reports(v: ReportsView, builder: Build) -> impl IntoView {
    let name = RwSignal::new("Monthly cost".to_string());
    let team = RwSignal::new(String::new());
    // Finance reports a closed month: the last one by default.
    let (first, last) = crate::today().previous_month();
    let from = RwSignal::new(first.to_string());
    let to = RwSignal::new(last.to_string());
    let newest = v.reports.first().cloned();
    let emissions = v.emissions.clone();
    // Why the report cannot be built yet, said beside the disabled button.
    let scenarios = v.planner_scenarios;
    let blocked = move || -> Option<String> {
        if scenarios == 0 {
            return Some("Nothing to build from yet: save a scenario on the Planner first.".into());
        }
        match (Date::parse(&from.get()), Date::parse(&to.get())) {
            (Err(reason), _) => Some(format!("From {reason}.")),
            (_, Err(reason)) => Some(format!("To {reason}.")),
            (Ok(f), Ok(t)) if t < f => Some("The period ends before it starts: set To on or after From.".into()),
            _ => None,
        }
    };
    let chart = (!v.top.is_empty()).then(|| {
        let rows: Vec<(String, Vec<f64>)> =
            v.top.iter().map(|(d, serving, training)| (d.clone(), vec![to_usd(*serving), to_usd(*training)])).collect();
        stacked_bars("Cost by deployment, newest report", "USD over the period", &rows, &["serving", "training"], usd)
    });
    view! {
        {newest.map(|r| {
            let id = r.id.clone();
            view! {
                <div class="cards">
                    <div class="card metric">
                        <h2>{format!("{} · {} to {}", r.name, r.from, r.to)}</h2>
                        <p class="big" data-out="report-total">{usd(to_usd(r.total_micro_usd))}</p>
                        <p class="sub">{format!("{} deployment{}, price catalog v{}", r.deployments, if r.deployments == 1 { "" } else { "s" }, r.catalog_version)}</p>
                        <Downloads lead="" base=format!("/api/v1/reports/{id}")/>
                    </div>
                    {emissions.clone().map(|e| view! { <Emissions e/> })}
                    <div class="card metric">
                        <h2>"Open recommendations would save"</h2>
                        <dl>
                            {v.savings.iter().map(|(kind, micros)| view! { <dt>{kind.replace('_', " ")}</dt><dd>{usd(to_usd(*micros))}</dd> }).collect_view()}
                        </dl>
                    </div>
                </div>
            }
        })}
        {chart.map(|svg| view! { <div class="chart card" data-chart="report" inner_html=svg></div> })}
        {(v.others > 0).then(|| view! { <p class="note">{format!("{} smaller deployments are in the downloads.", v.others)}</p> })}
        {v.reports.first().map(|r| view! { <Chargeback id=r.id.clone() teams=v.chargeback.clone() others=v.chargeback_others idle_known=v.idle_known policy=v.idle_policy.clone()/> })}
        <div class="card">
            <h2>"New report from saved scenarios"</h2>
            <p class="hint">{format!("Each saved Planner scenario ({} saved) becomes one line of the report: its requests, training and serving cost over the days chosen, and its distillation option as a possible saving, charged to the team you name (or to no team). Amounts are in US dollars, rounded to cents in the files, with the exact figure kept beside them.", v.planner_scenarios)}</p>
            <div class="report-form">
                <label>"Name "<input id="report-name" type="text" value=name.get_untracked() prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
                <label>"Team "<input id="report-team" type="text" maxlength="200" placeholder="e.g. search" value=team.get_untracked() prop:value=move || team.get() on:input=move |ev| team.set(event_target_value(&ev))/></label>
                <label>"From "<input id="report-from" type="date" value=from.get_untracked() prop:value=move || from.get() on:input=move |ev| from.set(event_target_value(&ev))/></label>
                <label>"To "<input id="report-to" type="date" value=to.get_untracked() prop:value=move || to.get() on:input=move |ev| to.set(event_target_value(&ev))/></label>
                <button type="button" class="primary" aria-describedby="build-why" disabled=move || builder.pending().get() || blocked().is_some() on:click=move |_| {
                    builder.dispatch((name.get_untracked(), team.get_untracked(), from.get_untracked(), to.get_untracked()));
                }>"Build report"</button>
            </div>
            <p class="hint" id="build-why" data-out="build-why">{move || blocked().unwrap_or_default()}</p>
            {move || builder.value().get().map(|r| match r {
                Ok(s) => view! { <p class="saved" role="status">{format!("Built “{}”: {} deployment{}, {}.", s.name, s.deployments, if s.deployments == 1 { "" } else { "s" }, usd(to_usd(s.total_micro_usd)))}</p> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{format!("Not built: {}", clean(&e))}</p> }.into_any(),
            })}
        </div>
        <h2>"All reports"</h2>
        {if v.reports.is_empty() {
            view! { <p class="notice">"No report yet."</p> }.into_any()
        } else {
            view! {
                <div tabindex="0" class="table-wrap">
                    <table class="stack reports">
                        <thead><tr><th>"Name"</th><th>"Period"</th><th class="num">"Deployments"</th><th class="num">"Total"</th><th class="num">"Catalog"</th><th>"Built"</th><th>"Files"</th></tr></thead>
                        <tbody>
                            {v.reports.iter().map(|r| {
                                let id = r.id.clone();
                                view! {
                                    <tr>
                                        <td data-label="Name">{r.name.clone()}</td>
                                        <td data-label="Period">{format!("{} to {}", r.from, r.to)}</td>
                                        <td data-label="Deployments" class="num">{r.deployments}</td>
                                        <td data-label="Total" class="num">{usd(to_usd(r.total_micro_usd))}</td>
                                        <td data-label="Catalog" class="num">{format!("v{}", r.catalog_version)}</td>
                                        <td data-label="Built">{format!("{} by {}", utc_minute(r.created_at_ms), r.created_by)}</td>
                                        <td data-label="Files"><a href=format!("/api/v1/reports/{id}.csv")>"CSV"</a>" "<a href=format!("/api/v1/reports/{id}.xlsx")>"XLSX"</a>" "<a href=format!("/api/v1/reports/{id}.parquet")>"Parquet"</a></td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            }.into_any()
        }}
    }
}

/// The newest report's energy and emissions, over the deployments that gave their power.
#[component]
fn Emissions(e: EmissionsView) -> impl IntoView {
    let kg = if e.co2e_kg < 100.0 { format!("{:.1}", e.co2e_kg) } else { grouped(e.co2e_kg) };
    let grid = if e.grid_version > 0 {
        format!("grid-intensity table v{}", e.grid_version)
    } else {
        "grid figures as entered".into()
    };
    view! {
        <div class="card metric" data-card="emissions">
            <h2>"Emissions over the period"</h2>
            <p class="big" data-out="report-co2e">{format!("{kg} kg CO2e")}</p>
            <p class="sub" data-out="report-co2e-note">{format!(
                "{} kWh{}; {} of {} deployments gave their power; {grid}. Location-based; making the servers is not counted.",
                grouped(e.energy_kwh),
                e.g_per_1000_requests.map(|g| format!(", {g:.3} g per 1,000 requests")).unwrap_or_default(),
                e.counted,
                e.deployments,
            )}</p>
        </div>
    }
}

/// The newest report by team: what each pays for what its volume used, the idle cost the
/// report's policy charges it, and training, with the chargeback files.
#[component]
fn Chargeback(
    id: String,
    teams: Vec<TeamChargeView>,
    others: usize,
    idle_known: bool,
    policy: (String, String),
) -> impl IntoView {
    let idle: i64 = teams.iter().map(|t| t.idle).sum();
    let name = |t: &TeamChargeView| match (&t.team, &t.cost_centre) {
        (team, _) if team.is_empty() => "(no team)".to_string(),
        (team, Some(centre)) => format!("{team} · {centre}"),
        (team, None) => team.clone(),
    };
    let chart = (!teams.is_empty()).then(|| {
        let rows: Vec<(String, Vec<f64>)> = teams
            .iter()
            .map(|t| (name(t), vec![to_usd(t.used_serving), to_usd(t.idle_charged), to_usd(t.training)]))
            .collect();
        stacked_bars(
            "Chargeback by team, newest report",
            "USD over the period",
            &rows,
            &["used serving", "idle charged", "training"],
            usd,
        )
    });
    let why = if !idle_known {
        "No deployment of this report says what its volume needs (needed_replicas, or sizing from its service time and SLO), so none of its replicas is counted idle.".to_string()
    } else if idle == 0 {
        "Every deployment that says what its volume needs runs no more replicas than that: nothing is idle.".to_string()
    } else {
        let shown = if others > 0 { " (by the teams shown)" } else { "" };
        format!(
            "{}{shown} of serving paid for replicas beyond what the volumes needed at their SLOs. Policy “{}”: {}.",
            usd(to_usd(idle)),
            policy.0,
            policy.1
        )
    };
    view! {
        <div class="card">
            <h2>"Chargeback by team"</h2>
            <p class="hint" data-out="idle-policy">{why}</p>
            {chart.map(|svg| view! { <div class="chart" data-chart="chargeback" inner_html=svg></div> })}
            <div tabindex="0" class="table-wrap">
                <table class="stack chargeback">
                    <thead><tr><th>"Team"</th><th class="num">"Deployments"</th><th class="num">"Used serving"</th><th class="num">"Own idle"</th><th class="num">"Idle charged"</th><th class="num">"Training"</th><th class="num">"Chargeback"</th></tr></thead>
                    <tbody>
                        {teams.iter().map(|t| view! {
                            <tr>
                                <td data-label="Team">{name(t)}</td>
                                <td data-label="Deployments" class="num">{t.deployments}</td>
                                <td data-label="Used serving" class="num">{usd(to_usd(t.used_serving))}</td>
                                <td data-label="Own idle" class="num">{usd(to_usd(t.idle))}</td>
                                <td data-label="Idle charged" class="num">{usd(to_usd(t.idle_charged))}</td>
                                <td data-label="Training" class="num">{usd(to_usd(t.training))}</td>
                                <td data-label="Chargeback" class="num">{usd(to_usd(t.chargeback))}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            {(others > 0).then(|| view! { <p class="note">{format!("{others} smaller teams are in the chargeback files.")}</p> })}
            <Downloads lead="Chargeback files: " base=format!("/api/v1/reports/{id}/chargeback")/>
        </div>
    }
}

/// Links to download `base` as CSV, XLSX and Parquet, after `lead`.
#[component]
pub fn Downloads(lead: &'static str, base: String) -> impl IntoView {
    view! {
        <p class="downloads">{lead}
            <a href=format!("{base}.csv") download>"CSV"</a>" · "
            <a href=format!("{base}.xlsx") download>"XLSX"</a>" · "
            <a href=format!("{base}.parquet") download>"Parquet"</a>
        </p>
    }
}
