//! `headroom-server admin …`: people, tokens, and the first-start set-up of a local install.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::auth::{self, Role};
use crate::store::Store;

/// Creates a user; returns the password (the given one, or a generated one).
pub async fn create_user(store: &Store, name: &str, role: Role, password: Option<String>) -> anyhow::Result<String> {
    let name = name.trim();
    anyhow::ensure!(!name.is_empty(), "the user name must not be empty");
    let password = match password {
        Some(p) => {
            anyhow::ensure!(p.chars().count() >= 8, "the password must have at least 8 characters");
            p
        }
        None => generated_password(),
    };
    store.create_user(name, role, &auth::hash_password(&password)?).await?;
    Ok(password)
}

/// Creates an agent, or replaces its token; returns the new token.
pub async fn create_agent_token(store: &Store, name: &str) -> anyhow::Result<String> {
    let name = name.trim();
    anyhow::ensure!(!name.is_empty(), "the agent name must not be empty");
    let token = auth::new_token("hr_agent_");
    store.upsert_agent(name, &auth::hash_token(&token)).await?;
    Ok(token)
}

/// Creates an API token acting as user `name`.
pub async fn create_api_token(store: &Store, user: &str) -> anyhow::Result<String> {
    create_expiring_api_token(store, user, None).await.map(|(token, _)| token)
}

/// Creates an API token acting as user `name`, valid for `days` if given; returns the token
/// and its id (by which `revoke-token` names it).
pub async fn create_expiring_api_token(
    store: &Store,
    user: &str,
    days: Option<u32>,
) -> anyhow::Result<(String, String)> {
    let record = store.user_by_name(user).await?.with_context(|| format!("no user named '{user}'"))?;
    if let Some(days) = days {
        anyhow::ensure!((1..=3650).contains(&days), "--expires-in-days must be between 1 and 3650");
    }
    let expires = days.map(|d| crate::store::now_ms() + i64::from(d) * 86_400_000);
    let token = auth::new_token("hr_api_");
    let id = store.create_api_token(&record.id, &auth::hash_token(&token), expires).await?;
    Ok((token, id))
}

/// Binds `node_id` to agent `agent`, so that agent may report it from now on.
pub async fn bind_node(store: &Store, node_id: &str, agent: &str) -> anyhow::Result<()> {
    let record = store.list_agents().await?.into_iter().find(|a| a.name == agent);
    let record = record.with_context(|| format!("no agent named '{agent}'"))?;
    anyhow::ensure!(store.bind_node(node_id, &record.id).await?, "no node with id '{node_id}'");
    Ok(())
}

/// What `init-local` set up.
#[derive(Debug)]
pub struct LocalInit {
    pub admin_created: bool,
    pub agent_token_created: bool,
}

/// On an empty database, creates user `admin` with a generated password kept in
/// `data_dir/admin-password`; makes sure `data_dir/agent-token` holds a valid token for agent
/// `local`. Both files are readable by the owner only.
pub async fn init_local(store: &Store, data_dir: &Path) -> anyhow::Result<LocalInit> {
    fs::create_dir_all(data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
    let admin_created = store.count_users().await? == 0;
    if admin_created {
        let password = create_user(store, "admin", Role::Admin, None).await?;
        write_secret(&data_dir.join("admin-password"), &password)?;
    }
    let token_file = data_dir.join("agent-token");
    let valid = match fs::read_to_string(&token_file) {
        Ok(token) => store.agent_by_token(&auth::hash_token(token.trim())).await?.is_some(),
        Err(_) => false,
    };
    if !valid {
        write_secret(&token_file, &create_agent_token(store, "local").await?)?;
    }
    Ok(LocalInit { admin_created, agent_token_created: !valid })
}

fn generated_password() -> String {
    auth::new_token("")[..20].to_string()
}

fn write_secret(path: &Path, secret: &str) -> anyhow::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(file, "{secret}")?;
    Ok(())
}
