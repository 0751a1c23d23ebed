//! Saved scenarios: a page's inputs under a name, listed, reopened, and shared as a URL that
//! carries the inputs themselves.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::utc_minute;

use crate::data::{ScenarioView, page_of, save_scenario, scenarios};
use crate::form::Form;

/// Most characters in a scenario's name.
pub const MAX_NAME: usize = 120;

/// Name, save, and a link that carries the inputs.
#[component]
pub fn SaveScenario(kind: &'static str, path: &'static str, form: Form) -> impl IntoView {
    let query = use_query_map();
    let name = RwSignal::new(query.get_untracked().get("name").unwrap_or_default());
    let save = Action::new(move |(name, query): &(String, String)| {
        save_scenario(kind.to_string(), name.clone(), query.clone())
    });
    let share = move || format!("{path}?{}", form.query());
    view! {
        <fieldset class="save">
            <legend>"Scenario"</legend>
            <div class="field">
                <label for="scenario-name">"Name"</label>
                <div class="input-row">
                    <input id="scenario-name" type="text" maxlength=MAX_NAME.to_string() placeholder="e.g. Q3 launch, 5 % growth"
                        value=name.get_untracked() prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                    <button type="button" class="primary" disabled=move || name.get().trim().is_empty() || save.pending().get()
                        on:click=move |_| { save.dispatch((name.get_untracked(), form.query_untracked())); }>
                        "Save"
                    </button>
                </div>
            </div>
            {move || save.value().get().map(|result| match result {
                Ok(saved) => view! {
                    <p class="saved" role="status">"Saved “"{saved.name.clone()}"”. "<a href="/scenarios">"All scenarios"</a></p>
                }.into_any(),
                Err(err) => view! { <p class="error" role="alert">{format!("Not saved: {}", clean(&err))}</p> }.into_any(),
            })}
            <p class="hint">"Share these inputs: "<a class="share" rel="external" href=share>"link to this plan"</a></p>
        </fieldset>
    }
}

/// A server function error as a person should read it.
pub fn clean(err: &ServerFnError) -> String {
    let text = err.to_string();
    text.trim_start_matches("error running server function: ").to_string()
}

#[component]
pub fn ScenariosPage() -> impl IntoView {
    let list = Resource::new(|| (), |_| scenarios());
    view! {
        <Title text="Scenarios · Headroom"/>
        <h1>"Scenarios"</h1>
        <p class="lede">"Saved planner and right-sizing inputs. Opening one fills the page with its inputs; the address can be shared."</p>
        <Suspense fallback=|| view! { <p>"Loading scenarios…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(err) => view! { <p class="error">{format!("Could not load scenarios: {}", clean(&err))}</p> }.into_any(),
                    Ok(items) if items.is_empty() => view! {
                        <p class="notice">"No scenario saved yet. Save one from the "<a href="/planner">"Planner"</a>" or "<a href="/right-sizing">"Right-sizing"</a>" page."</p>
                    }.into_any(),
                    Ok(items) => view! { <ScenarioTable items/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ScenarioTable(items: Vec<ScenarioView>) -> impl IntoView {
    view! {
        <div tabindex="0" class="table-wrap">
            <table class="scenarios">
                <thead><tr><th>"Name"</th><th>"Page"</th><th class="num">"Requests per month"</th><th class="num">"Cost per request"</th><th>"Saved by"</th><th>"Saved"</th></tr></thead>
                <tbody>
                    {items.into_iter().map(|s| {
                        let page = if page_of(&s.kind) == "/planner" { "Planner" } else { "Right-sizing" };
                        let (volume, cost) = key_figures(&s);
                        view! {
                            <tr>
                                <td><a href=s.url() rel="external">{s.name.clone()}</a></td>
                                <td>{page}</td>
                                <td class="num" data-out="volume">{volume}</td>
                                <td class="num" data-out="cost">{cost}</td>
                                <td>{s.created_by.clone().unwrap_or_else(|| "—".into())}</td>
                                <td>{utc_minute(s.created_at_ms)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// A saved Planner scenario's volume and cost per request, as the Planner would show them
/// (hardware-derived serving without measured nodes, as entered); dashes where it cannot say.
fn key_figures(s: &ScenarioView) -> (String, String) {
    let dash = || ("—".to_string(), "—".to_string());
    if s.kind != crate::planner::KIND {
        return dash();
    }
    let Ok(inputs) = crate::form::from_query(&s.query) else { return dash() };
    match crate::planner::plan(&crate::form::Form::snapshot(crate::planner::FIELDS, &inputs), &[]) {
        Ok(p) => (model::format::count(p.requests), model::format::usd(p.baseline.total_cost_per_request_usd.0)),
        Err(_) => dash(),
    }
}
