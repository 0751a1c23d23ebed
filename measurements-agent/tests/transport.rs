//! The transport suite through the real agent binary: a same-node run with its own server
//! process, a cross-node run against `measurements-agent serve` (over loopback, and across a
//! veth pair between two network namespaces where this machine lets the test make them), an
//! unreachable peer, and the upload of the figures to a real server.

mod common;

use common::text;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use model::{Measurement, MeasurementStatus, RunUpload, Unit};

fn agent() -> Command {
    let mut cmd = Command::cargo_bin("measurements-agent").unwrap();
    cmd.env_remove("HEADROOM_SERVER").env_remove("HEADROOM_TOKEN").env_remove("HEADROOM_PEER_TOKEN");
    cmd
}

fn run_transport(spool: &Path, extra: &[&str]) -> Output {
    agent().args(["run", "transport", "--quick", "--json", "--spool"]).arg(spool).args(extra).output().unwrap()
}

fn p<'a>(m: &'a Measurement, key: &str) -> &'a str {
    m.parameters.get(key).map(String::as_str).unwrap_or("")
}

/// Every figure the suite reports is finite, and positive where a zero would be impossible.
fn assert_plausible(run: &RunUpload) {
    run.validate().expect("the agent produces valid runs");
    for m in &run.measurements {
        let Some(s) = &m.stats else { continue };
        let values = [s.mean, s.p50, s.p90, s.p99, s.p999, s.ci95_low, s.ci95_high];
        assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0), "{m:?}");
        if m.unit != Unit::Count {
            assert!(s.p50 > 0.0 && s.mean > 0.0, "{} {:?} is not positive: {s:?}", m.case, m.parameters);
        }
        assert!(s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p999, "{m:?}");
    }
}

fn closed_round_trips<'a>(run: &'a RunUpload, placement: &str) -> Vec<&'a Measurement> {
    run.measurements
        .iter()
        .filter(|m| m.case == "round_trip" && p(m, "load") == "closed" && p(m, "placement") == placement)
        .collect()
}

#[test]
fn same_node_run_measures_every_transport_against_its_floor() {
    let spool = tempfile::tempdir().unwrap();
    let out = run_transport(spool.path(), &["--sizes", "1KiB,64KiB"]);
    assert!(out.status.success(), "{}", text(&out));
    let run: RunUpload = serde_json::from_slice(&out.stdout).expect("the run as JSON");
    assert_plausible(&run);
    // Not a terminal: a line per tenth of the steps ("transport  12/118  1.3s …"), then the end.
    let steps = text(&out).lines().filter(|l| l.starts_with("transport ") && l.contains('/')).count();
    assert!((2..=12).contains(&steps), "progress lines, a tenth apart: {}", text(&out));
    assert!(text(&out).contains("transport: done in"), "{}", text(&out));

    let cores = std::thread::available_parallelism().unwrap().get();
    let placements: &[&str] = if cores > 1 { &["same_core", "different_cores"] } else { &["same_core"] };
    let copy: BTreeMap<&str, f64> = run
        .measurements
        .iter()
        .filter(|m| m.case == "floor_memcpy")
        .map(|m| (p(m, "payload_bytes"), m.stats.unwrap().p50))
        .collect();
    for placement in placements {
        let trips = closed_round_trips(&run, placement);
        // 6 transports (shared memory twice: busy-poll and futex) × 2 sizes.
        assert_eq!(trips.len(), 12, "{placement}: {trips:#?}");
        for m in trips {
            assert_eq!(m.status, MeasurementStatus::Ok, "{m:?}");
            let s = m.stats.unwrap();
            let floor = m.floor.as_ref().unwrap_or_else(|| panic!("{m:?} has a floor"));
            // A floor does strictly less work than the transport beside it; the slack is for a
            // shared, noisy 2-core machine, where the two are timed seconds apart.
            assert!(floor.value <= s.p50 * 1.5, "{} {:?}: floor {floor:?} above p50 {}", m.case, m.parameters, s.p50);
            // The memcpy of a 64 KiB payload is below every transport that carries one, except
            // shared memory, which does not copy it.
            if p(m, "transport") != "shared_memory" {
                assert!(copy[p(m, "payload_bytes")] < s.p50, "{m:?} vs memcpy {copy:?}");
            }
        }
    }

    // Bytes on the wire follow the encoding: JSON text is larger than protobuf's packed floats.
    let wire = |transport: &str, size: &str| {
        run.measurements
            .iter()
            .find(|m| m.case == "wire_bytes" && p(m, "transport") == transport && p(m, "payload_bytes") == size)
            .map(|m| m.stats.unwrap().p50)
            .unwrap_or_else(|| panic!("wire bytes of {transport}"))
    };
    for size in ["1024", "65536"] {
        let payload: f64 = size.parse().unwrap();
        assert!(wire("http_json", size) > 1.5 * wire("grpc_protobuf_packed", size), "JSON beats protobuf at {size}?");
        assert!(wire("grpc_protobuf_packed", size) >= payload && wire("grpc_protobuf_bytes", size) >= payload);
        assert!(wire("unix_socket", size) >= payload && wire("shared_memory", size) < 100.0);
    }

    // Throughput at every concurrency, with CPU per request on both ends.
    let place = placements.last().unwrap();
    for in_flight in ["1", "4", "16"] {
        let n = run
            .measurements
            .iter()
            .filter(|m| m.case == "throughput" && p(m, "in_flight") == in_flight && p(m, "placement") == *place)
            .filter(|m| m.status == MeasurementStatus::Ok)
            .count();
        assert_eq!(n, 12, "throughput at {in_flight} in flight");
    }
    for side in ["client", "server"] {
        assert!(
            run.measurements.iter().any(|m| m.case == "cpu_per_request" && p(m, "side") == side),
            "{side} CPU per request"
        );
    }
    assert!(run.measurements.iter().any(|m| m.case == "round_trip" && p(m, "load") == "open"), "open loop");
    assert!(run.measurements.iter().any(|m| m.case == "timer_overhead" && m.status == MeasurementStatus::Ok));
}

/// The shared secret the tests' peers are started with.
const PEER_TOKEN: &str = "test-peer-token-0123456789abcdef";

/// `measurements-agent serve`, started the way an operator would on the other node.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(wrapper: &[&str], listen: &str) -> Serve {
        let exe = assert_cmd::cargo::cargo_bin("measurements-agent");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let mut child = cmd
            .args(["serve", "--listen", listen, "--peer-token", PEER_TOKEN])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("serve said {line:?}")).to_string();
        Serve { child, addr }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_cross_node(run: &RunUpload) {
    assert_plausible(run);
    let trips = closed_round_trips(run, "cross_node");
    for m in &trips {
        match p(m, "transport") {
            "unix_socket" | "shared_memory" => {
                assert_eq!(m.status, MeasurementStatus::Skipped, "{m:?}");
                assert!(m.reason.as_deref().unwrap_or("").contains("not applicable across nodes"), "{m:?}");
            }
            _ => {
                assert_eq!(m.status, MeasurementStatus::Ok, "{m:?}");
                assert_eq!(m.floor.as_ref().map(|f| f.name.as_str()), Some("tcp_exchange"), "{m:?}");
            }
        }
    }
    let ok = trips.iter().filter(|m| m.status == MeasurementStatus::Ok).count();
    assert_eq!(ok, 3, "HTTP+JSON and gRPC twice cross nodes");
    assert!(run.measurements.iter().all(|m| p(m, "placement") != "same_core"), "nothing measured locally as if remote");
}

#[test]
fn cross_node_run_against_a_serving_agent() {
    let serve = Serve::start(&[], "127.0.0.1:0");
    let spool = tempfile::tempdir().unwrap();
    let out = run_transport(spool.path(), &["--sizes", "1KiB", "--peer", &serve.addr, "--peer-token", PEER_TOKEN]);
    assert!(out.status.success(), "{}", text(&out));
    assert_cross_node(&serde_json::from_slice(&out.stdout).unwrap());
}

#[test]
fn an_unreachable_peer_fails_the_run_clearly() {
    let spool = tempfile::tempdir().unwrap();
    // Port 9 on loopback: nothing listens there.
    let out = run_transport(spool.path(), &["--peer", "127.0.0.1:9", "--peer-token", PEER_TOKEN]);
    assert!(!out.status.success());
    let message = text(&out);
    assert!(message.contains("cannot reach the transport peer at 127.0.0.1:9"), "{message}");
    assert!(out.stdout.is_empty(), "no run printed: {message}");
    let spooled = std::fs::read_dir(spool.path())
        .map(|d| d.filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))).count())
        .unwrap_or(0);
    assert_eq!(spooled, 0, "nothing spooled for a suite that could not start");
}

/// Two network namespaces joined by a veth pair; removed on drop.
struct Namespaces {
    names: [String; 2],
}

impl Namespaces {
    fn create() -> Result<Namespaces, String> {
        let id = std::process::id() % 10_000;
        let names = [format!("hr-a-{id}"), format!("hr-b-{id}")];
        let ns = Namespaces { names: names.clone() };
        let [a, b] = &names;
        let (va, vb) = (format!("hra{id}"), format!("hrb{id}"));
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), a.clone()],
            vec!["netns".into(), "add".into(), b.clone()],
            vec!["link", "add", &va, "type", "veth", "peer", "name", &vb].into_iter().map(String::from).collect(),
            vec!["link", "set", &va, "netns", a].into_iter().map(String::from).collect(),
            vec!["link", "set", &vb, "netns", b].into_iter().map(String::from).collect(),
            vec!["-n", a, "addr", "add", "10.231.0.1/24", "dev", &va].into_iter().map(String::from).collect(),
            vec!["-n", b, "addr", "add", "10.231.0.2/24", "dev", &vb].into_iter().map(String::from).collect(),
            vec!["-n", a, "link", "set", &va, "up"].into_iter().map(String::from).collect(),
            vec!["-n", b, "link", "set", &vb, "up"].into_iter().map(String::from).collect(),
            vec!["-n", a, "link", "set", "lo", "up"].into_iter().map(String::from).collect(),
            vec!["-n", b, "link", "set", "lo", "up"].into_iter().map(String::from).collect(),
        ];
        for step in steps {
            let out = Command::new("ip").args(&step).output().map_err(|e| format!("no `ip` command: {e}"))?;
            if !out.status.success() {
                return Err(format!("ip {}: {}", step.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
            }
        }
        Ok(ns)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

#[test]
fn cross_node_run_across_a_veth_pair_between_network_namespaces() {
    let ns = match Namespaces::create() {
        Ok(ns) => ns,
        Err(why) => {
            // Not counted as a pass of the veth path: the loopback test above covers the code,
            // and this line says in the test log that the real network stack was not crossed.
            eprintln!("SKIPPED: cannot create network namespaces here ({why})");
            return;
        }
    };
    let serve = Serve::start(&["ip", "netns", "exec", &ns.names[0]], "10.231.0.1:0");
    let spool = tempfile::tempdir().unwrap();
    let exe = assert_cmd::cargo::cargo_bin("measurements-agent");
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.names[1]])
        .arg(exe)
        .args(["run", "transport", "--quick", "--json", "--sizes", "1KiB", "--peer", &serve.addr])
        .args(["--peer-token", PEER_TOKEN, "--spool"])
        .arg(spool.path())
        .env_remove("HEADROOM_SERVER")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run: RunUpload = serde_json::from_slice(&out.stdout).unwrap();
    assert_cross_node(&run);
    drop(serve);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_figures_and_floors_are_uploaded_and_served() {
    let db = tempfile::tempdir().unwrap();
    let server = common::Server::start(db.path(), "127.0.0.1:0").await;
    let url = server.url.clone();
    let token = server.agent_token("transport-agent");
    let viewer = common::api_token(db.path(), "viewer", "viewer");

    let serve = Serve::start(&[], "127.0.0.1:0");
    let spool = tempfile::tempdir().unwrap();
    let (peer, server_url) = (serve.addr.clone(), url.clone());
    let out = tokio::task::spawn_blocking(move || {
        agent()
            .args(["run", "transport", "--quick", "--sizes", "1KiB", "--peer", &peer, "--attempts", "1"])
            .env("HEADROOM_PEER_TOKEN", PEER_TOKEN)
            .args(["--server", &server_url, "--token", &token, "--spool"])
            .arg(spool.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let http = reqwest::Client::new();
    let runs: serde_json::Value =
        http.get(format!("{url}/api/v1/runs")).bearer_auth(&viewer).send().await.unwrap().json().await.unwrap();
    let id = runs[0]["run_id"].as_str().expect("the run is listed").to_string();
    let detail: serde_json::Value =
        http.get(format!("{url}/api/v1/runs/{id}")).bearer_auth(&viewer).send().await.unwrap().json().await.unwrap();
    let measurements = detail["measurements"].as_array().expect("measurements");
    let trips: Vec<&serde_json::Value> = measurements
        .iter()
        .filter(|m| m["case"] == "round_trip" && m["status"] == "ok" && m["parameters"]["load"] == "closed")
        .collect();
    assert_eq!(trips.len(), 3, "{detail}");
    for m in trips {
        assert!(m["stats"]["p99"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(m["floor"]["name"], "tcp_exchange", "{m}");
        assert!(m["floor"]["value"].as_f64().unwrap() > 0.0, "{m}");
    }
    assert!(measurements.iter().any(|m| m["status"] == "skipped"), "skipped transports are kept with their reason");
    server.stop().await;
}

/// What anyone who reaches the peer's ports without the token gets: nothing.
#[test]
fn the_peer_lets_in_only_token_holders_and_maps_only_its_own_files() {
    use std::io::{Read, Write};
    let help = agent().args(["serve", "--help"]).output().unwrap();
    assert!(text(&help).contains("[default: 127.0.0.1:7070]"), "loopback by default: {}", text(&help));
    let serve = Serve::start(&[], "127.0.0.1:0");
    let call = |method: &str, path: &str, token: Option<&str>, body: &str| -> String {
        let mut stream = std::net::TcpStream::connect(&serve.addr).unwrap();
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    for path in ["/v1/info", "/v1/usage"] {
        assert!(call("GET", path, None, "").starts_with("HTTP/1.1 401"), "{path}");
        assert!(call("GET", path, Some("wrong-token-wrong-token"), "").starts_with("HTTP/1.1 401"), "{path}");
    }
    let infer = r#"{"request_id":1,"batch":1,"features":64,"values":[]}"#;
    assert!(call("POST", "/v1/infer", None, infer).starts_with("HTTP/1.1 401"));
    let info = call("GET", "/v1/info", Some(PEER_TOKEN), "");
    assert!(info.starts_with("HTTP/1.1 200") && !info.contains("\"pid\""), "{info}");
    // A client cannot name a file for the peer to map; the peer makes its own.
    let victim = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(victim.path(), b"precious").unwrap();
    let named = format!(r#"{{"path":"{}","slots":1,"max_batch":1,"wait":"futex"}}"#, victim.path().display());
    assert!(call("POST", "/v1/shm", Some(PEER_TOKEN), &named).starts_with("HTTP/1.1 422"));
    assert_eq!(std::fs::read(victim.path()).unwrap(), b"precious");
    let many = r#"{"slots":1000,"max_batch":1,"wait":"spin"}"#;
    assert!(call("POST", "/v1/shm", Some(PEER_TOKEN), many).starts_with("HTTP/1.1 422"), "slots are capped");
    let made = call("POST", "/v1/shm", Some(PEER_TOKEN), r#"{"slots":1,"max_batch":1,"wait":"futex"}"#);
    assert!(made.starts_with("HTTP/1.1 200") && made.contains("headroom-peer-"), "{made}");
    // The raw exchange answers nothing to a caller who does not send the token first.
    let info: serde_json::Value = serde_json::from_str(info.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let port = info["exchange_port"].as_u64().unwrap();
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut wrong = vec![b'x'; PEER_TOKEN.len()];
    wrong.extend_from_slice(&[8, 0, 0, 0, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    raw.write_all(&wrong).unwrap();
    let mut back = [0u8; 8];
    assert!(raw.read_exact(&mut back).is_err(), "the exchange answered without the token");
}
