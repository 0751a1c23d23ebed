//! The completion scripts and man pages both binaries print (and `cargo xtask dist` installs):
//! bash really completes with them, past the first word, and the man page names every command.

mod common;

use std::path::Path;
use std::process::Command;

fn output(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("run the binary");
    assert!(out.status.success(), "{} {args:?}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// What bash offers for the words `line` (the last one being completed), with `script` loaded.
fn bash_completes(script: &str, line: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("completion.bash");
    std::fs::write(&path, script).unwrap();
    let words = line.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ");
    // Calls the function `complete -p` registered for the command, as bash would on Tab.
    let probe = format!(
        "source '{}'; f=$(complete -p {cmd} | sed -E 's/.* -F ([^ ]+) .*/\\1/'); \
         COMP_WORDS=({words}); COMP_CWORD={last}; \"$f\" {cmd} '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display(),
        cmd = line[0],
        last = line.len() - 1,
        cur = line[line.len() - 1],
        prev = line[line.len() - 2],
    );
    let out = Command::new("bash").args(["-c", &probe]).output().expect("bash");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
}

#[test]
fn bash_completes_subcommands_and_their_options_for_both_binaries() {
    let server = common::server_bin();
    let agent = Path::new(env!("CARGO_BIN_EXE_measurements-agent"));

    let script = output(&server, &["completions", "bash"]);
    assert_eq!(bash_completes(&script, &["headroom-server", "ad"]), ["admin"]);
    // Past the first word: clap_complete alone completes nothing here (clap-rs/clap#6421).
    assert_eq!(
        bash_completes(&script, &["headroom-server", "admin", "create-"]),
        ["create-user", "create-agent-token", "create-api-token"]
    );
    assert_eq!(bash_completes(&script, &["headroom-server", "serve", "--tls-c"]), ["--tls-cert"]);

    let script = output(agent, &["completions", "bash"]);
    assert_eq!(bash_completes(&script, &["measurements-agent", "inv"]), ["inventory"]);
    assert_eq!(bash_completes(&script, &["measurements-agent", "run", "--qu"]), ["--quick"]);
}

#[test]
fn zsh_and_fish_scripts_name_the_commands() {
    let server = common::server_bin();
    for shell in ["zsh", "fish"] {
        let script = output(&server, &["completions", shell]);
        for word in ["serve", "create-agent-token", "log-format"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
}

#[test]
fn man_pages_are_roff_one_per_command_each_reference_written() {
    let server = common::server_bin();
    let agent = Path::new(env!("CARGO_BIN_EXE_measurements-agent"));
    for (bin, name, commands) in [
        (server.as_path(), "headroom-server", &["serve", "admin", "admin-create-user", "completions", "man"][..]),
        (agent, "measurements-agent", &["run", "upload", "inventory", "serve"][..]),
    ] {
        let page = output(bin, &["man"]);
        assert!(page.contains(&format!(".TH {name} 1")), "{name}: no title line");
        assert!(page.contains(".SH SUBCOMMANDS"), "{name}: no SUBCOMMANDS section");
        let dir = tempfile::tempdir().unwrap();
        output(bin, &["man", "--dir", dir.path().to_str().unwrap()]);
        assert_eq!(std::fs::read_to_string(dir.path().join(format!("{name}.1"))).unwrap(), page);
        for command in commands {
            let file = dir.path().join(format!("{name}-{command}.1"));
            assert!(file.exists(), "{} was not written", file.display());
        }
        // Every page a page refers to, `name\-sub(1)`, is there.
        for file in std::fs::read_dir(dir.path()).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            for reference in
                text.split_whitespace().filter(|w| w.ends_with("(1)") && w.starts_with(&name.replace('-', "\\-")))
            {
                let target = format!("{}.1", reference.trim_end_matches("(1)").replace("\\-", "-"));
                assert!(dir.path().join(&target).exists(), "{name}: a page names {reference}, but {target} is missing");
            }
        }
    }
}
