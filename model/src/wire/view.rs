//! What the server answers: summaries of nodes and runs for the API and the pages.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::wire::run::{GpuInfo, Measurement, Suite};

/// The server's answer to an upload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IngestAck {
    pub run_id: Uuid,
    /// True when this run id was already stored; nothing was written again.
    pub duplicate: bool,
    pub measurements_stored: u32,
}

/// Overall outcome of a run, derived from its measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every case ran or was skipped for a stated reason.
    Ok,
    /// At least one case failed.
    Partial,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Partial => "partial",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ok" => Some(RunStatus::Ok),
            "partial" => Some(RunStatus::Partial),
            _ => None,
        }
    }
}

/// A node and what was last measured on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeSummary {
    pub node_id: String,
    pub hostname: String,
    pub cpu_model: String,
    pub cpu_cores: u32,
    pub memory_bytes: u64,
    pub kernel: String,
    pub instance_type: Option<String>,
    pub hourly_usd: Option<f64>,
    pub gpus: Vec<GpuInfo>,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
    pub run_count: u64,
    /// Median memcpy bandwidth on the most threads and the largest buffer in the node's latest
    /// `system` run: its memory bandwidth.
    pub memcpy_bytes_per_second: Option<f64>,
}

/// One stored run without its measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummary {
    pub run_id: Uuid,
    pub node_id: String,
    pub hostname: String,
    pub agent_name: String,
    pub agent_version: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub received_at_ms: i64,
    pub status: RunStatus,
    pub suites: Vec<Suite>,
    pub measurement_count: u64,
    /// When retention (`headroom-server retention`) removed this run's measurements; its row and
    /// each suite's digest stay. Absent while they are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurements_removed_at_ms: Option<i64>,
}

/// One stored run with every measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunDetail {
    pub run: RunSummary,
    pub measurements: Vec<Measurement>,
}

/// What the Fleet page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetView {
    pub user: String,
    pub nodes: Vec<NodeSummary>,
    pub recent_runs: Vec<RunSummary>,
}

/// How an instance can be bought: the price catalog's `purchase_option` values.
pub const PURCHASE_OPTIONS: [&str; 4] = ["on_demand", "spot", "one_year", "three_year"];

/// What one replica of an instance type costs an hour under one purchase option, as the price
/// catalog lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceOffer {
    /// `on_demand`, `spot`, `one_year` or `three_year`.
    pub purchase_option: String,
    pub hourly_usd: f64,
    /// The catalog version, the row's source and its as-of date.
    pub source: String,
}
