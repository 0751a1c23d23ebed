//! Nodes that have reported at least one run, and what the pages read of them: the Fleet, the
//! measured nodes and services the Planner and Right-sizing size with, and the transport runs.

use std::collections::HashMap;

use app::data::{MeasuredFleet, MeasuredNode, MeasuredService, TRANSPORT_NODES, TransportRun};
use axum::Json;
use axum::extract::State;
use model::wire::measured::{self, PowerDigest};
use model::wire::view::PriceOffer;
use model::{FleetView, NodeSummary, Suite};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::store::{RunFilter, Store};

/// How many runs the Fleet page lists.
const RECENT_RUNS: u32 = 20;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every node, most recently seen first.
#[utoipa::path(get, path = "/api/v1/nodes", tag = "nodes",
    responses((status = 200, body = Vec<NodeSummary>), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<NodeSummary>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.store.list_nodes().await?))
}

/// The Fleet page: every node and the newest runs.
pub async fn fleet(store: &Store, caller: &Caller) -> Result<FleetView, ApiError> {
    let user = caller.require(Role::Viewer)?.0.to_string();
    let nodes = store.list_nodes().await?;
    let filter = RunFilter { limit: RECENT_RUNS, ..RunFilter::default() };
    let recent_runs = store.list_runs(&filter).await?;
    Ok(FleetView { user, nodes, recent_runs })
}

/// Per instance type, the newest node with a quantization run (priced from the node or the
/// catalog), and the load-tested services, for the Planner and Right-sizing.
pub async fn measured(store: &Store, caller: &Caller) -> Result<MeasuredFleet, ApiError> {
    caller.require(Role::Viewer)?;
    let candidates = store.latest_digests_by_type(Suite::Quant).await?;
    let ids: Vec<String> = candidates.iter().map(|(d, _)| d.node_id.clone()).collect();
    let summaries = store.nodes_by_id(&ids).await?;
    // Prices are looked up once per instance type.
    let mut catalog: HashMap<String, Vec<PriceOffer>> = HashMap::new();
    let mut nodes = Vec::new();
    for (latest, others_of_type) in candidates {
        let Some(node) = summaries.get(&latest.node_id) else { continue };
        let offers = match &node.instance_type {
            Some(instance) => {
                if !catalog.contains_key(instance) {
                    catalog.insert(instance.clone(), store.catalog_offers(instance).await?);
                }
                catalog[instance].clone()
            }
            None => Vec::new(),
        };
        let on_demand = offers.iter().find(|o| o.purchase_option == "on_demand");
        let (hourly_usd, price_source) = match (node.hourly_usd, on_demand, &node.instance_type) {
            (Some(price), _, _) => (Some(price), "the node's operator (--hourly-usd)".to_string()),
            (None, Some(offer), _) => (Some(offer.hourly_usd), offer.source.clone()),
            (None, None, Some(instance)) => {
                (None, format!("nowhere: {instance} has no on-demand price in the price catalog"))
            }
            (None, None, None) => (None, "nowhere: the node gave no instance type or price".to_string()),
        };
        let run_id = latest.run_id.to_string();
        let digest = latest.digest;
        let Some(hardware) = measured::hardware_from_perf(node, &run_id, digest.perf, hourly_usd.unwrap_or(0.0), 1.0)
        else {
            continue;
        };
        let power = node_power(store, node).await?;
        nodes.push(MeasuredNode {
            power,
            node_id: node.node_id.clone(),
            hostname: node.hostname.clone(),
            run_id,
            run_started_at_ms: latest.started_at_ms,
            hourly_usd,
            price_source,
            best_throughput_rps: digest.best_throughput_rps,
            others_of_type,
            hardware,
            offers,
        });
    }
    let services = measured_services(store).await?;
    Ok(MeasuredFleet { nodes, services })
}

/// A node's power where it was measured, with the run that measured it: its CPU packages and
/// DRAM (RAPL, its newest system run) on a node without GPUs; on a node with GPUs, its GPUs as
/// the newest gemm run read one of them (NVML) plus the CPUs where RAPL could read them, and
/// nothing without a GPU reading (RAPL alone would miss most of such a node's draw) or where
/// one GPU's draw cannot stand for the others ([`PowerDigest::of_gpu_node`]).
async fn node_power(store: &Store, node: &NodeSummary) -> Result<Option<(PowerDigest, String)>, ApiError> {
    // The newest of a few runs that read it (a gemm run skips its power where another process
    // used the GPU, say).
    let newest = |suite: Suite| async move {
        Ok::<_, ApiError>(
            store
                .node_digests(&node.node_id, suite, 5)
                .await?
                .into_iter()
                .find_map(|d| Some((d.digest.power?, d.run_id.to_string()))),
        )
    };
    let cpu = newest(Suite::System).await?;
    if node.gpus.is_empty() {
        return Ok(cpu);
    }
    let Some((gpu, run)) = newest(Suite::Gemm).await? else { return Ok(None) };
    let cpu = cpu.as_ref().map(|(power, run)| (power, run.as_str()));
    Ok(PowerDigest::of_gpu_node(&gpu, &node.gpus, cpu).map(|power| (power, run)))
}

/// The newest transport run of each of the [`TRANSPORT_NODES`] nodes measured last, newest first.
pub async fn transport_runs(store: &Store, caller: &Caller) -> Result<Vec<TransportRun>, ApiError> {
    caller.require(Role::Viewer)?;
    let latest = store.latest_digests(Suite::Transport, TRANSPORT_NODES).await?;
    Ok(latest
        .into_iter()
        .map(|d| TransportRun {
            node_id: d.node_id,
            hostname: d.hostname,
            run_id: d.run_id.to_string(),
            started_at_ms: d.started_at_ms,
            points: d.digest.transport,
        })
        .collect())
}

/// Services the endpoint suite measured, newest run first, each calibrated by the model. Not
/// the load tests of streamed LLM servers: a queue of whole requests (M/G/c) does not describe
/// continuous batching, so the LLM page sizes those with the engine fitted on them.
async fn measured_services(store: &Store) -> Result<Vec<MeasuredService>, ApiError> {
    const SERVICES: u32 = 10;
    let filter = RunFilter { suite: Some(Suite::Endpoint), llm: Some(false), limit: SERVICES, ..RunFilter::default() };
    let mut services = Vec::new();
    for run in store.list_runs(&filter).await? {
        let Some(detail) = store.get_run_figures(run.run_id).await? else { continue };
        // A run whose LLM fit failed (none of its steps trusted), or whose digest the backfill
        // has not refitted yet, is marked as no LLM run: its measurements tell.
        if !model::plan::llm::fit::steps(&detail.measurements).is_empty() {
            continue;
        }
        let Some(check) = model::plan::endpoint::check(&model::plan::endpoint::steps(&detail.measurements)) else {
            continue;
        };
        let first = detail.measurements.iter().find(|m| m.suite == Suite::Endpoint);
        let param = |key: &str| first.and_then(|m| m.parameters.get(key).cloned());
        let c = check.calibration;
        services.push(MeasuredService {
            run_id: run.run_id.to_string(),
            started_at_ms: run.started_at_ms,
            hostname: run.hostname.clone(),
            target: param("target").unwrap_or_default(),
            protocol: param("protocol").unwrap_or_default(),
            model: param("model"),
            service_mean_s: c.service_mean,
            service_cv: c.service_cv,
            concurrency: c.concurrency,
            saturation_rps: c.saturation_rps,
            saturation_measured: c.saturation_measured,
            mape_p99: check.mape_p99,
        });
    }
    Ok(services)
}
