//! Stored finance reports.

use std::collections::HashSet;

use sqlx::{AssertSqlSafe, FromRow};
use uuid::Uuid;

use super::{Store, now_ms};
use crate::reports::Report;

/// A report without its rows.
#[derive(Debug, Clone, FromRow, serde::Serialize, utoipa::ToSchema)]
pub struct ReportRecord {
    pub id: String,
    pub name: String,
    pub period_from: String,
    pub period_to: String,
    pub catalog_version: i64,
    pub created_by: String,
    pub created_at_ms: i64,
    pub deployment_count: i64,
    pub total_micro_usd: i64,
}

const SUMMARY: &str = "SELECT id, name, period_from, period_to, catalog_version, created_by, created_at_ms, \
                       deployment_count, total_micro_usd FROM reports";

impl Store {
    pub async fn insert_report(&self, report: &Report, created_by: &str) -> anyhow::Result<ReportRecord> {
        sqlx::query(
            "INSERT INTO reports (id, name, period_from, period_to, catalog_version, created_by, created_at_ms, \
             deployment_count, total_micro_usd, report_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&report.id)
        .bind(&report.name)
        .bind(&report.from)
        .bind(&report.to)
        .bind(report.catalog_version)
        .bind(created_by)
        .bind(if report.generated_at_ms > 0 { report.generated_at_ms } else { now_ms() })
        .bind(report.rows.len() as i64)
        .bind(report.total_micro_usd())
        .bind(serde_json::to_string(report)?)
        .execute(&self.pool)
        .await?;
        self.report_record(&report.id).await?.ok_or_else(|| anyhow::anyhow!("report {} vanished", report.id))
    }

    pub async fn report_record(&self, id: &str) -> anyhow::Result<Option<ReportRecord>> {
        Ok(sqlx::query_as(AssertSqlSafe(format!("{SUMMARY} WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Newest first.
    pub async fn list_reports(&self, limit: u32) -> anyhow::Result<Vec<ReportRecord>> {
        Ok(sqlx::query_as(AssertSqlSafe(list_sql(limit))).fetch_all(&self.pool).await?)
    }

    /// A stored report; one stored before reports recorded who built them and when takes both
    /// from its record.
    pub async fn report(&self, id: &str) -> anyhow::Result<Option<Report>> {
        let row: Option<(String, String, i64)> =
            sqlx::query_as("SELECT report_json, created_by, created_at_ms FROM reports WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        let Some((json, created_by, created_at_ms)) = row else { return Ok(None) };
        let mut report: Report = serde_json::from_str(&json)?;
        if report.generated_at_ms == 0 {
            report.generated_at_ms = created_at_ms;
        }
        if report.generated_by.is_empty() {
            report.generated_by = created_by;
        }
        Ok(Some(report))
    }

    /// Which of these scenario ids are saved.
    pub async fn existing_scenarios<'a>(&self, ids: impl Iterator<Item = &'a str>) -> anyhow::Result<HashSet<String>> {
        self.existing_ids("scenarios", ids).await
    }

    /// Which of these run ids are stored.
    pub async fn existing_runs(&self, ids: &[Uuid]) -> anyhow::Result<HashSet<Uuid>> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let found = self.existing_ids("runs", ids.iter().map(String::as_str)).await?;
        Ok(found.iter().filter_map(|id| Uuid::parse_str(id).ok()).collect())
    }

    /// Which of `ids` are in `table`'s `id` column, asked 500 at a time; ids the store could not
    /// have handed out are not looked up.
    async fn existing_ids<'a>(
        &self,
        table: &'static str,
        ids: impl Iterator<Item = &'a str>,
    ) -> anyhow::Result<HashSet<String>> {
        let ids: Vec<&str> = ids.filter(|id| super::could_be_id(id)).collect::<HashSet<_>>().into_iter().collect();
        let mut found = HashSet::new();
        for chunk in ids.chunks(500) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!("SELECT id FROM {table} WHERE id IN ({})", placeholders.join(", "));
            let mut query = sqlx::query_as::<_, (String,)>(AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            found.extend(query.fetch_all(&self.pool).await?.into_iter().map(|(id,)| id));
        }
        Ok(found)
    }
}

/// The newest `limit` reports.
pub(super) fn list_sql(limit: u32) -> String {
    format!("{SUMMARY} ORDER BY created_at_ms DESC, id LIMIT {limit}")
}
