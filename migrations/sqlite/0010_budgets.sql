-- Keep in step with the other backend's 0010_budgets.sql.

-- Monthly budgets (issue 18): one per team or per deployment, by name, compared with each
-- report's 12-month forecast. Amounts are integer micro-dollars, like reports.
CREATE TABLE budgets (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('team', 'deployment')),
    name TEXT NOT NULL,
    monthly_micro_usd INTEGER NOT NULL CHECK (monthly_micro_usd >= 0),
    updated_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    updated_at_ms INTEGER NOT NULL,
    UNIQUE (scope, name)
);
