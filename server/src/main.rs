//! `headroom-server`: serve the API, gRPC ingest and web app, or administer users and tokens.

use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use headroom_server::alerts::{Settings, Webhook, WebhookFormat};
use headroom_server::auth::Role;
use headroom_server::store::{self, Store};
use headroom_server::{AppState, admin};

#[derive(Parser)]
#[command(name = "headroom-server", version, about = "Headroom: what your inference performance costs, measured.")]
struct Cli {
    /// Where the embedded SQLite database and local secrets live.
    #[arg(long, env = "HEADROOM_DATA_DIR", default_value = "data", global = true)]
    data_dir: PathBuf,
    /// `postgres://…` or `sqlite://…`; default: the SQLite file in the data directory.
    #[arg(long, env = "DATABASE_URL", global = true)]
    database_url: Option<String>,
    /// `text` for people, `json` (one object per line) for a log collector.
    #[arg(long, env = "HEADROOM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    /// A TOML settings file: top-level keys are the global options, a table per subcommand
    /// holds its options (`[serve]`, `listen = "0.0.0.0:3000"`); a flag or environment variable
    /// wins over it.
    #[arg(long, env = "HEADROOM_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Print the effective settings (secrets redacted) and where each came from, then exit.
    #[arg(long, global = true)]
    print_config: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API, gRPC ingest and the web app on one port.
    Serve {
        #[arg(long, env = "HEADROOM_LISTEN", default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        /// Folder holding `pkg/` (the browser bundle); default: `site` beside the binary's folder.
        #[arg(long, env = "HEADROOM_SITE_ROOT")]
        site_root: Option<PathBuf>,
        /// PEM certificate chain: serve HTTPS (and gRPC over TLS) instead of plain HTTP.
        #[arg(long, env = "HEADROOM_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of --tls-cert.
        #[arg(long, env = "HEADROOM_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Bearer token a Prometheus scraper sends for /metrics; without it only admins may
        /// read /metrics.
        #[arg(long, env = "HEADROOM_METRICS_TOKEN", hide_env_values = true)]
        metrics_token: Option<String>,
        /// A regression alert is raised when a run's headline figure is worse than the median
        /// of its hardware class's recent runs by more than this fraction (and the noise).
        #[arg(long, env = "HEADROOM_ALERT_THRESHOLD", default_value_t = model::plan::regression::DEFAULT_THRESHOLD,
              value_parser = parse_threshold)]
        alert_threshold: f64,
        /// POST each new regression alert to this URL (retried with back-off, 10 s a try). It
        /// is a secret: receivers such as Slack's take their token in the URL.
        #[arg(long, env = "HEADROOM_ALERT_WEBHOOK", hide_env_values = true)]
        alert_webhook: Option<String>,
        /// The webhook's body: the alert as JSON, or a Slack-compatible `{"text": …}`.
        #[arg(long, env = "HEADROOM_ALERT_WEBHOOK_FORMAT", value_enum, default_value_t = WebhookFormat::Json)]
        alert_webhook_format: WebhookFormat,
    },
    /// Manage users and tokens.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Remove the measurements of runs older than the months kept, keeping every run's row and
    /// the summaries (digests) the pages read. Postgres drops each old month's partition whole;
    /// SQLite deletes a batch of runs at a time (its file does not shrink until `VACUUM`).
    Retention {
        /// Keep the current month and this many whole months before it (measurements of runs
        /// started earlier, UTC, are removed).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1200))]
        keep_months: u32,
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Print the outcome as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for SHELL to standard output
    /// (`cargo xtask dist` installs them under `share/`).
    Completions { shell: clap_complete::Shell },
    /// Print this program's man page (roff) to standard output, or write it and one page per
    /// subcommand into a folder.
    Man {
        /// Write every page here (`NAME.1`, `NAME-SUBCOMMAND.1`, …) instead.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create a person who signs in with a password (printed once if generated).
    CreateUser {
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Read the password from standard input instead of generating one.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Create an ingest-only token for a measurements agent (replaces that agent's old token).
    CreateAgentToken {
        #[arg(long)]
        name: String,
    },
    /// Create an API token that acts as an existing user (for scripts).
    CreateApiToken {
        #[arg(long)]
        user: String,
        /// The token stops working after this many days (default: until revoked).
        #[arg(long)]
        expires_in_days: Option<u32>,
    },
    /// List API tokens: id, user, created, expiry, revocation (never the secrets).
    ListTokens,
    /// Revoke an API token by the id that create-api-token and list-tokens print.
    RevokeToken {
        #[arg(long)]
        id: String,
    },
    /// Let agent NAME report node ID from now on (a node belongs to the agent that first
    /// reported it; runs from any other agent are refused with 403).
    BindNode {
        #[arg(long)]
        node: String,
        #[arg(long)]
        agent: String,
    },
    /// First-start set-up of a local install: an admin and a token for the local agent,
    /// kept in the data directory.
    InitLocal,
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text).ok_or_else(|| format!("unknown role '{text}': expected viewer, planner, finance or admin"))
}

fn parse_threshold(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number (0.1 is 10 %)"))?;
    model::plan::regression::threshold(value).map_err(|e| e.reason)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli: Cli = cli_config::parse();
    match cli.command {
        Command::Completions { shell } => {
            print_completions(shell);
            return Ok(());
        }
        Command::Man { dir } => return man(dir),
        _ => {}
    }
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colours for a person at a terminal, never in a file or a collector's pipe.
        .with_ansi(std::io::stderr().is_terminal());
    match cli.log_format {
        LogFormat::Text => logs.init(),
        // The event's fields at the top level, the request's span (id, method, path) under
        // `span`.
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
    }
    let url = match &cli.database_url {
        Some(url) => url.clone(),
        None => {
            std::fs::create_dir_all(&cli.data_dir)
                .with_context(|| format!("cannot create data directory {}", cli.data_dir.display()))?;
            store::sqlite_url(&cli.data_dir)
        }
    };
    let store = match cli.command {
        Command::Retention { .. } => Store::connect_current(&url).await?,
        _ => Store::connect(&url).await?,
    };
    match cli.command {
        Command::Serve {
            listen,
            site_root,
            tls_cert,
            tls_key,
            metrics_token,
            alert_threshold,
            alert_webhook,
            alert_webhook_format,
        } => {
            let webhook = alert_webhook
                .filter(|url| !url.trim().is_empty())
                .map(|url| Webhook::new(url.trim(), alert_webhook_format))
                .transpose()?;
            let alerts = Settings { threshold: alert_threshold, webhook, ..Settings::default() };
            serve(store, listen, site_root, tls_cert.zip(tls_key), metrics_token, alerts).await
        }
        Command::Admin(command) => run_admin(&store, &cli.data_dir, command).await,
        Command::Retention { keep_months, dry_run, json } => {
            let before = model::calendar::Date::from_unix_ms(store::now_ms()).first_of_month_back(keep_months);
            let done = store.remove_measurements_before(before, dry_run).await?;
            if json {
                println!("{}", serde_json::to_string(&done)?);
            } else {
                let verb = if dry_run { "would remove" } else { "removed" };
                println!(
                    "{verb} the {} measurements of {} runs started before {} (UTC); their runs and digests stay",
                    done.measurements, done.runs, done.before
                );
                if !done.partitions.is_empty() {
                    let dropped = if dry_run { "would drop" } else { "dropped" };
                    println!("{dropped} partitions: {}", done.partitions.join(", "));
                }
            }
            store.close().await;
            Ok(())
        }
        // Answered before the database is opened.
        Command::Completions { .. } | Command::Man { .. } => Ok(()),
    }
}

async fn serve(
    store: Store,
    listen: SocketAddr,
    site_root: Option<PathBuf>,
    tls: Option<(PathBuf, PathBuf)>,
    metrics_token: Option<String>,
    alerts: Settings,
) -> anyhow::Result<()> {
    let site_root = match site_root {
        Some(root) => root,
        None => std::env::current_exe()?.parent().and_then(|p| p.parent()).map(|p| p.join("site")).unwrap_or_default(),
    };
    let backend = store.database().name();
    // Runs stored before their suites had digests, or under an older reading of runs, are
    // read right meanwhile (computed per page); this stores them for good, in the background.
    let backfill = store.clone();
    tokio::spawn(async move {
        match backfill.refresh_digests().await {
            Ok(0) => {}
            Ok(rewritten) => tracing::info!(rewritten, "stored the digests of older runs"),
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "could not store the digests of older runs; pages compute them as they read")
            }
        }
    });
    let mut state = AppState::new(store.clone(), &site_root);
    state.alerts = std::sync::Arc::new(alerts);
    let _deliverer = headroom_server::alerts::spawn_deliverer(store.clone(), state.alerts.clone());
    if !site_root.join("pkg").join(format!("{}.js", state.leptos.output_name)).exists() {
        tracing::warn!(site_root = %site_root.display(), "no browser bundle found; pages render but do not hydrate (build it with `cargo xtask run`, or `cargo xtask dist` for the release bundle)");
    }
    if let Some(token) = metrics_token.filter(|t| !t.trim().is_empty()) {
        anyhow::ensure!(token.trim().len() >= 16, "--metrics-token must be at least 16 characters");
        state.metrics_token_hash = Some(headroom_server::auth::hash_token(token.trim()));
    }
    match tls {
        Some((cert, key)) => {
            let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert, &key)
                .await
                .with_context(|| format!("cannot load TLS certificate {} and key {}", cert.display(), key.display()))?;
            let listener = std::net::TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
            tracing::info!(%listen, database = backend, "serving HTTPS API, gRPC ingest over TLS and web app");
            state.tls = true;
            let router = headroom_server::app(state);
            headroom_server::serve_router_tls(listener, router, config, shutdown_signal()).await?;
        }
        None => {
            let listener =
                tokio::net::TcpListener::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
            tracing::info!(%listen, database = backend, "serving HTTP API, gRPC ingest and web app");
            headroom_server::serve(listener, state, shutdown_signal()).await?;
        }
    }
    store.close().await;
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("cannot install the SIGTERM handler");
        tokio::select! { _ = interrupt => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    tracing::info!("shutting down");
}

async fn run_admin(store: &Store, data_dir: &std::path::Path, command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::CreateUser { name, role, password_stdin } => {
            let given = if password_stdin {
                anyhow::ensure!(!std::io::stdin().is_terminal(), "--password-stdin expects the password on a pipe");
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                Some(text.trim_end_matches(['\r', '\n']).to_string())
            } else {
                None
            };
            let generated = given.is_none();
            let password = admin::create_user(store, &name, role, given).await?;
            println!("created user '{name}' with role {}", role.as_str());
            if generated {
                println!("password (shown once): {password}");
            }
        }
        AdminCommand::CreateAgentToken { name } => {
            let token = admin::create_agent_token(store, &name).await?;
            println!("agent '{name}' token (shown once; ingest only): {token}");
        }
        AdminCommand::CreateApiToken { user, expires_in_days } => {
            let (token, id) = admin::create_expiring_api_token(store, &user, expires_in_days).await?;
            let until = expires_in_days.map(|d| format!(", valid for {d} days")).unwrap_or_default();
            println!("API token {id} for user '{user}'{until} (shown once): {token}");
        }
        AdminCommand::ListTokens => {
            println!("id\tuser\tcreated_ms\texpires_ms\trevoked_ms");
            let text = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
            for t in store.list_api_tokens().await? {
                let (expires, revoked) = (text(t.expires_at_ms), text(t.revoked_at_ms));
                println!("{}\t{}\t{}\t{expires}\t{revoked}", t.id, t.user_name, t.created_at_ms);
            }
        }
        AdminCommand::RevokeToken { id } => {
            anyhow::ensure!(store.revoke_api_token(id.trim()).await?, "no valid API token with id '{id}'");
            println!("revoked API token {id}");
        }
        AdminCommand::BindNode { node, agent } => {
            admin::bind_node(store, &node, &agent).await?;
            println!("node '{node}' now belongs to agent '{agent}'");
        }
        AdminCommand::InitLocal => {
            let init = admin::init_local(store, data_dir).await?;
            let dir = data_dir.display();
            if init.admin_created {
                println!("created user 'admin'; its password is in {dir}/admin-password");
            }
            if init.agent_token_created {
                println!("created agent 'local'; its token is in {dir}/agent-token");
            }
        }
    }
    Ok(())
}

/// Prints `shell`'s completion script. For bash it mends clap_complete's spelling of a hyphenated
/// name: its case labels say `headroom__subcmd__server…` where its state says `headroom__server…`, so nothing past the first word
/// completed (clap-rs/clap#6421, open).
fn print_completions(shell: clap_complete::Shell) {
    const NAME: &str = "headroom-server";
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), NAME, &mut script);
    let script = String::from_utf8_lossy(&script).replace(&NAME.replace('-', "__subcmd__"), &NAME.replace('-', "__"));
    print!("{script}");
}

/// The man page on standard output, or every page (one per subcommand too) written into `dir`.
fn man(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let command = <Cli as clap::CommandFactory>::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write man pages to {}", dir.display()))
        }
        // As `generate_to` does: no page for the `help` subcommand, so none is named.
        None => Ok(clap_mangen::Man::new(command.disable_help_subcommand(true)).render(&mut std::io::stdout())?),
    }
}
