//! `--config FILE` (TOML) and `--print-config` on both real binaries: the file sits beneath the
//! environment and the flags, a key that names no option is refused by name, secrets never
//! print, and a server started from a file alone serves where the file says.

use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{free_addr, server_bin, text};

fn agent_bin() -> std::path::PathBuf {
    server_bin().parent().unwrap().join("measurements-agent")
}

fn run(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(bin);
    command.args(args);
    for var in
        ["HEADROOM_LISTEN", "HEADROOM_SERVER", "HEADROOM_TOKEN", "HEADROOM_CONFIG", "DATABASE_URL", "HEADROOM_EVERY"]
    {
        command.env_remove(var);
    }
    command.envs(env.iter().copied()).output().unwrap()
}

fn line<'a>(printed: &'a str, key: &str) -> &'a str {
    printed.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| panic!("no {key} in:\n{printed}"))
}

#[test]
fn the_file_is_beneath_environment_and_flags_and_secrets_stay_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(
        &file,
        "log-format = \"json\"\n[serve]\nlisten = \"0.0.0.0:3999\"\nmetrics_token = \"s3cret-token-value\"\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let out = run(&server_bin(), &["--config", config, "serve", "--print-config"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line(&printed, "listen"), "listen = \"0.0.0.0:3999\"  # config file");
    assert_eq!(line(&printed, "log-format"), "log-format = \"json\"  # config file");
    assert_eq!(line(&printed, "metrics-token"), "metrics-token = \"<redacted>\"  # config file");
    assert!(!printed.contains("s3cret"), "{printed}");
    assert!(line(&printed, "data-dir").ends_with("# default"), "{printed}");

    let env = [("HEADROOM_LISTEN", "127.0.0.1:4000")];
    let out = run(&server_bin(), &["--config", config, "serve", "--print-config"], &env);
    let printed = text(&out);
    assert_eq!(line(&printed, "listen"), "listen = \"127.0.0.1:4000\"  # environment HEADROOM_LISTEN");
    let out = run(&server_bin(), &["--config", config, "serve", "--listen", "127.0.0.1:4001", "--print-config"], &env);
    assert_eq!(line(&text(&out), "listen"), "listen = \"127.0.0.1:4001\"  # command line");
    // HEADROOM_CONFIG names the file as --config does.
    let out = run(&server_bin(), &["serve", "--print-config"], &[("HEADROOM_CONFIG", config)]);
    assert_eq!(line(&text(&out), "listen"), "listen = \"0.0.0.0:3999\"  # config file");
}

#[test]
fn mistakes_in_the_file_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[serve]\nlissen = \"0.0.0.0:1\"\n", "'[serve] lissen' is not a setting here"),
        ("colour = true\n", "'colour' is not a setting here"),
        ("[serve]\nlisten = \"not an address\"\n", "invalid value 'not an address' for '--listen"),
        ("[serve]\nlisten = [1, 2]\n", "'listen' takes one value, not a list"),
        ("log-format = \n", "--config"),
    ];
    for (toml, expected) in cases {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, toml).unwrap();
        let out = run(&server_bin(), &["--config", file.to_str().unwrap(), "serve", "--print-config"], &[]);
        assert_eq!(out.status.code(), Some(2), "{toml}: {}", text(&out));
        assert!(text(&out).contains(expected), "{toml}: {}", text(&out));
    }
    let out = run(&server_bin(), &["--config", "/nonexistent.toml", "serve", "--print-config"], &[]);
    assert!(text(&out).contains("cannot read --config /nonexistent.toml"), "{}", text(&out));
}

#[test]
fn the_agent_reads_lists_switches_and_its_token_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    std::fs::write(
        &file,
        "[daemon]\nsuites = [\"system\", \"gemm\"]\nevery = \"30m\"\nquick = true\nserver = \"http://h:3000\"\ntoken = \"hr_agent_secret\"\n",
    )
    .unwrap();
    let out = run(&agent_bin(), &["--config", file.to_str().unwrap(), "daemon", "--print-config"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line(&printed, "suites"), "suites = [\"system\", \"gemm\"]  # config file");
    assert_eq!(line(&printed, "every"), "every = \"30m\"  # config file");
    assert_eq!(line(&printed, "quick"), "quick = true  # config file");
    assert_eq!(line(&printed, "token"), "token = \"<redacted>\"  # config file");
    assert!(!printed.contains("hr_agent_secret"), "{printed}");
    // A flag shows as the command line's.
    let out = run(&agent_bin(), &["daemon", "--every", "2h", "--print-config"], &[]);
    assert!(line(&text(&out), "every").ends_with("# command line"), "{}", text(&out));
}

#[test]
fn a_server_started_from_the_file_alone_serves_where_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let file = dir.path().join("server.toml");
    let data = dir.path().join("data");
    std::fs::write(
        &file,
        format!(
            "data-dir = {:?}\n[serve]\nlisten = {addr:?}\nsite-root = \"/nonexistent-site\"\n",
            data.display().to_string()
        ),
    )
    .unwrap();
    let mut child = Command::new(server_bin())
        .args(["--config", file.to_str().unwrap(), "serve"])
        .env_remove("HEADROOM_LISTEN")
        .env_remove("HEADROOM_DATA_DIR")
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let ready = loop {
        match reqwest::blocking::get(format!("http://{addr}/readyz")) {
            Ok(r) => break r.status(),
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(100)),
            Err(e) => panic!("nothing on {addr}: {e}"),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(ready, 200);
    assert!(data.is_dir(), "the data directory is the file's");
}
