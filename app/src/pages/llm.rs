//! LLM serving: GPUs, dollars per million tokens and TTFT/ITL for a language model under
//! continuous batching, from the model's shape, a GPU's memory and price, and the engine's
//! costs per iteration ([`model::plan::llm`]). Computed in the browser as people type.

use std::collections::BTreeMap;
use std::time::Duration;

use leptos::leptos_dom::helpers::{TimeoutHandle, set_timeout_with_handle};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{bytes, count, grouped, seconds, usd, utc_minute};
use model::plan::llm::batching::{VALIDATED_LOAD, VALIDATED_SHARE};
use model::plan::llm::gpus::{Efficiency, GPUS};
use model::plan::llm::memory::{LlmMemoryFit, LlmMemoryInput, LlmShape, TENSOR_PARALLEL, fit};
use model::plan::llm::offers::{GpuOffer, OfferQuestion, OfferVerdict, compare};
use model::plan::llm::sizing::{LlmSizing, LlmSizingInput, LlmSpread, RENDER_WORK, size_within, spread};
use model::plan::llm::{Engine, Latency, Load, predict};
use model::plan::memory::Precision;
use model::units::{Bytes, HOURS_PER_MONTH, SECONDS_PER_MONTH, Seconds, UsdPerHour};

use crate::components::charts::{LineChart, Rule as ChartRule, Series, line_chart};
use crate::components::form::{ChoiceField, FieldSpec, FlagField, Form, NumberField, Rule};
use crate::data::{CatalogView, LlmRunView, PriceRowView};

const PRECISIONS: &[&str] = &["bf16", "fp16", "int8", "int4", "fp32"];
const PRECISION_LABELS: &[&str] = &["BF16", "FP16", "INT8", "INT4", "FP32"];
const DEGREES: &[&str] = &["1", "2", "4", "8"];
const TRY_WEIGHTS: &[&str] = &["entered", "int8", "int4"];
const TRY_WEIGHTS_LABELS: &[&str] = &["only the precision above", "down to INT8", "down to INT4"];
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The most sequences the page lets an engine batch: engines batch a few hundred (vLLM's
/// default is 256), and the model's cost grows with the slots, on the server's render too.
const PAGE_SLOTS: u32 = model::plan::llm::fit::MAX_FITTED_SLOTS;

macro_rules! field {
    ($key:literal, $label:literal, $unit:literal, $default:literal, $rule:expr) => {
        FieldSpec { key: $key, label: $label, unit: $unit, default: $default, rule: $rule }
    };
}

pub const FIELDS: &[FieldSpec] = &[
    field!("requests", "Requests per month", "requests", "10M", Rule::Positive),
    field!("input", "Prompt tokens per request", "tokens, mean", "1000", Rule::NonNegative),
    field!("input_cv", "Prompt length variation", "std dev ÷ mean", "0.5", Rule::NonNegative),
    field!("output", "Output tokens per request", "tokens, mean", "250", Rule::Positive),
    field!("context", "Tokens one sequence may hold", "prompt + output, longest", "4096", Rule::Positive),
    field!("ttft_ms", "TTFT SLO (p99)", "ms, 0 for none", "1000", Rule::NonNegative),
    field!("itl_ms", "ITL SLO (p99)", "ms, 0 for none", "50", Rule::NonNegative),
    field!("parameters", "Parameters", "", "8B", Rule::Positive),
    field!("layers", "Layers", "", "32", Rule::Positive),
    field!("kv_heads", "KV heads", "", "8", Rule::Positive),
    field!("head_dim", "Head dimension", "", "128", Rule::Positive),
    field!("weights", "Weights", "", "bf16", Rule::Choice(PRECISIONS)),
    field!("kv", "KV cache", "", "bf16", Rule::Choice(PRECISIONS)),
    field!("gpu_memory", "Memory of one GPU", "GiB", "80", Rule::Positive),
    field!("gpu_price", "Price of one GPU", "USD / hour", "12.29", Rule::NonNegative),
    field!("tp", "Tensor-parallel degree", "GPUs per replica", "1", Rule::Choice(DEGREES)),
    field!("headroom", "Memory kept free", "%", "10", Rule::Percent),
    field!("activations", "Working memory per GPU", "GiB", "2", Rule::NonNegative),
    field!("fixed_ms", "Iteration, fixed part", "ms", "6", Rule::NonNegative),
    field!("per_seq_ms", "Iteration, per sequence", "ms", "0.06", Rule::NonNegative),
    field!("prefill", "Prompt reading", "tokens / s", "30000", Rule::Positive),
    field!("max_slots", "Most sequences the engine batches", "sequences", "256", Rule::Positive),
    field!("run", "Your LLM server (measured)", "", "", Rule::Text),
    field!("uncertain", "Uncertainty: enter ranges", "", "0", Rule::Flag),
    field!("requests_pm", "Requests per month, ±", "%", "30", Rule::Percent),
    field!("engine_pm", "Engine costs, ±", "%", "25", Rule::Percent),
    field!("try_weights", "Weights precisions to try", "", "entered", Rule::Choice(TRY_WEIGHTS)),
    field!("bw_eff", "Memory bandwidth reached", "%", "80", Rule::Percent),
    field!("flops_eff", "Arithmetic reached in prompts", "%", "50", Rule::Percent),
];

/// The page's inputs, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmInputs {
    pub requests: f64,
    pub load: Load,
    pub context: f64,
    pub shape: LlmShape,
    pub tp: u32,
    pub gpu_memory: Bytes,
    pub gpu_price: f64,
    pub headroom: f64,
    pub activations: Bytes,
    pub fixed_ms: f64,
    pub per_seq_ms: f64,
    pub prefill: f64,
    pub max_slots: u32,
    pub ttft_slo: Option<Seconds>,
    pub itl_slo: Option<Seconds>,
    /// Weights precisions the catalog comparison tries, the entered one first.
    pub precisions: Vec<Precision>,
    pub efficiency: Efficiency,
}

/// Everything the page shows for the configuration entered, from one set of inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmPlan {
    pub requests: f64,
    pub rate: f64,
    pub tp: u32,
    /// The memory fit at each tensor-parallel degree.
    pub memory: Vec<(u32, LlmMemoryFit)>,
    pub engine: Engine,
    /// What was sized, for the uncertainty ranges.
    pub sizing_input: LlmSizingInput,
    pub sizing: LlmSizing,
    pub load: Load,
    pub ttft_slo: Option<f64>,
    pub itl_slo: Option<f64>,
    /// Where the engine's costs come from, when a measured run gave them.
    pub engine_source: Option<String>,
}

fn precision(form: &Form, key: &str) -> Precision {
    Precision::parse(&form.text(key)).unwrap_or(Precision::Bf16)
}

fn label_of(field: &str) -> &'static str {
    match field {
        "parameters" => "Parameters",
        "layers" => "Layers",
        "kv_heads" => "KV heads",
        "head_dim" => "Head dimension",
        "headroom" => "Memory kept free",
        "tokens_per_sequence" => "Tokens one sequence may hold",
        "ttft_p99_slo_s" => "TTFT SLO (p99)",
        "itl_p99_slo_s" => "ITL SLO (p99)",
        "rate_per_s" => "Requests per month",
        "output_tokens" => "Output tokens per request",
        "input_cv" => "Prompt length variation",
        "device_memory_bytes" => "Memory of one GPU",
        "activations_bytes" => "Working memory per GPU",
        "replica_hourly_usd" => "Price of one GPU",
        "per_sequence_s" => "Iteration, per sequence",
        "per_prompt_token_s" => "Prompt reading",
        "slots" => "Most sequences the engine batches",
        "fixed_s" => "Iteration, fixed part",
        "bandwidth_efficiency" => "Memory bandwidth reached",
        "compute_efficiency" => "Arithmetic reached in prompts",
        "volume_spread" => "Requests per month, ±",
        "engine_spread" => "Engine costs, ±",
        _ => "Input",
    }
}

fn model_error(e: model::ModelError) -> Vec<String> {
    vec![format!("{}: {}", label_of(&e.field), e.reason)]
}

/// The inputs, or every reason they cannot be used.
pub fn inputs(form: &Form) -> Result<LlmInputs, Vec<String>> {
    let mut errors = Vec::new();
    let mut num = |key: &str| {
        form.num(key).unwrap_or_else(|e| {
            errors.push(e);
            f64::NAN
        })
    };
    let requests = num("requests");
    let (input, input_cv, output, context) = (num("input"), num("input_cv"), num("output"), num("context"));
    let (ttft_ms, itl_ms) = (num("ttft_ms"), num("itl_ms"));
    let (parameters, layers, kv_heads, head_dim) = (num("parameters"), num("layers"), num("kv_heads"), num("head_dim"));
    let (gpu_memory, gpu_price, headroom, activations) =
        (num("gpu_memory"), num("gpu_price"), num("headroom"), num("activations"));
    // A picked run gives the engine's three costs; their fields are hidden then, so a value
    // left in them (from a link) is not held against the inputs.
    let measured = !form.text("run").is_empty();
    let mut engine_num = |key: &str| if measured { 1.0 } else { num(key) };
    let (fixed_ms, per_seq_ms, prefill) = (engine_num("fixed_ms"), engine_num("per_seq_ms"), engine_num("prefill"));
    let max_slots = num("max_slots");
    let (bw_eff, flops_eff) = (num("bw_eff"), num("flops_eff"));
    // Choices are read by their index in the list, so a value from a hand-edited link that is
    // not one of them is named here rather than taken for a default.
    let (tp_index, _, _, try_index) = (num("tp"), num("weights"), num("kv"), num("try_weights"));
    if context < input + output {
        errors.push(format!(
            "Tokens one sequence may hold: at least the prompt and output tokens of a mean request ({})",
            grouped(input + output)
        ));
    }
    if max_slots > f64::from(PAGE_SLOTS) {
        errors.push(format!("Most sequences the engine batches: at most {}", grouped(f64::from(PAGE_SLOTS))));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let shape = LlmShape {
        parameters,
        layers: whole(layers),
        kv_heads: whole(kv_heads),
        head_dim: whole(head_dim),
        weights: precision(form, "weights"),
        kv: precision(form, "kv"),
    };
    let lower = [Precision::Int8, Precision::Int4];
    let precisions = std::iter::once(shape.weights)
        .chain(
            lower
                .into_iter()
                .take(try_index as usize)
                .filter(|p| p.bytes_per_value() < shape.weights.bytes_per_value()),
        )
        .collect();
    let slo = |ms: f64| (ms > 0.0).then(|| Seconds(ms / 1e3));
    Ok(LlmInputs {
        requests,
        load: Load { rate: requests / SECONDS_PER_MONTH, input_tokens: input, input_cv, output_tokens: output },
        context,
        shape,
        tp: TENSOR_PARALLEL[tp_index as usize],
        gpu_memory: Bytes(gpu_memory * GIB),
        gpu_price,
        headroom: headroom / 100.0,
        activations: Bytes(activations * GIB),
        fixed_ms,
        per_seq_ms,
        prefill,
        max_slots: whole(max_slots),
        ttft_slo: slo(ttft_ms),
        itl_slo: slo(itl_ms),
        precisions,
        efficiency: Efficiency { bandwidth: bw_eff / 100.0, compute: flops_eff / 100.0 },
    })
}

fn whole(v: f64) -> u32 {
    v.clamp(0.0, f64::from(u32::MAX)) as u32
}

/// The plan for the configuration entered, or every reason it cannot be made.
pub fn plan(form: &Form) -> Result<LlmPlan, Vec<String>> {
    plan_with(form, &[])
}

/// [`plan`] knowing the measured runs the `run` field may name: a run picked gives the engine's
/// costs as fitted on it.
pub fn plan_with(form: &Form, runs: &[LlmRunView]) -> Result<LlmPlan, Vec<String>> {
    Ok(plan_within(form, runs, u64::MAX)?.expect("a sizing without a budget finishes"))
}

/// [`plan_with`], its sizing given up (`Ok(None)`) past `work` of the model's steps
/// ([`model::plan::llm::sizing::size_within`]); a budget of 0 checks everything the sizing
/// does not (the inputs, the run named, the memory) and sizes nothing.
pub fn plan_within(form: &Form, runs: &[LlmRunView], work: u64) -> Result<Option<LlmPlan>, Vec<String>> {
    let i = inputs(form)?;
    let run_id = form.text("run");
    let measured = match run_id.as_str() {
        "" => None,
        id => Some(runs.iter().find(|r| r.run_id == id).ok_or_else(|| {
            vec![format!(
                "Your LLM server (measured): run “{}” is not one of the {} newest load tests of an LLM server",
                id.chars().take(36).collect::<String>(),
                runs.len()
            )]
        })?),
    };
    let (shape, context) = (i.shape, i.context);
    let memory: Vec<(u32, LlmMemoryFit)> = TENSOR_PARALLEL
        .iter()
        .map(|&tp| {
            let input = LlmMemoryInput {
                shape,
                device_memory: i.gpu_memory,
                tensor_parallel: tp,
                activations: i.activations,
                headroom: i.headroom,
                tokens_per_sequence: context,
            };
            fit(&input).map(|f| (tp, f))
        })
        .collect::<Result<_, _>>()
        .map_err(model_error)?;
    let tp = i.tp;
    let chosen = memory.iter().find(|(d, _)| *d == tp).map(|(_, f)| *f).expect("every degree is fitted");
    if !chosen.fits {
        let smallest = memory.iter().find(|(_, f)| f.fits).map(|(d, _)| *d);
        return Err(vec![match smallest {
            Some(d) => format!(
                "Tensor-parallel degree: at {tp} GPU(s) not one sequence of {} tokens fits beside the weights; {d} GPUs hold {}",
                grouped(context),
                grouped(f64::from(memory.iter().find(|(x, _)| *x == d).unwrap().1.max_sequences))
            ),
            None => "Memory of one GPU: the model does not fit even on 8 GPUs".to_string(),
        }]);
    }
    let slots = chosen.max_sequences.min(i.max_slots).max(1);
    let engine = match measured {
        Some(run) => Engine { slots, ..run.check.calibration.engine },
        None => Engine {
            fixed: Seconds(i.fixed_ms / 1e3),
            per_sequence: Seconds(i.per_seq_ms / 1e3),
            per_prompt_token: Seconds(1.0 / i.prefill),
            slots,
        },
    };
    let sizing_input = LlmSizingInput {
        engine,
        load: i.load,
        ttft_p99_slo: i.ttft_slo,
        itl_p99_slo: i.itl_slo,
        replica_hourly: UsdPerHour(i.gpu_price * f64::from(tp)),
    };
    let sizing = size_within(&sizing_input, work).map_err(|e| {
        let measured = measured.filter(|_| e.field.ends_with("_slo_s"));
        let said = format!("{}: {}", label_of(&e.field), e.reason);
        // An SLO the engine alone misses: "this engine" is the run's, not the figures below.
        vec![match measured {
            Some(run) => format!("{said} (fitted on run {})", &run.run_id[..8.min(run.run_id.len())]),
            None => said,
        }]
    })?;
    let Some(sizing) = sizing else { return Ok(None) };
    Ok(Some(LlmPlan {
        requests: i.requests,
        rate: i.load.rate,
        tp,
        memory,
        engine,
        sizing_input,
        sizing,
        load: i.load,
        ttft_slo: i.ttft_slo.map(|s| s.0),
        itl_slo: i.itl_slo.map(|s| s.0),
        engine_source: measured.map(|r| {
            format!("Engine fitted on run {} of {}; {}.", &r.run_id[..8.min(r.run_id.len())], r.name(), r.error_words())
        }),
    }))
}

/// Sizings under way in this process's server renders of the page.
static RENDER_SIZINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The most sizings the server's renders run at once, whatever the number of requests: each
/// holds a thread (of the async runtime's, one per core) for up to about half a second
/// ([`RENDER_WORK`]), so two, and on a machine of two cores or fewer one, leaving a core to
/// the API, the ingest and the health checks.
pub fn render_sizings_at_once() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get().saturating_sub(1).clamp(1, 2))
}

/// [`plan_within`] as the server's render makes it: within [`RENDER_WORK`], and only while
/// fewer than [`render_sizings_at_once`] others are under way; past that everything but the
/// sizing is checked, and the browser sizes it (as past the budget).
pub fn render_plan(form: &Form, runs: &[LlmRunView]) -> Result<Option<LlmPlan>, Vec<String>> {
    use std::sync::atomic::Ordering;
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            RENDER_SIZINGS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let most = render_sizings_at_once();
    let taken =
        RENDER_SIZINGS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| (now < most).then_some(now + 1)).is_ok();
    if !taken {
        return plan_within(form, runs, 0);
    }
    let _leave = Leave;
    plan_within(form, runs, RENDER_WORK)
}

/// One instance type of the price catalog and what it can do for the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferRow {
    pub row: PriceRowView,
    pub verdict: OfferVerdict,
}

/// Every instance type with GPUs in `rows`, cheapest plan first, then those rejected.
pub fn offers(form: &Form, rows: &[PriceRowView]) -> Result<Vec<OfferRow>, Vec<String>> {
    let i = inputs(form)?;
    let rows: Vec<&PriceRowView> = rows.iter().filter(|r| r.gpu_count > 0 && r.gpu_model.is_some()).collect();
    let offers: Vec<GpuOffer> = rows
        .iter()
        .map(|r| GpuOffer {
            gpu_model: r.gpu_model.clone().unwrap_or_default(),
            gpus: r.gpu_count,
            hourly: UsdPerHour(r.hourly_micro_usd as f64 / 1e6),
        })
        .collect();
    let question = OfferQuestion {
        shape: i.shape,
        load: i.load,
        tokens_per_sequence: i.context,
        ttft_p99_slo: i.ttft_slo,
        itl_p99_slo: i.itl_slo,
        headroom: i.headroom,
        activations: i.activations,
        max_slots: i.max_slots,
        efficiency: i.efficiency,
    };
    let verdicts = compare(&offers, &question, &i.precisions).map_err(model_error)?;
    let mut out: Vec<OfferRow> =
        rows.into_iter().zip(verdicts).map(|(row, verdict)| OfferRow { row: row.clone(), verdict }).collect();
    let month = |r: &OfferRow| match &r.verdict {
        OfferVerdict::Plan(p) => p.sizing.usd_per_month,
        OfferVerdict::Rejected(_) => f64::INFINITY,
    };
    out.sort_by(|a, b| month(a).total_cmp(&month(b)));
    Ok(out)
}

/// TTFT and ITL p99 of one replica against its request rate, up to where it cannot keep up.
pub fn latency_chart(p: &LlmPlan) -> String {
    let capacity = p.engine.capacity(p.load.input_tokens, p.load.output_tokens);
    let mut ttft = Vec::new();
    let mut itl = Vec::new();
    for k in 1..=24 {
        let rate = capacity * 0.95 * f64::from(k) / 24.0;
        if let Ok(Some(l)) = predict(&p.engine, &Load { rate, ..p.load }) {
            ttft.push((rate, l.ttft_p99.0));
            itl.push((rate, l.itl_p99.0));
        }
    }
    let mut chart =
        LineChart::new("One replica: p99 latency vs request rate (model)", "requests / s per replica", "seconds (log)");
    chart.y_log = true;
    chart.x_format = |v| format!("{v:.2}");
    chart.y_format = seconds;
    chart.series.push(Series::new("TTFT p99", ttft));
    chart.series.push(Series::new("ITL p99", itl));
    if let Some(s) = p.ttft_slo {
        chart.y_rules.push(ChartRule { at: s, label: "TTFT SLO".into() });
    }
    if let Some(s) = p.itl_slo {
        chart.y_rules.push(ChartRule { at: s, label: "ITL SLO".into() });
    }
    let per_replica = p.rate / f64::from(p.sizing.replicas);
    chart.x_rules.push(ChartRule { at: per_replica, label: "planned".into() });
    line_chart(&chart)
}

#[component]
pub fn LlmPage() -> impl IntoView {
    let query = use_query_map();
    let form = Form::new(FIELDS, &query.get_untracked());
    // The run a link or saved scenario names is read even when no longer among the newest.
    let named = Some(form.text_untracked("run")).filter(|id| !id.is_empty());
    let runs = Resource::new(|| (), move |_| crate::data::llm_runs(named.clone()));
    let catalog = Resource::new(|| (), |_| crate::data::price_catalog());
    view! {
        <Title text="LLM serving · Headroom"/>
        <h1>"LLM serving"</h1>
        <p class="lede">"GPUs, dollars per million tokens and time to first token (TTFT) and between tokens (ITL) for a language model served with continuous batching. The KV cache bounds how many sequences a replica holds; the engine's cost per iteration sets the latencies. Numbers update as you type."</p>
        // One Suspense reads both resources, each once (see the Right-sizing page).
        <Suspense fallback=|| view! { <p>"Loading measured runs and prices…"</p> }>
            {move || Suspend::new(async move {
                let (runs, catalog) = (runs.await, catalog.await);
                let runs_error = runs.as_ref().err().map(|e| format!("Could not load the measured runs: {}", crate::pages::scenarios::clean(e)));
                let catalog = catalog.map_err(|e| crate::pages::scenarios::clean(&e));
                view! { <LlmPlanner form runs=runs.unwrap_or_default() runs_error catalog/> }
            })}
        </Suspense>
    }
}

/// The form and its answers, once the measured runs and the price catalog are read.
#[component]
fn LlmPlanner(
    form: Form,
    runs: Vec<LlmRunView>,
    runs_error: Option<String>,
    catalog: Result<CatalogView, String>,
) -> impl IntoView {
    let measured = StoredValue::new(runs.clone());
    // The catalog comparison sizes every GPU type: hundreds of evaluations of the model, up to a
    // second, and more for inputs chosen to make it slow. So it runs in the browser only (an
    // effect, which the server's render never runs: a link cannot spend the server's CPU), at
    // once when the page hydrates, then once typing pauses rather than at every key.
    let settled: RwSignal<Option<BTreeMap<String, String>>> = RwSignal::new(None);
    Effect::new(move |last: Option<Option<TimeoutHandle>>| {
        let values = form.values();
        if let Some(Some(timer)) = last {
            timer.clear();
        }
        if settled.get_untracked().is_none() {
            settled.set(Some(values));
            return None;
        }
        // The page may be gone when the timer fires: then the signal is too, and nothing is set.
        let settle = move || {
            if settled.try_with_untracked(|s| s.as_ref() != Some(&values)) == Some(true) {
                settled.try_set(Some(values));
            }
        };
        set_timeout_with_handle(settle, Duration::from_millis(400)).ok()
    });
    let pending = Signal::derive(move || settled.get().is_none_or(|s| s != form.values()));
    // The plan itself is drawn by the server's render, so that it is there before the script,
    // but its sizing stops at RENDER_WORK of the model's steps there: a link asking for a slow
    // sizing would otherwise hold a server thread for seconds. The browser sizes whole, except
    // while it hydrates a page whose render gave up: it draws the same card (its DOM says so,
    // rather than the browser counting the work again, whose floating-point library may round
    // a comparison the other way) until the page has settled, then sizes it once.
    let settled_once = Memo::new(move |_| settled.with(Option::is_some));
    let result = Memo::new(move |_| {
        if cfg!(feature = "ssr") {
            return measured.with_value(|runs| render_plan(&form, runs));
        }
        if !settled_once.get_untracked() && rendered_without_sizing() {
            settled_once.track();
            return Ok(None);
        }
        measured.with_value(|runs| plan_within(&form, runs, u64::MAX))
    });
    view! {
        <div class="planner">
            <form class="inputs card" method="get" action="/llm" on:submit=|ev| ev.prevent_default()>
                <button type="submit" class="before-hydration">"Update"</button>
                {view! {
                <fieldset>
                    <legend>"Workload"</legend>
                    <NumberField form key="requests"/>
                    <NumberField form key="input"/>
                    <NumberField form key="input_cv" hint="0 if every prompt is as long; long prompts make the TTFT tail."/>
                    <NumberField form key="output"/>
                    <NumberField form key="context" hint="What each sequence reserves in the KV cache: the longest prompt and answer you serve."/>
                    <NumberField form key="ttft_ms"/>
                    <NumberField form key="itl_ms"/>
                    <FlagField form key="uncertain"/>
                    <Show when=move || form.flag("uncertain")>
                        <NumberField form key="requests_pm"/>
                        <NumberField form key="engine_pm" hint="A picked run's hint says how far the model was off on it."/>
                    </Show>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Model"</legend>
                    <p class="hint">"From the model's config.json; the defaults are Llama 3 8B."</p>
                    <NumberField form key="parameters"/>
                    <NumberField form key="layers"/>
                    <NumberField form key="kv_heads" hint="num_key_value_heads: fewer than the attention heads with grouped-query attention."/>
                    <NumberField form key="head_dim"/>
                    <ChoiceField form key="weights" labels=PRECISION_LABELS/>
                    <ChoiceField form key="kv" labels=PRECISION_LABELS/>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"GPU"</legend>
                    <NumberField form key="gpu_memory"/>
                    <NumberField form key="gpu_price" hint="The default is AWS p5.48xlarge on demand ÷ its 8 H100s, from the shipped price catalog (2024-06-01)."/>
                    <ChoiceField form key="tp" labels=DEGREES/>
                    <NumberField form key="headroom"/>
                    <NumberField form key="activations"/>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Engine, per replica"</legend>
                    <LlmRunPicker form runs runs_error/>
                    <Show when=move || form.text("run").is_empty()>
                        <p class="hint">"An iteration takes fixed + per sequence × sequences + prompt tokens ÷ prompt reading. The defaults are estimates for Llama 3 8B in BF16 on one H100 (weights read at 80 % of 3.35 TB/s; 2 × parameters FLOPs per prompt token at half of 989 TFLOP/s), not measurements: load-test your server with "<code>"measurements-agent run endpoint --protocol openai-chat --sweep --server …"</code>" and pick the run above."</p>
                        <NumberField form key="fixed_ms"/>
                        <NumberField form key="per_seq_ms"/>
                        <NumberField form key="prefill"/>
                    </Show>
                    <NumberField form key="max_slots" hint="vLLM's max_num_seqs, llama.cpp's --parallel; the KV cache may allow fewer."/>
                </fieldset>
                }.into_any()}
                {view! {
                <fieldset>
                    <legend>"Across the price catalog"</legend>
                    <p class="hint">"Each GPU instance type of the price catalog, its engine estimated from the GPU's datasheet (a roofline), not measured."</p>
                    <ChoiceField form key="try_weights" labels=TRY_WEIGHTS_LABELS/>
                    <NumberField form key="bw_eff" hint="Of the datasheet's memory bandwidth, reading weights and the KV cache."/>
                    <NumberField form key="flops_eff" hint="Of the datasheet's dense 16-bit FLOP/s, reading prompts."/>
                </fieldset>
                }.into_any()}
            </form>
            <section class="outputs" aria-live="polite">
                {move || match result.get() {
                    Err(errors) => view! {
                        <div class="card problems" role="alert">
                            <h2>"Fix the marked fields"</h2>
                            <ul>{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul>
                        </div>
                    }.into_any(),
                    Ok(Some(p)) => view! { <LlmPlanView p settled/> }.into_any(),
                    Ok(None) => view! {
                        <div class="card" data-out="sizing-in-browser">
                            <p class="sub">"Sizing in your browser: the server did not size this plan while drawing the page (it takes more of the model's work than the server spends on one page, or the server was sizing others). It appears once the page's script has loaded."</p>
                        </div>
                    }.into_any(),
                }}
                <Spread settled measured/>
                {match catalog {
                    Err(err) => view! { <p class="error">{format!("Could not load the price catalog: {err}")}</p> }.into_any(),
                    Ok(c) => view! { <Offers settled pending rows=c.rows version=c.version/> }.into_any(),
                }}
            </section>
        </div>
    }
}

/// Whether the document holds the card the server's render draws where it gave the sizing up
/// (the browser asks while it hydrates that render).
fn rendered_without_sizing() -> bool {
    #[cfg(feature = "hydrate")]
    {
        document().query_selector("[data-out=sizing-in-browser]").ok().flatten().is_some()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        false
    }
}

/// "Your LLM server (measured)": a select of the load tests of OpenAI-compatible servers; a
/// pick replaces the engine's figures with those fitted on it.
#[component]
fn LlmRunPicker(form: Form, runs: Vec<LlmRunView>, runs_error: Option<String>) -> impl IntoView {
    let run = form.signal("run");
    let runs = StoredValue::new(runs);
    let hint = move || {
        let id = run.get();
        match runs.with_value(|rs| rs.iter().find(|r| r.run_id == id).cloned()) {
            Some(r) => {
                let e = r.check.calibration.engine;
                format!(
                    "Fitted when the run was stored: {}, {}, prompts read at {} tokens/s, with {} slots ({}; the plan batches as many as the field below allows); {}.",
                    crate::components::llm_check::fixed_part(&e),
                    crate::components::llm_check::per_sequence_part(&e),
                    grouped(1.0 / e.per_prompt_token.0.max(1e-12)),
                    e.slots,
                    r.check.slots_from.words(),
                    r.error_words()
                )
            }
            None if runs.with_value(Vec::is_empty) => runs_error.clone().unwrap_or_else(|| {
                "No LLM server load-tested yet: run `measurements-agent run endpoint --target URL --protocol openai-chat --sweep`.".into()
            }),
            None => "Sizes with the engine fitted on a load test of your own server instead of the figures below.".into(),
        }
    };
    view! {
        <div class="field" data-field="run">
            <label for="f-run">"Your LLM server (measured)"</label>
            <select id="f-run" name="run" on:change=move |ev| run.set(event_target_value(&ev))>
                <option value="" selected=move || run.get().is_empty()>"— none: the figures below —"</option>
                {runs.get_value().into_iter().map(|r| {
                    let id = r.run_id.clone();
                    let label = format!("{} · {} · run {}", r.name(), utc_minute(r.started_at_ms), &r.run_id[..8.min(r.run_id.len())]);
                    view! { <option value=id.clone() selected=move || run.get() == id>{label}</option> }
                }).collect_view()}
            </select>
            <p class="hint" data-out="run-hint">{hint}</p>
        </div>
    }
}

/// How far the latency figures can be trusted: inside or outside the range they were checked
/// against the simulated scheduler in.
fn validity(l: &Latency) -> String {
    if l.validated {
        return "model, within the range it was checked against a simulation".to_string();
    }
    format!(
        "model, outside the range it was checked in (the slots more than {:.0} % full on average, or the rate over {:.0} % of a replica's capacity): the tails may be longer",
        VALIDATED_SHARE * 100.0,
        VALIDATED_LOAD * 100.0
    )
}

#[component]
fn LlmPlanView(p: LlmPlan, settled: RwSignal<Option<BTreeMap<String, String>>>) -> impl IntoView {
    let s = p.sizing;
    let l = s.latency;
    let gpus = s.replicas * p.tp;
    // The chart predicts at 24 rates, each up to 85 ms natively for inputs chosen to be slow:
    // drawn in the browser only, like the catalog comparison (`settled` is first set by an
    // effect, which the server's render never runs), so a link cannot spend the server's CPU
    // on it. Drawn once per plan: later settles do not redraw it.
    let drawn = Memo::new(move |_| settled.with(Option::is_some));
    let chart = {
        let p = p.clone();
        move || {
            if drawn.get() {
                view! { <div class="chart card" data-chart="llm-latency" inner_html=latency_chart(&p)></div> }
                    .into_any()
            } else {
                view! { <div class="chart card"><p class="sub">"Drawing the latency chart in your browser…"</p></div> }
                    .into_any()
            }
        }
    };
    let validity = validity(&l);
    view! {
        <div class="cards">
            <div class="card metric">
                <h2>"GPUs"</h2>
                <p class="big" data-out="gpus">{grouped(f64::from(gpus))}</p>
                <p class="sub" data-out="replicas">{format!("{} replica(s) × {} GPU(s), {} sequences each", grouped(f64::from(s.replicas)), p.tp, p.engine.slots)}</p>
            </div>
            <div class="card metric">
                <h2>"Per million tokens"</h2>
                <p class="big" data-out="per-million-output">{format!("{} output", usd(s.usd_per_million_output))}</p>
                <p class="sub" data-out="per-million-input">{format!("{} input; {} any token", usd(s.usd_per_million_input), usd(s.usd_per_million_tokens))}</p>
            </div>
            <div class="card metric">
                <h2>"Monthly spend"</h2>
                <p class="big" data-out="monthly">{usd(s.usd_per_month)}</p>
                <p class="sub" data-out="per-request">{format!("{} per request at {} requests", usd(s.cost_per_request), count(p.requests))}</p>
            </div>
        </div>
        <div class="card" data-card="latency">
            <h2>"Latency at this size"</h2>
            <dl>
                <dt>"TTFT p50 / p99"</dt>
                <dd data-out="ttft">{format!("{} / {}", seconds(l.ttft_p50.0), seconds(l.ttft_p99.0))}</dd>
                <dt>"ITL p50 / p99"</dt>
                <dd data-out="itl">{format!("{} / {}", seconds(l.itl_p50.0), seconds(l.itl_p99.0))}</dd>
                <dt>"Sequences resident, engine busy"</dt>
                <dd>{format!("{:.1} of {}, {:.0} %", l.mean_resident, p.engine.slots, l.busy * 100.0)}</dd>
                <dt>"Output tokens per second, per replica"</dt>
                <dd>{grouped(l.output_tokens_per_second)}</dd>
            </dl>
            <p class="sub" data-out="validity">{validity}</p>
            {p.engine_source.map(|source| view! { <p class="sub" data-out="engine-source">{source}</p> })}
            <p class="note">{format!(
                "Tokens priced by the engine time they take: {:.0} % of a request's goes to reading its prompt. Replicas are paid by the hour ({} × {} hours) whether busy or not.",
                s.input_share * 100.0, usd(s.usd_per_month / f64::from(s.replicas) / HOURS_PER_MONTH), HOURS_PER_MONTH
            )}</p>
        </div>
        <div class="card">
            <h2>"Memory per GPU"</h2>
            <div tabindex="0" class="table-wrap"><table data-out="memory">
                <thead><tr><th>"GPUs per replica"</th><th class="num">"Weights"</th><th class="num">"KV per token"</th><th class="num">"Tokens cached"</th><th class="num">"Sequences"</th></tr></thead>
                <tbody>
                    {p.memory.iter().map(|(tp, f)| view! {
                        <tr class:chosen=*tp == p.tp>
                            <th>{tp.to_string()}</th>
                            <td class="num">{bytes(f.weights_per_gpu.0)}</td>
                            <td class="num">{bytes(f.kv_per_token_per_gpu.0)}</td>
                            <td class="num">{if f.fits { grouped(f.kv_tokens.floor()) } else { "does not fit".into() }}</td>
                            <td class="num">{grouped(f64::from(f.max_sequences))}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table></div>
        </div>
        {chart}
    }
}

/// GPUs and spend over the corners of the ranges entered (volume, engine costs), computed in
/// the browser like the catalog comparison: four more sizings.
#[component]
fn Spread(
    settled: RwSignal<Option<BTreeMap<String, String>>>,
    measured: StoredValue<Vec<LlmRunView>>,
) -> impl IntoView {
    let result = Memo::new(move |_| {
        let values = settled.get()?;
        let form = Form::snapshot(FIELDS, &values);
        if !form.flag("uncertain") {
            return None;
        }
        let p = measured.with_value(|runs| plan_with(&form, runs)).ok()?;
        let (volume, engine) = (form.num("requests_pm").ok()? / 100.0, form.num("engine_pm").ok()? / 100.0);
        Some(spread(&p.sizing_input, volume, engine).map(|s| (s, p.tp, volume, engine)).map_err(model_error))
    });
    move || {
        result.get().map(|answer| match answer {
            Err(errors) => view! { <div class="card problems" role="alert"><ul>{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul></div> }.into_any(),
            Ok((s, tp, volume, engine)) => view! { <SpreadCard s tp volume engine/> }.into_any(),
        })
    }
}

#[component]
fn SpreadCard(s: LlmSpread, tp: u32, volume: f64, engine: f64) -> impl IntoView {
    let range = |r: Option<(f64, f64)>, f: fn(f64) -> String| {
        r.map_or("—".to_string(), |(lo, hi)| format!("{} to {}", f(lo), f(hi)))
    };
    let gpus = s.replicas.map_or("—".to_string(), |(lo, hi)| {
        format!("{} to {}", grouped(f64::from(lo * tp)), grouped(f64::from(hi * tp)))
    });
    let unmet = (s.unmet > 0).then(|| {
        format!(
            "At {} of the 4 corners no number of replicas meets the SLOs: an engine {:.0} % slower than entered cannot serve them.",
            s.unmet,
            engine * 100.0
        )
    });
    view! {
        <div class="card" data-card="spread">
            <h2>"If the figures are uncertain"</h2>
            <p data-out="spread">{format!(
                "With requests ±{:.0} % and every engine cost ±{:.0} % (the corners of those ranges): {} GPUs, {} a month, {} per million output tokens, {} per million input tokens.",
                volume * 100.0,
                engine * 100.0,
                gpus,
                range(s.usd_per_month, usd),
                range(s.usd_per_million_output, usd),
                range(s.usd_per_million_input, usd),
            )}</p>
            {unmet.map(|u| view! { <p class="sub" data-out="spread-unmet">{u}</p> })}
        </div>
    }
}

/// Every GPU instance type of the catalog for this workload: the cheapest configuration of each,
/// or why it cannot serve it.
#[component]
fn Offers(
    settled: RwSignal<Option<BTreeMap<String, String>>>,
    pending: Signal<bool>,
    rows: Vec<PriceRowView>,
    version: i64,
) -> impl IntoView {
    let result = Memo::new(move |_| settled.get().map(|values| offers(&Form::snapshot(FIELDS, &values), &rows)));
    view! {
        <div class="card" data-card="offers" aria-busy=move || pending.get().to_string()>
            <h2>"Across the price catalog"</h2>
            <Show when=move || pending.get() && result.with(Option::is_some)>
                <p class="sub">"Updating for the inputs as typed…"</p>
            </Show>
            {move || match result.get() {
                None => view! { <p class="sub">"Comparing the catalog's GPU instance types in your browser…"</p> }.into_any(),
                Some(Err(_)) => view! { <p class="sub">"Fix the marked fields to compare instance types."</p> }.into_any(),
                Some(Ok(list)) => offers_table(list, version).into_any(),
            }}
        </div>
    }
}

fn offer_name(r: &PriceRowView) -> String {
    let mut name = format!("{} {}", r.provider, r.instance_type);
    if let Some(region) = &r.region {
        name.push_str(&format!(" ({region})"));
    }
    if r.purchase_option != "on_demand" {
        name.push_str(&format!(", {}", r.purchase_option.replace('_', " ")));
    }
    name
}

fn offers_table(list: Vec<OfferRow>, version: i64) -> impl IntoView {
    let summary = match list.first() {
        Some(OfferRow { row, verdict: OfferVerdict::Plan(p) }) => format!(
            "Cheapest: {}, {} replica(s) of {} GPU(s) with {} weights on {} instance(s): {} a month, {} per million output tokens.",
            offer_name(row),
            grouped(f64::from(p.sizing.replicas)),
            p.tensor_parallel,
            p.weights.as_str().to_uppercase(),
            grouped(f64::from(p.instances)),
            usd(p.sizing.usd_per_month),
            usd(p.sizing.usd_per_million_output),
        ),
        _ => {
            "No instance type of the catalog serves this workload within these SLOs; each one's reason is below.".into()
        }
    };
    let first = list.first().map(|r| r.row.clone());
    view! {
        <p data-out="cheapest">{summary}</p>
        <div tabindex="0" class="table-wrap"><table data-out="offers" class="offers">
            <thead><tr>
                <th>"Instance type"</th><th>"Configuration"</th><th class="num">"TTFT p99 / ITL p99"</th>
                <th class="num">"Per month"</th><th class="num">"Per 1M output / input tokens"</th>
            </tr></thead>
            <tbody>
                {list.into_iter().map(|r| {
                    let chosen = first.as_ref() == Some(&r.row) && matches!(r.verdict, OfferVerdict::Plan(_));
                    let gpus = format!("{} × {}", r.row.gpu_count, r.row.gpu_model.clone().unwrap_or_default());
                    let name = view! { <th>{offer_name(&r.row)}<span class="sub">{gpus}</span></th> };
                    match r.verdict {
                        OfferVerdict::Plan(p) => view! {
                            <tr class:chosen=chosen>
                                {name}
                                <td>{format!(
                                    "{} replica(s) of {} GPU(s), {} weights, on {} instance(s)",
                                    grouped(f64::from(p.sizing.replicas)),
                                    p.tensor_parallel,
                                    p.weights.as_str().to_uppercase(),
                                    grouped(f64::from(p.instances)),
                                )}</td>
                                <td class="num">{format!("{} / {}", seconds(p.sizing.latency.ttft_p99.0), seconds(p.sizing.latency.itl_p99.0))}</td>
                                <td class="num">{usd(p.sizing.usd_per_month)}</td>
                                <td class="num">{format!("{} / {}", usd(p.sizing.usd_per_million_output), usd(p.sizing.usd_per_million_input))}</td>
                            </tr>
                        }.into_any(),
                        OfferVerdict::Rejected(why) => view! {
                            <tr class="rejected">
                                {name}
                                <td colspan="4">{format!("Rejected: {why}")}</td>
                            </tr>
                        }.into_any(),
                    }
                }).collect_view()}
            </tbody>
        </table></div>
        <p class="note">{format!(
            "Prices from the catalog (version {version}). A replica's GPUs are in one instance, and instances are paid whole. The engine on each GPU is a roofline from its datasheet, not a measurement: weights and the KV cache read at the bandwidth share entered, prompts multiplied at the arithmetic share (8- and 4-bit weights are read faster, multiplied in 16 bits); the link between a replica's GPUs is not counted."
        )}</p>
        <details>
            <summary>"Datasheet figures"</summary>
            <ul>{GPUS.iter().map(|g| view! { <li>{g.source}</li> }).collect_view()}</ul>
        </details>
    }
}

// Signals outside a browser need the server build's runtime.
#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::components::form::testing::owned;

    fn form(pairs: &[(&str, &str)]) -> Form {
        crate::components::form::testing::form(FIELDS, pairs)
    }

    #[test]
    fn the_figures_say_whether_they_are_inside_the_range_the_simulation_checked() {
        use model::units::Seconds;
        // llama.cpp's fitted engine on the development VM: a 245-token prompt takes 71 ms, a
        // decode iteration about 1 ms a sequence. Where prompts outlast iterations the TTFT p99
        // was once a low estimate from 40 % of capacity; it now follows the scheduler there.
        let engine = Engine {
            fixed: Seconds(0.0),
            per_sequence: Seconds(0.00105),
            per_prompt_token: Seconds(0.00029),
            slots: 8,
        };
        let words = |share: f64| {
            let capacity = engine.capacity(245.0, 32.0);
            let l = Load { rate: share * capacity, input_tokens: 245.0, input_cv: 0.2, output_tokens: 32.0 };
            validity(&predict(&engine, &l).unwrap().unwrap())
        };
        assert_eq!(words(0.3), "model, within the range it was checked against a simulation");
        assert_eq!(words(0.5), "model, within the range it was checked against a simulation");
        assert!(words(0.8).starts_with("model, outside the range"), "{}", words(0.8));
        assert!(words(0.8).contains("over 70 % of a replica's capacity"), "{}", words(0.8));
    }

    #[test]
    fn the_defaults_plan_llama_3_8b_on_h100s() {
        owned(|| {
            let p = plan(&form(&[])).unwrap();
            // 128 KiB of KV per token in BF16; 4,096-token sequences on 80 GiB less 10 %, 2 GiB
            // and the 16 GB of weights: about 100 sequences on one GPU.
            let one = p.memory[0].1;
            assert_eq!(one.kv_per_token_per_gpu, Bytes(131_072.0));
            assert!((90..=120).contains(&one.max_sequences), "{one:?}");
            assert_eq!(p.engine.slots, one.max_sequences.min(256));
            let s = p.sizing;
            assert!(s.latency.ttft_p99.0 <= 1.0 && s.latency.itl_p99.0 <= 0.05, "{s:?}");
            let per_request = s.usd_per_million_input * 1000.0 / 1e6 + s.usd_per_million_output * 250.0 / 1e6;
            assert!((per_request - s.cost_per_request).abs() < 1e-9 * s.cost_per_request);
            assert!((s.usd_per_month - 12.29 * f64::from(s.replicas) * HOURS_PER_MONTH).abs() < 1e-6);
        })
    }

    fn row(instance: &str, gpu: Option<&str>, count: u32, hourly: f64) -> PriceRowView {
        PriceRowView {
            provider: "aws".into(),
            instance_type: instance.into(),
            gpus: String::new(),
            gpu_model: gpu.map(Into::into),
            gpu_count: count,
            vcpus: None,
            memory_bytes: None,
            hourly_micro_usd: (hourly * 1e6) as i64,
            purchase_option: "on_demand".into(),
            region: Some("us-east-1".into()),
            source: "test".into(),
            as_of: "2024-06-01".into(),
        }
    }

    #[test]
    fn the_catalog_comparison_lists_gpu_types_cheapest_first_with_reasons_for_the_rest() {
        owned(|| {
            let rows = vec![
                row("c7i.2xlarge", None, 0, 0.357),
                row("g4dn.xlarge", Some("NVIDIA T4"), 1, 0.526),
                row("p5.48xlarge", Some("NVIDIA H100 80GB"), 8, 98.32),
                row("g6e.xlarge", Some("NVIDIA L40S"), 1, 1.861),
            ];
            let list = offers(&form(&[]), &rows).unwrap();
            let names: Vec<&str> = list.iter().map(|r| r.row.instance_type.as_str()).collect();
            assert_eq!(names.len(), 3, "the CPU-only row is left out: {names:?}");
            let month = |r: &OfferRow| match &r.verdict {
                OfferVerdict::Plan(p) => p.sizing.usd_per_month,
                OfferVerdict::Rejected(_) => f64::INFINITY,
            };
            assert!(list.windows(2).all(|w| month(&w[0]) <= month(&w[1])), "{list:?}");
            // 16 GB of BF16 weights beside 12.4 GiB usable on a T4.
            let t4 =
                |list: &[OfferRow]| list.iter().find(|r| r.row.instance_type == "g4dn.xlarge").unwrap().verdict.clone();
            assert!(
                matches!(t4(&list), OfferVerdict::Rejected(why) if why.starts_with("does not fit: BF16")),
                "{list:?}"
            );
            // In INT8 it fits, but a 1,000-token prompt takes half a second at half of 65 TFLOP/s,
            // and its p99 (cv 0.5) over a second.
            let int8 = offers(&form(&[("try_weights", "int8")]), &rows).unwrap();
            let OfferVerdict::Rejected(why) = t4(&int8) else { panic!("{int8:?}") };
            assert!(why.starts_with("TTFT p99 is") && why.ends_with("INT8 weights)"), "{why}");
            // Lower precisions are only tried below the one entered; a bad share is named.
            assert_eq!(
                inputs(&form(&[("weights", "int4"), ("try_weights", "int4")])).unwrap().precisions,
                [Precision::Int4]
            );
            let zero = offers(&form(&[("bw_eff", "0")]), &rows).unwrap_err();
            assert!(zero[0].starts_with("Memory bandwidth reached:"), "{zero:?}");
        })
    }

    #[test]
    fn the_server_renders_the_defaults_but_leaves_a_plan_chosen_to_be_slow_to_the_browser() {
        owned(|| {
            let defaults = form(&[]);
            assert_eq!(plan_within(&defaults, &[], RENDER_WORK).unwrap(), Some(plan(&defaults).unwrap()));
            // 4,096 slots of a small model's short sequences, 38,000 requests a second of
            // ten-token prompts of cv 5 and two-token answers: more of the model's work than
            // the render's budget, so left to the browser, which sizes it whole.
            let slow = form(&[
                ("parameters", "1B"),
                ("layers", "16"),
                ("head_dim", "64"),
                ("context", "64"),
                ("max_slots", "4096"),
                ("requests", "100B"),
                ("input", "10"),
                ("input_cv", "5"),
                ("output", "2"),
            ]);
            assert_eq!(plan_within(&slow, &[], RENDER_WORK).unwrap(), None);
            let whole = plan(&slow).unwrap();
            assert_eq!(whole.engine.slots, 4096, "{:?}", whole.memory);
            // Input errors are still shown by the server's render.
            assert!(plan_within(&form(&[("requests", "lots")]), &[], RENDER_WORK).is_err());
            // With as many sizings under way as the renders run at once, a render gives up at
            // once (still naming bad input, and a model that does not fit), does not count
            // itself as under way, and sizes again when one has ended.
            use std::sync::atomic::Ordering;
            let most = render_sizings_at_once();
            assert!((1..=2).contains(&most));
            assert_eq!(render_plan(&defaults, &[]).unwrap(), Some(plan(&defaults).unwrap()));
            RENDER_SIZINGS.fetch_add(most, Ordering::SeqCst);
            let too_large = form(&[("parameters", "70.6B"), ("layers", "80"), ("tp", "1")]);
            let busy = (
                render_plan(&defaults, &[]),
                render_plan(&form(&[("requests", "lots")]), &[]),
                render_plan(&too_large, &[]),
            );
            let still = RENDER_SIZINGS.load(Ordering::SeqCst);
            RENDER_SIZINGS.fetch_sub(1, Ordering::SeqCst);
            let freed = render_plan(&defaults, &[]);
            RENDER_SIZINGS.fetch_sub(most - 1, Ordering::SeqCst);
            assert_eq!(busy.0.unwrap(), None);
            assert!(busy.1.is_err());
            assert!(busy.2.unwrap_err()[0].starts_with("Tensor-parallel degree"));
            assert_eq!(still, most, "a render that gave up holds no place");
            assert_eq!(freed.unwrap(), Some(plan(&defaults).unwrap()));
        })
    }

    #[test]
    fn a_model_too_large_for_the_degree_names_the_degree_that_fits() {
        owned(|| {
            // Llama 3 70B in BF16 (141 GB of weights) on 80 GiB GPUs: not on one; on two, 70.6 GB
            // each leaves room for about 30,000 tokens of its 160 KiB-per-token KV cache halves.
            let f = form(&[("parameters", "70.6B"), ("layers", "80"), ("tp", "1")]);
            let errors = plan(&f).unwrap_err();
            assert!(errors[0].starts_with("Tensor-parallel degree: at 1 GPU(s)"), "{errors:?}");
            assert!(errors[0].contains("2 GPUs hold 6"), "{errors:?}");
            let p = plan(&form(&[("parameters", "70.6B"), ("layers", "80"), ("tp", "4")])).unwrap();
            assert_eq!(p.tp, 4);
            let monthly = 12.29 * 4.0 * f64::from(p.sizing.replicas) * HOURS_PER_MONTH;
            assert!((p.sizing.usd_per_month - monthly).abs() < 1e-6, "a replica is four GPUs, each paid by the hour");
            assert!(plan(&form(&[("ttft_ms", "1")])).unwrap_err()[0].starts_with("TTFT SLO (p99): no number"));
            assert!(plan(&form(&[("requests", "lots")])).unwrap_err()[0].contains("“lots”"));
            // Hand-edited links: a degree or precision not offered, or more slots than modelled.
            assert!(plan(&form(&[("tp", "3")])).unwrap_err()[0].contains("must be one of: 1, 2, 4, 8"));
            assert!(plan(&form(&[("kv", "fp7")])).unwrap_err()[0].contains("must be one of"));
            assert!(plan(&form(&[("max_slots", "5000")])).unwrap_err()[0].contains("at most 4,096"));
            // A picked run's engine stands in for the hidden fields, whatever they hold; a run
            // not offered is named.
            let unknown = plan(&form(&[("run", "0000"), ("fixed_ms", "fast")])).unwrap_err();
            assert!(
                unknown[0].starts_with("Your LLM server (measured): run “0000” is not one of the 0 newest"),
                "{unknown:?}"
            );
            // A sequence shorter than a mean request would count billions of them in the cache.
            let short = plan(&form(&[("context", "1")])).unwrap_err();
            assert!(short[0].starts_with("Tokens one sequence may hold: at least"), "{short:?}");
            // A link from the review, which once aborted the process: no prompt, one output
            // token, a one-token context.
            let odd = plan(&form(&[("input", "0"), ("output", "1"), ("context", "1")])).unwrap();
            assert!(latency_chart(&odd).contains("<svg"), "its chart runs to 95 % of capacity");
        })
    }
}
