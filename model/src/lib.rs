//! Headroom's pure core: the wire types that agents upload and the server serves, their
//! validation, and formatting helpers shared by server and browser. No IO, no async; this
//! crate builds for `wasm32-unknown-unknown`.

pub mod format;
pub mod run;
pub mod validate;
pub mod view;

pub use run::{Floor, GpuInfo, Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
pub use validate::FieldError;
pub use view::{FleetView, IngestAck, NodeSummary, RunDetail, RunStatus, RunSummary};
