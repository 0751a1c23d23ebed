//! `system`: memory copy bandwidth across buffer sizes (cache-resident to DRAM-bound) on one
//! core, and DRAM-bound on every core at once, which is the node's memory bandwidth.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use model::{Measurement, MeasurementStatus, Suite, Unit};

use super::{Benchmark, Effort, Progress};
use crate::power::{self, Energy, Rapl};
use crate::stats::summarize;

pub struct System;

/// Buffer sizes: in L1/L2, in a typical L3, and well beyond any cache.
const SIZES: [usize; 3] = [256 * 1024, 8 * 1024 * 1024, 256 * 1024 * 1024];
/// Each sample copies for at least this long, so timer resolution does not matter.
const MIN_SAMPLE: Duration = Duration::from_millis(2);
/// Per-thread buffer of the all-core case, and the cap on all of its buffers together.
const PARALLEL_BYTES: usize = 64 * 1024 * 1024;
const PARALLEL_TOTAL: usize = 1024 * 1024 * 1024;

impl Benchmark for System {
    fn suite(&self) -> Suite {
        Suite::System
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let samples = if effort.quick { 10 } else { 40 };
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let rapl = Rapl::open(Path::new(crate::power::POWERCAP));
        // Idle first, before the copies warm anything.
        let mut power = Vec::new();
        if let Ok(rapl) = &rapl {
            let window = if effort.quick { Duration::from_millis(500) } else { Duration::from_secs(2) };
            power.push(power::case(Suite::System, "idle", rapl, rapl.during(|| std::thread::sleep(window)).0, &[]));
        }
        let mut measurements: Vec<Measurement> = SIZES.iter().map(|&bytes| memcpy(bytes, samples)).collect();
        if threads > 1 {
            let per_thread = PARALLEL_BYTES.min(PARALLEL_TOTAL / threads).max(8 * 1024 * 1024);
            // Every core copying memory is the busiest this suite makes the node: its power
            // is the draw under load.
            let copy = || memcpy_all_cores(per_thread, threads, samples);
            match &rapl {
                Ok(rapl) => {
                    let (watts, m) = rapl.during(copy);
                    measurements.push(m);
                    power.push(power::case(Suite::System, "busy", rapl, watts, &[]));
                }
                Err(_) => measurements.push(copy()),
            }
        }
        match &rapl {
            Err(reason) => {
                progress.line(&format!("system: power not measured: {reason}"));
                measurements.push(power::skipped::<Rapl>(Suite::System, None, reason, &[]));
            }
            Ok(rapl) => {
                for line in power::said(&power, &rapl.describe()) {
                    progress.line(&format!("system: {line}"));
                }
                measurements.extend(power);
            }
        }
        for m in &measurements {
            if let Some(stats) = &m.stats {
                progress.line(&format!(
                    "system: memcpy {} × {} thread(s) → {} (median of {samples})",
                    model::format::bytes(m.parameters["bytes"].parse::<f64>().unwrap_or(0.0)),
                    m.parameters["threads"],
                    model::format::bytes_per_second(stats.p50)
                ));
            }
        }
        Ok(measurements)
    }
}

/// Copies `bytes` between two buffers; each sample's bandwidth counts bytes copied once
/// (read once, written once) per elapsed second.
fn memcpy(bytes: usize, samples: usize) -> Measurement {
    let parameters =
        BTreeMap::from([("bytes".to_string(), bytes.to_string()), ("threads".to_string(), "1".to_string())]);
    let mut src = vec![0u8; bytes];
    let mut dst = vec![0u8; bytes];
    // Touch every page of both buffers so page faults are not timed.
    src.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    dst.copy_from_slice(&src);
    let copies_per_sample = copies_for(bytes, &mut src, &mut dst);
    let bandwidths: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..copies_per_sample {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
            }
            (bytes * copies_per_sample) as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    bandwidth(parameters, &bandwidths)
}

/// `threads` threads each copy their own `bytes` buffers at once; a sample's bandwidth is all
/// bytes copied over the wall time from the first thread's start to the last thread's finish.
/// The copying threads read the clock themselves: a coordinating thread woken late (with as
/// many copiers as cores, it often is) started its clock after copies had begun, and a 2-vCPU
/// VM reported 100 GB/s and more for a 22 GB/s copy one sample in ten.
fn memcpy_all_cores(bytes: usize, threads: usize, samples: usize) -> Measurement {
    let parameters =
        BTreeMap::from([("bytes".to_string(), bytes.to_string()), ("threads".to_string(), threads.to_string())]);
    let copies = {
        let mut src = vec![1u8; bytes];
        let mut dst = vec![0u8; bytes];
        copies_for(bytes, &mut src, &mut dst)
    };
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    // Each copier's start and finish of the sample under way.
    let spans: std::sync::Mutex<Vec<(Instant, Instant)>> = std::sync::Mutex::new(Vec::with_capacity(threads));
    let bandwidths = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // Allocated and touched by the thread that copies, so pages sit on its NUMA node.
                let src = vec![1u8; bytes];
                let mut dst = vec![0u8; bytes];
                dst.copy_from_slice(&src);
                for _ in 0..samples {
                    start.wait();
                    let began = Instant::now();
                    for _ in 0..copies {
                        dst.copy_from_slice(black_box(&src));
                        black_box(&mut dst);
                    }
                    let ended = Instant::now();
                    spans.lock().expect("no copier panics holding it").push((began, ended));
                    done.wait();
                }
            });
        }
        (0..samples)
            .map(|_| {
                start.wait();
                done.wait();
                let spans = std::mem::take(&mut *spans.lock().expect("no copier panics holding it"));
                let began = spans.iter().map(|s| s.0).min().expect("every copier timed its copies");
                let ended = spans.iter().map(|s| s.1).max().expect("every copier timed its copies");
                (threads * bytes * copies) as f64 / ended.duration_since(began).as_secs_f64()
            })
            .collect::<Vec<f64>>()
    });
    bandwidth(parameters, &bandwidths)
}

/// A memcpy case's result from its per-sample bandwidths.
fn bandwidth(parameters: BTreeMap<String, String>, samples: &[f64]) -> Measurement {
    Measurement {
        suite: Suite::System,
        case: model::Case::Memcpy.as_str().into(),
        parameters,
        unit: Unit::BytesPerSecond,
        status: MeasurementStatus::Ok,
        reason: None,
        stats: Some(summarize(samples)),
        floor: None,
        histogram: None,
    }
}

/// How many copies make one sample last at least [`MIN_SAMPLE`] (also warms caches).
fn copies_for(bytes: usize, src: &mut [u8], dst: &mut [u8]) -> usize {
    let mut copies = 1;
    loop {
        let start = Instant::now();
        for _ in 0..copies {
            dst.copy_from_slice(black_box(src));
            // Without this, an optimised build may drop all but the last copy (nothing reads
            // dst in between), time nothing, and double the count up to 16 GiB a sample.
            black_box(&mut *dst);
        }
        if start.elapsed() >= MIN_SAMPLE || copies >= 1 << 20 || bytes * copies >= 1 << 34 {
            return copies;
        }
        copies *= 2;
    }
}
