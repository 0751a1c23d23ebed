//! Headroom's pure core, in three parts: `plan` (the planning formulas: amortization and
//! break-even, queueing and replica sizing, right-sizing, memory fit, transport advice, the
//! endpoint check, the Monte Carlo), `wire` (the types agents upload and the server serves, the
//! typed measurement names, and their validation), and the units every page and export shares
//! (`units`, `money`, `calendar`, `format`). No IO, no async; this crate builds for
//! `wasm32-unknown-unknown`.

pub mod calendar;
pub mod format;
pub mod money;
pub mod plan;
pub mod units;
pub mod wire;

pub use plan::checks::ModelError;
pub use wire::run::{Case, Floor, GpuInfo, Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
pub use wire::validate::FieldError;
pub use wire::view::{FleetView, IngestAck, NodeSummary, RunDetail, RunStatus, RunSummary};
