//! The systemd units in `deploy/systemd/`, checked by systemd's own `systemd-analyze verify`
//! against the binaries this build made, and the agent's unit run the way systemd starts it:
//! its `Environment=` lines, its environment file and its `ExecStart=` with `$VAR` split into
//! words, against the real server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{Server, server_bin, text};

fn units() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(units().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The unit's `KEY=value` lines in `[Service]` (or any section), in order.
fn keys<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|line| line.trim().strip_prefix(key)?.strip_prefix('=')).collect()
}

fn one<'a>(unit: &'a str, key: &str) -> &'a str {
    let found = keys(unit, key);
    assert_eq!(found.len(), 1, "one {key}= expected: {found:?}");
    found[0]
}

/// The units as installed, with `/opt/headroom/bin/` pointing at this build's binaries.
fn installed(dir: &Path) -> Vec<PathBuf> {
    let bin = server_bin().parent().unwrap().to_path_buf();
    assert!(bin.join("measurements-agent").exists(), "the agent binary beside the server's");
    ["headroom-server.service", "headroom-agent.service", "headroom-agent.timer"]
        .iter()
        .map(|name| {
            let path = dir.join(name);
            std::fs::write(&path, read(name).replace("/opt/headroom/bin/", &format!("{}/", bin.display()))).unwrap();
            path
        })
        .collect()
}

fn systemd_analyze() -> Command {
    // Installed by `cargo xtask test` (Debian's systemd) when missing; never skipped.
    Command::new("systemd-analyze")
}

#[test]
fn units_pass_systemd_analyze_verify_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let paths = installed(dir.path());
    let out = systemd_analyze().args(["verify", "--man=no"]).args(&paths).output().expect("systemd-analyze runs");
    assert!(out.status.success() && out.stderr.is_empty(), "systemd-analyze verify: {}", text(&out));

    // The check bites: a misspelt key and a missing binary are both reported.
    let broken = dir.path().join("headroom-server.service");
    let unit = std::fs::read_to_string(&broken).unwrap();
    std::fs::write(&broken, unit.replace("ProtectHome=", "ProtectHom=")).unwrap();
    let out = systemd_analyze().args(["verify", "--man=no"]).arg(&broken).output().unwrap();
    assert!(text(&out).contains("Unknown key") && text(&out).contains("'ProtectHom'"), "{}", text(&out));
    std::fs::write(&broken, unit.replace("/headroom-server serve", "/headroom-server-gone serve")).unwrap();
    let out = systemd_analyze().args(["verify", "--man=no"]).arg(&broken).output().unwrap();
    assert!(!out.status.success() && text(&out).contains("is not executable"), "{}", text(&out));
}

#[test]
fn the_timer_fires_every_six_hours_and_each_node_keeps_its_own_delay() {
    let timer = read("headroom-agent.timer");
    let out = systemd_analyze()
        .args(["calendar", "--iterations=5", one(&timer, "OnCalendar")])
        .env("TZ", "UTC")
        .output()
        .expect("systemd-analyze runs");
    assert!(out.status.success(), "{}", text(&out));
    // "Next elapse: Sat 2026-12-05 00:00:00 UTC", then "Iter. #2: … 06:00:00 UTC", …
    let hours: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("Next elapse:") || l.contains("Iter. #"))
        .map(|l| {
            let time = l.split_whitespace().rev().nth(1).expect("HH:MM:SS");
            assert!(time.ends_with(":00:00"), "on the hour: {l}");
            time[..2].parse().unwrap()
        })
        .collect();
    assert_eq!(hours.len(), 5, "{}", text(&out));
    for pair in hours.windows(2) {
        assert_eq!((pair[0] + 6) % 24, pair[1], "six hours apart: {hours:?}");
    }
    assert_eq!(one(&timer, "FixedRandomDelay"), "yes");
    assert_eq!(one(&timer, "Persistent"), "true");
}

/// `$VAR` in `ExecStart=` becomes the variable's words (systemd.service(5), "Command lines");
/// `${VAR}` would be one word.
fn command_line(exec_start: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    exec_start
        .split_whitespace()
        .flat_map(|word| match word.strip_prefix('$') {
            Some(name) => env.get(name).map(|v| v.split_whitespace().map(String::from).collect()).unwrap_or_default(),
            None => vec![word.to_string()],
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_unit_runs_the_suites_and_uploads_as_systemd_starts_it() {
    let unit = read("headroom-agent.service");
    assert_eq!(one(&unit, "Type"), "oneshot");
    assert_eq!(one(&unit, "EnvironmentFile"), "/etc/headroom/agent.env", "a missing file fails the start");
    let state = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let server = Server::start(db.path(), "127.0.0.1:0").await;

    // The environment systemd gives it: the unit's own lines (%S is /var/lib, here a temporary
    // folder), then the shipped example file with this test's server, token and suite.
    let mut env = BTreeMap::new();
    for assignment in keys(&unit, "Environment") {
        let (name, value) = assignment.split_once('=').expect("NAME=value");
        env.insert(name.to_string(), value.replace("%S", &state.path().display().to_string()));
    }
    let example = read("agent.env");
    let set: Vec<&str> = example.lines().filter(|l| !l.starts_with('#') && l.contains('=')).collect();
    let named: Vec<&str> = set.iter().map(|l| l.split('=').next().unwrap()).collect();
    assert_eq!(named, ["HEADROOM_SERVER", "HEADROOM_TOKEN"], "the two settings a node must give");
    assert!(example.contains("#HEADROOM_RUN_ARGS="), "the suites are documented");
    env.insert("HEADROOM_SERVER".into(), server.url.clone());
    env.insert("HEADROOM_TOKEN".into(), server.agent_token("systemd-node"));
    env.insert("HEADROOM_RUN_ARGS".into(), "system --quick".into());

    let argv = command_line(one(&unit, "ExecStart"), &env);
    assert_eq!(argv[0], "/opt/headroom/bin/measurements-agent");
    assert_eq!(argv[1..], ["run", "system", "--quick"]);
    let agent = server_bin().parent().unwrap().join("measurements-agent");
    let mut command = Command::new(agent);
    command.args(&argv[1..]).env_clear().env("PATH", "/usr/bin:/bin").envs(&env);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(server.run_count().await, 1, "the run reached the server: {}", text(&out));
    let spool = state.path().join("headroom-agent/spool");
    assert!(spool.is_dir(), "the spool is in the unit's state directory");
    let waiting = std::fs::read_dir(&spool)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"));
    assert_eq!(waiting.count(), 0, "an acknowledged run leaves the spool");

    // Unset, every suite is asked for (`run` with no suite names).
    env.remove("HEADROOM_RUN_ARGS");
    assert_eq!(command_line(one(&unit, "ExecStart"), &env)[1..], ["run"]);
    server.stop().await;
}

#[test]
fn the_server_unit_keeps_its_state_in_its_state_directory_and_logs_json() {
    let unit = read("headroom-server.service");
    let env = keys(&unit, "Environment");
    assert!(env.contains(&"HEADROOM_DATA_DIR=%S/headroom-server"), "{env:?}");
    assert_eq!(one(&unit, "StateDirectory"), "headroom-server");
    assert!(env.contains(&"HEADROOM_LOG_FORMAT=json"), "{env:?}");
    // Every variable the example file sets or mentions is one the server reads.
    let help = Command::new(server_bin()).args(["serve", "--help"]).output().unwrap();
    let help = text(&help);
    for line in read("server.env").lines().filter(|l| l.contains('=') && !l.starts_with("# ")) {
        let name = line.trim_start_matches('#').split('=').next().unwrap();
        assert!(help.contains(&format!("[env: {name}")), "{name} is not a server setting:\n{help}");
    }
}
