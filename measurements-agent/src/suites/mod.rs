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
    /// Runs every case, telling the operator through `progress`. A case that cannot run is a
    /// skipped or failed measurement; an error means the suite as a whole could not start (an
    /// unreachable peer, say) and is reported to the operator, not uploaded.
    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>>;
}

/// What a run tells its operator, one implementation for every suite: lines, and for work of a
/// known number of steps a bar with the step in hand and the time left. On a terminal the bar is
/// indicatif's, redrawn in place with the lines printed above it; in a log (systemd, CI, a pipe)
/// a line per tenth of the work instead, so the log shows progress without a line per step.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Lines (and, without a terminal, the tenths) go here instead of stderr: for tests.
    sink: Option<Vec<String>>,
    tty: bool,
    name: String,
    total: u64,
    done: u64,
    last_tenth: u64,
    /// A tenth of the planned total: how often a log hears of steps past the plan.
    every: u64,
    started: std::time::Instant,
}

impl Progress {
    /// Progress on stderr, with a bar when stderr is a terminal.
    pub fn stderr() -> Self {
        use std::io::IsTerminal;
        // A log collector gets JSON lines, never a bar drawn over them.
        let json = crate::LOG_JSON.load(std::sync::atomic::Ordering::Relaxed);
        Self::new(std::io::stderr().is_terminal() && !json, None)
    }

    /// Progress kept in memory as the lines a log would get (no bar): what tests read.
    #[cfg(test)]
    pub fn recorded() -> Self {
        Self::new(false, Some(Vec::new()))
    }

    fn new(tty: bool, sink: Option<Vec<String>>) -> Self {
        Progress {
            bar: None,
            sink,
            tty,
            name: String::new(),
            total: 0,
            done: 0,
            last_tenth: 0,
            every: 1,
            started: std::time::Instant::now(),
        }
    }

    /// The lines recorded so far (only for [`Progress::recorded`]).
    #[cfg(test)]
    pub fn lines(&self) -> &[String] {
        self.sink.as_deref().unwrap_or_default()
    }

    /// A line for the operator, above the bar if one is drawn.
    pub fn line(&mut self, text: &str) {
        match (&mut self.sink, &self.bar) {
            (Some(lines), _) => lines.push(text.to_string()),
            (None, Some(bar)) => bar.println(text),
            (None, None) => crate::log(text),
        }
    }

    /// Starts `total` steps of work called `name` (a suite's name, usually).
    pub fn start(&mut self, name: &str, total: u64) {
        self.end_bar();
        (self.name, self.total, self.done, self.last_tenth) = (name.to_string(), total.max(1), 0, 0);
        self.every = (self.total / 10).max(1);
        self.started = std::time::Instant::now();
        if self.tty && self.sink.is_none() {
            let bar = indicatif::ProgressBar::new(self.total);
            let style = indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos:>3}/{len} {elapsed:>4} (about {eta} left) {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("#>.");
            bar.set_style(style);
            bar.set_prefix(self.name.clone());
            self.bar = Some(bar);
        }
    }

    /// One step done; `what` says which.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        // A step beyond the planned total grows the bar rather than overflowing it.
        let grew = self.done > self.total;
        if grew {
            self.total = self.done;
            if let Some(bar) = &self.bar {
                bar.set_length(self.total);
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
            bar.set_position(self.done);
            return;
        }
        let tenth = self.done * 10 / self.total;
        // Past the plan, a log still hears a line per tenth of the planned work, not one a step.
        if tenth > self.last_tenth || self.done == 1 || (grew && self.done.is_multiple_of(self.every)) {
            self.last_tenth = tenth;
            let line = format!(
                "{} {:>3}/{} {:>5.1}s {what}",
                self.name,
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64()
            );
            self.line(&line);
        }
    }

    /// `steps` steps that will not run (a case skipped with its reason).
    pub fn skip(&mut self, steps: u64) {
        for _ in 0..steps {
            self.step("skipped");
        }
    }

    /// The work started last is done.
    pub fn finish(&mut self) {
        self.end_bar();
        let line = format!("{}: done in {:.1}s", self.name, self.started.elapsed().as_secs_f64());
        self.line(&line);
    }

    fn end_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.end_bar();
    }
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

#[cfg(test)]
mod tests {
    use super::Progress;

    #[test]
    fn a_log_gets_the_first_step_and_each_tenth_and_lines_in_between() {
        let mut p = Progress::recorded();
        p.line("running suite transport");
        p.start("transport", 20);
        for i in 0..20 {
            p.step(&format!("case {i}"));
        }
        p.finish();
        let lines = p.lines();
        assert_eq!(lines[0], "running suite transport");
        // Step 1, then every second step (a tenth of 20), then the end.
        let steps: Vec<_> = lines[1..lines.len() - 1].iter().map(|l| l.split_whitespace().nth(1).unwrap()).collect();
        assert_eq!(
            steps,
            ["1/20", "2/20", "4/20", "6/20", "8/20", "10/20", "12/20", "14/20", "16/20", "18/20", "20/20"]
        );
        assert!(lines[2].ends_with("case 1"), "{}", lines[2]);
        assert!(lines.last().unwrap().starts_with("transport: done in "), "{lines:?}");
    }

    #[test]
    fn steps_past_the_plan_grow_the_total_and_skips_count_as_steps() {
        let mut p = Progress::recorded();
        p.start("quant", 2);
        p.skip(2);
        p.step("one more than planned");
        let last = p.lines().last().unwrap().clone();
        assert!(last.starts_with("quant   3/3 "), "{last}");
        assert!(last.ends_with("one more than planned"), "{last}");
        assert!(p.lines()[0].ends_with("skipped"), "{:?}", p.lines());
        // Twenty planned and thirty run: a line per two steps past the plan too, not per step.
        let mut p = Progress::recorded();
        p.start("transport", 20);
        for i in 0..30 {
            p.step(&format!("case {i}"));
        }
        let past: Vec<_> = p.lines().iter().map(|l| l.split_whitespace().nth(1).unwrap()).skip(11).collect();
        assert_eq!(past, ["22/22", "24/24", "26/26", "28/28", "30/30"]);
    }
}
