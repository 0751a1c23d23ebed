//! Saved scenarios (page inputs under a name) and price look-ups for the pages. Writes queue for
//! SQLite's single writer like every other write, so contention is a 503, not a 500.

use std::collections::BTreeMap;

use model::wire::view::PriceOffer;
use sqlx::FromRow;
use uuid::Uuid;

use super::{Store, now_ms};

/// A stored scenario, with the name of who saved it.
#[derive(Debug, Clone, FromRow)]
pub struct ScenarioRecord {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub inputs_json: String,
    pub created_by: Option<String>,
    pub created_at_ms: i64,
    /// The price catalog version current when it was saved.
    pub catalog_version: Option<i64>,
}

impl ScenarioRecord {
    pub fn inputs(&self) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(serde_json::from_str(&self.inputs_json)?)
    }
}

const SELECT: &str = "SELECT s.id, s.name, s.kind, s.inputs_json, u.name AS created_by, s.created_at_ms, \
                      s.catalog_version \
                      FROM scenarios s LEFT JOIN users u ON u.id = s.created_by";

impl Store {
    pub async fn insert_scenario(
        &self,
        kind: &str,
        name: &str,
        inputs: &BTreeMap<String, String>,
        user_id: &str,
    ) -> anyhow::Result<ScenarioRecord> {
        let id = Uuid::new_v4().to_string();
        let now = now_ms();
        let (_writing, mut tx) = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO scenarios (id, name, kind, inputs_json, created_by, created_at_ms, updated_at_ms, \
             catalog_version) VALUES ($1, $2, $3, $4, $5, $6, $6, (SELECT MAX(version) FROM catalog_versions))",
        )
        .bind(&id)
        .bind(name)
        .bind(kind)
        .bind(serde_json::to_string(inputs)?)
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.scenario(&id).await?.ok_or_else(|| anyhow::anyhow!("scenario {id} vanished after insert"))
    }

    pub async fn scenario(&self, id: &str) -> anyhow::Result<Option<ScenarioRecord>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!("{SELECT} WHERE s.id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Gives a scenario a new name; `None` when there is no such scenario.
    pub async fn rename_scenario(&self, id: &str, name: &str) -> anyhow::Result<Option<ScenarioRecord>> {
        let (_writing, mut tx) = self.begin_write().await?;
        let done = sqlx::query("UPDATE scenarios SET name = $1, updated_at_ms = $2 WHERE id = $3")
            .bind(name)
            .bind(now_ms())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.scenario(id).await
    }

    /// Deletes a scenario; whether there was one. Reports built from it keep their own copy of
    /// its figures and its id.
    pub async fn delete_scenario(&self, id: &str) -> anyhow::Result<bool> {
        let (_writing, mut tx) = self.begin_write().await?;
        let done = sqlx::query("DELETE FROM scenarios WHERE id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Newest first.
    pub async fn list_scenarios(&self, limit: u32) -> anyhow::Result<Vec<ScenarioRecord>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{SELECT} ORDER BY s.created_at_ms DESC, s.id DESC LIMIT {limit}"
        )))
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many scenarios of `kind` are saved.
    pub async fn count_scenarios(&self, kind: &str) -> anyhow::Result<i64> {
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM scenarios WHERE kind = $1").bind(kind).fetch_one(&self.pool).await?;
        Ok(n)
    }

    /// The newest catalog price of an instance type under each purchase option it is listed
    /// with, in [`crate::prices::PURCHASE_OPTIONS`]' order. A node does not say its region: of
    /// rows as new as each other, the first region by name (then provider) is taken for every
    /// option alike, so an import's prices for one type come from one region where it lists
    /// them all there. A row without a region sorts first on both backends (Postgres would put
    /// a NULL last, SQLite first).
    pub async fn catalog_offers(&self, instance_type: &str) -> anyhow::Result<Vec<PriceOffer>> {
        let rows: Vec<(String, i64, String, String, i64)> = sqlx::query_as(
            "SELECT purchase_option, hourly_micro_usd, source, as_of, catalog_version FROM price_catalog \
             WHERE instance_type = $1 ORDER BY as_of DESC, COALESCE(region, ''), provider, id",
        )
        .bind(instance_type)
        .fetch_all(&self.pool)
        .await?;
        Ok(crate::prices::PURCHASE_OPTIONS
            .iter()
            .filter_map(|option| {
                let (_, micros, source, as_of, version) = rows.iter().find(|r| r.0 == *option)?;
                Some(PriceOffer {
                    purchase_option: option.to_string(),
                    hourly_usd: model::money::to_usd(*micros),
                    source: format!("price catalog v{version} ({source}, as of {as_of})"),
                })
            })
            .collect())
    }
}
