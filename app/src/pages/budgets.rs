//! Budgets and forecast (finance and admin): a monthly budget per team or deployment, and the
//! newest report's spend over the next 12 months at each deployment's growth, saying when
//! each crosses its budget.

use leptos::prelude::*;
use leptos_meta::Title;
use model::format::{usd, utc_minute};
use model::money::to_usd;

use crate::components::charts::{LineChart, Rule, Series, line_chart};
use crate::data::{BudgetsView, ForecastLineView, budgets_page, delete_budget, set_budget};
use crate::pages::reports::Downloads;
use crate::pages::scenarios::clean;

/// Lines drawn in the chart: the costliest teams.
const CHARTED: usize = 8;

#[component]
pub fn BudgetsPage() -> impl IntoView {
    let set = Action::new(|(scope, name, amount): &(String, String, String)| {
        // "$25,000" reads as 25000: the server takes plain decimals.
        let amount: String = amount.chars().filter(|c| !matches!(c, '$' | ',' | ' ')).collect();
        set_budget(scope.clone(), name.clone(), amount)
    });
    let remove = Action::new(|id: &String| delete_budget(id.clone()));
    let data = Resource::new(move || (set.version().get(), remove.version().get()), |_| budgets_page());
    view! {
        <Title text="Budgets · Headroom"/>
        <h1>"Budgets and forecast"</h1>
        <p class="lede">"What each team and deployment will spend in each of the next 12 months, from the newest report: each deployment's volume grows at its growth rate, its replicas follow the volume (the ones it needs scaled with it, its idle ones kept), priced at the report's catalog version. Set a monthly budget to see the month it is first exceeded."</p>
        <Suspense fallback=|| view! { <p>"Loading budgets…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(err) => view! { <p class="error">{format!("Could not load budgets: {}", clean(&err))}</p> }.into_any(),
                    Ok(v) => view! { <Budgets v set remove/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

type SetBudget = Action<(String, String, String), Result<crate::data::BudgetView, ServerFnError>>;
type RemoveBudget = Action<String, Result<(), ServerFnError>>;

/// "month 3 (2027-02)", or why there is no such month.
fn crossing(line: &ForecastLineView, months: &[String]) -> String {
    match (line.budget, line.first_over) {
        (None, _) => "no budget".into(),
        (Some(_), None) => "within budget all 12 months".into(),
        (Some(_), Some(m)) => {
            format!("over in {} (month {m})", months.get(m as usize - 1).cloned().unwrap_or_default())
        }
    }
}

#[component]
fn Budgets(v: BudgetsView, set: SetBudget, remove: RemoveBudget) -> impl IntoView {
    let scope = RwSignal::new("team".to_string());
    let name = RwSignal::new(String::new());
    let amount = RwSignal::new(String::new());
    let months = v.months.clone();
    let teams: Vec<ForecastLineView> = v.lines.iter().filter(|l| l.scope == "team").cloned().collect();
    let deployments: Vec<ForecastLineView> = v.lines.iter().filter(|l| l.scope == "deployment").cloned().collect();
    let shown = |l: &ForecastLineView| if l.name.is_empty() { "(no team)".to_string() } else { l.name.clone() };
    let chart = (!months.is_empty()).then(|| {
        let mut costliest = teams.clone();
        costliest.sort_by_key(|l| std::cmp::Reverse(l.spend.iter().copied().max().unwrap_or(0)));
        costliest.truncate(CHARTED);
        let mut c = LineChart::new("Forecast spend by team, a month", "month after the report", "USD a month");
        c.x_format = |x| format!("{x:.0}");
        c.y_format = usd;
        c.series = costliest
            .iter()
            .map(|l| {
                Series::new(shown(l), l.spend.iter().enumerate().map(|(m, s)| (m as f64 + 1.0, to_usd(*s))).collect())
            })
            .collect();
        c.y_rules = costliest
            .iter()
            .filter_map(|l| l.budget.map(|b| Rule { at: to_usd(b), label: format!("{} budget", shown(l)) }))
            .collect();
        line_chart(&c)
    });
    let known: Vec<String> = v.lines.iter().map(|l| l.name.clone()).filter(|n| !n.is_empty()).collect();
    let table = move |lines: Vec<ForecastLineView>, what: &'static str, months: Vec<String>| {
        view! {
            <div tabindex="0" class="table-wrap">
                <table class=format!("stack forecast {what}")>
                    <thead><tr>
                        <th>{if what == "team" { "Team" } else { "Deployment" }}</th>
                        <th class="num">"Budget a month"</th>
                        <th class="num">{format!("{} (month 1)", months.first().cloned().unwrap_or_default())}</th>
                        <th class="num">{format!("{} (month 12)", months.last().cloned().unwrap_or_default())}</th>
                        <th>"Budget"</th>
                    </tr></thead>
                    <tbody>
                        {lines.iter().map(|l| {
                            let over = l.first_over.is_some();
                            view! {
                                <tr class:over=over>
                                    <td data-label="Name">{shown(l)}</td>
                                    <td data-label="Budget a month" class="num">{l.budget.map(|b| usd(to_usd(b))).unwrap_or_else(|| "—".into())}</td>
                                    <td data-label="Month 1" class="num">{l.spend.first().map(|s| usd(to_usd(*s))).unwrap_or_default()}</td>
                                    <td data-label="Month 12" class="num">{l.spend.last().map(|s| usd(to_usd(*s))).unwrap_or_default()}</td>
                                    <td data-label="Budget" data-out="crossing">{crossing(l, &months)}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        }
    };
    let report_line = match &v.report {
        None => "No report yet: build one on the Reports page (or POST /api/v1/reports) to forecast from.".to_string(),
        Some(r) if months.is_empty() => {
            format!("The newest report, “{}”, was built before forecasts: build a new one to forecast from.", r.name)
        }
        Some(r) => format!(
            "From “{}” ({} to {}, price catalog v{}), built {} by {}.",
            r.name,
            r.from,
            r.to,
            r.catalog_version,
            utc_minute(r.created_at_ms),
            r.created_by
        ),
    };
    let downloads = v.report.as_ref().filter(|_| !months.is_empty()).map(|r| {
        let id = r.id.clone();
        view! { <Downloads lead="Forecast files: " base=format!("/api/v1/reports/{id}/forecast")/> }
    });
    view! {
        <p class="note" data-out="forecast-from">{report_line}</p>
        {chart.map(|svg| view! { <div class="chart card" data-chart="forecast" inner_html=svg></div> })}
        {(!teams.is_empty()).then(|| view! { <h2>"By team"</h2> })}
        {(!teams.is_empty()).then(|| table(teams.clone(), "team", months.clone()))}
        {(!deployments.is_empty()).then(|| view! { <h2>"By deployment"</h2> })}
        {(!deployments.is_empty()).then(|| table(deployments.clone(), "deployment", months.clone()))}
        {(v.others > 0).then(|| view! { <p class="note">{format!("{} smaller teams and deployments are in the forecast files.", v.others)}</p> })}
        {downloads}
        <div class="card">
            <h2>"Set a monthly budget"</h2>
            <p class="hint">"For a team or a deployment, named as reports name it; setting one again replaces its amount."</p>
            <div class="report-form">
                <label>"For "<select id="budget-scope" on:change=move |ev| scope.set(event_target_value(&ev)) prop:value=move || scope.get()>
                    <option value="team">"team"</option>
                    <option value="deployment">"deployment"</option>
                </select></label>
                <label>"Name "<input id="budget-name" type="text" maxlength="200" list="budget-names" prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
                <datalist id="budget-names">{known.into_iter().map(|n| view! { <option value=n/> }).collect_view()}</datalist>
                <label>"USD a month "<input id="budget-amount" type="text" inputmode="decimal" placeholder="e.g. 25000" prop:value=move || amount.get() on:input=move |ev| amount.set(event_target_value(&ev))/></label>
                <button type="button" class="primary" disabled=move || set.pending().get() || amount.get().trim().is_empty() on:click=move |_| {
                    set.dispatch((scope.get_untracked(), name.get_untracked(), amount.get_untracked()));
                }>"Set budget"</button>
            </div>
            {move || set.value().get().map(|r| match r {
                Ok(b) => view! { <p class="saved" role="status">{format!("Budget for {} “{}”: {} a month.", b.scope, b.name, usd(to_usd(b.monthly)))}</p> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{format!("Not set: {}", clean(&e))}</p> }.into_any(),
            })}
        </div>
        <h2>"Budgets"</h2>
        {if v.budgets.is_empty() {
            view! { <p class="notice">"No budget set yet."</p> }.into_any()
        } else {
            view! {
                <div tabindex="0" class="table-wrap">
                    <table class="stack budgets">
                        <thead><tr><th>"For"</th><th>"Name"</th><th class="num">"A month"</th><th>"Set"</th><th>"Change"</th></tr></thead>
                        <tbody>
                            {v.budgets.iter().map(|b| {
                                let id = b.id.clone();
                                let label = format!("Delete the budget of {} {}", b.scope, b.name);
                                view! {
                                    <tr>
                                        <td data-label="For">{b.scope.clone()}</td>
                                        <td data-label="Name">{if b.name.is_empty() { "(no team)".to_string() } else { b.name.clone() }}</td>
                                        <td data-label="A month" class="num">{usd(to_usd(b.monthly))}</td>
                                        <td data-label="Set">{format!("{} by {}", utc_minute(b.updated_at_ms), b.updated_by)}</td>
                                        <td data-label="Change"><button type="button" aria-label=label on:click=move |_| { remove.dispatch(id.clone()); }>"Delete"</button></td>
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
