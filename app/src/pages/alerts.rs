//! Regression alerts: a run's headline figure worse than the recent runs of its hardware class
//! by more than the threshold and the run-to-run noise, with what it costs a month and what
//! changed; acknowledged and resolved here.

use leptos::prelude::*;
use leptos_meta::Title;
use model::format::{bytes_per_second, seconds, usd, utc_minute};

use crate::data::{AlertList, AlertView, alerts, set_alert_state};
use crate::pages::scenarios::clean;

/// A figure in its unit, as people read it.
pub fn figure_text(unit: &str, value: f64) -> String {
    match unit {
        "bytes_per_second" => bytes_per_second(value),
        "seconds" => seconds(value),
        "requests_per_second" => format!("{value:.1} req/s"),
        "tokens_per_second" => format!("{value:.0} tokens/s"),
        _ => format!("{value:.4}"),
    }
}

/// `+25.0 %`.
fn percent(fraction: f64) -> String {
    format!("{:+.1} %", fraction * 100.0)
}

/// The measured figure against its baseline, in one sentence.
pub fn against_baseline(a: &AlertView) -> String {
    let judged = match a.judged_on.as_str() {
        "window" => format!(
            "{}, the median of this run and the {} before it,",
            figure_text(&a.unit, a.value),
            model::plan::regression::WINDOW - 1
        ),
        _ => format!("{} in this run", figure_text(&a.unit, a.value)),
    };
    format!(
        "{judged} against a median of {} (noise σ {}) over {} earlier runs of the class",
        figure_text(&a.unit, a.median),
        figure_text(&a.unit, a.noise),
        a.baseline_runs
    )
}

/// What the regression costs, or why it cannot say.
pub fn cost_text(a: &AlertView) -> String {
    match a.monthly_cost_usd {
        Some(usd_month) => format!("{} a month", usd(usd_month)),
        None => "—".into(),
    }
}

#[component]
pub fn AlertsPage() -> impl IntoView {
    let list = Resource::new(|| (), |_| alerts());
    let changed = Callback::new(move |()| list.refetch());
    view! {
        <Title text="Alerts · Headroom"/>
        <h1>"Regression alerts"</h1>
        <p class="lede">"After each upload, every headline figure of the run (memory bandwidth, the HTTP round trip, the reference model's latency) is compared with up to 50 earlier runs of the same hardware class (its instance type, else its CPU model). It alerts when the run, or the median of it and the 14 runs before it, is worse than their median by more than the threshold and by more than 3.5 times the noise of what is judged, so a figure that always moves a lot does not alert at every dip, and a lasting shift hidden in any one run's noise is still found. Later regressed runs of the class are counted on the alert until it is resolved."</p>
        <Suspense fallback=|| view! { <p>"Loading alerts…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(err) => view! { <p class="error">{format!("Could not load alerts: {}", clean(&err))}</p> }.into_any(),
                    Ok(l) => view! { <AlertTable list=l changed/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn AlertTable(list: AlertList, changed: Callback<()>) -> impl IntoView {
    let active = list.items.iter().filter(|a| a.is_active()).count();
    let summary = format!(
        "{active} active · alerts above {:.0} % worse · {}",
        list.threshold * 100.0,
        if list.webhook { "new alerts are posted to the webhook" } else { "no webhook set (--alert-webhook)" }
    );
    if list.items.is_empty() {
        return view! {
            <p data-out="alert-summary">{summary}</p>
            <p class="notice">"No regression so far. A class is judged from its 25th run: 10 to compare with and the 14 just before the run."</p>
        }
        .into_any();
    }
    let can_act = list.can_act;
    view! {
        <p data-out="alert-summary">{summary}</p>
        <div tabindex="0" class="table-wrap">
            <table class="alerts stack">
                <thead><tr>
                    <th scope="col">"State"</th><th scope="col">"Figure"</th><th scope="col">"Run"</th>
                    <th scope="col">"Measured"</th><th scope="col" class="num">"Worse by"</th>
                    <th scope="col" class="num">"Cost"</th><th scope="col">"What changed"</th>
                    {can_act.then(|| view! { <th scope="col">"Act"</th> })}
                </tr></thead>
                <tbody>
                    {list.items.into_iter().map(|a| view! { <AlertRow a can_act changed/> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn AlertRow(a: AlertView, can_act: bool, changed: Callback<()>) -> impl IntoView {
    let act = Action::new(|(id, state): &(String, String)| set_alert_state(id.clone(), state.clone()));
    Effect::new(move || {
        if matches!(act.value().get(), Some(Ok(_))) {
            changed.run(());
        }
    });
    let id = StoredValue::new(a.id.clone());
    let button = move |state: &'static str, label: &'static str| {
        view! {
            <button type="button" class="link" data-act=state disabled=move || act.pending().get()
                on:click=move |_| { act.dispatch((id.get_value(), state.to_string())); }>{label}</button>
        }
    };
    let actions = can_act.then(|| {
        let buttons = match a.state.as_str() {
            "open" => view! { {button("acknowledged", "Acknowledge")}" "{button("resolved", "Resolve")} }.into_any(),
            "acknowledged" => view! { {button("resolved", "Resolve")} }.into_any(),
            _ => view! { {button("open", "Reopen")} }.into_any(),
        };
        view! {
            <td data-label="Act" class="actions">
                {buttons}
                {move || match act.value().get() {
                    Some(Err(e)) => Some(view! { <p class="error" role="alert">{format!("Not changed: {}", clean(&e))}</p> }),
                    _ => None,
                }}
            </td>
        }
    });
    let more = (a.runs > 1).then(|| {
        view! { <br/><a href=format!("/runs/{}", a.last_run_id)>{format!("and {} more run{} since, the newest {}", a.runs - 1, if a.runs == 2 { "" } else { "s" }, utc_minute(a.last_started_at_ms))}</a> }
    });
    let by = match (&a.acted_by, a.state.as_str()) {
        (Some(by), "acknowledged" | "resolved") => format!(" by {by}"),
        _ => String::new(),
    };
    let webhook = match a.webhook_state.as_str() {
        "sent" => Some("webhook sent".to_string()),
        "pending" if a.webhook_attempts > 0 => Some(format!("webhook retrying ({} tries)", a.webhook_attempts)),
        "pending" => Some("webhook pending".to_string()),
        "failed" => Some(format!(
            "webhook failed after {} tries: {}",
            a.webhook_attempts,
            a.webhook_error.clone().unwrap_or_default()
        )),
        _ => None,
    };
    view! {
        <tr class=format!("alert {}", a.state) data-alert=a.id.clone()>
            <td data-label="State"><span class="state" data-out="alert-state">{a.state.clone()}</span>{by}
                {webhook.map(|w| view! { <br/><span class="hint">{w}</span> })}</td>
            <td data-label="Figure"><strong>{a.figure.clone()}</strong><br/>{format!("{} · {}", a.class, a.suite)}</td>
            <td data-label="Run"><a href=format!("/runs/{}", a.run_id)>{format!("{} on {}", utc_minute(a.started_at_ms), a.hostname)}</a>{more}</td>
            <td data-label="Measured">{against_baseline(&a)}</td>
            <td data-label="Worse by" class="num" data-out="worse-by">{percent(a.worse_by)}<br/>
                <span class="hint">{format!("alerts above {}", percent(a.bound))}</span></td>
            <td data-label="Cost" class="num" data-out="alert-cost">{cost_text(&a)}<br/><span class="hint">{a.cost_basis.clone()}</span></td>
            <td data-label="What changed">{a.changes.clone()}</td>
            {actions}
        </tr>
    }
}

/// The alerts a run raised or was counted on, at the top of its page.
#[component]
pub fn RunAlerts(alerts: Vec<AlertView>) -> impl IntoView {
    (!alerts.is_empty()).then(|| {
        view! {
            <section class="card alert-notice" data-out="run-alerts" role="status">
                <h2>"Regression"</h2>
                <ul>
                    {alerts.into_iter().map(|a| view! {
                        <li>{format!("{} on {} regressed: {} more capacity for the same volume. {}. {} ({}). What changed: {}.",
                            a.figure, a.class, percent(a.worse_by), against_baseline(&a),
                            match a.monthly_cost_usd { Some(c) => format!("About {} a month more", usd(c)), None => "Not priced".into() },
                            a.cost_basis, a.changes)}
                            " "<a href="/alerts">{format!("Alert ({})", a.state)}</a></li>
                    }).collect_view()}
                </ul>
            </section>
        }
    })
}
