//! Headroom's pure core: the wire types that agents upload and the server serves, their
//! validation, formatting shared by server and browser, and the planning model. No IO, no
//! async; this crate builds for `wasm32-unknown-unknown`.

pub mod attribution;
pub mod calendar;
pub mod checks;
pub mod cost;
pub mod endpoint;
pub mod format;
pub mod measured;
pub mod memory;
pub mod money;
pub mod quant;
pub mod queue;
pub mod rightsize;
pub mod rng;
pub mod run;
pub mod transport;
pub mod uncertainty;
pub mod units;
pub mod validate;
pub mod view;

pub use checks::ModelError;
pub use run::{Case, Floor, GpuInfo, Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
pub use validate::FieldError;
pub use view::{FleetView, IngestAck, NodeSummary, RunDetail, RunStatus, RunSummary};
