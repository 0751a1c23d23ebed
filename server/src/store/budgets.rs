//! Monthly budgets, one per team or deployment by name, compared with reports' forecasts.

use sqlx::FromRow;
use uuid::Uuid;

use super::{Store, now_ms};

/// A stored budget, with the name of who set it last.
#[derive(Debug, Clone, PartialEq, Eq, FromRow, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BudgetRecord {
    pub id: String,
    /// `team` or `deployment`.
    pub scope: String,
    pub name: String,
    pub monthly_micro_usd: i64,
    pub updated_by: Option<String>,
    pub updated_at_ms: i64,
}

/// What a budget can be set for.
pub const SCOPES: [&str; 2] = ["team", "deployment"];

const SELECT: &str = "SELECT b.id, b.scope, b.name, b.monthly_micro_usd, u.name AS updated_by, b.updated_at_ms \
                      FROM budgets b LEFT JOIN users u ON u.id = b.updated_by";

impl Store {
    /// Sets the monthly budget of `scope` `name` (a second call for the same one replaces the
    /// amount) and returns it.
    pub async fn set_budget(
        &self,
        scope: &str,
        name: &str,
        micros: i64,
        user_id: &str,
    ) -> anyhow::Result<BudgetRecord> {
        let (_writing, mut tx) = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO budgets (id, scope, name, monthly_micro_usd, updated_by, updated_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, name) DO UPDATE SET \
             monthly_micro_usd = excluded.monthly_micro_usd, updated_by = excluded.updated_by, \
             updated_at_ms = excluded.updated_at_ms",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(scope)
        .bind(name)
        .bind(micros)
        .bind(user_id)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        sqlx::query_as(sqlx::AssertSqlSafe(format!("{SELECT} WHERE b.scope = $1 AND b.name = $2")))
            .bind(scope)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| anyhow::anyhow!("budget {scope} {name} vanished after it was set"))
    }

    /// Every budget, teams first, by name (sorted here: Postgres orders text by its locale,
    /// SQLite by bytes).
    pub async fn budgets(&self) -> anyhow::Result<Vec<BudgetRecord>> {
        let mut all: Vec<BudgetRecord> =
            sqlx::query_as(sqlx::AssertSqlSafe(SELECT.to_string())).fetch_all(&self.pool).await?;
        all.sort_by(|a, b| b.scope.cmp(&a.scope).then_with(|| a.name.cmp(&b.name)));
        Ok(all)
    }

    /// Deletes a budget; whether there was one.
    pub async fn delete_budget(&self, id: &str) -> anyhow::Result<bool> {
        let (_writing, mut tx) = self.begin_write().await?;
        let done = sqlx::query("DELETE FROM budgets WHERE id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }
}
