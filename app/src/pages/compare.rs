//! What changed between two saved scenarios: their inputs side by side, their answers side by
//! side, and the difference in cost per request broken down by input.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{count, usd};
use model::plan::attribution::{Breakdown, breakdown};

use crate::components::form::{FieldSpec, Form, from_query, parse_number};
use crate::data::{ScenarioView, scenario};
use crate::pages::planner::{FIELDS as PLANNER_FIELDS, KIND as PLANNER, Plan, plan};
use crate::pages::scenarios::clean;

/// One input of both scenarios, as entered (defaults filled in).
#[derive(Debug, Clone, PartialEq)]
pub struct InputRow {
    pub key: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
    pub a: String,
    pub b: String,
}

impl InputRow {
    pub fn changed(&self) -> bool {
        differs(&self.a, &self.b)
    }
}

/// A side's plan, or every reason it has none.
pub type Planned = Result<Plan, Vec<String>>;

/// Two scenarios of one page compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub inputs: Vec<InputRow>,
    /// Planner scenarios: each side's plan, or why it has none.
    pub plans: Option<(Planned, Planned)>,
    /// Planner scenarios whose plans both exist: cost per request from A to B, input by input.
    pub cost: Option<Breakdown<&'static str>>,
}

/// A page's inputs with every field present: what was saved, else the field's default.
pub fn filled(specs: &'static [FieldSpec], saved: &BTreeMap<String, String>) -> BTreeMap<&'static str, String> {
    specs.iter().map(|s| (s.key, saved.get(s.key).cloned().unwrap_or_else(|| s.default.to_string()))).collect()
}

/// Planner inputs that cannot move the cost per request a Planner page shows (the
/// optimization's and the uncertainty panel's, and which node or service filled the fields):
/// left out of the breakdown, so comparing costs no plan for them.
const NO_EFFECT_ON_COST: [&str; 11] = [
    "node",
    "service",
    "optimize",
    "extra",
    "saving",
    "accuracy",
    "uncertain",
    "requests_pm",
    "training_pm",
    "serving_pm",
    "saving_pm",
];

/// `inputs` as a plan this page shows: without the uncertainty panel (its Monte Carlo plays no
/// part in the figures compared here).
fn without_uncertainty<'a>(inputs: impl Iterator<Item = (&'a str, &'a String)>) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, String> = inputs.map(|(k, v)| (k.to_string(), v.clone())).collect();
    values.insert("uncertain".into(), "0".into());
    values
}

/// The cost per request a Planner page shows for `inputs` (the optimization is left out: the
/// headline is the baseline's).
fn cost_per_request(inputs: &BTreeMap<&'static str, String>) -> Option<f64> {
    let mut values = without_uncertainty(inputs.iter().map(|(k, v)| (*k, v)));
    values.insert("optimize".into(), "0".into());
    plan(&Form::snapshot(PLANNER_FIELDS, &values), &[]).ok().map(|p| p.baseline.total_cost_per_request_usd.0)
}

/// Whether two entries of a field differ as the page reads them (`50M` and `50,000,000` do not).
fn differs(a: &str, b: &str) -> bool {
    match (parse_number(a), parse_number(b)) {
        (Ok(x), Ok(y)) => x != y,
        _ => a.trim() != b.trim(),
    }
}

/// Compares two scenarios of page `kind` (`planner` or `right_sizing`).
pub fn compare(kind: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Comparison {
    let specs = if kind == PLANNER { PLANNER_FIELDS } else { crate::pages::right_sizing::FIELDS };
    let (fa, fb) = (filled(specs, a), filled(specs, b));
    let inputs = specs
        .iter()
        .map(|s| InputRow { key: s.key, label: s.label, unit: s.unit, a: fa[s.key].clone(), b: fb[s.key].clone() })
        .collect();
    if kind != PLANNER {
        return Comparison { inputs, plans: None, cost: None };
    }
    let shown = |m: &BTreeMap<String, String>| {
        plan(&Form::snapshot(specs, &without_uncertainty(m.iter().map(|(k, v)| (k.as_str(), v)))), &[])
    };
    let plans = (shown(a), shown(b));
    // Only the inputs that can move the cost are switched, and a field typed differently but
    // read the same (`50M`, `50,000,000`) is not a change.
    let counts = |k: &&'static str| !NO_EFFECT_ON_COST.contains(k);
    let mut fb = fb;
    for (k, v) in fb.iter_mut() {
        if !differs(&fa[k], v) {
            *v = fa[k].clone();
        }
    }
    let (ca, cb): (BTreeMap<_, _>, BTreeMap<_, _>) =
        (fa.into_iter().filter(|(k, _)| counts(k)).collect(), fb.into_iter().filter(|(k, _)| counts(k)).collect());
    let order: Vec<&'static str> = specs.iter().map(|s| s.key).filter(|k| counts(k)).collect();
    let cost = breakdown(&ca, &cb, &order, cost_per_request);
    Comparison { inputs, plans: Some(plans), cost }
}

fn label_of(key: &str) -> &'static str {
    PLANNER_FIELDS.iter().find(|f| f.key == key).map_or("", |f| f.label)
}

/// `+$0.00123`, `−$0.0450`, `$0.00`.
fn signed_usd(v: f64) -> String {
    if v > 0.0 { format!("+{}", usd(v)) } else { usd(v) }
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = use_query_map();
    let ids = move || {
        let q = query.get();
        (q.get("a").unwrap_or_default(), q.get("b").unwrap_or_default())
    };
    let pair = Resource::new(ids, |(a, b)| async move {
        if a.is_empty() || b.is_empty() {
            return Err("pick two scenarios on the Scenarios page, one as A and one as B".to_string());
        }
        let a = scenario(a).await.map_err(|e| clean(&e))?;
        let b = scenario(b).await.map_err(|e| clean(&e))?;
        Ok((a, b))
    });
    view! {
        <Title text="Compare scenarios · Headroom"/>
        <h1>"What changed"</h1>
        <p class="lede"><a href="/scenarios">"Scenarios"</a>" · two saved scenarios side by side, A before B."</p>
        <Suspense fallback=|| view! { <p>"Loading the scenarios…"</p> }>
            {move || Suspend::new(async move {
                match pair.await {
                    Err(reason) => view! { <p class="error" role="alert">{format!("Nothing to compare: {reason}.")}</p> }.into_any(),
                    Ok((a, b)) => view! { <Compared a b/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Compared(a: ScenarioView, b: ScenarioView) -> impl IntoView {
    if a.kind != b.kind {
        let page = |s: &ScenarioView| if s.kind == PLANNER { "Planner" } else { "Right-sizing" };
        return view! {
            <p class="error" role="alert">{format!(
                "“{}” is a {} scenario and “{}” a {} one; compare two scenarios of the same page.",
                a.name, page(&a), b.name, page(&b)
            )}</p>
        }
        .into_any();
    }
    let (Ok(ia), Ok(ib)) = (from_query(&a.query), from_query(&b.query)) else {
        return view! { <p class="error" role="alert">"A saved scenario's inputs could not be read."</p> }.into_any();
    };
    let c = compare(&a.kind, &ia, &ib);
    let (changed, same): (Vec<InputRow>, Vec<InputRow>) = c.inputs.iter().cloned().partition(InputRow::changed);
    let same_count = same.len();
    let no_effect =
        changed.iter().filter(|r| NO_EFFECT_ON_COST.contains(&r.key)).map(|r| r.label).collect::<Vec<_>>().join(", ");
    let (name_a, name_b) = (a.name.clone(), b.name.clone());
    let head = move || {
        view! { <thead><tr><th scope="col">"Input"</th><th scope="col">{format!("A: {name_a}")}</th><th scope="col">{format!("B: {name_b}")}</th></tr></thead> }
    };
    let (head_a, head_b) = (head.clone(), head.clone());
    let row = |r: InputRow| {
        let unit = if r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        view! { <tr><th scope="row">{r.label}</th><td>{format!("{}{unit}", r.a)}</td><td>{format!("{}{unit}", r.b)}</td></tr> }
    };
    view! {
        <section aria-labelledby="changed-inputs">
            <h2 id="changed-inputs">{match changed.len() { 0 => "No input changed".to_string(), 1 => "1 input changed".to_string(), n => format!("{n} inputs changed") }}</h2>
            {(!changed.is_empty()).then(|| view! {
                <div tabindex="0" class="table-wrap"><table class="compare" data-out="changed">{head_a()}<tbody>{changed.into_iter().map(row).collect_view()}</tbody></table></div>
            })}
            {(same_count > 0).then(|| view! {
                <details class="chart-data"><summary>{format!("{same_count} inputs the same")}</summary>
                    <div tabindex="0" class="table-wrap"><table class="compare">{head_b()}<tbody>{same.into_iter().map(row).collect_view()}</tbody></table></div>
                </details>
            })}
        </section>
        {match c.plans {
            None => view! {
                <p class="note">"Right-sizing answers come from the nodes measured when a scenario is opened; open each to see its recommendation: "
                    <a href=a.url() rel="external">"A"</a>", "<a href=b.url() rel="external">"B"</a>"."</p>
            }.into_any(),
            Some(plans) => view! { <Answers plans cost=c.cost no_effect=no_effect.clone()/> }.into_any(),
        }}
    }
    .into_any()
}

#[component]
fn Answers(plans: (Planned, Planned), cost: Option<Breakdown<&'static str>>, no_effect: String) -> impl IntoView {
    let (pa, pb) = match plans {
        (Ok(pa), Ok(pb)) => (pa, pb),
        (a, b) => {
            let reasons: Vec<String> = [("A", a.err()), ("B", b.err())]
                .into_iter()
                .filter_map(|(side, errs)| errs.map(|e| format!("{side}: {}", e.join("; "))))
                .collect();
            return view! { <p class="error" role="alert">{format!("No answer to compare: {}", reasons.join(". "))}</p> }.into_any();
        }
    };
    let net = |p: &Plan| p.optimized.as_ref().map(|(_, be)| be.monthly_net_usd.0);
    let rows: Vec<(&str, String, String, String)> = {
        let money = |label: &'static str, f: &dyn Fn(&Plan) -> f64| {
            let (x, y) = (f(&pa), f(&pb));
            (label, usd(x), usd(y), signed_usd(y - x))
        };
        let mut rows = vec![
            ("Requests per month", count(pa.requests), count(pb.requests), {
                let d = pb.requests - pa.requests;
                if d > 0.0 {
                    format!("+{}", count(d))
                } else if d < 0.0 {
                    format!("−{}", count(-d))
                } else {
                    "0".into()
                }
            }),
            money("Serving per request", &|p| p.serving),
            money("Training per request", &|p| p.baseline.training_cost_per_request_usd.0),
            money("Cost per request", &|p| p.baseline.total_cost_per_request_usd.0),
            money("Monthly cost", &|p| p.baseline.monthly_total_usd.0),
        ];
        if net(&pa).is_some() || net(&pb).is_some() {
            let show = |v: Option<f64>| v.map_or("not considered".to_string(), usd);
            let diff = match (net(&pa), net(&pb)) {
                (Some(x), Some(y)) => signed_usd(y - x),
                _ => "—".into(),
            };
            rows.push(("Net saving of distillation per month", show(net(&pa)), show(net(&pb)), diff));
        }
        rows
    };
    let breakdown_view = cost.map(|d| {
        let total = d.total();
        // Rounding residue of a switch that moved nothing is not a change.
        let tiny = 1e-12 * d.from.abs().max(d.to.abs());
        let (moved, still): (Vec<_>, Vec<_>) = d.parts.into_iter().partition(|p| p.change.abs() > tiny);
        let none = still.iter().flat_map(|p| p.inputs.iter().map(|k| label_of(k))).collect::<Vec<_>>().join(", ");
        view! {
            <section aria-labelledby="by-input">
                <h2 id="by-input">{format!("Cost per request: {} → {} ({})", usd(d.from), usd(d.to), signed_usd(total))}</h2>
                <p class="note">"Each changed input is switched from A's value to B's in the order the Planner lists them; each line is how far that switch moved the cost per request. The lines add up to the difference. When inputs interact (a price counts only while serving is derived from it), the order decides which of them a change is put on."</p>
                {(!moved.is_empty()).then(|| view! {
                    <div tabindex="0" class="table-wrap"><table class="compare" data-out="breakdown">
                        <thead><tr><th scope="col">"Input switched to B"</th><th scope="col" class="num">"Change per request"</th><th scope="col" class="num">"Share of the difference"</th></tr></thead>
                        <tbody>
                            {moved.into_iter().map(|p| {
                                let names = p.inputs.iter().map(|k| label_of(k)).collect::<Vec<_>>().join(" with ");
                                let share = if total != 0.0 { format!("{:.0} %", p.change / total * 100.0) } else { "—".into() };
                                view! { <tr><th scope="row">{names}</th><td class="num">{signed_usd(p.change)}</td><td class="num">{share}</td></tr> }
                            }).collect_view()}
                        </tbody>
                        <tfoot><tr><th scope="row">"Total"</th><td class="num" data-out="total">{signed_usd(total)}</td><td class="num">"100 %"</td></tr></tfoot>
                    </table></div>
                })}
                {(!none.is_empty()).then(|| view! { <p class="note">{format!("Changed with no effect on the cost per request: {none}.")}</p> })}
                {(!no_effect.is_empty()).then(|| view! { <p class="note">{format!("Changed, and not part of the cost per request: {no_effect}.")}</p> })}
            </section>
        }
    });
    view! {
        <section aria-labelledby="answers">
            <h2 id="answers">"Answers"</h2>
            <div tabindex="0" class="table-wrap"><table class="compare" data-out="answers">
                <thead><tr><th scope="col">"Figure"</th><th scope="col" class="num">"A"</th><th scope="col" class="num">"B"</th><th scope="col" class="num">"B − A"</th></tr></thead>
                <tbody>
                    {rows.into_iter().map(|(label, x, y, d)| view! {
                        <tr><th scope="row">{label}</th><td class="num">{x}</td><td class="num">{y}</td><td class="num">{d}</td></tr>
                    }).collect_view()}
                </tbody>
            </table></div>
            <p class="note">"Serving is priced as each scenario entered it (with derived serving, from its price and throughput), as on the Planner."</p>
        </section>
        {breakdown_view}
    }
    .into_any()
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::components::form::testing::owned;

    fn inputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_seed_scenarios_differ_by_volume_and_serving_and_the_parts_say_how_much_each() {
        owned(|| {
            // $1,000 training a month at 1M requests and $0.01 serving, against 2M requests at $0.004.
            let a = inputs(&[
                ("requests", "1M"),
                ("training", "1000"),
                ("retrains", "1"),
                ("serving", "0.01"),
                ("optimize", "0"),
            ]);
            let b = inputs(&[
                ("requests", "2M"),
                ("training", "1000"),
                ("retrains", "1"),
                ("serving", "0.004"),
                ("optimize", "0"),
            ]);
            let c = compare(PLANNER, &a, &b);
            let changed: Vec<&str> = c.inputs.iter().filter(|r| r.changed()).map(|r| r.key).collect();
            assert_eq!(changed, vec!["requests", "serving"]);
            let d = c.cost.expect("both plans exist");
            assert!((d.from - 0.011).abs() < 1e-12, "{}", d.from);
            assert!((d.to - 0.0045).abs() < 1e-12, "{}", d.to);
            // Requests first (the Planner's order): training per request halves, $0.001 → $0.0005.
            assert_eq!(d.parts[0].inputs, vec!["requests"]);
            assert!((d.parts[0].change + 0.0005).abs() < 1e-12);
            assert_eq!(d.parts[1].inputs, vec!["serving"]);
            assert!((d.parts[1].change + 0.006).abs() < 1e-12);
        });
    }

    #[test]
    fn the_same_number_typed_two_ways_is_no_change_and_the_optimization_is_not_part_of_the_cost() {
        owned(|| {
            let a = inputs(&[("requests", "50M"), ("extra", "5000"), ("uncertain", "1"), ("saving_pm", "90")]);
            let b = inputs(&[("requests", "50,000,000"), ("extra", "9000"), ("uncertain", "1"), ("saving_pm", "400")]);
            let c = compare(PLANNER, &a, &b);
            let changed: Vec<&str> = c.inputs.iter().filter(|r| r.changed()).map(|r| r.key).collect();
            assert_eq!(changed, vec!["extra", "saving_pm"]);
            let d = c.cost.expect("both costs exist");
            assert!(d.parts.is_empty(), "{:?}", d.parts);
            // A range the uncertainty panel refuses does not stop the comparison.
            let (pa, pb) = c.plans.unwrap();
            assert!(pa.is_ok() && pb.is_ok());
        });
    }

    #[test]
    fn right_sizing_scenarios_compare_inputs_only() {
        owned(|| {
            let c = compare(crate::pages::right_sizing::KIND, &inputs(&[("rate", "100")]), &inputs(&[("rate", "200")]));
            assert!(c.plans.is_none() && c.cost.is_none());
            assert_eq!(c.inputs.iter().filter(|r| r.changed()).count(), 1);
        });
    }
}
