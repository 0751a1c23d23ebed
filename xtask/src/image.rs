//! `cargo xtask image`: container images of the server (with the site) and the agent, built
//! with podman from `deploy/container/*.Containerfile` without pulling any base image: each is
//! `FROM scratch` holding the binary, the shared libraries `ldd` names for it (libc, libm,
//! libgcc_s and the loader; nothing else is linked) and, for the server, the browser bundle. Both run as
//! a non-root user on a read-only root filesystem and need no shell.
//!
//! The smoke test (`cargo xtask test` runs it) starts the server image with podman on loopback
//! and asks `/readyz` for 200.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::build::{Build, Built, step};

/// The images, each named after the binary it holds: the server's first.
const IMAGES: [&str; 2] = ["headroom-server", "measurements-agent"];

/// `cargo xtask image [--dev] [--check]`: release binaries and bundle (what `dist` ships), or
/// with `--dev` the dev-profile binaries (quicker to build; the bundle is the release one either
/// way); `--check` then runs them as the smoke test does.
pub fn image(args: &[String]) -> anyhow::Result<()> {
    let (mut dev, mut check) = (false, false);
    for arg in args {
        match arg.as_str() {
            "--dev" => dev = true,
            "--check" => check = true,
            _ => bail!("usage: cargo xtask image [--dev] [--check]"),
        }
    }
    let build = Build::new()?;
    let built = if dev { build.binaries(false, build.site(true)?)? } else { build.all(true)? };
    let tag = env!("CARGO_PKG_VERSION");
    let mut images = Vec::new();
    for name in IMAGES {
        let image = build_image(&build, &built, name, tag)?;
        eprintln!("==> built {image}");
        images.push(image);
    }
    if check {
        check_images(&images[0], &images[1])?;
    }
    Ok(())
}

/// Assembles the image's root filesystem under the target directory and builds it; returns
/// `localhost/NAME:TAG`.
pub fn build_image(build: &Build, built: &Built, name: &str, tag: &str) -> anyhow::Result<String> {
    ensure_podman()?;
    let context = build.target.join("image").join(name);
    if context.exists() {
        std::fs::remove_dir_all(&context).with_context(|| format!("cannot empty {}", context.display()))?;
    }
    let rootfs = context.join("rootfs");
    let binary = match name {
        "headroom-server" => &built.server,
        "measurements-agent" => &built.agent,
        other => bail!("no image is called {other}"),
    };
    let bin = rootfs.join("usr/local/bin");
    std::fs::create_dir_all(&bin)?;
    let inside = bin.join(name);
    // Debug information and symbols are most of a binary's size and nothing a container needs.
    step(
        &format!("copying {name} without its symbols"),
        Command::new("objcopy").arg("--strip-all").arg(binary).arg(&inside),
    )?;
    for library in shared_libraries(binary)? {
        let at = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
        std::fs::create_dir_all(at.parent().context("a library path has no folder")?)?;
        // The file itself, not a link to a path the image does not hold.
        std::fs::copy(&library, &at).with_context(|| format!("cannot copy {}", library.display()))?;
    }
    if name == "headroom-server" {
        // `serve` looks for `site` beside the binary's folder: /usr/local/site.
        crate::build::copy_site(&built.site_root, &rootfs.join("usr/local/site"))?;
    }
    // The data directory and the spool are volumes, whose mount points the image's user owns
    // (copied with --chown by the Containerfile), so a fresh volume starts writable; /tmp is
    // world-writable and sticky, for a deployment that mounts a tmpfs there or none.
    for dir in ["data", "spool"] {
        std::fs::create_dir_all(context.join("writable").join(dir))?;
    }
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777))?;
    let containerfile = build.root.join("deploy/container").join(format!("{name}.Containerfile"));
    let image = format!("localhost/{name}:{tag}");
    step(
        &format!("building the {name} image with podman"),
        Command::new("podman").args(["build", "--quiet", "--tag", &image, "--file"]).arg(&containerfile).arg(&context),
    )?;
    Ok(image)
}

/// The shared libraries the dynamic loader maps for `binary`, loader included, as `ldd` lists
/// them (resolved to real files).
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(binary).output().context("cannot run ldd")?;
    if !out.status.success() {
        bail!("ldd {} failed: {}", binary.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut libraries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.contains("not found") {
            bail!("{} needs a library this machine lacks: {}", binary.display(), line.trim());
        }
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)".
        let path = line.split_whitespace().find(|word| word.starts_with('/'));
        if let Some(path) = path {
            libraries.push(PathBuf::from(path));
        }
    }
    if libraries.is_empty() {
        bail!("ldd lists no loader for {}: is it a dynamic executable?", binary.display());
    }
    Ok(libraries)
}

/// podman, objcopy and runc (the fallback runtime, see `Podman`), installed with apt when
/// missing.
fn ensure_podman() -> anyhow::Result<()> {
    crate::build::ensure_commands(&[("podman", "podman"), ("objcopy", "binutils"), ("runc", "runc")])
}

/// How podman runs a container on this machine. Some virtual machines (this project's CI among
/// them) run hybrid cgroups, which crun refuses, and do not let a container raise its file and
/// process limits: there it runs under runc with cgroupfs and limits below the host's.
/// Elsewhere nothing is added.
struct Podman {
    /// Before the subcommand.
    global: Vec<String>,
    /// After `run`.
    run: Vec<String>,
}

impl Podman {
    fn for_image(image: &str) -> anyhow::Result<Podman> {
        let plain = Podman { global: Vec::new(), run: Vec::new() };
        if plain.works(image)? {
            return Ok(plain);
        }
        let fallback = Podman {
            global: ["--runtime", "runc", "--cgroup-manager", "cgroupfs"].map(String::from).to_vec(),
            run: ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"].map(String::from).to_vec(),
        };
        if fallback.works(image)? {
            eprintln!(
                "==> this machine's cgroups or limits refuse podman's defaults: running under runc with cgroupfs"
            );
            return Ok(fallback);
        }
        bail!(
            "podman cannot run {image} here, with its defaults or under runc: see `podman run --rm {image} --version`"
        )
    }

    fn works(&self, image: &str) -> anyhow::Result<bool> {
        let out = self.run(&["--rm", "--network", "none", "--read-only", image, "--version"]).output()?;
        Ok(out.status.success())
    }

    /// `podman run` with these flags and `args`.
    fn run(&self, args: &[&str]) -> Command {
        let mut command = self.command(&["run"]);
        command.args(&self.run).args(args);
        command
    }

    /// Any other podman command, with the same global flags.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("podman");
        command.args(&self.global).args(args);
        command
    }
}

/// A container removed (with its anonymous volumes) however the test ends.
struct Started<'a> {
    podman: &'a Podman,
    name: String,
}

impl Drop for Started<'_> {
    fn drop(&mut self) {
        let _ = self.podman.command(&["rm", "--force", "--volumes", "--time", "5", &self.name]).output();
    }
}

/// The smoke test: the server image on loopback, as its non-root user on a read-only root with
/// its data on the image's own volume, answers `/readyz` with 200 and finds its browser bundle;
/// the agent image prints its version.
pub fn smoke_test(build: &Build, built: &Built) -> anyhow::Result<()> {
    let server = build_image(build, built, IMAGES[0], "test")?;
    let agent = build_image(build, built, IMAGES[1], "test")?;
    check_images(&server, &agent)
}

fn check_images(server: &str, agent: &str) -> anyhow::Result<()> {
    let podman = Podman::for_image(agent)?;
    for image in [server, agent] {
        let user = output(Command::new("podman").args(["image", "inspect", "--format", "{{.Config.User}}", image]))?;
        let user = user.trim();
        if user.is_empty() || matches!(user.split(':').next(), Some("0" | "root")) {
            bail!("{image} runs as root ({user:?}): its Containerfile must name a non-root USER");
        }
    }
    let version = output(&mut podman.run(&["--rm", "--network", "none", "--read-only", agent, "--version"]))?;
    eprintln!("==> {agent} runs: {}", version.trim());

    // As a plain `podman run` starts it: /data on a fresh anonymous volume (the image's
    // VOLUME), and nothing else writable, not even the tmpfs podman puts on /tmp by default.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let name = format!("headroom-smoke-{}", std::process::id());
    let listen = format!("HEADROOM_LISTEN=127.0.0.1:{port}");
    output(&mut podman.run(&[
        "--detach",
        "--name",
        &name,
        "--network",
        "host",
        "--read-only",
        "--read-only-tmpfs=false",
        "--env",
        &listen,
        server,
    ]))?;
    let started = Started { podman: &podman, name: name.clone() };
    let answer = wait_ready(port, Duration::from_secs(60));
    let logs = output(&mut podman.command(&["logs", &name])).unwrap_or_default();
    drop(started);
    match answer {
        Ok(200) if logs.contains("no browser bundle found") => {
            bail!("{server} is ready but has no browser bundle; its log:\n{logs}")
        }
        Ok(200) => {
            eprintln!("==> {server} answered /readyz with 200 on 127.0.0.1:{port}");
            Ok(())
        }
        Ok(status) => bail!("{server} answered /readyz with {status}; its log:\n{logs}"),
        Err(err) => bail!("{server} did not answer /readyz: {err:#}; its log:\n{logs}"),
    }
}

/// `GET /readyz` until it answers or `within` passes; its status.
fn wait_ready(port: u16, within: Duration) -> anyhow::Result<u16> {
    let deadline = Instant::now() + within;
    loop {
        match get_status(port, "/readyz") {
            Ok(status) if status == 200 || Instant::now() > deadline => return Ok(status),
            Err(err) if Instant::now() > deadline => return Err(err),
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

fn get_status(port: u16, path: &str) -> anyhow::Result<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("not an HTTP answer: {text:?}"))
}

/// Runs `command`, returning its standard output, or an error with its standard error.
fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command.output().with_context(|| format!("cannot run {command:?}"))?;
    if !out.status.success() {
        bail!("{command:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    /// The manifests deploy the images `cargo xtask image` tags for this version: a version
    /// bump that left them behind would deploy the old agent, and an alert could not name the
    /// upgrade.
    #[test]
    fn the_manifests_name_this_versions_images() {
        let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
        let read = |file: &str| std::fs::read_to_string(deploy.join(file)).unwrap();
        let tag = env!("CARGO_PKG_VERSION");
        let kustomization = read("kustomization.yaml");
        assert_eq!(kustomization.matches(&format!("newTag: \"{tag}\"")).count(), 2, "{kustomization}");
        for (file, image) in [
            ("optional/agent-cronjob.yaml", "measurements-agent"),
            ("optional/server-retention-cronjob.yaml", "headroom-server"),
        ] {
            assert!(read(file).contains(&format!("headroom/{image}:{tag}\n")), "{file} does not deploy {image}:{tag}");
        }
    }
}
