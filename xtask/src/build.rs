//! Installing the build's tools and building the site (wasm + stylesheet) and binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Paths of one build.
pub struct Build {
    pub root: PathBuf,
    pub target: PathBuf,
}

/// What a build produced.
pub struct Built {
    pub server: PathBuf,
    pub agent: PathBuf,
    pub site_root: PathBuf,
}

impl Build {
    pub fn new() -> anyhow::Result<Self> {
        let root = workspace_root()?;
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let target = if target.is_relative() { root.join(target) } else { target };
        Ok(Build { root, target })
    }

    /// Tools, browser bundle, stylesheet, server and agent.
    pub fn all(&self, release: bool) -> anyhow::Result<Built> {
        let site_root = self.site()?;
        let profile = if release { "release" } else { "debug" };
        let mut cargo = self.cargo(&["build", "-p", "headroom-server", "-p", "measurements-agent"]);
        if release {
            cargo.arg("--release");
        }
        step("building server and agent", &mut cargo)?;
        let bin = self.target.join(profile);
        Ok(Built { server: bin.join("headroom-server"), agent: bin.join("measurements-agent"), site_root })
    }

    /// Builds `site/pkg`: the hydrate bundle through wasm-bindgen, and the stylesheet.
    pub fn site(&self) -> anyhow::Result<PathBuf> {
        ensure_wasm_target()?;
        let bindgen = self.ensure_wasm_bindgen()?;
        step(
            "building the browser bundle (wasm)",
            &mut self.cargo(&[
                "build",
                "-p",
                "headroom-app",
                "--lib",
                "--target",
                WASM_TARGET,
                "--no-default-features",
                "--features",
                "hydrate",
                "--profile",
                "wasm-dev",
            ]),
        )?;
        let site_root = self.target.join("site");
        let pkg = site_root.join("pkg");
        std::fs::create_dir_all(&pkg)?;
        let wasm = self.target.join(WASM_TARGET).join("wasm-dev").join("headroom_app.wasm");
        step(
            "generating JavaScript bindings",
            Command::new(&bindgen)
                .args(["--target", "web", "--no-typescript", "--out-name", "headroom", "--out-dir"])
                .arg(&pkg)
                .arg(&wasm),
        )?;
        std::fs::copy(self.root.join("style/main.css"), pkg.join("headroom.css"))
            .context("cannot copy the stylesheet")?;
        std::fs::copy(self.root.join("style/favicon.svg"), pkg.join("favicon.svg")).context("cannot copy the icon")?;
        Ok(site_root)
    }

    /// Builds the model's wasm bench in release mode and times it in Node.
    pub fn bench_wasm(&self) -> anyhow::Result<()> {
        ensure_wasm_target()?;
        let bindgen = self.ensure_wasm_bindgen()?;
        step(
            "building the planning model for wasm32 (release)",
            &mut self.cargo(&["build", "-p", "model-wasm-bench", "--release", "--target", WASM_TARGET]),
        )?;
        let out = self.target.join("model-wasm-bench");
        let wasm = self.target.join(WASM_TARGET).join("release").join("model_wasm_bench.wasm");
        step(
            "generating bindings for Node",
            Command::new(&bindgen).args(["--target", "nodejs", "--no-typescript", "--out-dir"]).arg(&out).arg(&wasm),
        )?;
        step(
            "timing in Node",
            Command::new("node")
                .arg(self.root.join("tools/model-wasm-bench/run.mjs"))
                .arg(out.join("model_wasm_bench.js")),
        )
    }

    pub fn cargo(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(args).current_dir(&self.root).env("CARGO_TARGET_DIR", &self.target);
        cmd
    }

    /// wasm-bindgen's CLI at exactly the version in Cargo.lock, installed once under the target dir.
    fn ensure_wasm_bindgen(&self) -> anyhow::Result<PathBuf> {
        let version = locked_version(&self.root.join("Cargo.lock"), "wasm-bindgen")?;
        let tools = self.target.join("tools").join(format!("wasm-bindgen-{version}"));
        let bin = tools.join("bin").join("wasm-bindgen");
        if bin.exists() {
            return Ok(bin);
        }
        step(
            &format!("installing wasm-bindgen-cli {version} (once; takes a few minutes)"),
            self.cargo(&["install", "wasm-bindgen-cli", "--version", &format!("={version}"), "--root"]).arg(&tools),
        )?;
        Ok(bin)
    }
}

/// The workspace being worked on, found from the current directory at run time: the xtask
/// binary may have been built from another checkout sharing the same target directory.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .output()
        .context("cannot run cargo locate-project")?;
    if !out.status.success() {
        bail!("not inside the Headroom workspace: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let manifest = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(manifest.parent().context("workspace manifest has no folder")?.to_path_buf())
}

/// Adds rustup components (rustfmt, clippy) that a minimal toolchain lacks.
pub fn ensure_components(components: &[&str]) -> anyhow::Result<()> {
    let installed = Command::new("rustup").args(["component", "list", "--installed"]).output();
    let list = match installed {
        Ok(out) => String::from_utf8_lossy(&out.stdout).to_string(),
        Err(err) => bail!("rustup is needed to add {components:?}: {err}"),
    };
    let missing: Vec<&str> = components.iter().copied().filter(|c| !list.lines().any(|l| l.starts_with(c))).collect();
    if missing.is_empty() {
        return Ok(());
    }
    step(
        &format!("adding rustup components {missing:?}"),
        Command::new("rustup").args(["component", "add"]).args(&missing),
    )
}

/// Adds the wasm32 target through rustup when it is missing.
pub fn ensure_wasm_target() -> anyhow::Result<()> {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    match installed {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == WASM_TARGET) => Ok(()),
        Ok(_) => step("adding the wasm32 target", Command::new("rustup").args(["target", "add", WASM_TARGET])),
        Err(err) => bail!("rustup is needed to add the {WASM_TARGET} target: {err}"),
    }
}

/// The version of `package` recorded in a Cargo.lock.
pub fn locked_version(lock: &Path, package: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(lock).with_context(|| format!("cannot read {}", lock.display()))?;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{package}\"")
            && let Some(version) = lines.next().and_then(|l| l.trim().strip_prefix("version = \""))
        {
            return Ok(version.trim_end_matches('"').to_string());
        }
    }
    bail!("{package} is not in {}", lock.display())
}

/// Runs a command, announcing it; fails with its exit status.
/// [`step`] with a wall-clock limit: past `limit` the command and everything it started (its
/// process group) are killed and the step fails saying so, so one stuck test cannot hold CI
/// until its own deadline. The test harness names a test running for over 60 s just above.
pub fn step_within(what: &str, cmd: &mut Command, limit: std::time::Duration) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    eprintln!("==> {what} (at most {} min)", limit.as_secs() / 60);
    let mut child = cmd.process_group(0).spawn().with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{what} failed ({status})");
            }
            return Ok(());
        }
        if started.elapsed() > limit {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            bail!(
                "{what} did not finish within {} min and was stopped; the test named as running for over 60 seconds above is the one that hung",
                limit.as_secs() / 60
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

pub fn step(what: &str, cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("==> {what}");
    let status = cmd.status().with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
