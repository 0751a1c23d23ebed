//! Serving a large language model: memory in tokens, latency in time to first token (TTFT) and
//! inter-token latency (ITL), cost in dollars per million tokens.
//!
//! - [`memory`]: weights and the KV cache against device memory, per tensor-parallel degree; the
//!   tokens the cache holds and so the sequences that fit at once.
//! - [`batching`]: TTFT and ITL percentiles under continuous batching at an arrival rate, from
//!   an engine's cost per iteration (checked against a discrete-event simulation in
//!   [`simulate`], in `model/tests/llm_simulation.rs`).
//! - [`sizing`]: replicas for TTFT and ITL SLOs, and what a request, a million input tokens and
//!   a million output tokens cost.
//! - [`fit`]: the engine's costs fitted from an `endpoint` run of an OpenAI-compatible server,
//!   and every step of that run predicted beside what was measured.
//! - [`simulate`]: the scheduler simulated event by event, and the spread of a run's error that
//!   sampling alone gives (to tell a model's error from a short step's noise).
//! - [`gpus`]: GPU datasheets, and the engine's costs estimated from them where nothing was
//!   measured (a roofline).
//! - [`offers`]: the cheapest configuration (tensor-parallel degree, weights precision,
//!   replicas, whole instances) of every GPU instance type in a price catalog, or why it cannot
//!   serve the workload.

pub mod batching;
pub mod fit;
pub mod gpus;
pub mod memory;
pub mod offers;
pub mod simulate;
pub mod sizing;

pub use batching::{Engine, Latency, Load, predict};
