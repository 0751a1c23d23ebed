//! The price catalog: the current rows, and every version ever imported.

use sqlx::{AssertSqlSafe, FromRow};
use uuid::Uuid;

use super::{Made, Store, record_version};
use crate::prices::{self, PriceRow};

#[derive(FromRow)]
struct Row {
    provider: String,
    instance_type: String,
    gpu_model: Option<String>,
    gpu_count: i64,
    vcpus: Option<i64>,
    memory_bytes: Option<i64>,
    hourly_micro_usd: i64,
    purchase_option: String,
    region: Option<String>,
    source: String,
    as_of: String,
}

/// One version of the catalog.
#[derive(Debug, Clone, FromRow, serde::Serialize, utoipa::ToSchema)]
pub struct CatalogVersion {
    pub version: i64,
    pub created_at_ms: i64,
    pub created_by: String,
    pub origin: String,
    pub row_count: i64,
}

impl Store {
    /// Loads the shipped catalog into a database that has never had one. Replicas starting at
    /// the same instant all call this; the check is made under the catalog's lock, so exactly
    /// one of them loads it.
    pub(super) async fn seed_price_catalog(&self) -> anyhow::Result<()> {
        if self.catalog_version().await?.is_some() {
            return Ok(());
        }
        let rows = prices::parse(prices::DEFAULT_CATALOG)
            .map_err(|errors| anyhow::anyhow!("the shipped price catalog is invalid: {errors:?}"))?;
        self.write_price_catalog(&rows, "default", "default", true).await?;
        Ok(())
    }

    /// The newest catalog version, if any was ever loaded.
    pub async fn catalog_version(&self) -> anyhow::Result<Option<CatalogVersion>> {
        Ok(sqlx::query_as(
            "SELECT version, created_at_ms, created_by, origin, row_count FROM catalog_versions \
             ORDER BY version DESC LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every version, newest first.
    pub async fn catalog_versions(&self) -> anyhow::Result<Vec<CatalogVersion>> {
        Ok(sqlx::query_as(
            "SELECT version, created_at_ms, created_by, origin, row_count FROM catalog_versions ORDER BY version DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Replaces the whole catalog in one transaction and records it as a new version.
    pub async fn replace_price_catalog(
        &self,
        rows: &[PriceRow],
        created_by: &str,
        origin: &str,
    ) -> anyhow::Result<i64> {
        let version = self.write_price_catalog(rows, created_by, origin, false).await?;
        Ok(version.expect("written unless only_if_empty"))
    }

    /// [`Store::replace_price_catalog`]; with `only_if_empty`, nothing when a catalog exists.
    /// The next version number is read and written under a lock on `catalog_versions`
    /// (Postgres; SQLite has one writer), so imports on two replicas at once get two versions
    /// in turn instead of one failing on the same number.
    async fn write_price_catalog(
        &self,
        rows: &[PriceRow],
        created_by: &str,
        origin: &str,
        only_if_empty: bool,
    ) -> anyhow::Result<Option<i64>> {
        let (_writing, mut tx) = self.begin_write().await?;
        let Some(version) = self.next_version(&mut tx, "catalog_versions", only_if_empty).await? else {
            return Ok(None);
        };
        sqlx::query("DELETE FROM price_catalog").execute(&mut *tx).await?;
        const COLUMNS: usize = 14;
        for chunk in rows.chunks(500) {
            let mut sql = String::from(
                "INSERT INTO price_catalog (id, provider, instance_type, gpu_model, gpu_count, vcpus, memory_bytes, \
                 hourly_usd, purchase_option, region, source, as_of, hourly_micro_usd, catalog_version) VALUES ",
            );
            for i in 0..chunk.len() {
                let cells: Vec<String> = (1..=COLUMNS).map(|c| format!("${}", i * COLUMNS + c)).collect();
                sql.push_str(&format!("{}({})", if i == 0 { "" } else { ", " }, cells.join(", ")));
            }
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for r in chunk {
                query = query
                    .bind(Uuid::new_v4().to_string())
                    .bind(&r.provider)
                    .bind(&r.instance_type)
                    .bind(&r.gpu_model)
                    .bind(i64::from(r.gpu_count))
                    .bind(r.vcpus.map(i64::from))
                    .bind(r.memory_bytes.map(|b| b as i64))
                    .bind(model::money::to_usd(r.hourly_micro_usd))
                    .bind(&r.purchase_option)
                    .bind(&r.region)
                    .bind(&r.source)
                    .bind(&r.as_of)
                    .bind(r.hourly_micro_usd)
                    .bind(version);
            }
            query.execute(&mut *tx).await?;
        }
        let made = Made { version, created_by, origin, rows: rows.len(), csv: prices::to_csv(rows) };
        record_version(&mut tx, "catalog_versions", made).await?;
        tx.commit().await?;
        Ok(Some(version))
    }

    /// The current catalog in a stable order.
    pub async fn price_catalog(&self) -> anyhow::Result<Vec<PriceRow>> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT provider, instance_type, gpu_model, gpu_count, vcpus, memory_bytes, hourly_micro_usd, \
             purchase_option, region, source, as_of FROM price_catalog",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut rows: Vec<PriceRow> = rows
            .into_iter()
            .map(|r| PriceRow {
                provider: r.provider,
                instance_type: r.instance_type,
                gpu_model: r.gpu_model,
                gpu_count: r.gpu_count as u32,
                vcpus: r.vcpus.map(|v| v as u32),
                memory_bytes: r.memory_bytes.map(|b| b as u64),
                hourly_micro_usd: r.hourly_micro_usd,
                purchase_option: r.purchase_option,
                region: r.region,
                source: r.source,
                as_of: r.as_of,
            })
            .collect();
        // Sorted here, not in SQL: the two databases collate text differently.
        rows.sort_by(|a, b| {
            (&a.provider, &a.instance_type, &a.purchase_option, &a.region).cmp(&(
                &b.provider,
                &b.instance_type,
                &b.purchase_option,
                &b.region,
            ))
        });
        Ok(rows)
    }
}
