//! The endpoint suite, run as the real agent binary against inference servers no one here
//! wrote: MLServer with its scikit-learn runtime (the Open Inference Protocol over REST and
//! gRPC), KServe's own model server (the protocol's binary tensor data extension over REST) and
//! GuideLLM's OpenAI-compatible mock server (streamed completions with set latencies). All are
//! installed by `tools/endpoint-servers/setup.sh` into virtual environments under the target
//! directory, once. Failure handling runs against a standard-library Python server that
//! answers 500s and broken streams on purpose.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;

use common::text;

use assert_cmd::cargo::CommandCargoExt;
use model::{Measurement, MeasurementStatus, RunUpload};

/// A stored latency histogram (HdrHistogram's V2 compressed encoding, base64), decoded.
fn histogram(encoded: &str) -> hdrhistogram::Histogram<u64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64");
    hdrhistogram::serialization::Deserializer::new().deserialize(&mut &bytes[..]).expect("an HdrHistogram")
}

/// The servers' virtual environments, installed on first use (a failure here fails the test:
/// these tests are never skipped).
fn servers() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("endpoint-servers");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/endpoint-servers/setup.sh");
        let status = Command::new("bash").arg(&script).arg(&dir).status().expect("bash runs");
        assert!(status.success(), "{} failed: the endpoint tests need MLServer and GuideLLM", script.display());
        dir
    })
}

/// One test at a time: each measures latencies, and two load tests on two cores would measure
/// each other.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_ready(url: &str, child: &mut Running) {
    let deadline = Instant::now() + Duration::from_secs(180);
    let client = reqwest::blocking::Client::new();
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the server exited ({status}) before {url} answered");
        }
        if client.get(url).send().is_ok_and(|r| r.status().is_success()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("{url} did not become ready in 180 s");
}

/// MLServer on free ports serving the digits classifier; its REST base URL.
fn mlserver(root: &Path) -> (Running, String) {
    let (server, url, _grpc) = mlserver_with_grpc(root);
    (server, url)
}

/// MLServer, its REST base URL and its gRPC address.
fn mlserver_with_grpc(root: &Path) -> (Running, String, String) {
    let (http, grpc, metrics) = (free_port(), free_port(), free_port());
    let models = root.join("digits");
    std::fs::create_dir_all(&models).unwrap();
    for file in ["model.joblib", "model-settings.json"] {
        std::fs::copy(servers().join("models/digits").join(file), models.join(file)).unwrap();
    }
    let settings = serde_json::json!({
        "http_port": http, "grpc_port": grpc, "metrics_port": metrics, "host": "127.0.0.1",
        "parallel_workers": 0, "debug": false,
    });
    std::fs::write(root.join("settings.json"), settings.to_string()).unwrap();
    let mut command = Command::new(servers().join("mlserver/bin/mlserver"));
    command.arg("start").arg(root);
    let url = format!("http://127.0.0.1:{http}");
    (start(command, &format!("{url}/v2/models/digits/ready")), url, format!("http://127.0.0.1:{grpc}"))
}

/// KServe's model server on free ports serving the same classifier (its coefficients); its REST
/// base URL. With `require_binary` it refuses tensors sent as JSON.
fn kserve(require_binary: bool) -> (Running, String) {
    let (http, grpc) = (free_port(), free_port());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/endpoint-servers/kserve_digits.py");
    let mut command = Command::new(servers().join("kserve/bin/python"));
    command.arg(script).arg(servers().join("models/digits/weights.npz"));
    command.args(["--http_port", &http.to_string(), "--grpc_port", &grpc.to_string()]);
    if require_binary {
        command.arg("--require-binary");
    }
    let url = format!("http://127.0.0.1:{http}");
    (start(command, &format!("{url}/v2/models/digits/ready")), url)
}

/// Starts a server quietly and waits until `ready` answers 2xx.
fn start(mut command: Command, ready: &str) -> Running {
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut running = Running(child);
    wait_ready(ready, &mut running);
    running
}

fn agent(args: &[&str], spool: &Path) -> Output {
    Command::cargo_bin("measurements-agent")
        .unwrap()
        .args(args)
        .arg("--spool")
        .arg(spool)
        .env_remove("HEADROOM_SERVER")
        .env_remove("HEADROOM_TOKEN")
        .output()
        .unwrap()
}

/// The run the agent printed with --json.
fn printed_run(out: &Output) -> RunUpload {
    assert!(out.status.success(), "{}", text(out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn spooled(spool: &Path) -> usize {
    std::fs::read_dir(spool)
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json")).count())
}

fn param<'a>(m: &'a Measurement, key: &str) -> &'a str {
    m.parameters.get(key).map(String::as_str).unwrap_or("")
}

/// The measurement of `case` in step `step`.
fn at<'a>(run: &'a RunUpload, case: &str, step: usize) -> &'a Measurement {
    run.measurements
        .iter()
        .find(|m| m.case == case && param(m, "step") == step.to_string())
        .unwrap_or_else(|| panic!("no {case} in step {step}"))
}

fn steps(run: &RunUpload) -> usize {
    run.measurements.iter().filter(|m| m.case == "endpoint_latency").count()
}

fn p(m: &Measurement) -> model::Stats {
    m.stats.unwrap_or_else(|| panic!("{} has no figures: {:?}", m.case, m.reason))
}

#[test]
fn kserve_v2_against_mlserver_discovers_the_model_sweeps_to_saturation_and_counts_an_unload() {
    let _one_at_a_time = exclusive();
    let root = tempfile::tempdir().unwrap();
    let (_server, url) = mlserver(root.path());
    let spool = tempfile::tempdir().unwrap();

    // A sweep: metadata read, inputs built from it, rates doubled until the service saturates.
    let out = agent(
        &["run", "endpoint", "--target", &url, "--protocol", "kserve-v2", "--model", "digits", "--sweep"]
            .iter()
            .chain(&["--duration", "2s", "--warmup", "1s", "--seed", "7", "--json", "--slo", "p99=50ms"])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    let run = printed_run(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let first = at(&run, "endpoint_latency", 1);
    assert_eq!(param(first, "model"), "digits");
    assert!(param(first, "server").contains("mlserver"), "{:?}", first.parameters);
    assert_eq!(param(first, "target"), url);
    assert_eq!(param(first, "protocol"), "kserve-v2");
    assert_eq!(p(at(&run, "endpoint_error_rate", 1)).mean, 0.0, "MLServer answers the built request");
    let unloaded = p(first);
    assert!(unloaded.p50 > 1e-5 && unloaded.p50 < 0.5, "unloaded p50 {} s", unloaded.p50);
    // Every latency histogram decodes and holds exactly the requests its statistics count.
    for m in run.measurements.iter().filter(|m| m.histogram.is_some()) {
        let h = histogram(m.histogram.as_ref().unwrap());
        assert_eq!(h.len(), p(m).samples, "{} step {}", m.case, param(m, "step"));
    }
    let n = steps(&run);
    // A shared node can still stall the client twice at one rate (it was retried once): the
    // sweep then ends there, marked, rather than report a saturation it did not see.
    let ended_on_the_client = param(at(&run, "endpoint_latency", n), "client_limited") == "true";
    assert!(n >= 3 || (n == 2 && ended_on_the_client), "a sweep takes several steps, got {n}");
    let gave_out = (1..=n)
        .map(|s| at(&run, "endpoint_latency", s))
        .find(|m| param(m, "saturated") == "true" || param(m, "client_limited") == "true");
    assert!(gave_out.is_some(), "the sweep goes on until the service (or, on a small node, the client) gives out");
    // Where it gave out on the client, not the service, the agent says the concurrency fitted
    // from the run is only a lower bound; where the service saturated, it does not.
    let service_gave_out = (1..=n)
        .map(|s| at(&run, "endpoint_latency", s))
        .any(|m| param(m, "saturated") == "true" && param(m, "client_limited") == "false");
    let noted = text(&out).contains("note: the sweep stopped at step");
    assert_eq!(noted, !service_gave_out, "{}", text(&out));
    assert_eq!(param(first, "saturated"), "false");
    // The schedule doubles the rate; what a Poisson schedule offers in a 2 s window varies
    // around it (a standard deviation of √(rate × 2 s) requests), so that is checked loosely.
    let nominal = |step| param(at(&run, "endpoint_latency", step), "rate").parse::<f64>().unwrap();
    let ratio = nominal(2) / nominal(1);
    assert!((1.8..=2.2).contains(&ratio), "rates double (to two significant digits): {ratio}");
    for step in 1..=n {
        let (expected, offered) = (nominal(step) * 2.0, p(at(&run, "endpoint_offered_rate", step)).mean * 2.0);
        assert!(
            (offered - expected).abs() < 5.0 * expected.sqrt() + 1.0,
            "step {step}: {offered} sent, {expected} due"
        );
    }
    assert!(run.measurements.iter().any(|m| m.case == "endpoint_goodput"), "an SLO gives goodput");
    assert_eq!(spooled(spool.path()), 1, "the run waits in the spool for a server");

    // Closed loop, as wrk and perf_analyzer load: a fixed number in flight, back to back.
    let out = agent(
        &["run", "endpoint", "--target", &url, "--protocol", "kserve-v2", "--model", "digits", "--concurrency", "1,4"]
            .iter()
            .chain(&["--duration", "2s", "--warmup", "1s", "--json"])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    let run = printed_run(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(steps(&run), 2);
    for (step, in_flight) in [(1, 1u32), (2, 4)] {
        let latency = at(&run, "endpoint_latency", step);
        assert_eq!((param(latency, "load"), param(latency, "in_flight")), ("closed", &*in_flight.to_string()));
        assert!(!latency.parameters.contains_key("rate") && !latency.parameters.contains_key("arrivals"));
        assert_eq!(p(at(&run, "endpoint_error_rate", step)).mean, 0.0);
        // Little's law: N in flight, each answered after R on average, is N / R a second (less
        // the client's own moment between an answer and the next send).
        let achieved = p(at(&run, "endpoint_achieved_rate", step)).mean;
        let little = achieved * p(latency).mean / f64::from(in_flight);
        assert!((0.7..=1.05).contains(&little), "step {step}: X·R/N = {little}: {}", text(&out));
    }
    assert!(
        !run.measurements.iter().any(|m| m.case == "endpoint_send_lag"),
        "a closed loop has no schedule to lag behind"
    );
    assert!(text(&out).contains("4 in flight, achieved"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 2);

    // The model unloaded mid-run: failures are counted by kind and the run is still stored.
    let unload = {
        let url = url.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2500));
            let client = reqwest::blocking::Client::new();
            client.post(format!("{url}/v2/repository/models/digits/unload")).send().unwrap().status()
        })
    };
    let out = agent(
        &["run", "endpoint", "--target", &url, "--protocol", "kserve-v2", "--model", "digits", "--rates", "40"]
            .iter()
            .chain(&["--duration", "3s", "--warmup", "1s", "--json"])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    assert!(unload.join().unwrap().is_success());
    let run = printed_run(&out);
    let errors: Vec<&Measurement> = run.measurements.iter().filter(|m| m.case == "endpoint_errors").collect();
    assert!(!errors.is_empty(), "requests after the unload fail: {}", text(&out));
    assert!(errors.iter().all(|m| param(m, "kind").starts_with("http_4")), "{errors:?}");
    assert!(p(at(&run, "endpoint_latency", 1)).samples > 10, "requests before the unload succeeded");
    assert!(p(at(&run, "endpoint_error_rate", 1)).mean > 0.05);
    assert_eq!(spooled(spool.path()), 3);
}

#[test]
fn kserve_v2_grpc_against_mlserver_reads_metadata_sends_raw_tensors_and_counts_status_codes() {
    let _one_at_a_time = exclusive();
    let root = tempfile::tempdir().unwrap();
    let (_server, url, grpc) = mlserver_with_grpc(root.path());
    let spool = tempfile::tempdir().unwrap();
    let load = |model: &str, rates: &str, duration: &str| {
        agent(
            &["run", "endpoint", "--target", &grpc, "--protocol", "kserve-v2-grpc", "--model", model, "--rates", rates]
                .iter()
                .chain(&["--duration", duration, "--warmup", "1s", "--json"])
                .copied()
                .collect::<Vec<_>>(),
            spool.path(),
        )
    };

    // Inputs built from ModelMetadata; every request answered OK.
    let out = load("digits", "20,40", "2s");
    let run = printed_run(&out);
    let first = at(&run, "endpoint_latency", 1);
    assert_eq!(param(first, "protocol"), "kserve-v2-grpc");
    assert_eq!(param(first, "model"), "digits");
    assert!(param(first, "server").contains("mlserver"), "ServerMetadata names the server: {:?}", first.parameters);
    assert_eq!(param(first, "target"), grpc);
    for step in 1..=2 {
        assert_eq!(p(at(&run, "endpoint_error_rate", step)).mean, 0.0, "MLServer answers OK: {}", text(&out));
        let latency = at(&run, "endpoint_latency", step);
        let h = histogram(latency.histogram.as_ref().unwrap());
        assert_eq!(h.len(), p(latency).samples);
        assert!(p(latency).p50 > 1e-5 && p(latency).p50 < 0.5, "step {step}: p50 {} s", p(latency).p50);
    }
    assert!(p(at(&run, "endpoint_achieved_rate", 2)).mean > 20.0, "40/s offered: {}", text(&out));

    // A model the server does not have: its answer to ModelMetadata, named; nothing spooled.
    let before = spooled(spool.path());
    let out = load("no-such-model", "5", "1s");
    assert!(!out.status.success());
    assert!(text(&out).contains("ModelMetadata for 'no-such-model'"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), before);

    // The model unloaded mid-run: the failures are counted by gRPC status, the run is stored.
    let unload = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        let client = reqwest::blocking::Client::new();
        client.post(format!("{url}/v2/repository/models/digits/unload")).send().unwrap().status()
    });
    let out = load("digits", "40", "3s");
    assert!(unload.join().unwrap().is_success());
    let run = printed_run(&out);
    let errors: Vec<&Measurement> = run.measurements.iter().filter(|m| m.case == "endpoint_errors").collect();
    assert!(!errors.is_empty(), "requests after the unload fail: {}", text(&out));
    assert!(errors.iter().all(|m| param(m, "kind").starts_with("grpc_")), "{errors:?}");
    assert!(p(at(&run, "endpoint_latency", 1)).samples > 10, "requests before the unload succeeded");
    assert_eq!(spooled(spool.path()), before + 1);
}

#[test]
fn kserve_v2_sends_raw_tensors_to_kserves_server_with_the_binary_extension() {
    let _one_at_a_time = exclusive();
    // The server refuses JSON tensors, so a step without errors proves the binary body arrived
    // and was decoded by KServe's own parser into the model's 64 features.
    let (_server, url) = kserve(true);
    let spool = tempfile::tempdir().unwrap();
    let load = |encoding: &str| {
        let args = ["run", "endpoint", "--target", &url, "--protocol", "kserve-v2", "--model", "digits"];
        let more = ["--rates", "20", "--duration", "2s", "--warmup", "1s", "--tensor-data", encoding, "--json"];
        agent(&args.iter().chain(&more).copied().collect::<Vec<_>>(), spool.path())
    };

    let out = load("binary");
    let run = printed_run(&out);
    let latency = at(&run, "endpoint_latency", 1);
    assert_eq!(param(latency, "tensor_data"), "binary");
    assert!(param(latency, "server").contains("kserve"), "{:?}", latency.parameters);
    assert_eq!(p(at(&run, "endpoint_error_rate", 1)).mean, 0.0, "every binary request answered: {}", text(&out));
    assert!(p(latency).samples >= 20, "{}", text(&out));

    // JSON tensors reach the same server and are refused, each counted by its status.
    let out = load("json");
    let run = printed_run(&out);
    assert!(text(&out).contains("every probe request failed (http_400 × 13)"), "the probe says why: {}", text(&out));
    assert_eq!(param(at(&run, "endpoint_latency", 1), "tensor_data"), "json");
    assert_eq!(p(at(&run, "endpoint_error_rate", 1)).mean, 1.0, "{}", text(&out));
    let refused = run.measurements.iter().find(|m| m.case == "endpoint_errors").expect("errors counted");
    assert_eq!(param(refused, "kind"), "http_400");

    // KServe does not list the extension in /v2, so `auto` sends JSON.
    let run = printed_run(&load("auto"));
    assert_eq!(param(at(&run, "endpoint_latency", 1), "tensor_data"), "json");

    // The option is refused where it means nothing, naming itself.
    let out = agent(
        &["run", "endpoint", "--target", &url, "--protocol", "http-json", "--rates", "1", "--tensor-data", "binary"],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--tensor-data is for kserve-v2"), "{}", text(&out));
}

#[test]
fn http_json_against_mlserver_is_uploaded_with_its_histograms() {
    let _one_at_a_time = exclusive();
    let root = tempfile::tempdir().unwrap();
    let (_server, url) = mlserver(root.path());
    let body = root.path().join("request.json");
    let pixels: Vec<f64> = (0..64).map(|i| f64::from(i % 17)).collect();
    let request =
        serde_json::json!({"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP64", "data": pixels}]});
    std::fs::write(&body, request.to_string()).unwrap();
    let infer = format!("{url}/v2/models/digits/infer");
    let spool = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(common::Server::start(db.path(), "127.0.0.1:0"));
    let server_url = server.url.clone();
    let token = server.agent_token("endpoint-agent");
    let body = body.to_str().unwrap();
    let out = agent(
        &["run", "endpoint", "--target", &infer, "--protocol", "http-json", "--input", body, "--rates", "10,25,50,25"]
            .iter()
            .chain(&["--duration", "2s", "--warmup", "1s", "--server", &server_url, "--token", &token])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    // MLServer keeps up with 50/s: the agent says no step saturated it (unless one did, on a
    // busy machine), naming the highest rate.
    let saturated = text(&out).lines().any(|l| l.contains(" — saturated") && !l.contains("CLIENT-LIMITED"));
    let noted = text(&out).contains("note: no step saturated the service (the highest rate was 50.0/s)");
    assert_eq!(noted, !saturated, "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0, "uploaded: {}", text(&out));
    let runs = runtime.block_on(server.runs());
    let run_id = runs[0]["run_id"].as_str().expect("a run id").to_string();
    let stored: model::RunDetail = serde_json::from_value(runtime.block_on(server.run(&run_id))).unwrap();
    let latency = stored.measurements.iter().find(|m| m.case == "endpoint_latency").unwrap();
    let h = histogram(latency.histogram.as_ref().expect("the histogram is stored"));
    assert_eq!(h.len(), p(latency).samples);
    let achieved = stored.measurements.iter().find(|m| m.case == "endpoint_achieved_rate").unwrap();
    let achieved = p(achieved).mean;
    assert!((5.0..20.0).contains(&achieved), "10/s offered first, {achieved}/s achieved");
    let errors = stored.measurements.iter().find(|m| m.case == "endpoint_error_rate").unwrap();
    assert_eq!(p(errors).mean, 0.0);

    // The run page sets each step's measurement beside the model's prediction, and the
    // Planner's data offers the service, calibrated.
    let viewer = common::api_token(db.path(), "manager", "viewer");
    let http = reqwest::blocking::Client::new();
    let page = http.get(format!("{server_url}/runs/{}", run_id)).bearer_auth(&viewer).send().unwrap();
    assert!(page.status().is_success());
    let page = page.text().unwrap();
    assert!(page.contains("Your service under load"), "{page}");
    let table = page.split("endpoint-steps\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    assert_eq!(table.matches("<tr").count(), 1 + 4, "a header row and a row per step: {table}");
    assert!(page.contains("data-out=\"model-error\""));
    // 25/s ran twice: how far the P99 moved between those steps, chance and drift together. A
    // step the client could not keep to its schedule (on a busy machine) is not judged, and
    // then nothing is repeated.
    let drift = page.split("data-out=\"model-drift\">").nth(1).and_then(|t| t.split("</p>").next()).unwrap_or("");
    let trusted_at_25 = stored
        .measurements
        .iter()
        .filter(|m| m.case == "endpoint_latency" && param(m, "rate") == "25" && param(m, "client_limited") == "false")
        .count();
    if trusted_at_25 == 2 {
        assert!(drift.contains("over 2 steps at 25/s (+"), "{page}");
    } else {
        assert!(!page.contains("data-out=\"model-drift\""), "one trusted step at 25/s repeats nothing: {page}");
    }
    // Each step's P99 beside where chance alone would put it were the service the model's queue,
    // simulated by the server for this page.
    assert!(table.contains("P99 by chance"), "{table}");
    assert!(["inside", "above", "below"].iter().any(|side| table.contains(&format!("ms, {side}"))), "{table}");
    assert!(page.contains("data-out=\"model-noise\"") && page.contains("90 times in 100"), "{page}");
    let fleet: serde_json::Value = http
        .post(format!("{server_url}/srv/measured_nodes"))
        .bearer_auth(&viewer)
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let service = &fleet["services"][0];
    assert_eq!(service["target"], infer.as_str());
    assert_eq!(service["protocol"], "http-json");
    assert!(service["concurrency"].as_u64().unwrap() >= 1, "{service}");
    let mean = service["service_mean_s"].as_f64().unwrap();
    assert!(mean > 1e-4 && mean < 0.5, "{service}");

    // Right-sizing sizes that service, not the reference model, in replicas priced by the hour.
    let query = format!("service={}&rate=20&slo=1000&svc_type=c7i.large&svc_price=0.5", run_id);
    let page = http.get(format!("{server_url}/right-sizing?{query}")).bearer_auth(&viewer).send().unwrap();
    assert!(page.status().is_success());
    let page = page.text().unwrap();
    let card = page.split("data-out=\"recommendation\"").nth(1).and_then(|t| t.split("</div>").next()).unwrap_or("");
    assert!(card.contains("Cheapest configuration of your service"), "{page}");
    assert!(card.contains("× c7i.large") && card.contains("as deployed"), "{card}");
    assert!(card.contains("the M/G/c model"), "the latency is marked as the model's: {card}");
    assert!(page.contains(&format!("your service {infer}, load-tested in run {}", &run_id.to_string()[..8])));
    runtime.block_on(server.stop());
}

/// GuideLLM's mock OpenAI server with a set time to first token and gap between tokens.
fn mock_llm(ttft_ms: u32, itl_ms: u32, tokens: u32) -> (Running, String) {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/endpoint-servers/mock_llm.py");
    let mut command = Command::new(servers().join("guidellm/bin/python"));
    command.arg(script).args([port.to_string(), ttft_ms.to_string(), itl_ms.to_string(), tokens.to_string()]);
    command.env("HF_HUB_OFFLINE", "1");
    let url = format!("http://127.0.0.1:{port}");
    (start(command, &format!("{url}/v1/models")), url)
}

#[test]
fn openai_streams_against_guidellms_mock_measure_the_latencies_it_was_told() {
    let _one_at_a_time = exclusive();
    // Told latencies well above the mock's own overhead per token (its asyncio sleeps and JSON
    // writes add 0.5–1 ms on a busy 2-core machine), so 10 % measures the client, not the mock.
    let (ttft_told, itl_told) = (0.200, 0.025);
    let (_server, url) = mock_llm(200, 25, 16);
    let spool = tempfile::tempdir().unwrap();
    for protocol in ["openai-chat", "openai-completions"] {
        let out = agent(
            &["run", "endpoint", "--target", &url, "--protocol", protocol, "--rates", "4", "--max-tokens", "16"]
                .iter()
                .chain(&["--duration", "3s", "--warmup", "1s", "--json", "--prompt-words", "20-60"])
                .copied()
                .collect::<Vec<_>>(),
            spool.path(),
        );
        let run = printed_run(&out);
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        let latency = p(at(&run, "endpoint_latency", 1));
        let ttft = p(at(&run, "endpoint_ttft", 1));
        let itl = p(at(&run, "endpoint_itl", 1));
        let within = |measured: f64, told: f64| (measured - told).abs() <= 0.1 * told;
        assert!(within(ttft.p50, ttft_told), "{protocol}: TTFT p50 {} s, told {ttft_told} s", ttft.p50);
        assert!(within(itl.p50, itl_told), "{protocol}: ITL p50 {} s, told {itl_told} s", itl.p50);
        let tokens = at(&run, "endpoint_output_tokens", 1);
        assert_eq!(param(tokens, "token_count_source"), "usage", "the mock sends usage");
        assert_eq!(p(tokens).mean, 16.0 * latency.samples as f64, "{protocol}: 16 tokens per answer");
        assert_eq!(param(tokens, "model"), "mock-llm", "the model comes from /v1/models");
        let tpot = p(at(&run, "endpoint_tpot", 1));
        assert!(within(tpot.p50, itl_told), "{protocol}: TPOT p50 {} s, told {itl_told} s", tpot.p50);
    }
}

/// A server that answers every POST with a 500, or (`/v1/chat/completions`) a broken stream.
const FAULTY: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get('content-length', 0)))
        if self.path == '/v1/chat/completions':
            body = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: {broken\n\n'
            self.send_response(200); self.send_header('content-type', 'text/event-stream')
        else:
            body = b'{"error": "boom"}'
            self.send_response(500); self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        self.send_response(200); self.send_header('content-length', '2'); self.end_headers(); self.wfile.write(b'{}')
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"#;

#[test]
fn bad_targets_and_arguments_are_named_and_failures_are_counted() {
    let _one_at_a_time = exclusive();
    let spool = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, "{}").unwrap();
    let body = body.to_str().unwrap();

    // Nothing listens: a clear error, nothing spooled.
    let nowhere = format!("http://127.0.0.1:{}/infer", free_port());
    let out = agent(
        &["run", "endpoint", "--target", &nowhere, "--protocol", "http-json", "--input", body, "--rates", "5"],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("cannot reach"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0);

    // Arguments that cannot describe a load test name themselves.
    let out =
        agent(&["run", "endpoint", "--target", &nowhere, "--protocol", "http-json", "--rates", "0"], spool.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--rates"), "{}", text(&out));
    let out = agent(
        &["run", "endpoint", "--target", &nowhere, "--protocol", "http-json", "--concurrency", "0"],
        spool.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--concurrency takes requests in flight from 1 to 4096"), "{}", text(&out));
    let out = agent(
        &["run", "endpoint", "--target", &nowhere, "--protocol", "http-json", "--concurrency", "4", "--rates", "5"],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("drop --rates, --sweep and --arrivals"), "{}", text(&out));
    let out = agent(
        &[
            "run",
            "endpoint",
            "--target",
            &nowhere,
            "--protocol",
            "http-json",
            "--input",
            body,
            "--slots",
            "4",
            "--rates",
            "5",
        ],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--slots is for openai-chat and openai-completions"), "{}", text(&out));
    let out = agent(
        &["run", "endpoint", "--target", &nowhere, "--protocol", "openai-chat", "--slots", "0", "--rates", "5"],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--slots must be 1 to 4096"), "{}", text(&out));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "offset_s\n0.0\n-0.5\n").unwrap();
    let arrivals = format!("trace:{}", trace.display());
    let out = agent(
        &["run", "endpoint", "--target", &nowhere, "--protocol", "http-json", "--arrivals", &arrivals],
        spool.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("line 3: offset -0.5 is negative"), "{}", text(&out));
    let out = agent(&["run", "endpoint", "--protocol", "http-json", "--rates", "5"], spool.path());
    assert!(text(&out).contains("--target URL"), "{}", text(&out));
    let secret = "http://user:hunter2@127.0.0.1:9/infer";
    let out = agent(&["run", "endpoint", "--target", secret, "--protocol", "http-json", "--rates", "5"], spool.path());
    assert!(text(&out).contains("must not carry credentials") && !text(&out).contains("hunter2"), "{}", text(&out));
    let nowhere_grpc = format!("http://127.0.0.1:{}", free_port());
    let out = agent(
        &["run", "endpoint", "--target", &nowhere_grpc, "--protocol", "kserve-v2-grpc", "--model", "m", "--rates", "5"],
        spool.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("cannot reach"), "{}", text(&out));
    assert_eq!(spooled(spool.path()), 0);

    // A target that answers 500, and one whose stream breaks: failures counted, runs stored.
    let port = free_port();
    let mut command = Command::new("python3");
    command.args(["-c", FAULTY, &port.to_string()]);
    let base = format!("http://127.0.0.1:{port}");
    let _faulty = start(command, &base);
    let out = agent(
        &["run", "endpoint", "--target", &format!("{base}/infer"), "--protocol", "http-json", "--input", body]
            .iter()
            .chain(&["--rates", "20", "--duration", "1s", "--warmup", "0.5s", "--json"])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    let run = printed_run(&out);
    let latency = at(&run, "endpoint_latency", 1);
    assert_eq!(latency.status, MeasurementStatus::Failed);
    assert!(latency.reason.as_deref().unwrap_or("").starts_with("no request succeeded: http_500 ×"), "{latency:?}");
    assert_eq!(param(at(&run, "endpoint_errors", 1), "kind"), "http_500");
    assert_eq!(p(at(&run, "endpoint_error_rate", 1)).mean, 1.0);
    let out = agent(
        &["run", "endpoint", "--target", &base, "--protocol", "openai-chat", "--model", "m", "--rates", "20"]
            .iter()
            .chain(&["--duration", "1s", "--warmup", "0.5s", "--json"])
            .copied()
            .collect::<Vec<_>>(),
        spool.path(),
    );
    let run = printed_run(&out);
    assert_eq!(param(at(&run, "endpoint_errors", 1), "kind"), "malformed_stream");
    assert_eq!(spooled(spool.path()), 2, "both runs are kept");
}
