//! LLM serving: GPUs, dollars per million tokens and TTFT/ITL for a language model under
//! continuous batching, from the model's shape, a GPU's memory and price, and the engine's
//! costs per iteration ([`model::plan::llm`]). Computed in the browser as people type.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use model::format::{bytes, count, grouped, seconds, usd};
use model::plan::llm::batching::MAX_SLOTS;
use model::plan::llm::memory::{LlmMemoryFit, LlmMemoryInput, LlmShape, TENSOR_PARALLEL, fit};
use model::plan::llm::sizing::{LlmSizing, LlmSizingInput, size};
use model::plan::llm::{Engine, Load, predict};
use model::plan::memory::Precision;
use model::units::{Bytes, HOURS_PER_MONTH, SECONDS_PER_MONTH, Seconds, UsdPerHour};

use crate::components::charts::{LineChart, Rule as ChartRule, Series, line_chart};
use crate::components::form::{ChoiceField, FieldSpec, Form, NumberField, Rule};

const PRECISIONS: &[&str] = &["bf16", "fp16", "int8", "int4", "fp32"];
const PRECISION_LABELS: &[&str] = &["BF16", "FP16", "INT8", "INT4", "FP32"];
const DEGREES: &[&str] = &["1", "2", "4", "8"];
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

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
];

/// Everything the page shows, from one set of inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmPlan {
    pub rate: f64,
    pub tp: u32,
    /// The memory fit at each tensor-parallel degree.
    pub memory: Vec<(u32, LlmMemoryFit)>,
    pub engine: Engine,
    pub sizing: LlmSizing,
    pub load: Load,
    pub ttft_slo: Option<f64>,
    pub itl_slo: Option<f64>,
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
        _ => "Input",
    }
}

/// The plan for these inputs, or every reason it cannot be made.
pub fn plan(form: &Form) -> Result<LlmPlan, Vec<String>> {
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
    let (fixed_ms, per_seq_ms, prefill, max_slots) =
        (num("fixed_ms"), num("per_seq_ms"), num("prefill"), num("max_slots"));
    // Choices are read by their index in the list, so a value from a hand-edited link that is
    // not one of them is named here rather than taken for a default.
    let (tp_index, _, _) = (num("tp"), num("weights"), num("kv"));
    if context < input + output {
        errors.push(format!(
            "Tokens one sequence may hold: at least the prompt and output tokens of a mean request ({})",
            grouped(input + output)
        ));
    }
    if max_slots > f64::from(MAX_SLOTS) {
        errors.push(format!("Most sequences the engine batches: at most {}", grouped(f64::from(MAX_SLOTS))));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let whole = |v: f64| v.clamp(0.0, f64::from(u32::MAX)) as u32;
    let shape = LlmShape {
        parameters,
        layers: whole(layers),
        kv_heads: whole(kv_heads),
        head_dim: whole(head_dim),
        weights: precision(form, "weights"),
        kv: precision(form, "kv"),
    };
    let model_error = |e: model::ModelError| vec![format!("{}: {}", label_of(&e.field), e.reason)];
    let memory: Vec<(u32, LlmMemoryFit)> = TENSOR_PARALLEL
        .iter()
        .map(|&tp| {
            let input = LlmMemoryInput {
                shape,
                device_memory: Bytes(gpu_memory * GIB),
                tensor_parallel: tp,
                activations: Bytes(activations * GIB),
                headroom: headroom / 100.0,
                tokens_per_sequence: context,
            };
            fit(&input).map(|f| (tp, f))
        })
        .collect::<Result<_, _>>()
        .map_err(model_error)?;
    let tp = TENSOR_PARALLEL[tp_index as usize];
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
    let engine = Engine {
        fixed: Seconds(fixed_ms / 1e3),
        per_sequence: Seconds(per_seq_ms / 1e3),
        per_prompt_token: Seconds(1.0 / prefill),
        slots: chosen.max_sequences.min(whole(max_slots)).max(1),
    };
    let rate = requests / SECONDS_PER_MONTH;
    let load = Load { rate, input_tokens: input, input_cv, output_tokens: output };
    let slo = |ms: f64| (ms > 0.0).then(|| Seconds(ms / 1e3));
    let sizing = size(&LlmSizingInput {
        engine,
        load,
        ttft_p99_slo: slo(ttft_ms),
        itl_p99_slo: slo(itl_ms),
        replica_hourly: UsdPerHour(gpu_price * f64::from(tp)),
    })
    .map_err(model_error)?;
    Ok(LlmPlan {
        rate,
        tp,
        memory,
        engine,
        sizing,
        load,
        ttft_slo: slo(ttft_ms).map(|s| s.0),
        itl_slo: slo(itl_ms).map(|s| s.0),
    })
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
    let result = Memo::new(move |_| plan(&form));
    view! {
        <Title text="LLM serving · Headroom"/>
        <h1>"LLM serving"</h1>
        <p class="lede">"GPUs, dollars per million tokens and time to first token (TTFT) and between tokens (ITL) for a language model served with continuous batching. The KV cache bounds how many sequences a replica holds; the engine's cost per iteration sets the latencies. Numbers update as you type."</p>
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
                    <p class="hint">"An iteration takes fixed + per sequence × sequences + prompt tokens ÷ prompt reading. The defaults are estimates for Llama 3 8B in BF16 on one H100 (weights read at 80 % of 3.35 TB/s; 2 × parameters FLOPs per prompt token at half of 989 TFLOP/s), not measurements: load-test your server with "<code>"measurements-agent run endpoint --protocol openai-chat"</code>" and fit them with "<code>"cargo run -p model --example llm_check"</code>"."</p>
                    <NumberField form key="fixed_ms"/>
                    <NumberField form key="per_seq_ms"/>
                    <NumberField form key="prefill"/>
                    <NumberField form key="max_slots" hint="vLLM's max_num_seqs, llama.cpp's --parallel; the KV cache may allow fewer."/>
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
                    Ok(p) => view! { <LlmPlanView p/> }.into_any(),
                }}
            </section>
        </div>
    }
}

#[component]
fn LlmPlanView(p: LlmPlan) -> impl IntoView {
    let s = p.sizing;
    let l = s.latency;
    let gpus = s.replicas * p.tp;
    let chart = latency_chart(&p);
    let validity = if l.validated {
        "model, within the range it was checked against a simulation"
    } else {
        "model, outside the range it was checked in (the slots more than half full on average): the tails may be longer"
    };
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
                <p class="sub" data-out="per-request">{format!("{} per request at {} requests", usd(s.cost_per_request), count(p.rate * SECONDS_PER_MONTH))}</p>
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
        <div class="chart card" data-chart="llm-latency" inner_html=chart></div>
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
            assert!(plan(&form(&[("max_slots", "1e12")])).unwrap_err()[0].contains("at most 100,000"));
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
