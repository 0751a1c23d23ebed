//! `transport`: what each way of calling an inference service costs on this node (or between
//! this node and a peer): round-trip latency closed and open loop, throughput at 1, 4 and 16 in
//! flight, CPU and context switches per request on both ends, encode/decode cost and bytes on
//! the wire, each beside a floor measured in the same run.
//!
//! Its moving parts live beside it: the wire format (`wire`), the server end (`peer`), the
//! clients of every transport (`clients`), shared memory (`shm`, `os`) and the measuring
//! harness (`harness`); starting the peer process and pinning threads are at the end of this
//! file.

pub mod clients;
pub mod harness;
pub mod os;
pub mod peer;
pub mod shm;
pub mod wire;

use std::collections::BTreeMap;
use std::time::Duration;

use model::{Floor, Measurement, MeasurementStatus, Stats, Suite, Unit};

use self::clients::{Client, Exchange, Factory, Transport};
use self::harness::Recorder;
use self::os::Usage;
use self::peer::PeerInfo;
use self::wire::{CLASSES, FRAME_HEADER};
use super::{Benchmark, Effort, Progress, single};
use anyhow::Context;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// Payload sizes measured by default.
pub const DEFAULT_SIZES: [usize; 5] = [1 << 10, 8 << 10, 64 << 10, 512 << 10, 4 << 20];
/// Sizes of a `--quick` run.
pub const QUICK_SIZES: [usize; 2] = [1 << 10, 64 << 10];
/// Requests in flight for the throughput cases.
pub const IN_FLIGHT: [usize; 3] = [1, 4, 16];

pub struct TransportSuite {
    /// `HOST:PORT` of a `measurements-agent serve` on another node; none measures this node.
    pub peer: Option<String>,
    /// The token that peer printed (or was given) when it started.
    pub peer_token: Option<String>,
    /// Payload sizes in bytes; empty takes the defaults.
    pub sizes: Vec<usize>,
}

/// Where the two ends ran.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pinning {
    SameCore(usize),
    DifferentCores(usize, usize),
    CrossNode,
}

impl Pinning {
    fn as_str(self) -> &'static str {
        match self {
            Pinning::SameCore(_) => "same_core",
            Pinning::DifferentCores(..) => "different_cores",
            Pinning::CrossNode => "cross_node",
        }
    }

    fn client_cpu(self) -> Option<usize> {
        match self {
            Pinning::SameCore(c) | Pinning::DifferentCores(c, _) => Some(c),
            Pinning::CrossNode => None,
        }
    }

    fn server_cpu(self) -> Option<usize> {
        match self {
            Pinning::SameCore(c) | Pinning::DifferentCores(_, c) => Some(c),
            Pinning::CrossNode => None,
        }
    }
}

impl Benchmark for TransportSuite {
    fn suite(&self) -> Suite {
        Suite::Transport
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let sizes = if !self.sizes.is_empty() {
            self.sizes.clone()
        } else if effort.quick {
            QUICK_SIZES.to_vec()
        } else {
            DEFAULT_SIZES.to_vec()
        };
        let total = if effort.quick { Duration::from_secs(20) } else { Duration::from_secs(120) };
        let placements = match &self.peer {
            Some(_) => vec![Pinning::CrossNode],
            None => match allowed_cpus()[..] {
                [a, b, ..] => vec![Pinning::SameCore(a), Pinning::DifferentCores(a, b)],
                [a] => vec![Pinning::SameCore(a)],
                [] => vec![Pinning::SameCore(0)],
            },
        };
        // Peers are reached first, so an unreachable one fails the suite before any timing.
        let peers: Vec<(Pinning, Peer)> = placements
            .iter()
            .map(|&p| {
                let peer = match &self.peer {
                    Some(addr) => {
                        let token = self.peer_token.as_deref().ok_or_else(|| {
                            anyhow::anyhow!(
                                "--peer needs --peer-token (or HEADROOM_PEER_TOKEN): the token `serve` printed"
                            )
                        })?;
                        Peer::remote(addr, token)?
                    }
                    None => Peer::spawn_local(p.server_cpu())?,
                };
                Ok((p, peer))
            })
            .collect::<anyhow::Result<_>>()?;
        let mut run = Runner::new(&sizes, &placements, total, progress);
        run.all(&peers, &sizes);
        run.progress.finish();
        let out = run.out;
        progress.line(&format!("transport: {} figures", out.len()));
        Ok(out)
    }
}

/// How the two threads of a ping-pong floor wait for each other.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PingPong {
    Spin,
    Futex,
}

impl PingPong {
    fn name(self) -> &'static str {
        match self {
            PingPong::Spin => "spin_ping_pong",
            PingPong::Futex => "futex_ping_pong",
        }
    }

    fn label(self) -> &'static str {
        match self {
            PingPong::Spin => "spin",
            PingPong::Futex => "futex",
        }
    }
}

struct Runner<'p> {
    out: Vec<Measurement>,
    budget: Duration,
    progress: &'p mut Progress,
    /// Floors by (name, payload bytes, placement), in seconds at the median.
    floors: BTreeMap<(&'static str, usize, &'static str), f64>,
}

impl<'p> Runner<'p> {
    fn new(sizes: &[usize], placements: &[Pinning], total: Duration, progress: &'p mut Progress) -> Self {
        let s = sizes.len();
        let p = placements.len();
        let transports = Transport::ALL.len();
        // Codec cases, memcpy, per placement and size two exchange floors and a futex ping-pong
        // (across cores, two spin and two futex ping-pongs more, bracketing shared memory),
        // per transport × size × placement latency and open loop, and throughput at one placement.
        let bracketed = placements.iter().filter(|p| matches!(p, Pinning::DifferentCores(..))).count();
        let phases =
            8 * s + s + p * s * 3 + bracketed * s * 4 + transports * s * p * 2 + transports * s * IN_FLIGHT.len();
        progress.start("transport", phases as u64);
        Runner {
            out: Vec::new(),
            budget: (total.mul_f64(0.85) / phases as u32).max(Duration::from_millis(20)),
            progress,
            floors: BTreeMap::new(),
        }
    }

    /// Everything that pins a thread does so on a thread of its own (`on_cpu` and the
    /// harness's workers), so this thread stays as the caller had it.
    fn all(&mut self, peers: &[(Pinning, Peer)], sizes: &[usize]) {
        let overhead = harness::timer_overhead();
        self.push("timer_overhead", Unit::Seconds, params(&[]), &overhead, None);
        for &size in sizes {
            self.codec(size);
            self.progress.step(&format!("memcpy {}", model::format::bytes(size as f64)));
            let copy = harness::memcpy(size, self.budget);
            self.floor(model::Case::Memcpy.as_str(), size, "none", &copy);
        }
        // Each size's floors are measured just before its transports: on a shared virtual
        // machine the same ping-pong can take 0.1 µs one second and 0.5 µs the next (the host
        // moves the vCPUs), so a floor is only comparable with figures taken beside it.
        for (placement, peer) in peers {
            for &size in sizes {
                self.floors_at(*placement, peer, size);
                for transport in Transport::ALL {
                    let shared_memory = matches!(transport, Transport::SharedMemorySpin | Transport::SharedMemoryFutex);
                    if shared_memory && let Pinning::DifferentCores(..) = placement {
                        self.bracketed(transport, *placement, peer, size);
                    } else {
                        self.transport(transport, *placement, peer, size);
                    }
                }
            }
        }
    }

    /// A shared-memory case across cores between two ping-pongs of its own kind of wake-up
    /// (spin for busy-poll, futex for futex), each measured while no slot competes for the
    /// core. On a shared VM the host moves the vCPUs now and then: the same spin ping-pong takes
    /// 0.1 µs before a move and 0.4 µs after, and a futex wake-up of an idle vCPU 50 µs one
    /// second and 250 µs the next. When the two brackets disagree by more than half, the host
    /// moved during the case, so the case and its brackets are measured again (three tries);
    /// the floor is the lower bracket, and a case whose brackets never agreed says so in
    /// `floor_stable = false`.
    fn bracketed(&mut self, transport: Transport, placement: Pinning, peer: &Peer, size: usize) {
        const TRIES: usize = 3;
        let kind = if transport == Transport::SharedMemorySpin { PingPong::Spin } else { PingPong::Futex };
        let key = (kind.name(), size, placement.as_str());
        for attempt in 1..=TRIES {
            let mark = self.out.len();
            self.floors.remove(&key);
            let before = self.ping_pong_floor(kind, placement, size, "before");
            self.transport(transport, placement, peer, size);
            let after = self.ping_pong_floor(kind, placement, size, "after");
            let (Some(before), Some(after)) = (before, after) else { return };
            let stable = before.max(after) <= 1.5 * before.min(after);
            if !stable && attempt < TRIES {
                self.out.truncate(mark);
                continue;
            }
            let lowest = before.min(after);
            self.floors.insert(key, lowest);
            for m in &mut self.out[mark..] {
                if let Some(floor) = m.floor.as_mut().filter(|f| f.name == kind.name()) {
                    floor.value = lowest;
                }
                if m.is(model::Case::RoundTrip) {
                    m.parameters.insert("floor_stable".into(), stable.to_string());
                }
            }
            return;
        }
    }

    fn push(
        &mut self,
        case: &str,
        unit: Unit,
        parameters: BTreeMap<String, String>,
        r: &Recorder,
        floor: Option<Floor>,
    ) {
        self.out.push(figure(case, unit, parameters, r.stats(), floor));
    }

    fn floor(&mut self, name: &'static str, size: usize, placement: &'static str, r: &Recorder) {
        if let Some(stats) = r.stats() {
            self.floors.insert((name, size, placement), stats.p50);
        }
        let mut p = params(&[("placement", placement.to_string())]);
        if size > 0 {
            p.insert("payload_bytes".into(), size.to_string());
        }
        self.push(&format!("floor_{name}"), Unit::Seconds, p, r, None);
    }

    /// Encoding a request and decoding it, on this thread, per transport that serializes.
    fn codec(&mut self, size: usize) {
        let tensor = wire::tensor(wire::batch_for(size));
        for transport in [Transport::HttpJson, Transport::GrpcPacked, Transport::GrpcBytes, Transport::UnixSocket] {
            let Some((encode, decode)) = clients::codec(transport, &tensor) else { continue };
            let base = [("transport", transport.as_str().to_string()), ("payload_bytes", size.to_string())];
            self.progress.step(&format!("{} encode {}", transport.as_str(), model::format::bytes(size as f64)));
            let r = harness::cpu_per_call(encode, self.budget);
            self.push("encode_cpu", Unit::Seconds, params(&base), &r, None);
            self.progress.step(&format!("{} decode {}", transport.as_str(), model::format::bytes(size as f64)));
            let r = harness::cpu_per_call(decode, self.budget);
            self.push("decode_cpu", Unit::Seconds, params(&base), &r, None);
        }
    }

    fn floors_at(&mut self, placement: Pinning, peer: &Peer, size: usize) {
        let name = placement.as_str();
        self.progress.step(&format!("futex ping-pong, {name}"));
        if let (Some(a), Some(b)) = (placement.client_cpu(), placement.server_cpu()) {
            let r = harness::futex_ping_pong((a, b), self.budget);
            self.floor("futex_ping_pong", size, name, &r);
        }
        self.exchange_floor_of("tcp_exchange", placement, peer, size);
        if peer.local {
            self.exchange_floor_of("uds_exchange", placement, peer, size);
        } else {
            self.progress.skip(1);
        }
    }

    /// The TCP (`tcp_exchange`) or Unix-socket (`uds_exchange`) exchange of this size's frames.
    fn exchange_floor_of(&mut self, name: &'static str, placement: Pinning, peer: &Peer, size: usize) {
        let response = FRAME_HEADER + wire::batch_for(size) * CLASSES * 4;
        let request = FRAME_HEADER + size;
        if name == "tcp_exchange" {
            let (addr, token) = (peer.exchange_addr(), peer.token.as_str());
            self.exchange_floor(name, "TCP", placement, size, || Exchange::tcp(addr, token, request, response));
        } else {
            let path = &peer.info.uds_exchange_path;
            self.exchange_floor(name, "Unix-socket", placement, size, || Exchange::unix(path, request, response));
        }
    }

    /// An exchange floor measured again right after a case it came out above: a floor does less
    /// work than the case it bounds, so the host ran this VM slower while it was measured (a
    /// 64 KiB Unix-socket exchange took 106 µs one second and its round trip 58 µs the next).
    /// The lower of the two stands; the second is stored with `when = again`.
    fn exchange_floor_again(&mut self, name: &'static str, placement: Pinning, peer: &Peer, size: usize) {
        let key = (name, size, placement.as_str());
        let before = self.floors.get(&key).copied();
        let mark = self.out.len();
        self.exchange_floor_of(name, placement, peer, size);
        for m in &mut self.out[mark..] {
            m.parameters.insert("when".into(), "again".into());
        }
        if let (Some(before), Some(again)) = (before, self.floors.get(&key).copied()) {
            self.floors.insert(key, before.min(again));
        }
    }

    /// An atomic bounced between the client's and the server's cores, by spinning or by futex
    /// wake-ups, bracketing a shared-memory case.
    fn ping_pong_floor(&mut self, kind: PingPong, placement: Pinning, size: usize, when: &str) -> Option<f64> {
        let at = placement.as_str();
        self.progress.step(&format!("{} ping-pong ({when}), {at}", kind.label()));
        let Pinning::DifferentCores(a, b) = placement else { return None };
        let r = match kind {
            PingPong::Spin => harness::spin_ping_pong((a, b), self.budget),
            PingPong::Futex => harness::futex_ping_pong((a, b), self.budget),
        };
        let p50 = r.stats()?.p50;
        // The round trip measured next is compared with this until the bracket closes.
        self.floors.entry((kind.name(), size, at)).or_insert(p50);
        let mut p = params(&[("placement", at.to_string()), ("payload_bytes", size.to_string())]);
        p.insert("when".into(), when.into());
        self.push(&format!("floor_{}", kind.name()), Unit::Seconds, p, &r, None);
        Some(p50)
    }

    /// A raw exchange of the payload's bytes, timed like a transport's round trip.
    fn exchange_floor<C: Client>(
        &mut self,
        name: &'static str,
        label: &str,
        placement: Pinning,
        size: usize,
        connect: impl FnOnce() -> anyhow::Result<C> + Send,
    ) {
        let at = placement.as_str();
        self.progress.step(&format!("{label} exchange {}, {at}", model::format::bytes(size as f64)));
        let budget = self.budget;
        match on_cpu(placement.client_cpu(), || harness::closed_loop(&mut connect()?, budget, &harness::no_usage)) {
            Ok(latency) => self.floor(name, size, at, &latency.recorder),
            Err(e) => {
                let p = params(&[("payload_bytes", size.to_string()), ("placement", at.to_string())]);
                self.out.push(failed(&format!("floor_{name}"), Unit::Seconds, p, format!("{e:#}")));
            }
        }
    }

    fn floor_for(&self, transport: Transport, size: usize, placement: Pinning) -> Option<Floor> {
        let at = placement.as_str();
        let name = match transport {
            Transport::HttpJson | Transport::GrpcPacked | Transport::GrpcBytes => "tcp_exchange",
            Transport::UnixSocket => "uds_exchange",
            Transport::SharedMemorySpin if self.floors.contains_key(&("spin_ping_pong", size, at)) => "spin_ping_pong",
            Transport::SharedMemorySpin | Transport::SharedMemoryFutex => "futex_ping_pong",
        };
        self.floors.get(&(name, size, at)).map(|&value| Floor { name: name.to_string(), value })
    }

    fn transport(&mut self, transport: Transport, placement: Pinning, peer: &Peer, size: usize) {
        let name = placement.as_str();
        let label = format!("{} {} {}", label(transport), model::format::bytes(size as f64), name);
        let throughput_here = placement_for_throughput(placement);
        let steps = 2 + if throughput_here { IN_FLIGHT.len() } else { 0 };
        let base = transport_params(transport, size, name);
        let not_run = |status, reason: String| Measurement {
            status,
            ..failed(model::Case::RoundTrip.as_str(), Unit::Seconds, base.clone(), reason)
        };
        if let Some(reason) = transport.not_applicable(peer) {
            self.progress.skip(steps as u64);
            self.out.push(not_run(MeasurementStatus::Skipped, reason));
            return;
        }
        // One slot: idle busy-polling slots would compete with the measured one for the core.
        let factory = match Factory::new(transport, peer, size, 1) {
            Ok(f) => f,
            Err(e) => {
                self.progress.skip(steps as u64);
                self.out.push(not_run(MeasurementStatus::Skipped, format!("{e:#}")));
                return;
            }
        };
        let bytes = clients::wire_bytes(transport, &factory.tensor);
        self.out.push(figure("wire_bytes", Unit::Bytes, base.clone(), Some(single(bytes as f64)), None));

        self.progress.step(&format!("{label}: latency"));
        let measured = on_cpu(placement.client_cpu(), || {
            let mut client = factory.client()?;
            harness::closed_loop(client.as_mut(), self.budget, &|| peer.usage())
        });
        let latency = match measured {
            Ok(m) => m,
            Err(e) => {
                self.progress.skip((steps - 1) as u64);
                self.out.push(not_run(MeasurementStatus::Failed, format!("{e:#}")));
                return;
            }
        };
        let mut closed = base.clone();
        closed.insert("load".into(), "closed".into());
        closed.insert("in_flight".into(), "1".into());
        let mut floor = self.floor_for(transport, size, placement);
        let exchange = match floor.as_ref().map(|f| f.name.as_str()) {
            Some("tcp_exchange") => Some("tcp_exchange"),
            Some("uds_exchange") => Some("uds_exchange"),
            _ => None,
        };
        let p50 = latency.recorder.stats().map(|s| s.p50);
        if let (Some(name), Some(f), Some(p50)) = (exchange, &floor, p50)
            && f.value > p50
        {
            self.exchange_floor_again(name, placement, peer, size);
            floor = self.floor_for(transport, size, placement);
        }
        self.push(model::Case::RoundTrip.as_str(), Unit::Seconds, closed.clone(), &latency.recorder, floor.clone());
        let calls = latency.recorder.len() as f64;
        self.per_request(&closed, "client", &latency.client, calls);
        self.per_request(&closed, "server", &latency.server, calls);

        // Open loop at half the closed-loop rate: how latency looks under a steady arrival rate.
        self.progress.step(&format!("{label}: open loop"));
        let mean = latency.recorder.stats().map(|s| s.mean).unwrap_or(1.0);
        let rate = 0.5 / mean;
        let open = on_cpu(placement.client_cpu(), || {
            let mut client = factory.client()?;
            harness::open_loop(client.as_mut(), rate, self.budget)
        });
        let mut open_params = base.clone();
        open_params.insert("load".into(), "open".into());
        open_params.insert("rate_rps".into(), format!("{rate:.1}"));
        match open {
            Ok(r) => self.push(model::Case::RoundTrip.as_str(), Unit::Seconds, open_params, &r, floor),
            Err(e) => {
                self.out.push(failed(model::Case::RoundTrip.as_str(), Unit::Seconds, open_params, format!("{e:#}")))
            }
        }

        if throughput_here {
            for in_flight in IN_FLIGHT {
                self.progress.step(&format!("{label}: throughput, {in_flight} in flight"));
                let mut p = base.clone();
                p.insert("in_flight".into(), in_flight.to_string());
                let factory = match Factory::new(transport, peer, size, in_flight) {
                    Ok(f) => f,
                    Err(e) => {
                        self.out.push(failed("throughput", Unit::RequestsPerSecond, p, format!("{e:#}")));
                        continue;
                    }
                };
                let make = || -> anyhow::Result<Box<dyn Client>> { factory.client() };
                match harness::throughput(&make, in_flight, self.budget, placement.client_cpu(), &|| peer.usage()) {
                    Ok((rps, calls, client, server)) => {
                        self.out.push(figure(
                            "throughput",
                            Unit::RequestsPerSecond,
                            p.clone(),
                            Some(single(rps)),
                            None,
                        ));
                        self.per_request(&p, "client", &client, calls as f64);
                        self.per_request(&p, "server", &server, calls as f64);
                    }
                    Err(e) => self.out.push(failed("throughput", Unit::RequestsPerSecond, p, format!("{e:#}"))),
                }
            }
        }
    }

    /// CPU seconds and context switches per request of one end.
    fn per_request(&mut self, base: &BTreeMap<String, String>, side: &str, usage: &Usage, calls: f64) {
        if calls <= 0.0 {
            return;
        }
        let mut p = base.clone();
        p.insert("side".into(), side.into());
        self.out.push(figure(
            model::Case::CpuPerRequest.as_str(),
            Unit::Seconds,
            p.clone(),
            Some(single(usage.cpu_s() / calls)),
            None,
        ));
        for (kind, n) in [("voluntary", usage.voluntary_switches), ("involuntary", usage.involuntary_switches)] {
            let mut p = p.clone();
            p.insert("switches".into(), kind.into());
            self.out.push(figure("context_switches_per_request", Unit::Count, p, Some(single(n as f64 / calls)), None));
        }
    }
}

/// Throughput is measured at one placement: across cores (the usual deployment), or across
/// nodes, or on the only core there is.
fn placement_for_throughput(placement: Pinning) -> bool {
    match placement {
        Pinning::DifferentCores(..) | Pinning::CrossNode => true,
        Pinning::SameCore(_) => allowed_cpus().len() < 2,
    }
}

fn label(transport: Transport) -> String {
    match transport.wait() {
        Some(wait) => format!("{} ({})", transport.as_str(), wait.as_str()),
        None => transport.as_str().to_string(),
    }
}

/// Runs `f` on a thread pinned to `cpu` (or unpinned), so pinning never leaks to the caller.
fn on_cpu<T: Send>(cpu: Option<usize>, f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if let Some(cpu) = cpu {
                    pin_thread(cpu)?;
                }
                f()
            })
            .join()
            .map_err(|_| anyhow::anyhow!("measuring thread panicked"))?
    })
}

fn params(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn transport_params(transport: Transport, size: usize, placement: &str) -> BTreeMap<String, String> {
    let mut p = params(&[
        ("transport", transport.as_str().to_string()),
        ("payload_bytes", size.to_string()),
        ("placement", placement.to_string()),
    ]);
    if let Some(wait) = transport.wait() {
        p.insert("wait".into(), wait.as_str().into());
    }
    p
}

/// A measured figure with its floor; failed when the harness took no sample.
fn figure(
    case: &str,
    unit: Unit,
    parameters: BTreeMap<String, String>,
    stats: Option<Stats>,
    floor: Option<Floor>,
) -> Measurement {
    Measurement { floor, ..super::figure(Suite::Transport, case, unit, parameters, stats) }
}

fn failed(case: &str, unit: Unit, parameters: BTreeMap<String, String>, reason: String) -> Measurement {
    Measurement {
        suite: Suite::Transport,
        case: case.into(),
        parameters,
        unit,
        status: MeasurementStatus::Failed,
        reason: Some(reason),
        stats: None,
        floor: None,
        histogram: None,
    }
}

// ---- The peer process and CPU pinning (shared by the transport and quant suites). ----

/// Runs the calling thread (and threads it spawns afterwards) on `cpu` only.
pub fn pin_thread(cpu: usize) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).with_context(|| format!("cannot pin to CPU {cpu}"))
}

/// The CPUs this thread may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => vec![],
    }
}

/// A running peer: a child `serve` process on this node, or a remote one.
pub struct Peer {
    pub addr: SocketAddr,
    /// The shared secret every TCP call to the peer carries.
    pub token: String,
    pub info: PeerInfo,
    /// Whether the peer shares this node (Unix sockets and shared memory work).
    pub local: bool,
    control: Control,
    child: Option<Child>,
}

impl Peer {
    /// Starts `measurements-agent serve` as a child, optionally pinned to `cpu`.
    pub fn spawn_local(cpu: Option<usize>) -> anyhow::Result<Peer> {
        let exe = std::env::current_exe().context("cannot find this agent's executable")?;
        let token = peer::new_token();
        let mut command = Command::new(exe);
        command.args(["serve", "--listen", "127.0.0.1:0", "--stop-on-stdin-eof"]).env(peer::TOKEN_ENV, &token);
        if let Some(cpu) = cpu {
            command.args(["--cpu", &cpu.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start the transport server process")?;
        let stdout = child.stdout.take().expect("piped");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).context("transport server did not start")?;
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("transport server said {line:?} instead of its address"))?;
        let mut peer = Peer::connect_with(addr, token, true)?;
        peer.child = Some(child);
        Ok(peer)
    }

    /// A peer on another node, started there with `measurements-agent serve --listen ADDR`,
    /// which printed the `token` it expects.
    pub fn remote(peer: &str, token: &str) -> anyhow::Result<Peer> {
        use std::net::ToSocketAddrs;
        let addr = peer
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve peer {peer}"))?
            .next()
            .with_context(|| format!("peer {peer} resolves to no address"))?;
        Peer::connect_with(addr, token.to_string(), false)
    }

    fn connect_with(addr: SocketAddr, token: String, local: bool) -> anyhow::Result<Peer> {
        let control = Control { addr, token: token.clone() };
        let info: PeerInfo = control.get("/v1/info").with_context(|| {
            format!("cannot reach the transport peer at {addr}: is `measurements-agent serve --listen {addr}` running there, with this --peer-token?")
        })?;
        Ok(Peer { addr, token, info, local, control, child: None })
    }

    /// The peer process's CPU time and context switches so far.
    pub fn usage(&self) -> anyhow::Result<Usage> {
        self.control.get("/v1/usage")
    }

    /// Asks the peer for shared-memory slots; it creates the file and says where.
    pub fn attach_shm(&self, attach: &shm::Attach) -> anyhow::Result<shm::Layout> {
        self.control.post("/v1/shm", attach)
    }

    pub fn exchange_addr(&self) -> SocketAddr {
        SocketAddr::new(self.addr.ip(), self.info.exchange_port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Control calls to a peer over plain HTTP/1.1 on a blocking socket: nothing here is timed.
struct Control {
    addr: SocketAddr,
    token: String,
}

impl Control {
    fn request(&self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<Vec<u8>> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            self.token,
            body.len()
        )?;
        stream.write_all(body)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let split = response.windows(4).position(|w| w == b"\r\n\r\n").context("malformed HTTP response")?;
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let status = head.split_whitespace().nth(1).unwrap_or("");
        let body = response[split + 4..].to_vec();
        anyhow::ensure!(status.starts_with('2'), "{method} {path}: {head} {}", String::from_utf8_lossy(&body));
        // Bodies from axum without Content-Length come chunked; ours are small and sized.
        Ok(body)
    }

    fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        Ok(serde_json::from_slice(&self.request("GET", path, b"")?)?)
    }

    fn post<T: serde::Serialize, R: serde::de::DeserializeOwned>(&self, path: &str, body: &T) -> anyhow::Result<R> {
        Ok(serde_json::from_slice(&self.request("POST", path, &serde_json::to_vec(body)?)?)?)
    }
}
