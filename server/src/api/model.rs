//! The planning model over HTTP: `POST /api/v1/model/*`. Each endpoint is one pure function of
//! the `model` crate; the browser runs the same functions without a round trip.

use axum::Json;
use model::ModelError;
use model::plan::cost::{Amortization, AmortizationInput, BreakEven, BreakEvenInput};
use model::plan::memory::{KvCache, MemoryFit, MemoryInput, Precision};
use model::plan::owned::{OwnedCost, OwnedInput, PowerSource};
use model::plan::purchase::{CommitmentOffer, PurchaseInput, PurchasePlan, SpotOffer};
use model::plan::queue::{ReplicaInput, ReplicaPlan};
use model::plan::rightsize::{Hardware, ModelShape, PerfPoint, RightSizeInput, RightSizing, Source};
use model::plan::transport::{Placement, TransportAdvice, TransportInput, TransportMeasurement};
use model::plan::uncertainty::{Uncertainty, UncertaintyInput};
use model::units::{Bytes as ByteCount, PerMonth, PerSecond, Seconds, Usd, UsdPerHour};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::{Needs, need};
use crate::error::ApiError;
use crate::json::ApiJson;

/// Bodies beyond this are refused; a right-sizing catalog of thousands of rows fits easily.
pub const MAX_MODEL_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Computes off the async threads (Monte Carlo and right-sizing take milliseconds), and refuses
/// to answer with a number that is not finite.
async fn compute<I, O>(input: I, f: fn(&I) -> Result<O, ModelError>) -> Result<Json<O>, ApiError>
where
    I: Send + 'static,
    O: Serialize + Send + 'static,
{
    let output = tokio::task::spawn_blocking(move || f(&input))
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("model task failed: {e}")))??;
    if let Some(path) = non_finite(&output) {
        return Err(ApiError::Unprocessable(format!(
            "the inputs are too large to compute with: {path} would not be a finite number"
        )));
    }
    Ok(Json(output))
}

/// The path of the first number in `value` that is NaN or infinite. serde_json would write such
/// a number as `null`, indistinguishable from an absent optional, so it is caught here.
pub fn non_finite<T: Serialize>(value: &T) -> Option<String> {
    fn walk(value: &serde_value::Value, path: &str) -> Option<String> {
        use serde_value::Value;
        match value {
            Value::F64(x) if !x.is_finite() => Some(path.to_string()),
            Value::F32(x) if !x.is_finite() => Some(path.to_string()),
            Value::Option(Some(inner)) | Value::Newtype(inner) => walk(inner, path),
            Value::Seq(items) => items.iter().enumerate().find_map(|(i, v)| walk(v, &format!("{path}[{i}]"))),
            Value::Map(map) => map.iter().find_map(|(k, v)| {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                let child = if path.is_empty() { key } else { format!("{path}.{key}") };
                walk(v, &child)
            }),
            _ => None,
        }
    }
    match serde_value::to_value(value) {
        Ok(tree) => walk(&tree, ""),
        Err(err) => Some(format!("(unserializable: {err})")),
    }
}

/// Every endpoint once: its handler, its route, and the answer to its documented example all
/// come from this table.
macro_rules! endpoints {
    ($($name:ident, $path:literal, $input:ty, $output:ty, $function:path, $doc:literal;)+) => {
        $(
            #[doc = $doc]
            #[utoipa::path(post, path = $path, tag = "model", request_body = $input,
                security(("bearer" = [])),
                responses((status = 200, body = $output), (status = 400, description = "malformed JSON"),
                    (status = 401, description = "not signed in"), (status = 403, description = "role below planner"),
                    (status = 415, description = "not application/json"),
                    (status = 422, description = "an input is impossible or meaningless; `field` names it")))]
            pub async fn $name(
                _caller: Needs<need::Planner>,
                ApiJson(input): ApiJson<$input>,
            ) -> Result<Json<$output>, ApiError> {
                compute::<$input, $output>(input, $function).await
            }
        )+

        pub fn router() -> OpenApiRouter<AppState> {
            OpenApiRouter::new()
                $(.routes(routes!($name)))+
                .layer(axum::extract::DefaultBodyLimit::max(MAX_MODEL_BODY_BYTES))
        }

        /// The response the model gives for an example request, for the OpenAPI document.
        pub fn example_response(path: &str, request: &serde_json::Value) -> Option<serde_json::Value> {
            match path {
                $($path => answer(request, $function),)+
                _ => None,
            }
        }
    };
}

fn answer<I: DeserializeOwned, O: Serialize>(
    request: &serde_json::Value,
    f: fn(&I) -> Result<O, ModelError>,
) -> Option<serde_json::Value> {
    let input: I = serde_json::from_value(request.clone()).ok()?;
    serde_json::to_value(f(&input).ok()?).ok()
}

endpoints! {
    amortization, "/api/v1/model/amortization", AmortizationInput, Amortization, model::plan::cost::amortize,
        "Training amortized over the requests it serves, plus serving: cost per request and monthly spend.";
    break_even, "/api/v1/model/break-even", BreakEvenInput, BreakEven, model::plan::cost::break_even,
        "Whether paying more at every retrain (distillation, QAT) to serve cheaper pays back, and when.";
    replicas, "/api/v1/model/replicas", ReplicaInput, ReplicaPlan, model::plan::queue::size_replicas,
        "The fewest replicas that meet a latency SLO at a quantile (M/M/c exact, M/G/c approximation).";
    right_size, "/api/v1/model/right-size", RightSizeInput, RightSizing, model::plan::rightsize::right_size,
        "The cheapest instance type × precision × batch × replicas that meets the SLO, memory and accuracy limits, the Pareto front of cost vs latency, and why the rest failed.";
    memory_fit, "/api/v1/model/memory-fit", MemoryInput, MemoryFit, model::plan::memory::memory_fit,
        "Weights, activations, KV cache and headroom against device memory; the largest batch that fits.";
    transport, "/api/v1/model/transport", TransportInput, TransportAdvice, model::plan::transport::advise_transport,
        "Cores and monthly core cost of each measured transport at a request rate; the recommendation and why.";
    uncertainty, "/api/v1/model/uncertainty", UncertaintyInput, Uncertainty, model::plan::uncertainty::simulate,
        "Monte Carlo over input ranges: P10/P50/P90 of cost per request and monthly cost, break-even probability, tornado table.";
    purchase, "/api/v1/model/purchase", PurchaseInput, PurchasePlan, model::plan::purchase::purchase,
        "Should we commit? Per commitment offer the replicas to commit for its term (the largest count needed more than its break-even share of the term's hours) and the saving against on demand; spot's cost per useful hour with its interruptions.";
    owned_cost, "/api/v1/model/owned-cost", OwnedInput, OwnedCost, model::plan::owned::owned_cost,
        "A server you own by the hour, comparable with an instance's price: its price over its life, energy (power × PUE × electricity price) and hosting, each part shown.";
}

/// One example request per endpoint, used by the OpenAPI document (with the response the model
/// gives for it) and by the API tests.
pub fn examples() -> Vec<(&'static str, serde_json::Value)> {
    fn json<T: Serialize>(value: T) -> serde_json::Value {
        serde_json::to_value(value).expect("example serializes")
    }
    let a10 = Hardware {
        instance_type: "g5.xlarge".into(),
        hourly_usd: UsdPerHour(1.006),
        device_memory_bytes: ByteCount(24.0 * 1024f64.powi(3)),
        source: Source::Catalog,
        perf: vec![
            PerfPoint {
                precision: Precision::Fp16,
                batch_size: 1,
                service_time_mean_s: Seconds(0.012),
                service_time_cv: 0.3,
                accuracy_delta: 0.0,
                concurrency: 1,
            },
            PerfPoint {
                precision: Precision::Int8,
                batch_size: 8,
                service_time_mean_s: Seconds(0.030),
                service_time_cv: 0.3,
                accuracy_delta: -0.004,
                concurrency: 1,
            },
        ],
        power_watts: None,
    };
    let cpu = Hardware {
        instance_type: "c7i.2xlarge".into(),
        hourly_usd: UsdPerHour(0.357),
        device_memory_bytes: ByteCount(16.0 * 1024f64.powi(3)),
        source: Source::Measured { run_ids: vec!["0b6f3c52-5d1e-4a51-9a57-3f7d0c1e2a90".into()] },
        perf: vec![PerfPoint {
            precision: Precision::Int8,
            batch_size: 1,
            service_time_mean_s: Seconds(0.045),
            service_time_cv: 0.5,
            accuracy_delta: -0.004,
            concurrency: 1,
        }],
        power_watts: None,
    };
    vec![
        (
            "/api/v1/model/amortization",
            json(AmortizationInput {
                training_cost_usd: Usd(20_000.0),
                retrains_per_month: PerMonth(1.0),
                requests_per_month: PerMonth(100_000_000.0),
                serving_cost_per_request_usd: Usd(0.0001),
            }),
        ),
        (
            "/api/v1/model/break-even",
            json(BreakEvenInput {
                extra_training_cost_usd: Usd(2_000.0),
                retrains_per_month: PerMonth(1.0),
                requests_per_month: PerMonth(100_000_000.0),
                baseline_serving_cost_per_request_usd: Usd(0.0001),
                optimized_serving_cost_per_request_usd: Usd(0.00007),
                accuracy_delta: Some(-0.004),
            }),
        ),
        (
            "/api/v1/model/replicas",
            json(ReplicaInput {
                arrival_rate_rps: PerSecond(200.0),
                service_time_mean_s: Seconds(0.02),
                service_time_cv: 0.5,
                slo_latency_s: Seconds(0.1),
                slo_quantile: 0.99,
                max_utilization: 0.8,
                burst_factor: 1.5,
            }),
        ),
        (
            "/api/v1/model/right-size",
            json(RightSizeInput {
                arrival_rate_rps: PerSecond(150.0),
                slo_latency_s: Seconds(0.2),
                slo_quantile: 0.99,
                max_utilization: 0.8,
                accuracy_loss_limit: 0.01,
                model: ModelShape {
                    parameters: 350e6,
                    activation_bytes_per_sample: ByteCount(64.0 * 1024f64.powi(2)),
                    kv_cache: KvCache::default(),
                },
                headroom_fraction: 0.1,
                max_replicas: 1000,
                hardware: vec![a10, cpu],
                grid: None,
            }),
        ),
        (
            "/api/v1/model/memory-fit",
            json(MemoryInput {
                parameters: 7e9,
                precision: Precision::Fp16,
                activation_bytes_per_sample: ByteCount(32.0 * 1024f64.powi(2)),
                kv_cache: KvCache { layers: 32, kv_heads: 8, head_dim: 128, context_tokens: 4096, precision: None },
                batch_size: 16,
                headroom_fraction: 0.1,
                device_memory_bytes: ByteCount(80.0 * 1024f64.powi(3)),
            }),
        ),
        (
            "/api/v1/model/transport",
            json(TransportInput {
                requests_per_second: PerSecond(5_000.0),
                placement: Placement::SameNode,
                core_hour_usd: UsdPerHour(0.045),
                latency_budget_p99_s: Seconds(0.001),
                measurements: vec![
                    measured("http_json", 95e-6, 420e-6, true),
                    measured("grpc_protobuf", 40e-6, 210e-6, true),
                    measured("unix_socket", 9e-6, 35e-6, false),
                    measured("shared_memory", 2e-6, 6e-6, false),
                ],
            }),
        ),
        ("/api/v1/model/uncertainty", json(UncertaintyInput::example(20_000))),
        (
            "/api/v1/model/purchase",
            json(PurchaseInput {
                on_demand_hourly_usd: UsdPerHour(1.006),
                // A year of 5 % growth a month from 4 replicas.
                replicas_by_month: (0..12).map(|m| (4.0 * 1.05f64.powi(m)).ceil() as u32).collect(),
                running_share: 1.0,
                commitments: vec![
                    CommitmentOffer { name: "1-year".into(), term_months: 12, hourly_usd: UsdPerHour(0.704) },
                    CommitmentOffer { name: "3-year".into(), term_months: 36, hourly_usd: UsdPerHour(0.503) },
                ],
                spot: Some(SpotOffer {
                    hourly_usd: UsdPerHour(0.402),
                    interruptions_per_hour: 2.0 / 730.0,
                    hours_lost_per_interruption: 1.0 / 6.0,
                }),
            }),
        ),
        (
            "/api/v1/model/owned-cost",
            json(OwnedInput {
                purchase_usd: 30_000.0,
                life_months: 36.0,
                power_watts: 700.0,
                power_source: PowerSource::Rated,
                electricity_usd_per_kwh: 0.12,
                pue: 1.4,
                hosting_usd_per_month: 150.0,
            }),
        ),
    ]
}

fn measured(transport: &str, cpu: f64, p99: f64, across: bool) -> TransportMeasurement {
    TransportMeasurement {
        transport: transport.into(),
        cpu_seconds_per_request: Seconds(cpu),
        latency_p99_s: Seconds(p99),
        works_across_nodes: across,
        measured_placement: Some("different_cores".into()),
        spinning_cores: 0.0,
    }
}
