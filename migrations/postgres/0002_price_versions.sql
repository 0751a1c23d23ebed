-- Price catalog versions. Keep in step with migrations/sqlite/0002_price_versions.sql.
-- Each import makes a new version holding the whole catalog as exported; plans and reports
-- record the version they were priced with. Money is integer micro-dollars.

CREATE TABLE catalog_versions (
    version BIGINT PRIMARY KEY,
    created_at_ms BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('default', 'import')),
    row_count BIGINT NOT NULL,
    csv TEXT NOT NULL
);

ALTER TABLE price_catalog ADD COLUMN hourly_micro_usd BIGINT NOT NULL DEFAULT 0;
ALTER TABLE price_catalog ADD COLUMN catalog_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE scenarios ADD COLUMN catalog_version BIGINT;

-- Finance reports: the computed rows (integer micro-dollars, with the catalog version, price
-- dates and benchmark runs behind them) are kept whole, so an export years later says what
-- was said then.
CREATE TABLE reports (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    period_from TEXT NOT NULL,
    period_to TEXT NOT NULL,
    catalog_version BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    deployment_count BIGINT NOT NULL,
    total_micro_usd BIGINT NOT NULL,
    report_json TEXT NOT NULL
);
CREATE INDEX reports_by_time ON reports (created_at_ms DESC, id);
