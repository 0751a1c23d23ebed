-- Keep in step with the other backend's 0009_alerts.sql.

-- Regression alerts (model::plan::regression). Each suite of a run keeps its headline figure
-- and its hardware class (the node's instance type, else its CPU model), written with the run,
-- so a new run is compared with the newest runs of its class off an index; and what the run
-- was measured with (agent version, kernel, GPU driver), to say what changed.
ALTER TABLE run_suites ADD COLUMN class TEXT;
ALTER TABLE run_suites ADD COLUMN headline DOUBLE PRECISION;
ALTER TABLE run_suites ADD COLUMN context TEXT;
-- The alert this suite of the run raised or was counted on.
ALTER TABLE run_suites ADD COLUMN alert_id TEXT;
-- Runs stored before: their node's class today and the headline their digest holds, in one
-- pass over the table (every row is rewritten once; a run_suites row is small: a row per run
-- and suite).
UPDATE run_suites rs SET
    class = CASE WHEN TRIM(n.instance_type) <> '' THEN n.instance_type
                 WHEN TRIM(n.cpu_model) <> '' THEN n.cpu_model END,
    headline = CASE WHEN json_typeof(rs.digest::json -> 'headline' -> 'value') = 'number'
                    THEN (rs.digest::json -> 'headline' ->> 'value')::DOUBLE PRECISION END
FROM nodes n WHERE n.id = rs.node_id;
CREATE INDEX run_suites_by_class ON run_suites (class, suite, started_at_ms DESC, run_id) WHERE headline IS NOT NULL;

-- At most one alert is active (open or acknowledged) per class and suite: open_key is set
-- while it is, NULL once resolved, and unique. Later regressed runs are counted on it.
CREATE TABLE alerts (
    id TEXT PRIMARY KEY,
    open_key TEXT UNIQUE,
    state TEXT NOT NULL CHECK (state IN ('open', 'acknowledged', 'resolved')),
    class TEXT NOT NULL,
    suite TEXT NOT NULL,
    figure TEXT NOT NULL,
    unit TEXT NOT NULL,
    better TEXT NOT NULL CHECK (better IN ('higher', 'lower')),
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    hostname TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    last_run_id TEXT NOT NULL,
    last_started_at_ms BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    judged_on TEXT NOT NULL CHECK (judged_on IN ('run', 'window')),
    value DOUBLE PRECISION NOT NULL,
    median DOUBLE PRECISION NOT NULL,
    noise DOUBLE PRECISION NOT NULL,
    baseline_runs BIGINT NOT NULL,
    worse_by DOUBLE PRECISION NOT NULL,
    bound DOUBLE PRECISION NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    monthly_cost_usd DOUBLE PRECISION,
    cost_basis TEXT NOT NULL,
    changes TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    acted_by TEXT,
    webhook_state TEXT NOT NULL CHECK (webhook_state IN ('none', 'pending', 'sent', 'failed')),
    webhook_attempts BIGINT NOT NULL DEFAULT 0,
    webhook_next_ms BIGINT NOT NULL DEFAULT 0,
    webhook_error TEXT
);
CREATE INDEX alerts_by_created ON alerts (created_at_ms DESC, id);
CREATE INDEX alerts_by_state ON alerts (state, created_at_ms DESC, id);
CREATE INDEX alerts_webhook_due ON alerts (webhook_next_ms) WHERE webhook_state = 'pending';
