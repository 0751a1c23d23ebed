-- Headroom schema. Keep in step with migrations/postgres/0001_init.sql: same tables, columns
-- and constraints; only the spelling of types differs. Times are Unix milliseconds (INTEGER).

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'planner', 'finance', 'admin')),
    password_hash TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    token_hash TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL CHECK (scope IN ('ingest')),
    created_at_ms INTEGER NOT NULL,
    last_seen_ms INTEGER
);

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    hostname TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cpu_cores INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    kernel TEXT NOT NULL,
    instance_type TEXT,
    hourly_usd REAL,
    gpus_json TEXT NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    run_count INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL REFERENCES nodes (id),
    agent_id TEXT NOT NULL REFERENCES agents (id),
    agent_version TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER NOT NULL,
    received_at_ms INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'partial')),
    suites TEXT NOT NULL,
    measurement_count INTEGER NOT NULL
);
CREATE INDEX runs_by_node ON runs (node_id, started_at_ms DESC, id);
CREATE INDEX runs_by_start ON runs (started_at_ms DESC, id);

CREATE TABLE run_suites (
    suite TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    node_id TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    PRIMARY KEY (suite, run_id)
);
CREATE INDEX run_suites_by_node ON run_suites (node_id, suite, started_at_ms DESC, run_id);
CREATE INDEX run_suites_by_start ON run_suites (suite, started_at_ms DESC, run_id);

CREATE TABLE measurements (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    suite TEXT NOT NULL,
    case_name TEXT NOT NULL,
    parameters_json TEXT NOT NULL,
    unit TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed')),
    reason TEXT,
    samples INTEGER,
    mean REAL,
    p50 REAL,
    p90 REAL,
    p99 REAL,
    p999 REAL,
    ci95_low REAL,
    ci95_high REAL,
    floor_name TEXT,
    floor_value REAL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE price_catalog (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    gpu_model TEXT,
    gpu_count INTEGER NOT NULL,
    vcpus INTEGER,
    memory_bytes INTEGER,
    hourly_usd REAL NOT NULL,
    purchase_option TEXT NOT NULL CHECK (purchase_option IN ('on_demand', 'spot', 'one_year', 'three_year')),
    region TEXT,
    source TEXT NOT NULL,
    as_of TEXT NOT NULL
);

CREATE TABLE scenarios (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    inputs_json TEXT NOT NULL,
    created_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
