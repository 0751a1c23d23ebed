//! Benchmark suites behind one small trait. A case that cannot run is recorded as skipped or
//! failed with its reason; the other cases and suites still run.

pub mod system;

use model::{Measurement, Suite};

/// How thoroughly to measure.
#[derive(Debug, Clone, Copy)]
pub struct Effort {
    /// Fewer samples and sizes: for a smoke run, not for decisions.
    pub quick: bool,
}

/// One suite of benchmarks.
pub trait Benchmark {
    fn suite(&self) -> Suite;
    /// Runs every case, reporting progress lines through `progress`.
    fn run(&self, effort: Effort, progress: &mut dyn FnMut(&str)) -> Vec<Measurement>;
}

/// The suites this agent can run, by name.
pub fn available() -> Vec<Suite> {
    vec![Suite::System]
}

/// The implementation of `suite`, or why there is none in this build.
pub fn benchmark(suite: Suite) -> Result<Box<dyn Benchmark>, String> {
    match suite {
        Suite::System => Ok(Box::new(system::System)),
        other => Err(format!(
            "suite '{other}' is not in this version of the agent; available: {}",
            available().iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}
