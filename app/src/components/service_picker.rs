//! "Your service (measured)": a select of the services the endpoint suite load-tested, shared by
//! the Planner and Right-sizing. It sets the form's `service` field; the page says what else a
//! pick changes through `on_pick`.

use leptos::prelude::*;
use model::format::{seconds, utc_minute};

use crate::components::form::Form;
use crate::data::MeasuredService;

#[component]
pub fn ServicePicker(
    form: Form,
    #[prop(into)] services: Signal<Vec<MeasuredService>>,
    /// The first option's words: what the page uses without a service.
    none: &'static str,
    /// The hint when services exist but none is picked.
    idle_hint: &'static str,
    /// Called with the picked service (`None` for the first option), after `service` is set.
    #[prop(optional)]
    on_pick: Option<Callback<Option<MeasuredService>>>,
) -> impl IntoView {
    let service = form.signal("service");
    let pick = move |id: String| {
        service.set(id.clone());
        if let Some(on_pick) = on_pick {
            on_pick.run(services.get_untracked().into_iter().find(|m| !id.is_empty() && m.run_id == id));
        }
    };
    view! {
        <div class="field" data-field="service">
            <label for="f-service">"Your service (measured)"</label>
            <select id="f-service" name="service" on:change=move |ev| pick(event_target_value(&ev))>
                <option value="" selected=move || service.get().is_empty()>{none}</option>
                {move || services.get().into_iter().map(|m| {
                    let id = m.run_id.clone();
                    let label = format!("{} · {} at once, {} each · {}", m.name(), m.concurrency, seconds(m.service_mean_s), utc_minute(m.started_at_ms));
                    view! { <option value=id.clone() selected=move || service.get() == id>{label}</option> }
                }).collect_view()}
            </select>
            <p class="hint">{move || {
                let id = service.get();
                match services.get().into_iter().find(|m| m.run_id == id) {
                    Some(m) => format!("Measured by the endpoint suite in run {}; {}.", &m.run_id[..m.run_id.len().min(8)], m.error_words()),
                    None if services.get().is_empty() => "No service measured yet (load tests of streamed LLM servers are sized on the LLM page): run `measurements-agent run endpoint --target URL --protocol … --sweep`.".to_string(),
                    None => idle_hint.to_string(),
                }
            }}</p>
        </div>
    }
}
