//! Users, sessions, API tokens and agents. Secrets are stored only as hashes.

use sqlx::FromRow;
use uuid::Uuid;

use super::{Store, now_ms};
use crate::auth::Role;

/// A person who can sign in.
#[derive(Debug, Clone, FromRow)]
pub struct UserRecord {
    pub id: String,
    pub name: String,
    pub role: String,
    pub password_hash: String,
}

impl UserRecord {
    pub fn role(&self) -> Role {
        Role::parse(&self.role).unwrap_or(Role::Viewer)
    }
}

/// A measurements agent allowed to ingest.
#[derive(Debug, Clone, FromRow)]
pub struct AgentRecord {
    pub id: String,
    pub name: String,
    pub scope: String,
    pub created_at_ms: i64,
    pub last_seen_ms: Option<i64>,
}

/// An API token as an admin sees it (never the secret).
#[derive(Debug, Clone, FromRow)]
pub struct ApiTokenRecord {
    pub id: String,
    pub user_name: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

/// A person as an admin sees them: no secrets.
#[derive(Debug, Clone, FromRow)]
pub struct PersonRecord {
    pub id: String,
    pub name: String,
    pub role: String,
    pub created_at_ms: i64,
    /// API tokens neither revoked nor expired.
    pub live_tokens: i64,
}

/// A user name already in use (the error [`Store::create_user`] fails with).
#[derive(Debug, thiserror::Error)]
#[error("a user named '{0}' already exists")]
pub struct NameTaken(pub String);

/// What a change to a person did.
#[derive(Debug, PartialEq, Eq)]
pub enum PersonChange {
    Done,
    NoSuchUser,
    /// Refused: the change would leave no admin, and nobody could manage people again.
    LastAdmin,
}

/// The public name of a token: the first 12 hex digits of its hash.
fn token_id(token_hash: &str) -> String {
    token_hash.chars().take(12).collect()
}

const SESSION_LIFETIME_MS: i64 = 12 * 60 * 60 * 1000;

impl Store {
    pub async fn count_users(&self) -> anyhow::Result<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users").fetch_one(&self.pool).await?;
        Ok(n)
    }

    /// Creates a user; fails with [`NameTaken`] when the name is taken, in any letter case ("Ana"
    /// beside "ana" would read as one person on every page and export).
    pub async fn create_user(&self, name: &str, role: Role, password_hash: &str) -> anyhow::Result<String> {
        let id = Uuid::new_v4().to_string();
        let (_writing, mut tx) = self.begin_write().await?;
        let taken: Option<(String,)> = sqlx::query_as("SELECT name FROM users WHERE lower(name) = lower($1)")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some((existing,)) = taken {
            return Err(NameTaken(existing).into());
        }
        sqlx::query("INSERT INTO users (id, name, role, password_hash, created_at_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&id)
            .bind(name)
            .bind(role.as_str())
            .bind(password_hash)
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .map_err(|e| match e.as_database_error() {
                Some(db) if db.is_unique_violation() => anyhow::Error::from(NameTaken(name.to_string())),
                _ => anyhow::Error::from(e),
            })?;
        tx.commit().await?;
        Ok(id)
    }

    /// Everyone, by name, with how many live API tokens each holds.
    pub async fn list_people(&self) -> anyhow::Result<Vec<PersonRecord>> {
        Ok(sqlx::query_as(
            "SELECT u.id, u.name, u.role, u.created_at_ms, \
             (SELECT COUNT(*) FROM api_tokens t WHERE t.user_id = u.id AND t.revoked_at_ms IS NULL \
              AND (t.expires_at_ms IS NULL OR t.expires_at_ms > $1)) AS live_tokens \
             FROM users u ORDER BY u.name",
        )
        .bind(now_ms())
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn user_by_id(&self, id: &str) -> anyhow::Result<Option<UserRecord>> {
        Ok(sqlx::query_as("SELECT id, name, role, password_hash FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Gives user `id` a role (live at their next request, sessions and tokens alike), unless
    /// that would leave no admin.
    pub async fn set_role(&self, id: &str, role: Role) -> anyhow::Result<PersonChange> {
        self.change_person(id, Some(role)).await
    }

    /// Removes user `id` with their sessions and API tokens, unless they are the last admin.
    /// What they made stays: scenarios lose their author, reports and catalog versions keep the
    /// name that made them.
    pub async fn delete_user(&self, id: &str) -> anyhow::Result<PersonChange> {
        self.change_person(id, None).await
    }

    /// Sets `id`'s role, or removes them (`None`), keeping at least one admin. The admins are
    /// read under a row lock on Postgres (SQLite has one writer), so two admins demoting each
    /// other at once cannot both succeed.
    async fn change_person(&self, id: &str, role: Option<Role>) -> anyhow::Result<PersonChange> {
        let (_writing, mut tx) = self.begin_write().await?;
        // In id order, so two changes at once take the locks in the same order (no deadlock).
        let lock = if self.backend == super::DatabaseKind::Postgres { " ORDER BY id FOR UPDATE" } else { "" };
        let admins: Vec<(String,)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT id FROM users WHERE role = 'admin'{lock}")))
                .fetch_all(&mut *tx)
                .await?;
        let exists: Option<(String,)> =
            sqlx::query_as("SELECT id FROM users WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?;
        if exists.is_none() {
            return Ok(PersonChange::NoSuchUser);
        }
        let is_admin = admins.iter().any(|(a,)| a == id);
        if is_admin && role != Some(Role::Admin) && admins.len() == 1 {
            return Ok(PersonChange::LastAdmin);
        }
        match role {
            Some(role) => {
                sqlx::query("UPDATE users SET role = $1 WHERE id = $2")
                    .bind(role.as_str())
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
            }
            None => sqlx::query("DELETE FROM users WHERE id = $1").bind(id).execute(&mut *tx).await?,
        };
        tx.commit().await?;
        Ok(PersonChange::Done)
    }

    pub async fn user_by_name(&self, name: &str) -> anyhow::Result<Option<UserRecord>> {
        Ok(sqlx::query_as("SELECT id, name, role, password_hash FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Starts a session (and sweeps out expired ones); returns its lifetime in seconds.
    pub async fn create_session(&self, user_id: &str, token_hash: &str) -> anyhow::Result<i64> {
        let now = now_ms();
        sqlx::query("DELETE FROM sessions WHERE expires_at_ms <= $1").bind(now).execute(&self.pool).await?;
        sqlx::query("INSERT INTO sessions (token_hash, user_id, created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4)")
            .bind(token_hash)
            .bind(user_id)
            .bind(now)
            .bind(now + SESSION_LIFETIME_MS)
            .execute(&self.pool)
            .await?;
        Ok(SESSION_LIFETIME_MS / 1000)
    }

    pub async fn delete_session(&self, token_hash: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1").bind(token_hash).execute(&self.pool).await?;
        Ok(())
    }

    /// The user of an unexpired session.
    pub async fn user_by_session(&self, token_hash: &str) -> anyhow::Result<Option<UserRecord>> {
        Ok(sqlx::query_as(
            "SELECT u.id, u.name, u.role, u.password_hash FROM sessions s JOIN users u ON u.id = s.user_id \
             WHERE s.token_hash = $1 AND s.expires_at_ms > $2",
        )
        .bind(token_hash)
        .bind(now_ms())
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Stores an API token (by its hash) for `user_id`, valid until `expires_at_ms` if given;
    /// returns its id.
    pub async fn create_api_token(
        &self,
        user_id: &str,
        token_hash: &str,
        expires_at_ms: Option<i64>,
    ) -> anyhow::Result<String> {
        let id = token_id(token_hash);
        sqlx::query(
            "INSERT INTO api_tokens (token_hash, user_id, created_at_ms, id, expires_at_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token_hash)
        .bind(user_id)
        .bind(now_ms())
        .bind(&id)
        .bind(expires_at_ms)
        .execute(&self.pool)
        .await?;
        Ok(id)
    }

    /// The user of an API token that is neither revoked nor expired.
    pub async fn user_by_api_token(&self, token_hash: &str) -> anyhow::Result<Option<UserRecord>> {
        Ok(sqlx::query_as(
            "SELECT u.id, u.name, u.role, u.password_hash FROM api_tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.token_hash = $1 AND t.revoked_at_ms IS NULL AND (t.expires_at_ms IS NULL OR t.expires_at_ms > $2)",
        )
        .bind(token_hash)
        .bind(now_ms())
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every API token: id, user name, created, expires, revoked (revoked ones are kept, so an
    /// admin can see what was cut off and when).
    pub async fn list_api_tokens(&self) -> anyhow::Result<Vec<ApiTokenRecord>> {
        Ok(sqlx::query_as(
            "SELECT t.id, u.name AS user_name, t.created_at_ms, t.expires_at_ms, t.revoked_at_ms FROM api_tokens t \
             JOIN users u ON u.id = t.user_id ORDER BY t.created_at_ms, t.id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Revokes the API token with `id`; false when there is no such token still valid.
    pub async fn revoke_api_token(&self, id: &str) -> anyhow::Result<bool> {
        let done = sqlx::query("UPDATE api_tokens SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL")
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Creates the agent, or gives an existing agent of that name a new token (the old one stops working).
    pub async fn upsert_agent(&self, name: &str, token_hash: &str) -> anyhow::Result<String> {
        let id = Uuid::new_v4().to_string();
        let (id,): (String,) = sqlx::query_as(
            "INSERT INTO agents (id, name, token_hash, scope, created_at_ms) VALUES ($1, $2, $3, 'ingest', $4) \
             ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash RETURNING id",
        )
        .bind(&id)
        .bind(name)
        .bind(token_hash)
        .bind(now_ms())
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    /// Creates an agent; false (and nothing changed) when the name is taken.
    pub async fn insert_agent(&self, name: &str, token_hash: &str) -> anyhow::Result<bool> {
        let done = sqlx::query(
            "INSERT INTO agents (id, name, token_hash, scope, created_at_ms) VALUES ($1, $2, $3, 'ingest', $4) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(name)
        .bind(token_hash)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn agent_by_token(&self, token_hash: &str) -> anyhow::Result<Option<AgentRecord>> {
        Ok(sqlx::query_as("SELECT id, name, scope, created_at_ms, last_seen_ms FROM agents WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn list_agents(&self) -> anyhow::Result<Vec<AgentRecord>> {
        Ok(sqlx::query_as("SELECT id, name, scope, created_at_ms, last_seen_ms FROM agents ORDER BY name")
            .fetch_all(&self.pool)
            .await?)
    }
}
