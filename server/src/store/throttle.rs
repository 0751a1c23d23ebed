//! Failed sign-ins counted per key (an account or a client address) in the database, so that
//! every server replica sees the same count and the same lock.

use super::{Store, now_ms};

/// Failures are forgotten after a day without one.
const FORGET_AFTER_MS: i64 = 24 * 60 * 60 * 1000;
/// The longest lock.
const MAX_LOCK_MS: i64 = 15 * 60 * 1000;

impl Store {
    /// The latest time (Unix ms) until which any of `keys` is locked, if one is locked now.
    pub async fn login_locked_until(&self, keys: &[&str]) -> anyhow::Result<Option<i64>> {
        let now = now_ms();
        let mut latest = None;
        for key in keys {
            let row: Option<(i64,)> =
                sqlx::query_as("SELECT locked_until_ms FROM login_throttle WHERE key = $1 AND locked_until_ms > $2")
                    .bind(*key)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
            latest = latest.max(row.map(|(until,)| until));
        }
        Ok(latest)
    }

    /// Counts a failure for `key`. Past `free` failures the key is locked for 1 s, doubling with
    /// each further failure up to 15 minutes. Returns the count.
    pub async fn record_login_failure(&self, key: &str, free: u32) -> anyhow::Result<i64> {
        let now = now_ms();
        let (failures,): (i64,) = sqlx::query_as(
            "INSERT INTO login_throttle (key, failures, locked_until_ms, updated_at_ms) VALUES ($1, 1, 0, $2) \
             ON CONFLICT (key) DO UPDATE SET failures = CASE WHEN login_throttle.updated_at_ms < $3 THEN 1 \
             ELSE login_throttle.failures + 1 END, updated_at_ms = $2 RETURNING failures",
        )
        .bind(key)
        .bind(now)
        .bind(now - FORGET_AFTER_MS)
        .fetch_one(&self.pool)
        .await?;
        let over = failures - i64::from(free);
        if over > 0 {
            let lock_ms = 1000i64.saturating_mul(1 << (over - 1).min(20)).min(MAX_LOCK_MS);
            sqlx::query("UPDATE login_throttle SET locked_until_ms = $1 WHERE key = $2")
                .bind(now + lock_ms)
                .bind(key)
                .execute(&self.pool)
                .await?;
        }
        Ok(failures)
    }

    /// Forgets the failures of `key` (after a successful sign-in).
    pub async fn clear_login_failures(&self, key: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM login_throttle WHERE key = $1").bind(key).execute(&self.pool).await?;
        Ok(())
    }
}
