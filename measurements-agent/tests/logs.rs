//! `--log-format json` on the real agent binary: every line on standard error is one JSON
//! object with a UTC time, a level read from the line (`error:` is ERROR) and the message.

use std::process::Command;

mod common;

use common::{server_bin, text};

fn agent(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(server_bin().parent().unwrap().join("measurements-agent"));
    for var in ["HEADROOM_SERVER", "HEADROOM_TOKEN", "HEADROOM_CONFIG", "HEADROOM_LOG_FORMAT"] {
        command.env_remove(var);
    }
    command.args(args).envs(env.iter().copied()).output().unwrap()
}

/// Each stderr line parsed as JSON; fails on any line that is not.
fn objects(out: &std::process::Output) -> Vec<serde_json::Value> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}")))
        .collect()
}

#[test]
fn json_logs_are_one_object_a_line_with_time_level_and_message() {
    let spool = tempfile::tempdir().unwrap();
    let spool = spool.path().to_str().unwrap();
    // An empty spool sent nowhere: one line saying so.
    let out = agent(
        &["--log-format", "json", "--spool", spool, "upload", "--server", "http://127.0.0.1:9"],
        &[("HEADROOM_TOKEN", "t")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let lines = objects(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["level"], "INFO");
    assert!(line["message"].as_str().unwrap().starts_with("0 uploaded, 0 refused, 0 waiting in "), "{line}");
    let time = line["timestamp"].as_str().unwrap();
    let shaped = time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T" && time.starts_with("20");
    assert!(shaped, "{time}");

    // The environment variable does the same, and an error is an ERROR without its prefix.
    let out = agent(&["--spool", spool, "upload"], &[("HEADROOM_LOG_FORMAT", "json")]);
    assert!(!out.status.success());
    let lines = objects(&out);
    assert_eq!((lines.len(), &lines[0]["level"]), (1, &serde_json::json!("ERROR")), "{lines:?}");
    assert!(
        lines[0]["message"].as_str().unwrap().starts_with("--server (or HEADROOM_SERVER) is required"),
        "{lines:?}"
    );

    // Text, the default, is the line as it was.
    let out = agent(&["--spool", spool, "upload"], &[]);
    assert!(text(&out).contains("error: --server (or HEADROOM_SERVER) is required"), "{}", text(&out));
}
