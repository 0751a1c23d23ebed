//! `headroom-server admin …`: people, tokens, and the first-start set-up of a local install.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

use model::FieldError;

use crate::auth::{self, Role};
use crate::error::ApiError;
use crate::store::Store;

/// The longest user or agent name.
pub const MAX_NAME_CHARS: usize = 64;
/// Password lengths accepted (argon2 hashes all of it; the cap keeps a hostile one cheap).
pub const PASSWORD_CHARS: std::ops::RangeInclusive<usize> = 8..=256;

/// A user or agent name, trimmed: 1 to 64 ASCII letters, digits, `.`, `_`, `-` and `@`, starting
/// with a letter or digit. Names appear on pages, in logs and in exports (reports say who made
/// them), so nothing in one can be markup, a spreadsheet formula or a control character, nor a
/// look-alike of another name in another script (Cyrillic "а" for Latin "a").
pub fn checked_name(field: &str, name: &str) -> Result<String, FieldError> {
    let name = name.trim();
    let problem = if name.is_empty() {
        Some("must not be empty".to_string())
    } else if name.chars().count() > MAX_NAME_CHARS {
        Some(format!("must be at most {MAX_NAME_CHARS} characters"))
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("must start with a letter (a-z, A-Z) or a digit".to_string())
    } else {
        let odd = name.chars().find(|c| !(c.is_ascii_alphanumeric() || ".-_@".contains(*c)));
        odd.map(|c| format!("may hold letters a-z, A-Z, digits, '.', '_', '-' and '@', not {c:?}"))
    };
    match problem {
        Some(reason) => Err(FieldError::new(field, reason)),
        None => Ok(name.to_string()),
    }
}

/// A password of an accepted length.
pub fn checked_password(password: &str) -> Result<(), FieldError> {
    let n = password.chars().count();
    if PASSWORD_CHARS.contains(&n) {
        return Ok(());
    }
    let (low, high) = (PASSWORD_CHARS.start(), PASSWORD_CHARS.end());
    Err(FieldError::new("password", format!("must have {low} to {high} characters, not {n}")))
}

/// Creates a user; returns the password (the given one, or a generated one). Fails with a
/// [`FieldError`] for a bad name or password and with [`crate::store::NameTaken`] for a taken name.
pub async fn create_user(store: &Store, name: &str, role: Role, password: Option<String>) -> anyhow::Result<String> {
    add_user(store, name, role, password).await.map(|(_, password)| password)
}

/// [`create_user`], answering the new user's id as well.
pub async fn add_user(
    store: &Store,
    name: &str,
    role: Role,
    password: Option<String>,
) -> anyhow::Result<(String, String)> {
    let name = checked_name("name", name)?;
    let password = match password {
        Some(p) => {
            checked_password(&p)?;
            p
        }
        None => generated_password(),
    };
    let hash = auth::hash_password_off_runtime(password.clone()).await?;
    let id = store.create_user(&name, role, &hash).await?;
    Ok((id, password))
}

/// Creates an agent, or replaces its token; returns the new token.
pub async fn create_agent_token(store: &Store, name: &str) -> anyhow::Result<String> {
    let name = checked_name("name", name)?;
    let token = auth::new_token("hr_agent_");
    store.upsert_agent(&name, &auth::hash_token(&token)).await?;
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
    let (token, id, _) = api_token_for(store, &record.id, days).await?;
    Ok((token, id))
}

/// The longest an API token may live.
pub const MAX_TOKEN_DAYS: u32 = 3650;

/// Creates an API token acting as user `user_id` (who must exist), valid for `days` if given;
/// returns the token, its id and when it expires.
pub async fn api_token_for(
    store: &Store,
    user_id: &str,
    days: Option<u32>,
) -> Result<(String, String, Option<i64>), ApiError> {
    if let Some(days) = days
        && !(1..=MAX_TOKEN_DAYS).contains(&days)
    {
        return Err(FieldError::new("expires_in_days", format!("must be between 1 and {MAX_TOKEN_DAYS}")).into());
    }
    let expires = days.map(|d| crate::store::now_ms() + i64::from(d) * 86_400_000);
    let token = auth::new_token("hr_api_");
    let id = store.create_api_token(user_id, &auth::hash_token(&token), expires).await?;
    Ok((token, id, expires))
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
