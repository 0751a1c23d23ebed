//! The cheapest way to serve an LLM workload on each GPU instance type of a price catalog, and
//! why the others cannot.
//!
//! An offer is an instance type with G GPUs at a price per hour. A configuration is a
//! tensor-parallel degree T ≤ G (one replica never spans instances) and a weights precision. For
//! each, [`memory::fit`] says whether the weights fit and how many sequences the KV cache holds
//! (the engine's slots, at most the engine's own limit), [`gpus::roofline`] gives the engine's
//! costs from the GPU's datasheet, and [`sizing::size`] the replicas that meet the SLOs. An
//! instance holds ⌊G ÷ T⌋ replicas and is paid whole: instances = ⌈replicas ÷ ⌊G ÷ T⌋⌉, and
//! the month costs instances × price × hours. Prices per token scale with that month.
//!
//! Configurations are sized cheapest bound first: ⌈λ ÷ capacity⌉ replicas is a lower bound, so
//! once a configuration meets the SLOs, any whose bound costs as much is skipped (the answer is
//! the one an exhaustive search gives; a test checks that).
//!
//! [`memory::fit`]: super::memory::fit
//! [`gpus::roofline`]: super::gpus::roofline
//! [`sizing::size`]: super::sizing::size

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batching::{Engine, Load, MAX_SLOTS, predict};
use super::gpus::{Efficiency, roofline, spec};
use super::memory::{LlmMemoryInput, LlmShape, TENSOR_PARALLEL, fit};
use super::sizing::{LlmSizing, LlmSizingInput, MAX_REPLICAS, size};
use crate::format::{bytes, grouped, seconds};
use crate::plan::checks::ModelError;
use crate::plan::memory::Precision;
use crate::units::{Bytes, HOURS_PER_MONTH, Seconds, UsdPerHour};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// An instance type with GPUs, as the price catalog lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuOffer {
    pub gpu_model: String,
    pub gpus: u32,
    pub hourly: UsdPerHour,
}

/// The workload and what each configuration may use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OfferQuestion {
    /// The model; its `weights` precision is replaced by each of the precisions tried.
    pub shape: LlmShape,
    /// The whole traffic.
    pub load: Load,
    /// Tokens a sequence reserves in the KV cache.
    pub tokens_per_sequence: f64,
    pub ttft_p99_slo: Option<Seconds>,
    pub itl_p99_slo: Option<Seconds>,
    /// Share of each GPU's memory kept free.
    pub headroom: f64,
    /// Working memory per GPU.
    pub activations: Bytes,
    /// The engine's own limit on sequences batched.
    pub max_slots: u32,
    pub efficiency: Efficiency,
}

/// The cheapest configuration of one offer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OfferPlan {
    pub tensor_parallel: u32,
    pub weights: Precision,
    pub engine: Engine,
    /// Replicas, latency and prices, the month paid for whole instances.
    pub sizing: LlmSizing,
    pub replicas_per_instance: u32,
    pub instances: u32,
}

/// What an offer can do for the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OfferVerdict {
    Plan(OfferPlan),
    /// Why no configuration serves it.
    Rejected(String),
}

/// Why one configuration failed, kept to explain the offer's rejection.
enum Miss {
    Memory { tp: u32, weights: Precision, need: f64, usable: f64 },
    Slo { tp: u32, weights: Precision, reason: String },
}

fn precision_label(p: Precision) -> String {
    p.as_str().to_uppercase()
}

/// Each offer's verdict, in the order given; an error names an input of `question` that is
/// wrong for every offer.
pub fn compare(
    offers: &[GpuOffer],
    question: &OfferQuestion,
    precisions: &[Precision],
) -> Result<Vec<OfferVerdict>, ModelError> {
    question.load.validate()?;
    crate::plan::checks::positive("rate_per_s", question.load.rate)?;
    question.efficiency.validate()?;
    question.shape.validate()?;
    // Replicas depend on the GPU, the degree and the precision, not the price: offers of the
    // same GPU (several providers, sizes) share them.
    let mut sized = BTreeMap::new();
    offers.iter().map(|o| verdict(o, question, precisions, &mut sized)).collect()
}

/// Sizings at one dollar a replica-hour, by GPU, degree and precision.
type Sized = BTreeMap<(&'static str, u32, &'static str), Result<LlmSizing, String>>;

struct Candidate {
    bound: f64,
    tp: u32,
    weights: Precision,
    engine: Engine,
    per_instance: u32,
}

fn verdict(
    offer: &GpuOffer,
    q: &OfferQuestion,
    precisions: &[Precision],
    sized: &mut Sized,
) -> Result<OfferVerdict, ModelError> {
    let Some(gpu) = spec(&offer.gpu_model) else {
        return Ok(OfferVerdict::Rejected(format!("no datasheet figures for the {} are shipped", offer.gpu_model)));
    };
    if offer.gpus == 0 || !offer.hourly.0.is_finite() || offer.hourly.0 < 0.0 {
        return Ok(OfferVerdict::Rejected("no GPUs, or no price".into()));
    }
    let decode_tokens = q.load.input_tokens + q.load.output_tokens / 2.0;
    let (mut candidates, mut misses) = (Vec::new(), Vec::new());
    for &weights in precisions {
        let shape = LlmShape { weights, ..q.shape };
        for tp in TENSOR_PARALLEL.into_iter().filter(|&tp| tp <= offer.gpus) {
            let memory = fit(&LlmMemoryInput {
                shape,
                device_memory: Bytes(gpu.memory_gib * GIB),
                tensor_parallel: tp,
                activations: q.activations,
                headroom: q.headroom,
                tokens_per_sequence: q.tokens_per_sequence,
            })?;
            if !memory.fits {
                let usable = memory.kv_budget_per_gpu.0 + memory.weights_per_gpu.0;
                let need = memory.weights_per_gpu.0 + memory.kv_per_token_per_gpu.0 * q.tokens_per_sequence;
                misses.push(Miss::Memory { tp, weights, need, usable });
                continue;
            }
            let slots = memory.max_sequences.min(q.max_slots).clamp(1, MAX_SLOTS);
            let engine = roofline(gpu, &shape, tp, decode_tokens, q.efficiency, slots)?;
            let per_instance = offer.gpus / tp;
            let capacity = engine.capacity(q.load.input_tokens, q.load.output_tokens);
            let replicas = (q.load.rate / capacity).ceil().max(1.0);
            let bound = (replicas / f64::from(per_instance)).ceil() * offer.hourly.0;
            candidates.push(Candidate { bound, tp, weights, engine, per_instance });
        }
    }
    candidates.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    let mut best: Option<OfferPlan> = None;
    for c in candidates {
        if best.is_some_and(|b| b.sizing.usd_per_month <= c.bound * HOURS_PER_MONTH) {
            break;
        }
        let key = (gpu.name, c.tp, c.weights.as_str());
        let sizing = sized.entry(key).or_insert_with(|| {
            let input = LlmSizingInput {
                engine: c.engine,
                load: q.load,
                ttft_p99_slo: q.ttft_p99_slo,
                itl_p99_slo: q.itl_p99_slo,
                replica_hourly: UsdPerHour(1.0),
            };
            size(&input).map_err(|e| slo_reason(&e, &c.engine, q))
        });
        match sizing {
            Ok(sizing) => {
                let plan = priced(offer, &c, *sizing);
                if best.is_none_or(|b| plan.sizing.usd_per_month < b.sizing.usd_per_month) {
                    best = Some(plan);
                }
            }
            Err(reason) => misses.push(Miss::Slo { tp: c.tp, weights: c.weights, reason: reason.clone() }),
        }
    }
    Ok(match best {
        Some(plan) => OfferVerdict::Plan(plan),
        None => OfferVerdict::Rejected(rejection(&misses, offer.gpus)),
    })
}

/// `sizing` was priced at a dollar a replica-hour; an instance of this offer holds
/// `c.per_instance` replicas and is paid whole, a partly used last one too.
fn priced(offer: &GpuOffer, c: &Candidate, sizing: LlmSizing) -> OfferPlan {
    let instances = sizing.replicas.div_ceil(c.per_instance);
    let usd_per_month = f64::from(instances) * offer.hourly.0 * HOURS_PER_MONTH;
    let scale = usd_per_month / sizing.usd_per_month;
    let sizing = LlmSizing {
        cost_per_request: sizing.cost_per_request * scale,
        usd_per_million_input: sizing.usd_per_million_input * scale,
        usd_per_million_output: sizing.usd_per_million_output * scale,
        usd_per_million_tokens: sizing.usd_per_million_tokens * scale,
        usd_per_month,
        ..sizing
    };
    OfferPlan {
        tensor_parallel: c.tp,
        weights: c.weights,
        engine: c.engine,
        sizing,
        replicas_per_instance: c.per_instance,
        instances,
    }
}

fn slo_reason(e: &ModelError, engine: &Engine, q: &OfferQuestion) -> String {
    let unloaded = predict(engine, &Load { rate: 1e-9, ..q.load }).ok().flatten();
    match (e.field.as_str(), unloaded) {
        ("ttft_p99_slo_s", Some(l)) => {
            format!("TTFT p99 is {} with no other traffic, over the SLO", seconds(l.ttft_p99.0))
        }
        ("itl_p99_slo_s", Some(l)) => {
            format!("ITL p99 is {} with no other traffic, over the SLO", seconds(l.itl_p99.0))
        }
        ("rate_per_s", Some(_)) => format!("the volume needs more than {} replicas", grouped(f64::from(MAX_REPLICAS))),
        _ => format!("no number of replicas serves it: {}", e.reason),
    }
}

/// The rejection of an offer, told by its most capable configuration: the SLO miss with the most
/// GPUs and fewest bits if any configuration fitted in memory, else the memory miss of that one.
fn rejection(misses: &[Miss], gpus: u32) -> String {
    let rank = |tp: u32, w: Precision| (tp, -(w.bytes_per_value() * 8.0) as i32);
    let slo = misses
        .iter()
        .filter_map(|m| match m {
            Miss::Slo { tp, weights, reason } => Some((rank(*tp, *weights), *tp, *weights, reason)),
            Miss::Memory { .. } => None,
        })
        .max_by_key(|(r, ..)| *r);
    if let Some((_, tp, weights, reason)) = slo {
        return format!("{reason} (at best: {tp} of {gpus} GPU(s) per replica, {} weights)", precision_label(weights));
    }
    let memory = misses
        .iter()
        .filter_map(|m| match m {
            Miss::Memory { tp, weights, need, usable } => Some((rank(*tp, *weights), *tp, *weights, *need, *usable)),
            Miss::Slo { .. } => None,
        })
        .max_by_key(|(r, ..)| *r);
    match memory {
        Some((_, tp, weights, need, usable)) => format!(
            "does not fit: {} weights split over {tp} GPU(s) and one sequence's KV cache need {} per GPU, {} is usable",
            precision_label(weights),
            bytes(need),
            bytes(usable.max(0.0))
        ),
        None => "no configuration was tried: no precision allowed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::llm::gpus::DEFAULT_EFFICIENCY;
    use crate::units::SECONDS_PER_MONTH;
    use proptest::prelude::*;

    fn offer(gpu: &str, gpus: u32, hourly: f64) -> GpuOffer {
        GpuOffer { gpu_model: gpu.into(), gpus, hourly: UsdPerHour(hourly) }
    }

    fn catalog() -> Vec<GpuOffer> {
        vec![
            offer("NVIDIA T4", 1, 0.526),
            offer("NVIDIA A10G", 1, 1.006),
            offer("NVIDIA A10G", 4, 5.672),
            offer("NVIDIA L4", 1, 0.8048),
            offer("NVIDIA L40S", 1, 1.861),
            offer("NVIDIA A100 40GB", 8, 32.7726),
            offer("NVIDIA A100 80GB", 1, 3.673),
            offer("NVIDIA H100 80GB", 8, 98.32),
        ]
    }

    fn question(parameters: f64, layers: u32, requests_per_month: f64) -> OfferQuestion {
        OfferQuestion {
            shape: LlmShape {
                parameters,
                layers,
                kv_heads: 8,
                head_dim: 128,
                weights: Precision::Bf16,
                kv: Precision::Bf16,
            },
            load: Load {
                rate: requests_per_month / SECONDS_PER_MONTH,
                input_tokens: 1000.0,
                input_cv: 0.5,
                output_tokens: 250.0,
            },
            tokens_per_sequence: 4096.0,
            ttft_p99_slo: Some(Seconds(1.0)),
            itl_p99_slo: Some(Seconds(0.05)),
            headroom: 0.1,
            activations: Bytes(2.0 * GIB),
            max_slots: 256,
            efficiency: DEFAULT_EFFICIENCY,
        }
    }

    /// Every configuration sized, no bound: what the search must agree with.
    fn exhaustive(offer: &GpuOffer, q: &OfferQuestion, precisions: &[Precision]) -> Option<f64> {
        let gpu = spec(&offer.gpu_model).unwrap();
        let mut best: Option<f64> = None;
        for &weights in precisions {
            let shape = LlmShape { weights, ..q.shape };
            for tp in TENSOR_PARALLEL.into_iter().filter(|&tp| tp <= offer.gpus) {
                let m = fit(&LlmMemoryInput {
                    shape,
                    device_memory: Bytes(gpu.memory_gib * GIB),
                    tensor_parallel: tp,
                    activations: q.activations,
                    headroom: q.headroom,
                    tokens_per_sequence: q.tokens_per_sequence,
                })
                .unwrap();
                if !m.fits {
                    continue;
                }
                let engine = roofline(
                    gpu,
                    &shape,
                    tp,
                    q.load.input_tokens + q.load.output_tokens / 2.0,
                    q.efficiency,
                    m.max_sequences.min(q.max_slots).max(1),
                )
                .unwrap();
                let per_instance = offer.gpus / tp;
                let input = LlmSizingInput {
                    engine,
                    load: q.load,
                    ttft_p99_slo: q.ttft_p99_slo,
                    itl_p99_slo: q.itl_p99_slo,
                    replica_hourly: UsdPerHour(offer.hourly.0 / f64::from(per_instance)),
                };
                if let Ok(s) = size(&input) {
                    let month = f64::from(s.replicas.div_ceil(per_instance)) * offer.hourly.0 * HOURS_PER_MONTH;
                    best = Some(best.map_or(month, |b: f64| b.min(month)));
                }
            }
        }
        best
    }

    #[test]
    fn llama_3_70b_fits_only_the_large_gpus_and_says_why_the_others_do_not() {
        let q = question(70.6e9, 80, 100e6);
        let all = [Precision::Bf16, Precision::Int8, Precision::Int4];
        let verdicts = compare(&catalog(), &q, &all[..1]).unwrap();
        let rejected = |i: usize| match &verdicts[i] {
            OfferVerdict::Rejected(why) => why.clone(),
            OfferVerdict::Plan(p) => panic!("offer {i} should not serve 70B in BF16: {p:?}"),
        };
        // One T4 has 16 GiB; 141 GB of weights do not fit.
        assert!(rejected(0).starts_with("does not fit: BF16 weights split over 1 GPU(s)"), "{}", rejected(0));
        // Four A10Gs, 96 GiB in all: 35 GB of weights each beside 21.6 GiB usable.
        assert!(rejected(2).contains("split over 4 GPU(s)"), "{}", rejected(2));
        let OfferVerdict::Plan(h100) = &verdicts[7] else { panic!("{:?}", verdicts[7]) };
        assert!(h100.tensor_parallel >= 2, "141 GB of weights need two 80 GiB GPUs: {h100:?}");
        assert_eq!(h100.replicas_per_instance, 8 / h100.tensor_parallel);
        assert_eq!(h100.instances, h100.sizing.replicas.div_ceil(h100.replicas_per_instance));
        assert!((h100.sizing.usd_per_month - f64::from(h100.instances) * 98.32 * HOURS_PER_MONTH).abs() < 1e-6);
        // Per-token prices and the request's cost are the whole month's share.
        let per_request = h100.sizing.usd_per_month / (q.load.rate * SECONDS_PER_MONTH);
        assert!((h100.sizing.cost_per_request - per_request).abs() < 1e-9 * per_request, "{h100:?}");
        assert!(h100.sizing.latency.ttft_p99.0 <= 1.0 && h100.sizing.latency.itl_p99.0 <= 0.05);
        // More precisions allowed never cost more.
        let quantized = compare(&catalog(), &q, &all).unwrap();
        let OfferVerdict::Plan(h100_any) = &quantized[7] else { panic!() };
        assert!(h100_any.sizing.usd_per_month <= h100.sizing.usd_per_month);
        // Four-bit weights fit where BF16 did not: 35 GB on four A10Gs. Reading a 1,000-token
        // prompt there takes over half a second (2 × 17.6 G FLOP a token at 62.5 TFLOP/s), so
        // only a TTFT SLO looser than a second admits it.
        let OfferVerdict::Rejected(why) = &quantized[2] else { panic!("{:?}", quantized[2]) };
        assert!(why.starts_with("TTFT p99 is ") && why.ends_with("4 of 4 GPU(s) per replica, INT4 weights)"), "{why}");
        let loose = OfferQuestion { ttft_p99_slo: Some(Seconds(3.0)), ..q };
        let OfferVerdict::Plan(int4) = compare(&catalog(), &loose, &all).unwrap()[2] else { panic!() };
        assert_eq!((int4.weights, int4.tensor_parallel), (Precision::Int4, 4), "{int4:?}");
    }

    #[test]
    fn an_slo_the_engine_cannot_meet_names_the_latency_it_reaches_and_unknown_gpus_are_named() {
        let mut q = question(8.03e9, 32, 10e6);
        q.itl_p99_slo = Some(Seconds(0.004));
        let verdicts = compare(
            &[offer("NVIDIA L4", 1, 0.8048), offer("NVIDIA B200", 8, 100.0), offer("NVIDIA T4", 0, 1.0)],
            &q,
            &[Precision::Bf16],
        )
        .unwrap();
        // One L4 reads 16 GB of weights at 240 GB/s: 67 ms an iteration, far over 4 ms.
        let OfferVerdict::Rejected(why) = &verdicts[0] else { panic!("{:?}", verdicts[0]) };
        assert!(why.starts_with("ITL p99 is 6") && why.contains("over the SLO (at best: 1 of 1 GPU(s)"), "{why}");
        assert_eq!(verdicts[1], OfferVerdict::Rejected("no datasheet figures for the NVIDIA B200 are shipped".into()));
        assert_eq!(verdicts[2], OfferVerdict::Rejected("no GPUs, or no price".into()));
        let bad = OfferQuestion { load: Load { output_tokens: 0.0, ..q.load }, ..q };
        assert_eq!(compare(&catalog(), &bad, &[Precision::Bf16]).unwrap_err().field, "output_tokens");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(8))]
        #[test]
        fn the_bounded_search_finds_what_sizing_every_configuration_finds(
            billions in 1.0f64..80.0,
            requests in 1e5f64..1e9,
            input in 50.0f64..4000.0,
            output in 10.0f64..1000.0,
            itl_ms in 20.0f64..200.0,
        ) {
            let mut q = question(billions * 1e9, (billions.sqrt() * 10.0) as u32 + 8, requests);
            q.load.input_tokens = input;
            q.load.output_tokens = output;
            q.tokens_per_sequence = 2.0 * (input + output);
            q.itl_p99_slo = Some(Seconds(itl_ms / 1e3));
            q.ttft_p99_slo = Some(Seconds(2.0));
            let precisions = [Precision::Bf16, Precision::Int4];
            let offers = catalog();
            for (o, v) in offers.iter().zip(compare(&offers, &q, &precisions).unwrap()) {
                let found = match v { OfferVerdict::Plan(p) => Some(p.sizing.usd_per_month), OfferVerdict::Rejected(_) => None };
                let all = exhaustive(o, &q, &precisions);
                prop_assert_eq!(found.is_some(), all.is_some(), "{:?}", o);
                if let (Some(f), Some(a)) = (found, all) {
                    prop_assert!((f - a).abs() <= 1e-9 * a, "{:?}: {} against {}", o, f, a);
                }
            }
        }
    }
}
