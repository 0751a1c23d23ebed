//! The LLM planning model against llama.cpp's OpenAI-compatible server serving a tiny
//! Llama-architecture model (random weights, real compute), both built by
//! `tools/llm-server/setup.sh` under the target directory, once: the KV cache the memory model
//! predicts is the one the server allocates and holds, and the engine fitted from the agent's
//! load test is the one the server itself reports.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use common::text;
use model::plan::llm::Engine;
use model::plan::llm::fit::{check, steps};
use model::plan::llm::memory::{LlmMemoryInput, LlmShape, fit};
use model::plan::llm::simulate::sampling;
use model::plan::memory::Precision;
use model::units::{Bytes, Seconds};
use model::{RunUpload, Suite};

/// A stored latency histogram (HdrHistogram's V2 compressed encoding, base64), decoded.
fn histogram(encoded: &str) -> hdrhistogram::Histogram<u64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64");
    hdrhistogram::serialization::Deserializer::new().deserialize(&mut &bytes[..]).expect("an HdrHistogram")
}

/// The server and the model, built on first use (a failure fails the test: never skipped).
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::tool_venv("llm-server"))
}

/// One test at a time: each measures latencies on the same two cores.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

const SLOTS: u32 = 8;
const CONTEXT: u32 = 4096;

/// llama-server on a free port, its log in `log`; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `verbosity` 4 logs the KV cache's size; 0 keeps a load test's server quiet.
fn llama_server(log: &Path, verbosity: u8) -> Server {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = built();
    // One thread for the model, as a GPU is one device; prompts are not cached between
    // requests (the planning model does not model prefix caching); EOS never ends an answer
    // early, so every request generates max_tokens.
    let args = ["-c", &CONTEXT.to_string(), "-np", &SLOTS.to_string(), "-t", "1", "-tb", "1"];
    let mut command = Command::new(dir.join("bin/llama-server"));
    command
        .arg("-m")
        .arg(dir.join("models/tiny.gguf"))
        .args(args)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--ignore-eos", "--no-webui"])
        .args(["--no-cache-prompt", "--cache-ram", "0", "-lv", &verbosity.to_string(), "--metrics"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    let mut server =
        Server { child: command.spawn().expect("llama-server starts"), url: format!("http://127.0.0.1:{port}") };
    let client = reqwest::blocking::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("llama-server exited ({status}): {}", std::fs::read_to_string(log).unwrap_or_default());
        }
        if client.get(format!("{}/health", server.url)).send().is_ok_and(|r| r.status().is_success()) {
            return server;
        }
        assert!(Instant::now() < deadline, "llama-server did not become ready in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// llama.cpp's own counters (`--metrics`, Prometheus text): each `llamacpp:NAME VALUE` line.
fn counters(url: &str) -> std::collections::HashMap<String, f64> {
    let body =
        reqwest::blocking::get(format!("{url}/metrics")).and_then(|r| r.text()).expect("llama-server's /metrics");
    body.lines()
        .filter_map(|line| line.strip_prefix("llamacpp:")?.split_once(' '))
        .filter_map(|(name, value)| Some((name.to_string(), value.trim().parse().ok()?)))
        .collect()
}

/// The model's shape as the setup wrote it.
fn shape() -> LlmShape {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(built().join("models/tiny.json")).unwrap()).unwrap();
    let n = |key: &str| json[key].as_u64().unwrap_or_else(|| panic!("tiny.json has no {key}"));
    LlmShape {
        parameters: n("parameters") as f64,
        layers: n("layers") as u32,
        kv_heads: n("kv_heads") as u32,
        head_dim: n("head_dim") as u32,
        weights: Precision::Fp16,
        kv: Precision::Fp16,
    }
}

/// `words` words of ordinary text.
fn prompt(words: usize) -> String {
    "the model reads this sentence and then some more of it "
        .split(' ')
        .cycle()
        .take(words)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Tokens the server's tokenizer makes of `text`.
fn tokens(url: &str, text: &str) -> usize {
    let body = serde_json::json!({"content": text});
    let answer: serde_json::Value =
        reqwest::blocking::Client::new().post(format!("{url}/tokenize")).json(&body).send().unwrap().json().unwrap();
    answer["tokens"].as_array().expect("/tokenize answers tokens").len()
}

/// The longest prompt of ordinary text with at most `limit` tokens.
fn prompt_within(url: &str, limit: usize) -> String {
    let words = (1..2000).take_while(|&w| tokens(url, &prompt(w)) <= limit).last().expect("one word fits");
    prompt(words)
}

fn complete(url: &str, prompt: &str, max_tokens: u32) -> (u16, serde_json::Value) {
    let client = reqwest::blocking::Client::new();
    let body = serde_json::json!({"prompt": prompt, "max_tokens": max_tokens, "stream": false});
    let response = client.post(format!("{url}/v1/completions")).json(&body).send().unwrap();
    (response.status().as_u16(), response.json().unwrap_or(serde_json::Value::Null))
}

#[test]
fn the_kv_cache_the_memory_model_predicts_is_the_one_llama_cpp_allocates_and_holds() {
    let _one = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = llama_server(&log, 4);
    let shape = shape();

    // Bytes: the server logs the cache it allocated for CONTEXT tokens.
    let logged = BufReader::new(std::fs::File::open(&log).unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            let size = line.split("llama_kv_cache: size =").nth(1)?;
            size.split_whitespace().next()?.parse::<f64>().ok()
        })
        .expect("llama-server logs its KV cache size");
    let predicted = shape.kv_bytes_per_token(1) * f64::from(CONTEXT);
    assert!(
        (predicted.0 / 1048576.0 - logged).abs() < 0.01,
        "predicted {} MiB, llama.cpp allocated {logged} MiB",
        predicted.0 / 1048576.0
    );

    // Sequences: a device with room for the weights and that cache holds SLOTS sequences of
    // CONTEXT / SLOTS tokens, which is what the server gives each slot.
    let per_sequence = f64::from(CONTEXT / SLOTS);
    let memory = LlmMemoryInput {
        shape,
        device_memory: shape.weight_bytes(1) + predicted,
        tensor_parallel: 1,
        activations: Bytes(0.0),
        headroom: 0.0,
        tokens_per_sequence: per_sequence,
    };
    let fitted = fit(&memory).unwrap();
    let props: serde_json::Value = reqwest::blocking::get(format!("{}/props", server.url)).unwrap().json().unwrap();
    assert_eq!(u64::from(fitted.max_sequences), props["total_slots"].as_u64().unwrap(), "{props}");
    assert_eq!(props["default_generation_settings"]["n_ctx"].as_f64(), Some(fitted.kv_tokens / f64::from(SLOTS)));

    // Held: SLOTS requests that fill nearly a slot each (prompt and answer) are served at once;
    // a prompt longer than a slot is refused, with a message that says so.
    let per_slot = (CONTEXT / SLOTS) as usize;
    let near_full = prompt_within(&server.url, per_slot - 100 - 2);
    let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..SLOTS).map(|_| s.spawn(|| complete(&server.url, &near_full, 100))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["usage"]["completion_tokens"], 100, "{body}");
        assert!(body["usage"]["total_tokens"].as_u64().unwrap() > (per_slot as u64) * 9 / 10, "{body}");
    }
    let too_long = prompt_within(&server.url, per_slot + 50);
    assert!(tokens(&server.url, &too_long) > per_slot);
    let (status, body) = complete(&server.url, &too_long, 8);
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("context"), "{body}");

    // Slots stated with --slots win, and a server that reports others is named beside them.
    let spool = tempfile::tempdir().unwrap();
    let stated = SLOTS * 4;
    let out = Command::cargo_bin("measurements-agent")
        .unwrap()
        .args(["run", "endpoint", "--target", &server.url, "--protocol", "openai-completions"])
        .args(["--rates", "2", "--duration", "1s", "--warmup", "500ms", "--max-tokens", "4", "--json"])
        .args(["--slots", &stated.to_string(), "--spool"])
        .arg(spool.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let said = format!("{stated} slots as stated (the server reports {SLOTS}; the stated count is used)");
    assert!(text(&out).contains(&said), "{}", text(&out));
    let run: RunUpload = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let parameters = &run.measurements.iter().find(|m| m.suite == Suite::Endpoint).unwrap().parameters;
    assert_eq!(parameters.get("slots"), Some(&stated.to_string()), "{parameters:?}");
    assert_eq!(parameters.get("slots_from").map(String::as_str), Some("stated"), "{parameters:?}");
}

#[test]
fn the_engine_fitted_from_a_load_test_is_the_one_llama_cpp_reports() {
    let _one = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let server = llama_server(&dir.path().join("server.log"), 0);
    let spool = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let headroom = runtime.block_on(common::Server::start(db.path(), "127.0.0.1:0"));
    let token = headroom.agent_token("llm-agent");
    // What llama.cpp measures inside itself for one request of the test's mean lengths, alone:
    // three before the load test (after one to warm up) and three after, because this shared
    // VM's speed drifts over the minutes between (a fit 27 % above the time of one request
    // taken after the load test failed a CI run while a build shared the machine).
    let reference = |url: &str| -> Vec<(f64, f64)> {
        (0..3)
            .map(|_| {
                let (status, body) = complete(url, &prompt(60), 32);
                assert_eq!(status, 200, "{body}");
                let ms = |key: &str| body["timings"][key].as_f64().unwrap() * 1e-3;
                (ms("prompt_per_token_ms"), ms("predicted_per_token_ms"))
            })
            .collect()
    };
    complete(&server.url, &prompt(60), 32);
    let mut alone = reference(&server.url);
    // The rates, as fractions of what this machine's llama.cpp can serve: fixed rates (0.5, 1.5,
    // 3 and 4.5/s) put the last step past the model's validated load on a slower VM, leaving
    // too few steps to check, or just under it, where the prediction is least sure (TTFT p99
    // 1 725 ms predicted against 834 ms measured at 4.63/s in a CI run). The capacity as
    // `Engine::capacity` reads it with a decode iteration taking one sequence's time alone:
    // one request costs its output tokens' iterations and its prompt's tokens. llama.cpp's own
    // timings leave out HTTP, streaming and sampling, which the fit finds (9.2/s estimated, 6.2/s
    // fitted in one run here), so the last step is at 0.38 of the estimate: about 55-60 % of the
    // fitted capacity. At 0.45 (about 70 %) a CI run predicted 852 ms against 278 ms measured:
    // the model's error near saturation is the README's open point, not what this test holds.
    let (prompt_s, decode_s) =
        (alone.iter().map(|r| r.0).sum::<f64>() / 3.0, alone.iter().map(|r| r.1).sum::<f64>() / 3.0);
    let alone_engine = Engine {
        fixed: Seconds(0.0),
        per_sequence: Seconds(decode_s),
        per_prompt_token: Seconds(prompt_s),
        slots: SLOTS,
    };
    let capacity = alone_engine.capacity(tokens(&server.url, &prompt(60)) as f64, 32.0);
    let rates = [0.06, 0.17, 0.28, 0.38].map(|f| format!("{:.2}", f * capacity)).join(",");
    eprintln!("about {capacity:.1} requests/s at most; rates {rates}");
    // And what it measures inside itself during the load test: a 2-vCPU VM slows by tens of
    // per cent while the load test's client shares its cores, which the requests timed alone,
    // before and after, do not see (a fit 56 % above the slowest of those failed a CI run).
    let before = counters(&server.url);
    let out = Command::cargo_bin("measurements-agent")
        .unwrap()
        .args(["run", "endpoint", "--target", &server.url, "--protocol", "openai-completions"])
        // Long enough steps for a p99 of TTFT to be more than the largest of a few dozen.
        .args(["--rates", &rates, "--duration", "30s", "--warmup", "3s", "--max-tokens", "32"])
        // A send 25 ms late (where a first token takes 70 ms and more) leaves the arrivals as
        // Poisson as they were; the default 10 ms marked a 120-second step at 0.7/s untrusted
        // for one send 10.9 ms late, and a step too few fails this test.
        .args(["--max-send-lag", "25ms"])
        .args(["--prompt-words", "40-80", "--json", "--server", &headroom.url, "--token", &token, "--spool"])
        .arg(spool.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run: RunUpload = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let steps = steps(&run.measurements);
    assert_eq!(steps.len(), 4, "{}", text(&out));
    assert!(steps.iter().all(|s| s.output_tokens == 32.0), "every answer is max_tokens long: {steps:?}");
    let check = check(&steps, SLOTS).expect("a trusted step");
    let engine = check.calibration.engine;
    for p in &check.predictions {
        eprintln!(
            "step {} at {:.2}/s: TTFT p99 {:.1} ms measured, {} predicted; ITL p99 {:.2} ms measured, {} predicted",
            p.step,
            p.offered,
            p.measured_ttft_p99 * 1e3,
            p.ttft_p99.map_or("unbounded".into(), |v| format!("{:.1} ms", v * 1e3)),
            p.measured_itl_p99 * 1e3,
            p.itl_p99.map_or("unbounded".into(), |v| format!("{:.2} ms", v * 1e3)),
        );
    }
    eprintln!("fitted {engine:?}; mean |error| TTFT p99 {:?}, ITL p99 {:?}", check.mape_ttft_p99, check.mape_itl_p99);

    let after = counters(&server.url);
    let during = |seconds: &str, count: &str| (after[seconds] - before[seconds]) / (after[count] - before[count]);
    let (prompt_loaded, token_loaded) = (
        during("prompt_seconds_total", "prompt_tokens_total"),
        during("tokens_predicted_seconds_total", "tokens_predicted_total"),
    );
    eprintln!(
        "llama.cpp during the load test: a prompt token {prompt_loaded:.6} s, an output token {token_loaded:.6} s"
    );
    assert!(prompt_loaded > 0.0 && token_loaded > 0.0, "llama.cpp counted the load test: {before:?} → {after:?}");
    alone.extend(reference(&server.url));
    // llama.cpp's own figures, alone before and after the load test.
    let range = |pick: fn(&(f64, f64)) -> f64| {
        alone.iter().map(pick).fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)))
    };
    // Within the tolerance of the range llama.cpp reported alone, before and after, and during.
    let within = |fitted: f64, (lo, hi): (f64, f64), tolerance: f64| {
        fitted >= lo * (1.0 - tolerance) && fitted <= hi * (1.0 + tolerance)
    };
    let (per_prompt_token, per_token) = (range(|r| r.0), range(|r| r.1));
    let one = engine.fixed.0 + engine.per_sequence.0;
    eprintln!("a decode iteration: fitted {one} s, llama.cpp {per_token:?} s");
    // One sequence's iteration as fitted lies between llama.cpp's own counts: not below its
    // time per token alone (less 25 %), not above its time per token during the load test
    // (plus 10 %), which is an iteration of the batch then, other requests' prompts read in
    // some, on cores the load test's client shares. Held to the times alone instead (+35 %),
    // it failed a CI run at 2.47 ms against 1.12-1.58 ms: the load test's iterations come out
    // 4-56 % above those timed alone before and after it on these 2-core VMs (3.07 ms against
    // 1.37-2.24 ms alone and 4.76 ms during, in a later run).
    assert!(
        one >= per_token.0 * 0.75 && one <= token_loaded * 1.1,
        "a decode iteration: fitted {one} s, llama.cpp {per_token:?} s alone, {token_loaded} s a token during the load test"
    );
    // The fitted prompt cost also carries what happens before the first token outside the
    // model (HTTP, tokenizing, the first sampling), so it is a little above the server's, alone
    // or during the load test.
    let per_prompt_token = (per_prompt_token.0.min(prompt_loaded), per_prompt_token.1.max(prompt_loaded));
    assert!(
        within(engine.per_prompt_token.0, per_prompt_token, 0.35),
        "a prompt token: fitted {} s, llama.cpp {per_prompt_token:?} s",
        engine.per_prompt_token.0
    );
    // Three steps are counted, the lowest being the calibration's; a step the client marked
    // untrusted (its sends fell behind: on 2026-12-07 one CI run of three on this shared 2-core
    // VM lost step 1 at 0.97/s so) moves the calibration to the next and leaves one fewer to
    // count, never fewer than two. Steps lost for any other reason fail here.
    let untrusted = steps.iter().filter(|s| !s.step.trusted()).count();
    let counted = check.predictions.iter().filter(|p| p.counted).count();
    assert!(counted >= 2 && counted + untrusted >= 3, "{counted} counted, {untrusted} untrusted: {check:?}");
    // The model against the real server, at the three loaded rates: README states the errors
    // measured. A p99 read off 30 seconds of requests is itself unsure, the more so near
    // capacity: the same run simulated 100 times as the scheduler the model describes, with the
    // engine fitted on it, each replicate fitted and checked as this one, gives the mean |error|
    // a run reaches when the server is that scheduler (sampling noise, plus the approximation's
    // error and the fit's). A fixed bound of 0.40 failed a CI run at 0.67 (115.9 / 164.8 ms,
    // 148.6 / 217.7, 568.3 / 290.1 and 608.7 / 1 260.0 measured / predicted); 30-second runs of
    // that scheduler are off by more than 0.5 one time in ten (`model/tests/llm_simulation.rs`).
    // So:
    // - the median replicate is off by at most 0.40: the approximation and the fit, checked on
    //   their own scheduler's output at these rates (a model that misread the batching, as the
    //   first version did, 97 % and 405 % on this server, fails here);
    // - one replicate in ten is off by less than 100 %: else these steps are too short to tell
    //   a wrong model from noise;
    // - this run is off by no more than the largest replicate plus the 25 % (at least
    //   0.40 and at most 1.0): llama.cpp behaves as that scheduler, within the noise.
    let ttft = check.mape_ttft_p99.unwrap();
    let noise = sampling(&check, &steps, 100, 1);
    assert!(noise.mape_ttft_p99.len() >= 90, "nearly every simulated run can be checked");
    let q = |q: f64| noise.ttft_p99_error(q).unwrap();
    let (median, one_in_ten, worst) = (q(0.5), q(0.9), q(1.0));
    eprintln!(
        "mean |error| of TTFT p99 {ttft:.2}; over {} simulated runs: median {median:.2}, 90 % {one_in_ten:.2}, largest {worst:.2}",
        noise.mape_ttft_p99.len(),
    );
    assert!(median <= 0.4, "the model is off by {median:.2} on its own scheduler's output at these rates");
    assert!(one_in_ten < 1.0, "30-second steps are off by {one_in_ten:.2} one time in ten from noise alone");
    let bound = (worst + 0.25).clamp(0.40, 1.0);
    assert!(ttft <= bound, "mean |error| of TTFT p99: {ttft:.2}, above what the simulated runs explain ({bound:.2})");
    // ITL's distribution is two-valued, plain gaps and gaps that read a prompt (5 ms against
    // 60 ms here): near the rate where 1 % of gaps read one, its p99 jumps from one to the other
    // (4.97 ms and 9.91 ms measured, 58 ms predicted, in runs at 1.6/s and 2.4/s). So, as in the
    // simulation test, a predicted p99 also agrees when it sits within 2.5 points of rank of
    // the measured one, read off the stored histogram.
    // Per step the error counts as none where the prediction sits within those 2.5 points; the
    // mean over the loaded steps is held to 40 % (one step alone near the jump measured 9.6 ms
    // against 4.7 ms predicted in a CI run).
    let mut errors = Vec::new();
    for p in check.predictions.iter().filter(|p| p.counted) {
        let itl = run
            .measurements
            .iter()
            .find(|m| m.case == "endpoint_itl" && m.parameters.get("step") == Some(&p.step.to_string()))
            .unwrap();
        let h = histogram(itl.histogram.as_ref().expect("the ITL histogram is stored"));
        // Between the measured p96.5 and the largest gap: a prediction above every gap measured
        // is not within any points of rank, however far above.
        let predicted = (p.itl_p99.unwrap() * 1e9) as u64;
        let agrees = predicted >= h.value_at_quantile(0.965) && predicted <= h.max();
        errors.push(if agrees { 0.0 } else { p.error_itl_p99.unwrap().abs() });
    }
    let itl = errors.iter().sum::<f64>() / errors.len() as f64;
    assert!(itl <= 0.4, "mean |error| of ITL p99 (rank-agreeing steps as none): {itl:.2}, {errors:?}");

    // The run's page fits the same engine and sets each step beside the model.
    let run_id = run.run_id.to_string();
    let viewer = common::api_token(db.path(), "manager", "viewer");
    let page = reqwest::blocking::Client::new()
        .get(format!("{}/runs/{run_id}", headroom.url))
        .bearer_auth(&viewer)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains("Your LLM server under load"), "{page}");
    // Its steps are short: the page says how few requests each p99 rests on.
    assert!(page.contains("The smallest of those steps counted"), "{page}");
    let table = page.split("llm-steps\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    assert_eq!(table.matches("<tr").count(), 1 + 4, "a header row and a row per step: {table}");
    // The agent read the server's slots from llama.cpp's /props, so the page fits the engine
    // this test fits, and where each measured ITL p99 sits in the model's distribution, as a
    // percentile, is the same there.
    let parameters = &run.measurements[0].parameters;
    assert_eq!(parameters.get("slots").map(String::as_str), Some(SLOTS.to_string().as_str()), "{parameters:?}");
    assert_eq!(parameters.get("slots_from").map(String::as_str), Some("server"), "{parameters:?}");
    assert!(parameters.get("server").is_some_and(|s| s.starts_with("llama.cpp ")), "{parameters:?}");
    assert!(page.contains(&format!("{SLOTS} slots, as the server reported them")), "{page}");
    for p in &check.predictions {
        let (error, rank) = (p.error_itl_p99.unwrap_or(f64::NAN), p.itl_rank.unwrap_or(f64::NAN));
        eprintln!("step {}: ITL p99 {:+.0} %, the model's p{:.1}", p.step, error * 100.0, rank * 100.0);
        if p.itl_rank.is_some() {
            assert!(
                table.contains(&format!(">p{:.1}", rank * 100.0)),
                "step {}'s rank p{:.1}: {table}",
                p.step,
                rank * 100.0
            );
        }
    }
    let ranked = table
        .split("data-label=\"ITL p99 is the model")
        .skip(1)
        .filter(|cell| cell.split('<').next().is_some_and(|c| c.contains(">p")))
        .count();
    assert!(ranked >= 3, "a percentile for each step below capacity: {table}");
    // And where chance alone would put each counted step's p99s, were the server the fitted
    // engine: simulated when the run was stored, a band per step and a sentence over them.
    let chance = page.split("data-out=\"llm-chance\">").nth(1).and_then(|t| t.split("</p>").next()).unwrap_or("");
    assert!(chance.contains("outside the band each would fall in 90 times in 100"), "{page}");
    eprintln!("{chance}");
    for label in ["TTFT p99 by chance", "ITL p99 by chance"] {
        let sides: Vec<&str> = table
            .split(&format!("data-label=\"{label}\">"))
            .skip(1)
            .filter_map(|cell| cell.split('<').next())
            .filter(|cell| cell.ends_with(", inside") || cell.ends_with(", above") || cell.ends_with(", below"))
            .collect();
        eprintln!("{label}: {sides:?}");
        assert_eq!(sides.len(), check.predictions.iter().filter(|p| p.counted).count(), "{label}: {table}");
    }
    for chart in ["ttft-cdf", "itl-cdf", "tokens"] {
        assert!(page.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
    }
    // Below it, each step's requests end to end, as measured: no queue of whole requests is
    // set beside the LLM model (M/G/c's P99 is off by up to +180 % on a kept llama.cpp run, see
    // `EndToEnd`).
    assert!(!page.contains("Your service under load") && !page.contains("data-out=\"endpoint-check\""), "{page}");
    let (llm_at, end_to_end_at) =
        (page.find("data-out=\"llm-check\"").unwrap(), page.find("data-out=\"end-to-end\"").unwrap());
    assert!(llm_at < end_to_end_at, "the LLM model first");
    let requests = page.split("end-to-end-steps\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    for s in &steps {
        let cell = format!("data-label=\"Requests\">{}<", s.requests);
        assert!(requests.contains(&cell), "step {} counted {} requests: {requests}", s.step.step, s.requests);
    }
    assert_eq!(requests.matches("<tr").count(), 1 + 4, "a header row and a row per step: {requests}");
    // The LLM page offers the run and, picked, sizes with the engine fitted when it was stored,
    // saying how far the model was off in it: for a workload like the load test's (the page's
    // default of 1 000-token prompts takes this tiny CPU engine 0.3-0.4 s each, and a slow VM's
    // fit then misses the default TTFT SLO of 1 s with one request alone).
    let llm_page = |query: &str| {
        reqwest::blocking::Client::new()
            .get(format!("{}/llm?run={run_id}{query}", headroom.url))
            .bearer_auth(&viewer)
            .send()
            .unwrap()
            .text()
            .unwrap()
    };
    let page = llm_page("&input=60&output=32");
    assert!(page.contains(&format!("value=\"{run_id}\"")), "the picker offers the run: {page}");
    let source = page.split("data-out=\"engine-source\"").nth(1).expect("the engine's source is shown");
    assert!(source.contains(&format!("Engine fitted on run {}", &run_id[..8])), "{source}");
    assert!(source.contains("TTFT p99 was off by"), "{source}");
    // An SLO the engine misses with one request alone says what that request takes, and on
    // whose engine.
    let page = llm_page("&input=60&output=32&ttft_ms=1");
    let problems = page.split("class=\"card problems\"").nth(1).expect("the SLO is refused");
    assert!(
        problems.contains("TTFT SLO (p99): no number of replicas meets it: one request alone has a TTFT p99 of"),
        "{problems}"
    );
    assert!(problems.contains(&format!("on this engine (fitted on run {})", &run_id[..8])), "{problems}");
    runtime.block_on(headroom.stop());
}
