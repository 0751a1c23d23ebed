//! The Admin page: for admins, people, API tokens and agent tokens ([`people`]); for everyone,
//! the price catalog every plan and report is priced with, its version and origin, a download,
//! and (for finance and admin) an editor that imports it as a new version; and the same for the
//! grid-intensity table the emissions are counted with.

mod people;

use leptos::prelude::*;
use leptos_meta::Title;
use model::calendar::Date;
use model::format::{bytes, utc_minute};
use model::money::format_usd;

use crate::data::{CatalogView, GridView, ImportOutcome, import_prices, price_catalog};
use crate::pages::scenarios::clean;

#[component]
pub fn AdminPage() -> impl IntoView {
    let import = Action::new(|csv: &String| import_prices(csv.clone()));
    // Reload the catalog after each import.
    let catalog = Resource::new(move || import.version().get(), |_| price_catalog());
    let import_grid = Action::new(|csv: &String| crate::data::import_grid(csv.clone()));
    let grid = Resource::new(move || import_grid.version().get(), |_| crate::data::grid_table());
    view! {
        <Title text="Admin · Headroom"/>
        <h1>"Admin"</h1>
        <people::People/>
        <h2 id="prices">"Price catalog"</h2>
        <Suspense fallback=|| view! { <p>"Loading the price catalog…"</p> }>
            {move || Suspend::new(async move {
                match catalog.await {
                    Err(err) => view! { <p class="error">{format!("Could not load the price catalog: {}", clean(&err))}</p> }.into_any(),
                    Ok(c) => view! { <Catalog c import/> }.into_any(),
                }
            })}
        </Suspense>
        <h2 id="grid">"Grid intensity"</h2>
        <Suspense fallback=|| view! { <p>"Loading the grid-intensity table…"</p> }>
            {move || Suspend::new(async move {
                match grid.await {
                    Err(err) => view! { <p class="error">{format!("Could not load the grid-intensity table: {}", clean(&err))}</p> }.into_any(),
                    Ok(g) => view! { <GridTable g import=import_grid/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Prices older than this are flagged: cloud prices change a few times a year.
const STALE_PRICE_DAYS: i64 = 180;

#[component]
fn Catalog(c: CatalogView, import: Action<String, Result<ImportOutcome, ServerFnError>>) -> impl IntoView {
    let today = crate::today();
    let age = |as_of: &str| Date::parse(as_of).ok().map(|d| d.days_until(today));
    let stale = c.rows.iter().filter(|r| age(&r.as_of).is_some_and(|days| days > STALE_PRICE_DAYS)).count();
    let origin = if c.origin == "default" {
        "the catalog shipped with Headroom".to_string()
    } else {
        format!("imported by {}", c.created_by)
    };
    view! {
        <p class="lede" data-out="catalog-version">{format!("Version {} — {}, {}. {} prices. Plans and reports record the version they used.", c.version, origin, utc_minute(c.created_at_ms), c.rows.len())}</p>
        {(stale > 0).then(|| view! {
            <p class="notice" data-out="stale-prices">{format!("{stale} of {} prices are more than {STALE_PRICE_DAYS} days old (marked below): check them against the provider before relying on plans and reports.", c.rows.len())}</p>
        })}
        <p><a href="/api/v1/prices" download="price-catalog.csv">"Download as CSV"</a></p>
        <div tabindex="0" class="table-wrap card">
            <table class="stack prices">
                <thead><tr><th>"Provider"</th><th>"Instance"</th><th>"GPUs"</th><th class="num">"vCPUs"</th><th class="num">"Memory"</th><th class="num">"Per hour"</th><th>"Purchase"</th><th>"Region"</th><th>"As of"</th><th>"Source"</th></tr></thead>
                <tbody>
                    {c.rows.iter().map(|r| view! {
                        <tr>
                            <td data-label="Provider">{r.provider.clone()}</td>
                            <td data-label="Instance">{r.instance_type.clone()}</td>
                            <td data-label="GPUs">{if r.gpus.is_empty() { "—".to_string() } else { r.gpus.clone() }}</td>
                            <td data-label="vCPUs" class="num">{r.vcpus.map(|v| v.to_string()).unwrap_or_else(|| "—".into())}</td>
                            <td data-label="Memory" class="num">{r.memory_bytes.map(|b| bytes(b as f64)).unwrap_or_else(|| "—".into())}</td>
                            <td data-label="Per hour" class="num">{format!("${}", format_usd(r.hourly_micro_usd))}</td>
                            <td data-label="Purchase">{r.purchase_option.replace('_', " ")}</td>
                            <td data-label="Region">{r.region.clone().unwrap_or_else(|| "—".into())}</td>
                            {match age(&r.as_of) {
                                Some(days) if days > STALE_PRICE_DAYS => view! {
                                    <td data-label="As of" class="stale" title=format!("{days} days old")>{r.as_of.clone()}" "<span class="badge">"old"</span></td>
                                }.into_any(),
                                _ => view! { <td data-label="As of">{r.as_of.clone()}</td> }.into_any(),
                            }}
                            <td data-label="Source" class="source">{r.source.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        {c.can_edit.then(|| view! { <Importer csv=c.csv.clone() id="catalog-csv" label="Price catalog CSV" noun="prices" import/> })}
    }
}

/// The grid-intensity table the emissions are counted with, its version, a download, and (for
/// finance and admin) an editor that imports it as a new version.
#[component]
fn GridTable(g: GridView, import: Action<String, Result<ImportOutcome, ServerFnError>>) -> impl IntoView {
    let origin = if g.origin == "default" {
        "the table shipped with Headroom (Cloud Carbon Footprint's figures)".to_string()
    } else {
        format!("imported by {}", g.created_by)
    };
    view! {
        <p class="lede" data-out="grid-version">{format!("Version {} — {}, {}. {} regions. Reports record the version they used.", g.version, origin, utc_minute(g.created_at_ms), g.rows.len())}</p>
        <p><a href="/api/v1/grid-intensity" download="grid-intensity.csv">"Download as CSV"</a></p>
        <div tabindex="0" class="table-wrap card">
            <table class="stack grid-intensity">
                <thead><tr><th>"Provider"</th><th>"Region"</th><th>"Location"</th><th class="num">"g CO2e / kWh"</th><th class="num">"PUE"</th><th>"As of"</th><th>"Source"</th></tr></thead>
                <tbody>
                    {g.rows.iter().map(|r| view! {
                        <tr>
                            <td data-label="Provider">{r.provider.clone()}</td>
                            <td data-label="Region">{r.region.clone()}</td>
                            <td data-label="Location">{r.location.clone()}</td>
                            <td data-label="g CO2e / kWh" class="num">{r.g_co2e_per_kwh.to_string()}</td>
                            <td data-label="PUE" class="num">{r.pue.to_string()}</td>
                            <td data-label="As of">{r.as_of.clone()}</td>
                            <td data-label="Source" class="source">{r.source.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        {g.can_edit.then(|| view! { <Importer csv=g.csv.clone() id="grid-csv" label="Grid-intensity CSV" noun="regions" import/> })}
    }
}

/// An editor of a versioned CSV (the price catalog, the grid-intensity table): edit or paste,
/// import as a new version, and every located problem when nothing was imported.
#[component]
fn Importer(
    csv: String,
    id: &'static str,
    label: &'static str,
    noun: &'static str,
    import: Action<String, Result<ImportOutcome, ServerFnError>>,
) -> impl IntoView {
    let text = RwSignal::new(csv.clone());
    view! {
        <div class="card editor">
            <h3>"Edit and import"</h3>
            <p class="hint">"Edit the CSV below (or paste your own with the same header) and import it as a new version. If any cell is wrong nothing is imported, and each problem is listed with its line and column."</p>
            <label for=id>{label}</label>
            <textarea id=id rows="14" spellcheck="false" prop:value=move || text.get() on:input=move |ev| text.set(event_target_value(&ev))>{textarea_text(&csv)}</textarea>
            <button type="button" class="primary" data-import=id disabled=move || import.pending().get() on:click=move |_| { import.dispatch(text.get_untracked()); }>"Import as a new version"</button>
            {move || import.value().get().map(|result| match result {
                Ok(ImportOutcome::Imported { version, rows }) => view! { <p class="saved" role="status">{format!("Imported version {version}: {rows} {noun}.")}</p> }.into_any(),
                Ok(ImportOutcome::Rejected { error, problems }) => view! {
                    <div class="problems card" role="alert">
                        <h4>{error}</h4>
                        <ul class="import-errors">
                            {problems.into_iter().map(|(line, column, reason)| view! {
                                <li>{format!("line {line}{}: {reason}", column.map(|c| format!(", column {c}")).unwrap_or_default())}</li>
                            }).collect_view()}
                        </ul>
                    </div>
                }.into_any(),
                Err(err) => view! { <p class="error" role="alert">{format!("Not imported: {}", clean(&err))}</p> }.into_any(),
            })}
        </div>
    }
}

/// A `<textarea>`'s initial text. Leptos writes a textarea's children unescaped (it treats the
/// element as raw text), so on the server a cell like `</textarea><script>` would end the
/// element and run; it is escaped there. In the browser the text becomes a DOM text node,
/// which is never parsed, and `prop:value` sets what is shown.
fn textarea_text(text: &str) -> String {
    if cfg!(feature = "ssr") {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    } else {
        text.to_string()
    }
}
