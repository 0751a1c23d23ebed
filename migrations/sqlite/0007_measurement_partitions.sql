-- Keep in step with the other backend's 0007_measurement_partitions.sql.

-- Every measurement carries its run's start time, as on Postgres, whose table is partitioned
-- by its month; SQLite keeps one table (no partitions) of the same columns, in the same order,
-- so the same SQL serves both. Its primary key stays (run_id, seq): Postgres adds the start
-- time only because a partitioned table's key must hold the partition key. No foreign key to
-- runs, as on Postgres: measurements are written only in their run's transaction, and runs
-- are never deleted.

-- A run whose measurements retention removed keeps its row and its digests; this says when.
ALTER TABLE runs ADD COLUMN measurements_removed_at_ms INTEGER;
ALTER TABLE run_suites ADD COLUMN measurements_removed_at_ms INTEGER;

CREATE TABLE measurements_by_start (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
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
    histogram TEXT,
    PRIMARY KEY (run_id, seq)
);

INSERT INTO measurements_by_start (run_id, seq, started_at_ms, suite, case_name, parameters_json, unit, status,
    reason, samples, mean, p50, p90, p99, p999, ci95_low, ci95_high, floor_name, floor_value, histogram)
SELECT m.run_id, m.seq, r.started_at_ms, m.suite, m.case_name, m.parameters_json, m.unit, m.status, m.reason,
    m.samples, m.mean, m.p50, m.p90, m.p99, m.p999, m.ci95_low, m.ci95_high, m.floor_name, m.floor_value, m.histogram
FROM measurements m JOIN runs r ON r.id = m.run_id;

DROP TABLE measurements;
ALTER TABLE measurements_by_start RENAME TO measurements;
