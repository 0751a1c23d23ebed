//! Installing the build's tools and building the site (wasm + stylesheet) and binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// The names wasm-bindgen and the stylesheet copy give the bundle's files (the app's own
/// `OUTPUT_NAME`); a release build renames them after their content.
const OUTPUT_NAME: &str = "headroom";

/// Written beside `pkg/` by a release build: `{"output_name": "headroom.<hash>"}`, read by the
/// server at start.
const BUNDLE_MANIFEST: &str = "bundle.json";

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

    /// Tools, browser bundle, stylesheet, server and agent; `release`: what ships (see [`Self::site`]).
    pub fn all(&self, release: bool) -> anyhow::Result<Built> {
        let site_root = self.site(release)?;
        self.binaries(release, site_root)
    }

    /// `target/dist`: `bin/headroom-server`, `bin/measurements-agent`, `site/` (the release
    /// bundle), laid out so the server finds its site beside its own folder with no flag, and
    /// `share/` (completions and man pages).
    pub fn dist(&self) -> anyhow::Result<()> {
        let built = self.all(true)?;
        let dist = self.target.join("dist");
        if dist.exists() {
            std::fs::remove_dir_all(&dist).with_context(|| format!("cannot empty {}", dist.display()))?;
        }
        let bin = dist.join("bin");
        std::fs::create_dir_all(&bin)?;
        for binary in [&built.server, &built.agent] {
            std::fs::copy(binary, bin.join(binary.file_name().context("a binary has no name")?))?;
        }
        copy_site(&built.site_root, &dist.join("site"))?;
        for binary in [&built.server, &built.agent] {
            write_docs(binary, &dist.join("share"))?;
        }
        eprintln!("==> what ships is in {}: bin/headroom-server serve finds site/ beside bin/", dist.display());
        Ok(())
    }

    /// Server and agent, in the dev or release profile.
    pub fn binaries(&self, release: bool, site_root: PathBuf) -> anyhow::Result<Built> {
        let profile = if release { "release" } else { "debug" };
        let mut cargo = self.cargo(&["build", "-p", "headroom-server", "-p", "measurements-agent"]);
        if release {
            cargo.arg("--release");
        }
        step(&format!("building server and agent ({profile})"), &mut cargo)?;
        let bin = self.target.join(profile);
        Ok(Built { server: bin.join("headroom-server"), agent: bin.join("measurements-agent"), site_root })
    }

    /// Builds the site's `pkg/`: the hydrate bundle through wasm-bindgen, the stylesheet and
    /// the icon. Dev (`site/`): plain names, quick to build. Release (`site-release/`): the
    /// `wasm-release` profile through `wasm-opt -Oz`, the bundle's files named after their
    /// content (so the server lets browsers keep them a year), with `.br` and `.gz` beside
    /// each for the server to send as they are.
    pub fn site(&self, release: bool) -> anyhow::Result<PathBuf> {
        ensure_wasm_target()?;
        let bindgen = self.ensure_wasm_bindgen()?;
        let profile = if release { "wasm-release" } else { "wasm-dev" };
        step(
            &format!("building the browser bundle (wasm, {profile})"),
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
                profile,
            ]),
        )?;
        let site_root = self.target.join(if release { "site-release" } else { "site" });
        let pkg = site_root.join("pkg");
        // Files of an earlier build would linger under their old hashed names.
        if pkg.exists() {
            std::fs::remove_dir_all(&pkg).with_context(|| format!("cannot empty {}", pkg.display()))?;
        }
        std::fs::create_dir_all(&pkg)?;
        let _ = std::fs::remove_file(site_root.join(BUNDLE_MANIFEST));
        let wasm = self.target.join(WASM_TARGET).join(profile).join("headroom_app.wasm");
        step(
            "generating JavaScript bindings",
            Command::new(&bindgen)
                .args(["--target", "web", "--no-typescript", "--out-name", OUTPUT_NAME, "--out-dir"])
                .arg(&pkg)
                .arg(&wasm),
        )?;
        std::fs::copy(self.root.join("style/main.css"), pkg.join(format!("{OUTPUT_NAME}.css")))
            .context("cannot copy the stylesheet")?;
        std::fs::copy(self.root.join("style/favicon.svg"), pkg.join("favicon.svg")).context("cannot copy the icon")?;
        if release {
            let bg = pkg.join(format!("{OUTPUT_NAME}_bg.wasm"));
            self.shrink_wasm(&bg)?;
            let output_name = name_by_content(&pkg)?;
            std::fs::write(site_root.join(BUNDLE_MANIFEST), format!("{{\"output_name\": \"{output_name}\"}}\n"))?;
            let files = [
                format!("{output_name}_bg.wasm"),
                format!("{output_name}.js"),
                format!("{output_name}.css"),
                "favicon.svg".to_string(),
            ];
            for file in &files {
                precompress(&pkg.join(file))?;
            }
            print_sizes(&pkg, &files)?;
        }
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

    /// Shrinks the bundle's wasm in place with `wasm-opt -Oz`. The result is kept under the
    /// target dir by the input's hash, so an unchanged bundle is not optimized again (it takes
    /// over a minute on 2 cores).
    fn shrink_wasm(&self, wasm: &Path) -> anyhow::Result<()> {
        let wasm_opt = self.ensure_wasm_opt()?;
        let input = std::fs::read(wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
        let cache = self.target.join("tools").join("wasm-opt-cache");
        let cached = cache.join(format!("{:016x}.wasm", fnv1a(FNV_OFFSET, &input)));
        if cached.exists() {
            eprintln!("==> the bundle is unchanged since its last wasm-opt; using {}", cached.display());
            std::fs::copy(&cached, wasm)?;
            return Ok(());
        }
        // The features rustc's wasm32 target emits by default; wasm-opt must be told it may
        // keep them.
        step(
            "shrinking the bundle (wasm-opt -Oz)",
            Command::new(&wasm_opt)
                .args([
                    "-Oz",
                    "--enable-bulk-memory",
                    "--enable-mutable-globals",
                    "--enable-nontrapping-float-to-int",
                    "--enable-sign-ext",
                    "--enable-reference-types",
                    "--enable-multivalue",
                    "-o",
                ])
                .arg(wasm)
                .arg(wasm),
        )?;
        // Only the latest is worth keeping.
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir_all(&cache)?;
        std::fs::copy(wasm, &cached)?;
        Ok(())
    }

    /// binaryen's `wasm-opt` at the version pinned in `tools/binaryen/package-lock.json`, its
    /// own npm build (wasm, run by Node), installed once under the target dir. Not Debian's
    /// binaryen: its version 108 rewrites wasm-bindgen's externref table so that the bundle
    /// fails in the browser (`WebAssembly.Table.set(): Argument 1 is invalid`).
    fn ensure_wasm_opt(&self) -> anyhow::Result<PathBuf> {
        let pinned = self.root.join("tools").join("binaryen");
        let lock = std::fs::read_to_string(pinned.join("package-lock.json"))
            .context("cannot read tools/binaryen/package-lock.json")?;
        let version = lock
            .split("\"node_modules/binaryen\"")
            .nth(1)
            .and_then(|rest| rest.split("\"version\": \"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .context("tools/binaryen/package-lock.json names no binaryen version")?;
        let tools = self.target.join("tools").join(format!("binaryen-{version}"));
        let bin = tools.join("node_modules").join(".bin").join("wasm-opt");
        if bin.exists() {
            return Ok(bin);
        }
        ensure_commands(&[("node", "nodejs"), ("npm", "npm")])?;
        std::fs::create_dir_all(&tools)?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(pinned.join(file), tools.join(file))
                .with_context(|| format!("cannot copy tools/binaryen/{file}"))?;
        }
        step(
            &format!("installing binaryen {version} (wasm-opt, from npm; once)"),
            Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&tools),
        )?;
        Ok(bin)
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

/// Writes the completion scripts and man pages `binary` makes (its `completions` and `man`
/// commands) where a package puts them under `share`: bash-completion, zsh, fish, man1.
fn write_docs(binary: &Path, share: &Path) -> anyhow::Result<()> {
    let name = binary.file_name().and_then(|n| n.to_str()).context("a binary has no name")?;
    let files = [
        (vec!["completions", "bash"], format!("bash-completion/completions/{name}")),
        (vec!["completions", "zsh"], format!("zsh/site-functions/_{name}")),
        (vec!["completions", "fish"], format!("fish/vendor_completions.d/{name}.fish")),
    ];
    for (args, file) in files {
        let output = Command::new(binary).args(&args).output().with_context(|| format!("cannot run {name}"))?;
        if !output.status.success() || output.stdout.is_empty() {
            bail!("`{name} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
        }
        let path = share.join(file);
        std::fs::create_dir_all(path.parent().context("no folder")?)?;
        std::fs::write(&path, output.stdout).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let man1 = share.join("man").join("man1");
    step(&format!("writing {name}'s man pages"), Command::new(binary).arg("man").arg("--dir").arg(&man1))
}

/// Copies the files under `from` into `to`, folders too (wasm-bindgen writes a `snippets/`
/// folder when a dependency carries inline JavaScript).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).with_context(|| format!("cannot copy {}", source.display()))?;
        }
    }
    Ok(())
}

/// Renames the bundle's script, wasm and stylesheet to `headroom.<hash>.js`,
/// `headroom.<hash>_bg.wasm` and `headroom.<hash>.css`, one hash over all three (they change
/// together: the script names the wasm's exports), and returns `headroom.<hash>`.
fn name_by_content(pkg: &Path) -> anyhow::Result<String> {
    let parts = [".js", "_bg.wasm", ".css"];
    let mut hash = FNV_OFFSET;
    for part in parts {
        let path = pkg.join(format!("{OUTPUT_NAME}{part}"));
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        hash = fnv1a(fnv1a(hash, &bytes), part.as_bytes());
    }
    let named = format!("{OUTPUT_NAME}.{hash:016x}");
    for part in parts {
        std::fs::rename(pkg.join(format!("{OUTPUT_NAME}{part}")), pkg.join(format!("{named}{part}")))?;
    }
    Ok(named)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bits, continued from `hash`: not for security, only so changed bytes get a new
/// name.
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Writes `file.br` (brotli, quality 11) and `file.gz` (gzip -9) beside `file`, which the
/// server sends to a browser that accepts them instead of compressing on every request.
fn precompress(file: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let with_suffix = |suffix: &str| {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 24, ..Default::default() };
    brotli::BrotliCompress(&mut bytes.as_slice(), &mut br, &params)?;
    std::fs::write(with_suffix(".br"), br)?;
    // No file name or time in the header: the same input gives the same bytes.
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::best());
    gz.write_all(&bytes)?;
    std::fs::write(with_suffix(".gz"), gz.finish()?)?;
    Ok(())
}

/// Prints each file's size raw, gzipped and brotli'd (the README's table).
fn print_sizes(pkg: &Path, files: &[String]) -> anyhow::Result<()> {
    let size = |name: &str| std::fs::metadata(pkg.join(name)).map(|m| m.len());
    eprintln!("==> the bundle in {}", pkg.display());
    eprintln!("{:<34} {:>10} {:>10} {:>10}", "file", "bytes", "gzip", "brotli");
    for file in files {
        let raw = size(file)?;
        let gz = size(&format!("{file}.gz"))?;
        let br = size(&format!("{file}.br"))?;
        eprintln!("{file:<34} {raw:>10} {gz:>10} {br:>10}");
    }
    Ok(())
}

/// The site as the server reads it (`bundle.json` and `pkg/`), copied from `site_root` to `to`.
pub fn copy_site(site_root: &Path, to: &Path) -> anyhow::Result<()> {
    let pkg = to.join("pkg");
    std::fs::create_dir_all(&pkg)?;
    std::fs::copy(site_root.join(BUNDLE_MANIFEST), to.join(BUNDLE_MANIFEST))
        .with_context(|| format!("{} has no {BUNDLE_MANIFEST}: build the release bundle", site_root.display()))?;
    copy_tree(&site_root.join("pkg"), &pkg)
}

/// Commands (and the Debian package with each) the build runs; installed with apt when
/// missing and this user may.
pub fn ensure_commands(commands: &[(&str, &str)]) -> anyhow::Result<()> {
    let found = |command: &str| {
        Command::new("sh").args(["-c", &format!("command -v {command}")]).output().is_ok_and(|o| o.status.success())
    };
    let missing: Vec<&str> = commands.iter().filter(|(c, _)| !found(c)).map(|(_, package)| *package).collect();
    if missing.is_empty() {
        return Ok(());
    }
    apt_install(&missing, &format!("the build's tools ({})", missing.join(", ")))
}

/// Installs Debian packages when running as root; otherwise says what to install.
pub fn apt_install(packages: &[&str], what: &str) -> anyhow::Result<()> {
    let root = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root.unwrap_or(false) {
        bail!("this needs {what}: run `sudo apt-get install -y {}` once", packages.join(" "));
    }
    step("apt-get update", Command::new("apt-get").args(["update", "-qq"]))?;
    step(
        &format!("installing {what}"),
        Command::new("apt-get").args(["install", "-y", "-qq"]).args(packages).env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .with_context(|| format!("cannot install {}", packages.join(" ")))
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
