//! Benchmark suites behind one small trait. A case that cannot run is recorded as skipped or
//! failed with its reason; the other cases and suites still run.

pub mod endpoint;
pub mod gpu;
pub mod quant;
pub mod system;
pub mod transport;

use std::collections::BTreeMap;

use model::{Measurement, MeasurementStatus, Stats, Suite, Unit};

/// How thoroughly to measure.
#[derive(Debug, Clone, Copy)]
pub struct Effort {
    /// Fewer samples and sizes: for a smoke run, not for decisions.
    pub quick: bool,
}

/// One suite of benchmarks.
pub trait Benchmark {
    fn suite(&self) -> Suite;
    /// Runs every case, reporting progress lines through `progress`. A case that cannot run is
    /// a skipped or failed measurement; an error means the suite as a whole could not start
    /// (an unreachable peer, say) and is reported to the operator, not uploaded.
    fn run(&self, effort: Effort, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Measurement>>;
}

/// Settings of suites that take any.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `HOST:PORT` of a transport peer on another node.
    pub peer: Option<String>,
    /// The token of that peer.
    pub peer_token: Option<String>,
    /// Transport payload sizes in bytes (empty: the suite's defaults).
    pub sizes: Vec<usize>,
    /// The endpoint suite's target and load, when it is asked for.
    pub endpoint: Option<endpoint::Config>,
}

/// The suites a bare `run` runs (`endpoint` needs a target, so it runs only when named).
pub fn available() -> Vec<Suite> {
    vec![Suite::System, Suite::Transport, Suite::Quant, Suite::Transfer, Suite::Alloc, Suite::Gemm]
}

/// The implementation of `suite`, or why there is none in this build.
pub fn benchmark(suite: Suite, options: &Options) -> Result<Box<dyn Benchmark>, String> {
    match suite {
        Suite::System => Ok(Box::new(system::System)),
        Suite::Quant => Ok(Box::new(quant::QuantSuite)),
        Suite::Transfer => Ok(Box::new(gpu::TransferSuite)),
        Suite::Alloc => Ok(Box::new(gpu::AllocSuite)),
        Suite::Gemm => Ok(Box::new(gpu::GemmSuite)),
        Suite::Endpoint => match &options.endpoint {
            Some(config) => Ok(Box::new(endpoint::EndpointSuite { config: config.clone() })),
            None => Err("the endpoint suite needs --target URL and --protocol".into()),
        },
        Suite::Transport => Ok(Box::new(transport::TransportSuite {
            peer: options.peer.clone(),
            peer_token: options.peer_token.clone(),
            sizes: options.sizes.clone(),
        })),
    }
}

/// A figure that is one number, as statistics of one sample.
pub fn single(value: f64) -> Stats {
    Stats::single(value)
}

/// A measured figure; failed when the harness took no sample.
pub fn figure(
    suite: Suite,
    case: &str,
    unit: Unit,
    parameters: BTreeMap<String, String>,
    stats: Option<Stats>,
) -> Measurement {
    let status = if stats.is_some() { MeasurementStatus::Ok } else { MeasurementStatus::Failed };
    Measurement {
        suite,
        case: case.into(),
        parameters,
        unit,
        status,
        reason: stats.is_none().then(|| "no samples".to_string()),
        stats,
        floor: None,
        histogram: None,
    }
}
