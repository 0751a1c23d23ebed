//! The transport benchmark's moving parts: the wire format, the server end (`serve`), the
//! clients of every transport, shared memory, and the measuring harness. The suite that runs
//! them and turns them into measurements is `suites::transport`.

pub mod clients;
pub mod harness;
pub mod os;
pub mod peer;
pub mod shm;
pub mod wire;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use self::os::Usage;
use self::peer::PeerInfo;

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
