//! The grid-intensity table: every version ever imported, each kept whole as its CSV.

use sqlx::FromRow;

use super::Store;
use super::{Made, record_version};
use crate::grid::{self, GridRow};

/// One version of the grid-intensity table.
#[derive(Debug, Clone, FromRow, serde::Serialize, utoipa::ToSchema)]
pub struct GridVersion {
    pub version: i64,
    pub created_at_ms: i64,
    pub created_by: String,
    pub origin: String,
    pub row_count: i64,
}

impl Store {
    /// Loads the shipped table into a database that has never had one (under the table's lock,
    /// so replicas starting together load it once).
    pub(super) async fn seed_grid_table(&self) -> anyhow::Result<()> {
        let rows = grid::parse(grid::DEFAULT_TABLE)
            .map_err(|errors| anyhow::anyhow!("the shipped grid-intensity table is invalid: {errors:?}"))?;
        self.write_grid_table(&rows, "default", "default", true).await?;
        Ok(())
    }

    /// The table in force and its version (none before the first start's seeding).
    pub async fn grid_table(&self) -> anyhow::Result<Option<(GridVersion, Vec<GridRow>)>> {
        let newest: Option<(i64, i64, String, String, i64, String)> = sqlx::query_as(
            "SELECT version, created_at_ms, created_by, origin, row_count, csv FROM grid_versions \
             ORDER BY version DESC LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        let Some((version, created_at_ms, created_by, origin, row_count, csv)) = newest else { return Ok(None) };
        let rows = grid::parse(&csv)
            .map_err(|errors| anyhow::anyhow!("grid-intensity version {version} does not read back: {errors:?}"))?;
        Ok(Some((GridVersion { version, created_at_ms, created_by, origin, row_count }, rows)))
    }

    /// Every version, newest first.
    pub async fn grid_versions(&self) -> anyhow::Result<Vec<GridVersion>> {
        Ok(sqlx::query_as(
            "SELECT version, created_at_ms, created_by, origin, row_count FROM grid_versions ORDER BY version DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Replaces the table as a new version.
    pub async fn replace_grid_table(&self, rows: &[GridRow], created_by: &str, origin: &str) -> anyhow::Result<i64> {
        let version = self.write_grid_table(rows, created_by, origin, false).await?;
        Ok(version.expect("written unless only_if_empty"))
    }

    async fn write_grid_table(
        &self,
        rows: &[GridRow],
        created_by: &str,
        origin: &str,
        only_if_empty: bool,
    ) -> anyhow::Result<Option<i64>> {
        let (_writing, mut tx) = self.begin_write().await?;
        let Some(version) = self.next_version(&mut tx, "grid_versions", only_if_empty).await? else {
            return Ok(None);
        };
        let made = Made { version, created_by, origin, rows: rows.len(), csv: grid::to_csv(rows) };
        record_version(&mut tx, "grid_versions", made).await?;
        tx.commit().await?;
        Ok(Some(version))
    }
}
