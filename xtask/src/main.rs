//! Headroom's one-command entry points:
//!
//! - `cargo xtask run`: install what the build needs, build the browser bundle, stylesheet and
//!   binaries, set up the local database, start the server, measure this machine once.
//! - `cargo xtask test`: build everything and run every test (Rust, wasm build, browser).
//! - `cargo xtask e2e [FILE…]`: only the browser tests (all four files, or those named, e.g.
//!   `pages`), on the release bundle and dev binaries, as `cargo xtask test` runs them.
//! - `cargo xtask build`: only the build step of `run`.
//! - `cargo xtask dist`: what ships, in `target/dist`: release binaries and the release bundle.
//! - `cargo xtask image [--dev] [--check]`: the server and agent container images, built with
//!   podman; `--check` runs them as `cargo xtask test` does.
//! - `cargo xtask bench-wasm`: time the planning model compiled to wasm32, in Node's V8.

mod build;
mod image;
mod run;
mod test;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run::run(&args[1..]),
        Some("test") => test::test(&args[1..]),
        Some("e2e") => test::e2e(&args[1..]),
        Some("build") => build::Build::new().and_then(|b| b.all(false).map(|_| ())),
        Some("dist") => build::Build::new().and_then(|b| b.dist()),
        Some("image") => image::image(&args[1..]),
        Some("bench-wasm") => build::Build::new().and_then(|b| b.bench_wasm()),
        _ => {
            eprintln!(
                "usage: cargo xtask <run [--listen ADDR] [--data-dir DIR] | test [CARGO TEST ARGS] | e2e [FILE…] | build | dist | image [--dev] [--check] | bench-wasm>"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}
