//! Saved scenarios: a page's inputs under a name, listed, reopened, and shared as a URL that
//! carries the inputs themselves.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::utc_minute;

use crate::components::form::Form;
use crate::data::{ScenarioView, delete_scenario, page_of, rename_scenario, save_scenario, scenarios};

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
    let changed = Callback::new(move |()| list.refetch());
    view! {
        <Title text="Scenarios · Headroom"/>
        <h1>"Scenarios"</h1>
        <p class="lede">"Saved planner and right-sizing inputs. Opening one fills the page with its inputs; the address can be shared. Pick two to see what changed between them."</p>
        <Suspense fallback=|| view! { <p>"Loading scenarios…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(err) => view! { <p class="error">{format!("Could not load scenarios: {}", clean(&err))}</p> }.into_any(),
                    Ok(l) if l.items.is_empty() => view! {
                        <p class="notice">"No scenario saved yet. Save one from the "<a href="/planner">"Planner"</a>" or "<a href="/right-sizing">"Right-sizing"</a>" page."</p>
                    }.into_any(),
                    Ok(l) => view! { <ScenarioTable items=l.items can_edit=l.can_edit changed/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The list, inside a plain GET form to the comparison (so comparing works before the bundle
/// loads): the newest two are picked as B and A.
#[component]
fn ScenarioTable(items: Vec<ScenarioView>, can_edit: bool, changed: Callback<()>) -> impl IntoView {
    let comparable = items.len() >= 2;
    view! {
        <form method="get" action="/scenarios/compare" class="compare-form">
            <div tabindex="0" class="table-wrap">
                <table class="scenarios stack">
                    <thead><tr>
                        {comparable.then(|| view! { <th scope="col"><abbr title="compare from">"A"</abbr></th><th scope="col"><abbr title="compare to">"B"</abbr></th> })}
                        <th scope="col">"Name"</th><th scope="col">"Page"</th><th scope="col" class="num">"Requests per month"</th><th scope="col" class="num">"Cost per request"</th><th scope="col">"Saved by"</th><th scope="col">"Saved"</th>
                        {can_edit.then(|| view! { <th scope="col">"Change"</th> })}
                    </tr></thead>
                    <tbody>
                        {items.into_iter().enumerate().map(|(i, s)| view! { <ScenarioRow s index=i comparable can_edit changed/> }).collect_view()}
                    </tbody>
                </table>
            </div>
            {comparable.then(|| view! { <p><button type="submit" class="primary">"Compare A with B"</button></p> })}
        </form>
    }
}

/// What a row's change cell shows.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Idle,
    Renaming,
    Confirming,
}

#[component]
fn ScenarioRow(
    s: ScenarioView,
    index: usize,
    comparable: bool,
    can_edit: bool,
    changed: Callback<()>,
) -> impl IntoView {
    let page = if page_of(&s.kind) == "/planner" { "Planner" } else { "Right-sizing" };
    let (volume, cost) = key_figures(&s);
    let mode = RwSignal::new(Mode::Idle);
    let new_name = RwSignal::new(s.name.clone());
    let rename = Action::new(|(id, name): &(String, String)| rename_scenario(id.clone(), name.clone()));
    let delete = Action::new(|id: &String| delete_scenario(id.clone()));
    Effect::new(move || {
        if matches!(rename.value().get(), Some(Ok(_))) || matches!(delete.value().get(), Some(Ok(()))) {
            changed.run(());
        }
    });
    let failure = move || match (rename.value().get(), delete.value().get()) {
        (Some(Err(e)), _) => Some(format!("Not renamed: {}", clean(&e))),
        (_, Some(Err(e))) => Some(format!("Not deleted: {}", clean(&e))),
        _ => None,
    };
    let (id, name) = (s.id.clone(), s.name.clone());
    let stored = StoredValue::new((id.clone(), name.clone()));
    let actions = can_edit.then(|| {
        view! {
            <td class="actions">
                {move || match mode.get() {
                    Mode::Idle => view! {
                        <button type="button" class="link" on:click=move |_| mode.set(Mode::Renaming)>"Rename"</button>
                        " "
                        <button type="button" class="link danger" on:click=move |_| mode.set(Mode::Confirming)>"Delete"</button>
                    }.into_any(),
                    Mode::Confirming => view! {
                        <span role="alert">{format!("Delete “{}”? ", stored.with_value(|(_, n)| n.clone()))}</span>
                        <button type="button" class="link danger" disabled=move || delete.pending().get()
                            on:click=move |_| { delete.dispatch(stored.with_value(|(id, _)| id.clone())); }>"Yes, delete"</button>
                        " "
                        <button type="button" class="link" on:click=move |_| mode.set(Mode::Idle)>"Keep"</button>
                    }.into_any(),
                    Mode::Renaming => view! {
                        // Enter renames; it must not submit the comparison form around the table.
                        <input type="text" class="rename" maxlength=MAX_NAME.to_string() aria-label="New name"
                            prop:value=move || new_name.get() on:input=move |ev| new_name.set(event_target_value(&ev))
                            on:keydown=move |ev| {
                                if ev.key() == "Enter" {
                                    ev.prevent_default();
                                    if !new_name.get_untracked().trim().is_empty() {
                                        rename.dispatch((stored.with_value(|(id, _)| id.clone()), new_name.get_untracked()));
                                    }
                                }
                            }/>
                        " "
                        <button type="button" class="link" disabled=move || new_name.get().trim().is_empty() || rename.pending().get()
                            on:click=move |_| { rename.dispatch((stored.with_value(|(id, _)| id.clone()), new_name.get_untracked())); }>"Save"</button>
                        " "
                        <button type="button" class="link" on:click=move |_| mode.set(Mode::Idle)>"Cancel"</button>
                    }.into_any(),
                }}
                {move || failure().map(|text| view! { <p class="error" role="alert">{text}</p> })}
            </td>
        }
    });
    view! {
        <tr>
            {comparable.then(|| view! {
                <td data-label="A"><input type="radio" name="a" value=id.clone() checked=index == 1 aria-label=format!("Compare from {name}")/></td>
                <td data-label="B"><input type="radio" name="b" value=id.clone() checked=index == 0 aria-label=format!("Compare to {name}")/></td>
            })}
            <td data-label="Name"><a href=s.url() rel="external">{s.name.clone()}</a></td>
            <td data-label="Page">{page}</td>
            <td class="num" data-out="volume" data-label="Requests per month">{volume}</td>
            <td class="num" data-out="cost" data-label="Cost per request">{cost}</td>
            <td data-label="Saved by">{s.created_by.clone().unwrap_or_else(|| "—".into())}</td>
            <td data-label="Saved">{utc_minute(s.created_at_ms)}</td>
            {actions}
        </tr>
    }
}

/// A saved Planner scenario's volume and cost per request, as the Planner would show them
/// (hardware-derived serving without measured nodes, as entered); dashes where it cannot say.
fn key_figures(s: &ScenarioView) -> (String, String) {
    let dash = || ("—".to_string(), "—".to_string());
    if s.kind != crate::pages::planner::KIND {
        return dash();
    }
    let Ok(inputs) = crate::components::form::from_query(&s.query) else { return dash() };
    match crate::pages::planner::plan(
        &crate::components::form::Form::snapshot(crate::pages::planner::FIELDS, &inputs),
        &[],
    ) {
        Ok(p) => (model::format::count(p.requests), model::format::usd(p.baseline.total_cost_per_request_usd.0)),
        Err(_) => dash(),
    }
}
