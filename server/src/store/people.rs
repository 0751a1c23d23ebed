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

    /// Creates a user; fails when the name is taken.
    pub async fn create_user(&self, name: &str, role: Role, password_hash: &str) -> anyhow::Result<String> {
        let id = Uuid::new_v4().to_string();
        sqlx::query("INSERT INTO users (id, name, role, password_hash, created_at_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&id)
            .bind(name)
            .bind(role.as_str())
            .bind(password_hash)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(|e| match e.as_database_error() {
                Some(db) if db.is_unique_violation() => anyhow::anyhow!("a user named '{name}' already exists"),
                _ => e.into(),
            })?;
        Ok(id)
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

    /// Every API token: id, user name, created, expires, revoked.
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
