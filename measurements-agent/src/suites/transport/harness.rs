//! Timing: warm-up excluded, iterations that adapt until the confidence interval of the mean is
//! narrow enough or the case's time budget is spent, latencies in an HdrHistogram.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use model::Stats;

use super::clients::Client;
use super::os::Usage;
use crate::stats::t95;

/// Stop once the 95% confidence interval's half width is within this fraction of the mean.
pub const TARGET_RELATIVE_HALF_WIDTH: f64 = 0.01;
/// Samples taken before the interval is first checked (enough for a p99.9 to mean something).
pub const MIN_SAMPLES: u64 = 1000;
/// Fewest samples of a case even when its budget is spent (large payloads are slow).
pub const FLOOR_SAMPLES: u64 = 5;

/// Latencies in nanoseconds (1 ns to 100 s, 3 significant digits) plus an exact running mean
/// and variance (Welford) for the confidence interval.
pub struct Recorder {
    histogram: Histogram<u64>,
    n: u64,
    mean: f64,
    m2: f64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            histogram: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds"),
            n: 0,
            mean: 0.0,
            m2: 0.0,
        }
    }
}

impl Recorder {
    pub fn record(&mut self, seconds: f64) {
        let _ = self.histogram.record(((seconds * 1e9).round() as u64).max(1));
        self.n += 1;
        let delta = seconds - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (seconds - self.mean);
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    fn half_width(&self) -> f64 {
        if self.n < 2 {
            return f64::INFINITY;
        }
        let variance = self.m2 / (self.n - 1) as f64;
        t95((self.n - 1) as usize) * (variance / self.n as f64).sqrt()
    }

    pub fn converged(&self) -> bool {
        self.n >= MIN_SAMPLES && self.half_width() <= TARGET_RELATIVE_HALF_WIDTH * self.mean
    }

    /// In seconds. `None` without samples.
    pub fn stats(&self) -> Option<Stats> {
        if self.n == 0 {
            return None;
        }
        let q = |q: f64| self.histogram.value_at_quantile(q) as f64 * 1e-9;
        let half = if self.n > 1 { self.half_width() } else { 0.0 };
        Some(Stats {
            samples: self.n,
            mean: self.mean,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            ci95_low: (self.mean - half).max(0.0),
            ci95_high: self.mean + half,
        })
    }
}

/// What one closed-loop latency case measured.
pub struct Latency {
    pub recorder: Recorder,
    /// This process's usage over the measured calls.
    pub client: Usage,
    /// The far end's usage over the same calls.
    pub server: Usage,
}

/// Reads the far end's usage; read just before and just after the measured calls, so
/// warm-up and connection set-up are not charged to them.
pub type PeerUsage<'a> = &'a (dyn Fn() -> anyhow::Result<Usage> + Sync);

/// For a far end whose usage is not measured (the floors).
pub fn no_usage() -> anyhow::Result<Usage> {
    Ok(Usage::default())
}

/// Warm-up (a tenth of the budget, at least 3 calls), then calls one at a time until the
/// mean's interval is narrow or the budget is spent.
pub fn closed_loop(client: &mut dyn Client, budget: Duration, peer: PeerUsage) -> anyhow::Result<Latency> {
    // Warm-up by time, not by count: sub-microsecond transports need thousands of calls before
    // both ends' caches, TLBs and clocks settle.
    let warm_until = Instant::now() + budget / 10;
    let mut warm_calls = 0;
    while warm_calls < 3 || Instant::now() < warm_until {
        client.call()?;
        warm_calls += 1;
    }
    let mut recorder = Recorder::default();
    let server = peer()?;
    let usage = Usage::now();
    let start = Instant::now();
    let deadline = start + budget;
    loop {
        let sent = Instant::now();
        client.call()?;
        let done = Instant::now();
        recorder.record((done - sent).as_secs_f64());
        let n = recorder.len();
        if n >= FLOOR_SAMPLES && (done >= deadline || (n % 64 == 0 && recorder.converged())) {
            break;
        }
    }
    let client_usage = Usage::now().since(&usage);
    Ok(Latency { client: client_usage, server: peer()?.since(&server), recorder })
}

/// Requests sent on a fixed schedule at `rate` per second for `budget`, each timed from the
/// moment it was scheduled to leave, so a slow answer delays and is charged to the requests
/// behind it (no coordinated omission).
pub fn open_loop(client: &mut dyn Client, rate: f64, budget: Duration) -> anyhow::Result<Recorder> {
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(1);
    let mut recorder = Recorder::default();
    let mut i: u32 = 0;
    loop {
        let scheduled = start + interval * i;
        sleep_until(scheduled);
        client.call()?;
        let done = Instant::now();
        recorder.record((done - scheduled).as_secs_f64());
        i += 1;
        if recorder.len() >= FLOOR_SAMPLES && done - start >= budget {
            return Ok(recorder);
        }
    }
}

/// Sleeps most of the way, then spins, so the send is on time to a microsecond or so.
fn sleep_until(at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Completed calls per second with `in_flight` clients (one thread each) for `budget`.
pub fn throughput(
    make: &(dyn Fn() -> anyhow::Result<Box<dyn Client>> + Sync),
    in_flight: usize,
    budget: Duration,
    pin: Option<usize>,
    peer: PeerUsage,
) -> anyhow::Result<(f64, u64, Usage, Usage)> {
    let go = Barrier::new(in_flight + 1);
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let (elapsed, usage, server, done) = std::thread::scope(|scope| {
        for _ in 0..in_flight {
            scope.spawn(|| {
                if let Some(cpu) = pin {
                    let _ = super::pin_thread(cpu);
                }
                let client = make().and_then(|mut c| {
                    for _ in 0..3 {
                        c.call()?;
                    }
                    Ok(c)
                });
                go.wait();
                let mut client = match client {
                    Ok(c) => c,
                    Err(e) => {
                        failure.lock().expect("lock").get_or_insert(e);
                        return;
                    }
                };
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = client.call() {
                        failure.lock().expect("lock").get_or_insert(e);
                        return;
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        go.wait();
        let server = peer();
        let usage = Usage::now();
        let start = Instant::now();
        std::thread::sleep(budget);
        let done = count.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        let client = Usage::now().since(&usage);
        let server = server.and_then(|before| Ok(peer()?.since(&before)));
        stop.store(true, Ordering::Relaxed);
        (elapsed, client, server, done)
    });
    if let Some(e) = failure.into_inner().expect("lock") {
        return Err(e);
    }
    Ok((done as f64 / elapsed.as_secs_f64(), done, usage, server?))
}

/// Thread CPU seconds per call of `f`, over batches of calls lasting about 2 ms each.
pub fn cpu_per_call(mut f: impl FnMut() -> usize, budget: Duration) -> Recorder {
    per_call(
        || {
            black_box(f());
        },
        budget,
        || {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
            t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
        },
    )
}

/// Round trips of an atomic bounced between two threads that spin: the cost of moving a cache
/// line there and back, the floor under any shared-memory protocol. Each round trip is timed
/// on its own, as the transports' calls are, so both include the timer's cost.
pub fn spin_ping_pong(cpus: (usize, usize), budget: Duration) -> Recorder {
    const WARM_UP: u64 = 10_000;
    /// The ball alone on its cache lines (and the adjacent-line prefetcher's pair).
    #[repr(align(128))]
    struct Line(AtomicU64);
    let ball = Line(AtomicU64::new(0));
    let ball = &ball.0;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _ = super::pin_thread(cpus.1);
            let mut expect = 1;
            loop {
                while ball.load(Ordering::Acquire) != expect {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::hint::spin_loop();
                }
                ball.store(expect + 1, Ordering::Release);
                expect += 2;
            }
        });
        let measurer = scope.spawn(|| {
            let _ = super::pin_thread(cpus.0);
            let mut recorder = Recorder::default();
            let mut value = 0u64;
            let mut round_trip = || {
                value += 1;
                ball.store(value, Ordering::Release);
                value += 1;
                while ball.load(Ordering::Acquire) != value {
                    std::hint::spin_loop();
                }
            };
            for _ in 0..WARM_UP {
                round_trip();
            }
            let deadline = Instant::now() + budget;
            loop {
                let start = Instant::now();
                round_trip();
                let done = Instant::now();
                recorder.record((done - start).as_secs_f64());
                let n = recorder.len();
                if n >= MIN_SAMPLES && (done >= deadline || (n % 64 == 0 && recorder.converged())) {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            recorder
        });
        measurer.join().expect("spin measurer")
    })
}

/// Round trips between two threads that sleep on a futex and wake each other: the floor under
/// any blocking wake-up.
pub fn futex_ping_pong(cpus: (usize, usize), budget: Duration) -> Recorder {
    use rustix::thread::futex;
    let word = AtomicU32::new(0);
    const STOP: u32 = u32::MAX;
    let wait_for = |expect: u32| loop {
        let now = word.load(Ordering::Acquire);
        if now == expect || now == STOP {
            return now;
        }
        let _ = futex::wait(&word, futex::Flags::PRIVATE, now, None);
    };
    let set = |value: u32| {
        word.store(value, Ordering::Release);
        let _ = futex::wake(&word, futex::Flags::PRIVATE, 1);
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _ = super::pin_thread(cpus.1);
            let mut expect = 1;
            while wait_for(expect) != STOP {
                set(expect + 1);
                expect += 2;
            }
        });
        let measurer = scope.spawn(|| {
            let _ = super::pin_thread(cpus.0);
            let mut recorder = Recorder::default();
            let deadline = Instant::now() + budget;
            let mut value = 0u32;
            let mut i = 0;
            while recorder.len() < FLOOR_SAMPLES || (Instant::now() < deadline && !recorder.converged()) {
                let start = Instant::now();
                value += 1;
                set(value);
                value += 1;
                wait_for(value);
                if i >= 100 {
                    recorder.record(start.elapsed().as_secs_f64());
                }
                i += 1;
                if value > 2_000_000_000 {
                    break;
                }
            }
            set(STOP);
            recorder
        });
        measurer.join().expect("futex measurer")
    })
}

/// Copying the payload once: what a copy-in/copy-out transport pays at the very least.
pub fn memcpy(bytes: usize, budget: Duration) -> Recorder {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    wall_per_call(
        || {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        },
        budget,
    )
}

/// Wall seconds per call of `f`, over batches of about 2 ms.
pub fn wall_per_call(f: impl FnMut(), budget: Duration) -> Recorder {
    let start = Instant::now();
    per_call(f, budget, move || start.elapsed().as_secs_f64())
}

/// Seconds of `clock` per call of `f`, over batches of calls lasting about 2 ms each (so the
/// clock's resolution does not matter), until the mean settles or the budget is spent.
fn per_call(mut f: impl FnMut(), budget: Duration, clock: impl Fn() -> f64) -> Recorder {
    f();
    let calibrate = Instant::now();
    f();
    let per_batch = ((2e-3 / calibrate.elapsed().as_secs_f64().max(1e-9)) as u64).clamp(1, 1_000_000);
    let mut recorder = Recorder::default();
    let deadline = Instant::now() + budget;
    while recorder.len() < 3 || (Instant::now() < deadline && !recorder.converged()) {
        let start = clock();
        for _ in 0..per_batch {
            f();
        }
        recorder.record((clock() - start) / per_batch as f64);
        if recorder.len() >= 200 {
            break;
        }
    }
    recorder
}

/// What reading the clock twice costs, which every latency sample includes.
pub fn timer_overhead() -> Recorder {
    wall_per_call(
        || {
            let a = Instant::now();
            black_box(Instant::now() - a);
        },
        Duration::from_millis(20),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_matches_a_known_sample() {
        let mut a = Recorder::default();
        for i in 1..=100 {
            a.record(i as f64 * 1e-6);
        }
        let s = a.stats().unwrap();
        assert_eq!(s.samples, 100);
        assert!((s.mean - 50.5e-6).abs() < 1e-12);
        assert!((s.p50 - 50e-6).abs() < 0.1e-6, "{s:?}");
        assert!((s.p99 - 99e-6).abs() < 0.1e-6, "{s:?}");
        // Same half width as the plain summary of 1..=100.
        assert!((s.ci95_high - s.mean - 5.744e-6).abs() < 0.02e-6, "{s:?}");
    }

    #[test]
    fn floors_are_positive_and_ordered() {
        let cpus = crate::suites::transport::allowed_cpus();
        if let [a, b, ..] = cpus[..] {
            let spin = spin_ping_pong((a, b), Duration::from_millis(5)).stats().unwrap();
            let futex = futex_ping_pong((a, b), Duration::from_millis(20)).stats().unwrap();
            assert!(
                spin.p50 > 0.0 && futex.p50 > spin.p50,
                "a futex wake-up costs more than a cache line: {spin:?} {futex:?}"
            );
        }
        let copy_small = memcpy(1024, Duration::from_millis(20)).stats().unwrap();
        let copy_big = memcpy(4 << 20, Duration::from_millis(50)).stats().unwrap();
        assert!(copy_small.p50 > 0.0 && copy_big.p50 > copy_small.p50 * 10.0, "{copy_small:?} {copy_big:?}");
    }
}
