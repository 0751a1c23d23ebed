//! The Fleet page: every node with what was last measured on it, and the latest runs.

use leptos::prelude::*;
use leptos_meta::Title;
use model::format::{bytes, bytes_per_second, utc_minute};
use model::{FleetView, NodeSummary, RunSummary};

/// The Fleet page's data for the signed-in caller.
#[server(prefix = "/srv", endpoint = "fleet")]
pub async fn fleet_overview() -> Result<FleetView, ServerFnError> {
    let backend = expect_context::<crate::backend::BackendHandle>();
    let headers: http::HeaderMap = leptos_axum::extract().await?;
    backend.0.fleet(headers).await.map_err(crate::backend::page_error)
}

#[component]
pub fn FleetPage() -> impl IntoView {
    let fleet = Resource::new(|| (), |_| fleet_overview());
    view! {
        <Title text="Fleet · Headroom"/>
        <h1>"Fleet"</h1>
        <Suspense fallback=|| view! { <p>"Loading the fleet…"</p> }>
            {move || Suspend::new(async move {
                match fleet.await {
                    Ok(fleet) => view! { <Fleet fleet/> }.into_any(),
                    Err(err) => view! { <p class="error">{format!("Could not load the fleet: {err}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Fleet(fleet: FleetView) -> impl IntoView {
    let empty = fleet.nodes.is_empty();
    view! {
        <p class="lede">{format!("Signed in as {}. {}.", fleet.user, plural(fleet.nodes.len(), "node reporting", "nodes reporting"))}</p>
        {empty.then(|| view! {
            <p class="notice">"No node has reported yet. Run "<code>"measurements-agent run system --server URL --token TOKEN"</code>" on a node."</p>
        })}
        <h2>"Nodes"</h2>
        <section class="nodes">
            {fleet.nodes.into_iter().map(|node| view! { <NodeCard node/> }).collect_view()}
        </section>
        <h2>"Latest runs"</h2>
        <RunTable runs=fleet.recent_runs/>
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {many}") }
}

#[component]
fn NodeCard(node: NodeSummary) -> impl IntoView {
    let memcpy = node.memcpy_bytes_per_second.map(bytes_per_second).unwrap_or_else(|| "not measured".into());
    let gpus = if node.gpus.is_empty() {
        "none detected".to_string()
    } else {
        node.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>().join(", ")
    };
    view! {
        <article class="card node" data-node=node.node_id.clone()>
            <h3 class="hostname">{node.hostname.clone()}</h3>
            <dl>
                <dt>"CPU"</dt><dd>{format!("{} ({} cores)", node.cpu_model, node.cpu_cores)}</dd>
                <dt>"Memory"</dt><dd>{bytes(node.memory_bytes as f64)}</dd>
                <dt>"Kernel"</dt><dd>{node.kernel.clone()}</dd>
                <dt>"GPUs"</dt><dd>{gpus}</dd>
                <dt>"memcpy bandwidth"</dt><dd class="memcpy">{memcpy}</dd>
                <dt>"Instance"</dt><dd>{node.instance_type.clone().unwrap_or_else(|| "not given".into())}</dd>
                <dt>"Runs"</dt><dd>{node.run_count}</dd>
                <dt>"Last seen"</dt><dd>{utc_minute(node.last_seen_ms)}</dd>
            </dl>
        </article>
    }
}

#[component]
fn RunTable(runs: Vec<RunSummary>) -> impl IntoView {
    view! {
        <div tabindex="0" class="table-wrap">
            <table class="stack">
                <thead>
                    <tr><th>"Started"</th><th>"Node"</th><th>"Suites"</th><th>"Status"</th><th class="num">"Measurements"</th><th>"Agent"</th><th>"Run"</th></tr>
                </thead>
                <tbody>
                    {runs.into_iter().map(|run| {
                        let suites = run.suites.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                        let id = run.run_id.to_string();
                        view! {
                            <tr>
                                <td data-label="Started">{utc_minute(run.started_at_ms)}</td>
                                <td data-label="Node">{run.hostname}</td>
                                <td data-label="Suites">{suites}</td>
                                <td data-label="Status" class=format!("status {}", run.status.as_str())>{run.status.as_str()}</td>
                                <td data-label="Measurements" class="num">{run.measurement_count}</td>
                                <td data-label="Agent">{format!("{} {}", run.agent_name, run.agent_version)}</td>
                                <td data-label="Run"><a href=format!("/runs/{id}")><code>{id[..8].to_string()}</code></a></td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}
