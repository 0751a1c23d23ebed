//! `cargo xtask run`: from a fresh clone to a served page showing this machine's measurements.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::build::{Build, step};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut listen = std::env::var("HEADROOM_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let mut data_dir: Option<PathBuf> = std::env::var_os("HEADROOM_DATA_DIR").map(PathBuf::from);
    let mut release = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--listen" => listen = rest.next().context("--listen needs ADDR")?.clone(),
            "--data-dir" => data_dir = Some(PathBuf::from(rest.next().context("--data-dir needs DIR")?)),
            "--release" => release = true,
            other => bail!("unknown option {other}; expected --listen ADDR, --data-dir DIR, --release"),
        }
    }
    let build = Build::new()?;
    let built = build.all(release)?;
    let data_dir = data_dir.unwrap_or_else(|| build.root.join("data"));

    step(
        "preparing the database (first admin, local agent token)",
        Command::new(&built.server).arg("--data-dir").arg(&data_dir).args(["admin", "init-local"]),
    )?;
    eprintln!("==> starting the server on http://{listen}");
    let mut server = Command::new(&built.server)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["serve", "--listen", &listen, "--site-root"])
        .arg(&built.site_root)
        .spawn()
        .context("cannot start headroom-server")?;
    if let Err(err) = wait_ready(&listen, Duration::from_secs(60)) {
        let _ = server.kill();
        return Err(err);
    }
    let token = std::fs::read_to_string(data_dir.join("agent-token")).context("no agent token in the data dir")?;
    let measured = step(
        "measuring this machine (measurements-agent run system)",
        Command::new(&built.agent)
            .args(["run", "system", "--server", &format!("http://{listen}"), "--spool"])
            .arg(data_dir.join("spool"))
            .env("HEADROOM_TOKEN", token.trim()),
    );
    if let Err(err) = measured {
        eprintln!("warning: {err:#}; the server keeps running");
    }
    let password_file = data_dir.join("admin-password");
    let password = std::fs::read_to_string(&password_file).map(|p| p.trim().to_string());
    eprintln!();
    eprintln!("Headroom is running: http://{listen}/");
    match password {
        Ok(password) => eprintln!("Sign in as 'admin' with password {password} (kept in {})", password_file.display()),
        Err(_) => eprintln!("Sign in with an existing user (headroom-server admin create-user … to add one)"),
    }
    eprintln!("Stop with Ctrl-C.");
    let status = server.wait()?;
    if !status.success() {
        bail!("headroom-server exited with {status}");
    }
    Ok(())
}

/// Polls `/readyz` until it answers 200.
pub fn wait_ready(addr: &str, limit: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(mut stream) = TcpStream::connect(addr) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_to_string(&mut answer).is_ok()
                && answer.starts_with("HTTP/1.1 200")
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("the server did not become ready on {addr} within {limit:?}")
}
