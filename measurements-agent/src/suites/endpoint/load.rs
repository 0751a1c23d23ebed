//! The load drivers, built as wrk2 is: a sender per core (a *lane*), each a thread with its own
//! single-threaded runtime, its own client, its own connections and its share of the work, so
//! that no request crosses threads. (When one thread kept the schedule and handed each request
//! to a shared runtime, two thirds of the client's time went in waking another thread, which on
//! a virtual machine is an exit to the hypervisor, and its open loop fell behind at 2 000/s.)
//!
//! Open loop ([`run`]): each lane sends its share of a schedule fixed in advance, sleeping
//! until each send on a timerfd (tokio's own timers are a millisecond coarse), and every latency
//! is timed from the *scheduled* send, so a stalled server shows up as latency rather than as
//! fewer requests (no coordinated omission). Closed loop ([`run_closed`]): a fixed number of
//! requests in flight, back to back, for comparing like with like with closed-loop tools.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::protocol::{Client, Failure, Prepared, Tokens};
use crate::suites::transport::os::Alarm;

/// What happened to one scheduled request.
#[derive(Debug)]
pub struct Outcome {
    /// Scheduled send, in seconds from the step's start.
    pub offset: f64,
    /// How late the request's task began, after its scheduled send: the client's own delay.
    pub lag: Duration,
    /// How long it waited for the in-flight cap, when it did.
    pub capped: Option<Duration>,
    /// From the scheduled send to the end of the response.
    pub latency: Duration,
    /// When the response ended, in seconds from the step's start.
    pub finished: f64,
    pub result: Result<Option<Tokens>, Failure>,
    /// From the scheduled send to the first token, and the gaps between tokens (LLM protocols).
    pub first_token: Option<Duration>,
    pub gaps: Vec<Duration>,
}

/// A finished step: every outcome in schedule order, and the client's CPU over the step.
pub struct Ran {
    pub outcomes: Vec<Outcome>,
    /// The busiest lane's CPU seconds per wall second (0..1).
    pub cpu: f64,
}

/// What every lane starts from: the client and the target as prepared (each lane makes its own
/// of both, with its own connections), how many lanes, and the bound on each request.
pub struct Load<'a> {
    pub client: &'a Client,
    pub target: &'a Prepared,
    pub lanes: usize,
    pub timeout: Duration,
}

/// Sends one request at each offset (seconds from the start), request `i` from lane
/// `i % lanes`, and waits for every answer. A request not answered within `timeout` of its
/// scheduled send (waiting for the in-flight cap included) is a timeout. `max_in_flight` bounds
/// the requests in flight of all lanes together.
pub fn run(load: &Load, offsets: &[f64], max_in_flight: usize) -> anyhow::Result<Ran> {
    let lanes = load.lanes.clamp(1, max_in_flight.max(1));
    let timeout = load.timeout;
    // One cap for all lanes: a lane waits on another's thread only when the cap is reached.
    let cap = Arc::new(Semaphore::new(max_in_flight.max(1)));
    let ran = on_lanes(load, lanes, |lane, start, client, target| {
        let share: Vec<(usize, f64)> = offsets.iter().copied().enumerate().skip(lane).step_by(lanes).collect();
        open_lane(share, start, cap.clone(), timeout, client, target)
    })?;
    let cpu = ran.cpu;
    let mut slots: Vec<Option<Outcome>> = (0..offsets.len()).map(|_| None).collect();
    for (i, outcome) in ran.outcomes.into_iter().flatten() {
        slots[i] = Some(outcome);
    }
    let outcomes = slots
        .into_iter()
        .zip(offsets)
        .map(|(slot, &offset)| {
            slot.unwrap_or_else(|| Outcome {
                offset,
                lag: Duration::ZERO,
                capped: None,
                latency: timeout,
                finished: offset + timeout.as_secs_f64(),
                result: Err(Failure::Timeout),
                first_token: None,
                gaps: Vec::new(),
            })
        })
        .collect();
    Ok(Ran { outcomes, cpu })
}

/// Closed loop, as `wrk -cN` and perf_analyzer run by default: `in_flight` callers, shared out
/// between the lanes, each send a request, wait for its answer and send the next at once, for
/// `span` seconds. Latency is timed from each actual send (a closed loop has no schedule, so a
/// stalled server shows as fewer requests rather than as latency: the price of comparing like
/// with like with those tools). Outcomes are in order of their send.
pub fn run_closed(load: &Load, in_flight: usize, span: f64) -> anyhow::Result<Ran> {
    let lanes = load.lanes.clamp(1, in_flight.max(1));
    let timeout = load.timeout;
    let ran = on_lanes(load, lanes, |lane, start, client, target| {
        let callers = in_flight / lanes + usize::from(lane < in_flight % lanes);
        closed_lane(lane, lanes, callers, start, span, timeout, client, target)
    })?;
    let cpu = ran.cpu;
    let mut outcomes: Vec<Outcome> = ran.outcomes.into_iter().flatten().collect();
    outcomes.sort_by(|a, b| a.offset.total_cmp(&b.offset));
    Ok(Ran { outcomes, cpu })
}

/// What each lane returned, in lane order, and the busiest lane's CPU seconds per wall second
/// (0..1): a lane is one thread, so one out of CPU reads 1 however idle the others are.
struct OnLanes<T> {
    outcomes: Vec<T>,
    cpu: f64,
}

/// CPU seconds this thread has used.
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Runs `work` on `lanes` threads at once, each with its own single-threaded runtime, client
/// and target (connected in that runtime), all given the same start once every lane is ready.
fn on_lanes<T, F, Fut>(load: &Load, lanes: usize, work: F) -> anyhow::Result<OnLanes<T>>
where
    T: Send,
    F: Fn(usize, Instant, Arc<Client>, Arc<Prepared>) -> Fut + Sync,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let (ready_tx, ready) = mpsc::channel::<bool>();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut go = Vec::new();
        let mut not_started = None;
        for lane in 0..lanes {
            let (go_tx, go_rx) = mpsc::channel::<Instant>();
            let (ready_tx, work) = (ready_tx.clone(), &work);
            let spawned = std::thread::Builder::new().name(format!("endpoint-lane-{lane}")).spawn_scoped(
                scope,
                move || -> anyhow::Result<Option<(T, f64)>> {
                    set_fine_timer_slack();
                    let prepared = (|| {
                        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                        let client = Arc::new(load.client.lane()?);
                        let target = Arc::new(runtime.block_on(load.target.lane(&client))?);
                        anyhow::Ok((runtime, client, target))
                    })();
                    // Sent and dropped at once: a lane that panicked before it is counted as not
                    // ready when its sender drops, and none waits for it.
                    let _ = ready_tx.send(prepared.is_ok());
                    drop(ready_tx);
                    let (runtime, client, target) = prepared?;
                    // No start: another lane could not be made ready, and says why.
                    let Ok(start) = go_rx.recv() else { return Ok(None) };
                    let cpu_before = thread_cpu();
                    let outcome = runtime.block_on(work(lane, start, client, target))?;
                    Ok(Some((outcome, thread_cpu() - cpu_before)))
                },
            );
            match spawned {
                Ok(handle) => {
                    handles.push(handle);
                    go.push(go_tx);
                }
                Err(e) => {
                    not_started = Some(anyhow::Error::from(e).context("cannot start a load lane"));
                    break;
                }
            }
        }
        drop(ready_tx);
        let all_ready = not_started.is_none() && ready.iter().filter(|&ok| ok).count() == lanes;
        let start = Instant::now() + Duration::from_millis(5);
        if all_ready {
            for go in &go {
                let _ = go.send(start);
            }
        }
        drop(go);
        let mut outcomes = Vec::with_capacity(lanes);
        let mut cpu_s: f64 = 0.0;
        let mut failed = not_started;
        for handle in handles {
            match handle.join() {
                Ok(Ok(Some((outcome, cpu)))) => {
                    outcomes.push(outcome);
                    cpu_s = cpu_s.max(cpu);
                }
                Ok(Ok(None)) => {}
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some(anyhow::anyhow!("a load lane panicked"))),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let wall = start.elapsed().as_secs_f64().max(1e-9);
        Ok(OnLanes { outcomes, cpu: (cpu_s / wall).min(1.0) })
    })
}

/// Requests a lane sends before it lets the requests already sent run, when it is behind its
/// schedule.
const BURST: usize = 64;

/// One lane's share of an open loop: `(index, offset)` in schedule order.
async fn open_lane(
    share: Vec<(usize, f64)>,
    start: Instant,
    cap: Arc<Semaphore>,
    timeout: Duration,
    client: Arc<Client>,
    target: Arc<Prepared>,
) -> anyhow::Result<Vec<(usize, Outcome)>> {
    let alarm = Alarm::new()?;
    let mut tasks = JoinSet::new();
    let mut done = Vec::with_capacity(share.len());
    let at = |offset: f64| start + Duration::from_secs_f64(offset);
    let mut next = 0;
    while let Some(&(_, offset)) = share.get(next) {
        if at(offset) > Instant::now() {
            alarm.until(at(offset)).await?;
        } else {
            // Behind schedule: let what was sent run before sending more.
            tokio::task::yield_now().await;
        }
        let now = Instant::now();
        let due = share[next..].iter().take(BURST).take_while(|&&(_, offset)| at(offset) <= now);
        for &(i, offset) in due {
            let (client, target, cap) = (client.clone(), target.clone(), cap.clone());
            tasks.spawn(async move { (i, scheduled_send(&client, &target, &cap, i, start, offset, timeout).await) });
            next += 1;
        }
        while let Some(finished) = tasks.try_join_next() {
            done.extend(finished.ok());
        }
    }
    // Every task ends by its deadline; the margin is for a runtime too busy to say so.
    let give_up = tokio::time::Instant::now() + timeout + Duration::from_secs(10);
    while let Ok(Some(finished)) = tokio::time::timeout_at(give_up, tasks.join_next()).await {
        // A task panics only on a bug; its request is then a timeout, not invented.
        done.extend(finished.ok());
    }
    Ok(done)
}

/// Sends one request of an open loop, its latency timed from its scheduled send.
async fn scheduled_send(
    client: &Client,
    target: &Prepared,
    cap: &Arc<Semaphore>,
    i: usize,
    start: Instant,
    offset: f64,
    timeout: Duration,
) -> Outcome {
    let scheduled = start + Duration::from_secs_f64(offset);
    let began = Instant::now();
    // When it began to wait for the cap, and how long it waited once it had a place.
    let (mut asked, mut waited) = (None, None);
    let send = async {
        let _permit = match cap.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let since = *asked.insert(Instant::now());
                let permit = cap.clone().acquire_owned().await.expect("the semaphore is never closed");
                waited = Some(since.elapsed());
                permit
            }
        };
        client.send(target, i).await
    };
    let deadline = tokio::time::Instant::from_std(scheduled + timeout);
    let result = tokio::time::timeout_at(deadline, send).await.unwrap_or(Err(Failure::Timeout));
    // Timed out still waiting: it waited until now.
    let capped = waited.or_else(|| asked.map(|since| since.elapsed()));
    finish(offset, scheduled, began, start, capped, result)
}

/// One lane's share of a closed loop: `callers` loops, body `lane + lanes × n` for the lane's
/// `n`th request.
#[allow(clippy::too_many_arguments)]
async fn closed_lane(
    lane: usize,
    lanes: usize,
    callers: usize,
    start: Instant,
    span: f64,
    timeout: Duration,
    client: Arc<Client>,
    target: Arc<Prepared>,
) -> anyhow::Result<Vec<Outcome>> {
    let end = start + Duration::from_secs_f64(span);
    let sent = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..callers {
        let (client, target, sent) = (client.clone(), target.clone(), sent.clone());
        tasks.spawn(async move {
            let mut outcomes = Vec::new();
            loop {
                let began = Instant::now();
                if began >= end {
                    return outcomes;
                }
                let i = lane + lanes * sent.fetch_add(1, Ordering::Relaxed);
                let result =
                    tokio::time::timeout(timeout, client.send(&target, i)).await.unwrap_or(Err(Failure::Timeout));
                let offset = began.saturating_duration_since(start).as_secs_f64();
                outcomes.push(finish(offset, began, began, start, None, result));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(finished) = tasks.join_next().await {
        // A caller panics only on a bug; its requests are then missing, not invented.
        all.extend(finished.unwrap_or_default());
    }
    Ok(all)
}

/// The outcome of a request meant to go at `scheduled` (`offset` seconds after `start`) whose
/// task began at `began` and ended now.
fn finish(
    offset: f64,
    scheduled: Instant,
    began: Instant,
    start: Instant,
    capped: Option<Duration>,
    result: Result<Option<Tokens>, Failure>,
) -> Outcome {
    let done = Instant::now();
    let (first_token, gaps) = match &result {
        Ok(Some(tokens)) => timing(tokens, scheduled),
        _ => (None, Vec::new()),
    };
    Outcome {
        offset,
        lag: began.saturating_duration_since(scheduled),
        capped,
        latency: done.saturating_duration_since(scheduled),
        finished: done.saturating_duration_since(start).as_secs_f64(),
        result,
        first_token,
        gaps,
    }
}

fn timing(tokens: &Tokens, scheduled: Instant) -> (Option<Duration>, Vec<Duration>) {
    let first = tokens.arrivals.first().map(|t| t.saturating_duration_since(scheduled));
    let gaps = tokens.arrivals.windows(2).map(|w| w[1].saturating_duration_since(w[0])).collect();
    (first, gaps)
}

/// Lets a lane's sleeps end within a microsecond or so of when they were asked to (Linux pads
/// them by 50 µs by default).
fn set_fine_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::{Read, Write};
    use std::sync::Mutex;

    use super::*;
    use crate::suites::endpoint::protocol::{Protocol, TargetOptions, prepare};

    /// A keep-alive HTTP/1.1 server on a thread per connection, answering `ok` to every POST of
    /// `{}`; it records the port each request came from.
    fn server() -> (u16, Arc<Mutex<Vec<u16>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let (mut socket, log) = (socket.unwrap(), log.clone());
                std::thread::spawn(move || {
                    let from = socket.peer_addr().unwrap().port();
                    let mut got = Vec::new();
                    let mut buffer = [0u8; 4096];
                    loop {
                        while !got.ends_with(b"\r\n\r\n{}") {
                            match socket.read(&mut buffer) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&buffer[..n]),
                            }
                        }
                        got.clear();
                        log.lock().unwrap().push(from);
                        let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    }
                });
            }
        });
        (port, seen)
    }

    fn target(port: u16) -> (Client, Prepared) {
        let client = Client::new(Duration::from_secs(5), 8, None).unwrap();
        let options = TargetOptions {
            model: None,
            model_version: None,
            input: Some(b"{}".to_vec()),
            expect_status: 200,
            max_tokens: 1,
            slots: None,
            prompt_words: (1, 1),
            tensor_data: Default::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let url = format!("http://127.0.0.1:{port}/infer");
        let prepared = runtime.block_on(prepare(&client, &url, Protocol::HttpJson, &options)).unwrap();
        (client, prepared)
    }

    #[test]
    fn two_lanes_send_every_scheduled_request_once_each_on_its_own_connections() {
        let (port, seen) = server();
        let (client, prepared) = target(port);
        let load = Load { client: &client, target: &prepared, lanes: 2, timeout: Duration::from_secs(5) };
        let offsets: Vec<f64> = (0..300).map(|i| f64::from(i) * 0.001).collect();
        let ran = run(&load, &offsets, 64).unwrap();
        assert_eq!(ran.outcomes.len(), 300);
        for (outcome, &offset) in ran.outcomes.iter().zip(&offsets) {
            assert_eq!(outcome.offset, offset, "outcomes come back in schedule order");
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
            assert!(outcome.finished >= offset, "an answer cannot end before its send was due");
        }
        assert_eq!(seen.lock().unwrap().len(), 300, "each request sent once");
        let connections: BTreeSet<u16> = seen.lock().unwrap().iter().copied().collect();
        assert!(connections.len() >= 2, "each lane connects on its own: {connections:?}");
        assert!(ran.cpu > 0.0 && ran.cpu <= 1.0, "{}", ran.cpu);

        // A closed loop of three over two lanes keeps three connections busy.
        seen.lock().unwrap().clear();
        let ran = run_closed(&load, 3, 0.3).unwrap();
        assert!(ran.outcomes.len() > 30 && ran.outcomes.iter().all(|o| o.result.is_ok()));
        assert!(ran.outcomes.windows(2).all(|w| w[0].offset <= w[1].offset), "in order of send");
        let connections: BTreeSet<u16> = seen.lock().unwrap().iter().copied().collect();
        assert_eq!(connections.len(), 3, "one connection per caller: {connections:?}");
    }

    #[test]
    fn a_lane_that_cannot_connect_fails_the_step_and_names_the_target() {
        let (port, _) = server();
        let (client, mut prepared) = target(port);
        // A gRPC channel is made again by each lane: to a port no one listens on, it cannot be.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        prepared.url = format!("http://127.0.0.1:{closed}");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        prepared.channel = Some(runtime.block_on(async {
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap().connect_lazy()
        }));
        let load = Load { client: &client, target: &prepared, lanes: 2, timeout: Duration::from_secs(2) };
        let error = run(&load, &[0.0, 0.001], 8).err().expect("no lane can connect");
        assert!(error.to_string().contains(&format!("127.0.0.1:{closed}")), "{error}");
    }
}
