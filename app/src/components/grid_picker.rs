//! The grid a fleet draws from, for its emissions: a cloud region picked from the
//! grid-intensity table fills the grid's g CO2e per kWh and the provider's PUE (both stay
//! editable). The Planner and Right-sizing share these fields.

use leptos::prelude::*;

use crate::components::form::{FieldSpec, Form, Rule};
use crate::data::GridRowView;

pub const CARBON: FieldSpec =
    FieldSpec { key: "carbon", label: "Count emissions", unit: "", default: "0", rule: Rule::Flag };
pub const REGION: FieldSpec =
    FieldSpec { key: "grid_region", label: "Grid region", unit: "", default: "", rule: Rule::Text };
pub const GRID: FieldSpec = FieldSpec {
    key: "grid",
    label: "Grid emissions",
    unit: "g CO2e / kWh",
    default: "379.069",
    rule: Rule::NonNegative,
};
pub const PUE: FieldSpec =
    FieldSpec { key: "pue", label: "Data centre PUE", unit: "≥ 1", default: "1.135", rule: Rule::Positive };

/// Picks a cloud region from the grid-intensity table: its grid's emissions and its provider's
/// PUE fill the fields below (which stay editable).
#[component]
pub fn GridPicker(form: Form) -> impl IntoView {
    let table = LocalResource::new(crate::data::grid_table);
    let rows = move || table.get().and_then(Result::ok).map(|t| t.rows).unwrap_or_default();
    let region = form.signal("grid_region");
    let key = |r: &GridRowView| format!("{} {}", r.provider, r.region);
    let pick = move |picked: String| {
        region.set(picked.clone());
        if let Some(r) = rows().into_iter().find(|r| key(r) == picked) {
            form.signal("grid").set(r.g_co2e_per_kwh.to_string());
            form.signal("pue").set(r.pue.to_string());
        }
    };
    // A figure edited after the pick is no longer the region's: the pick is undone, so the
    // Emissions card does not name a region whose figure it is not using.
    Effect::new(move |_| {
        let (grid, pue) = (form.signal("grid").get(), form.signal("pue").get());
        let picked = region.get_untracked();
        let row = rows().into_iter().find(|r| !picked.is_empty() && key(r) == picked);
        if row.is_some_and(|r| grid != r.g_co2e_per_kwh.to_string() || pue != r.pue.to_string()) {
            region.set(String::new());
        }
    });
    let about = move || {
        let picked = region.get();
        rows()
            .into_iter()
            .find(|r| key(r) == picked)
            .map(|r| format!("{}: {} (as of {}).", r.location, r.source, r.as_of))
    };
    view! {
        <div class="field" data-field="grid_region">
            <label for="f-grid_region">"Grid region"</label>
            <select id="f-grid_region" name="grid_region" on:change=move |ev| pick(event_target_value(&ev))>
                <option value="" selected=move || region.get().is_empty()>"— enter by hand —"</option>
                {move || rows().into_iter().map(|r| {
                    let value = key(&r);
                    let label = format!("{value} · {} · {} g/kWh", r.location, significant(r.g_co2e_per_kwh));
                    view! { <option value=value.clone() selected=move || region.get() == value>{label}</option> }
                }).collect_view()}
            </select>
            <p class="hint" data-out="grid-source">{move || about().unwrap_or_else(|| "Fills the grid's yearly average emissions and the provider's PUE from the grid-intensity table (finance replaces it by import).".into())}</p>
        </div>
    }
}

/// A positive figure to three significant digits, as a field's text (0.0423, 12.5, 1250).
pub fn significant(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{x:.decimals$}")
}
