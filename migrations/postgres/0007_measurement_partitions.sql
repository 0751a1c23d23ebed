-- Keep in step with the other backend's 0007_measurement_partitions.sql.

-- Every measurement carries its run's start time, and on Postgres the table is partitioned by
-- the month (UTC) of that time, one partition per month that has runs. Retention
-- (`headroom-server retention`) drops a month's partition whole, and a read of one run, which
-- names its start time, is pruned to a single partition. Postgres requires the partition key in
-- the primary key. Measurements have no foreign key to runs any more: they are written only in
-- the transaction that writes their run, and runs are never deleted, while the key's check
-- cost a lookup and a lock of the run's row for every measurement stored.

-- A run whose measurements retention removed keeps its row and its digests (the summaries the
-- pages read); this says when they went.
ALTER TABLE runs ADD COLUMN measurements_removed_at_ms BIGINT;
ALTER TABLE run_suites ADD COLUMN measurements_removed_at_ms BIGINT;

ALTER TABLE measurements RENAME TO measurements_unpartitioned;
ALTER INDEX measurements_pkey RENAME TO measurements_unpartitioned_pkey;

CREATE TABLE measurements (
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    suite TEXT NOT NULL,
    case_name TEXT NOT NULL,
    parameters_json TEXT NOT NULL,
    unit TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed')),
    reason TEXT,
    samples BIGINT,
    mean DOUBLE PRECISION,
    p50 DOUBLE PRECISION,
    p90 DOUBLE PRECISION,
    p99 DOUBLE PRECISION,
    p999 DOUBLE PRECISION,
    ci95_low DOUBLE PRECISION,
    ci95_high DOUBLE PRECISION,
    floor_name TEXT,
    floor_value DOUBLE PRECISION,
    histogram TEXT,
    PRIMARY KEY (run_id, seq, started_at_ms)
) PARTITION BY RANGE (started_at_ms);

-- The partition of the month of `at_ms`, created and attached if it is missing; its name
-- (measurements_yYYYYmMM). The ingest calls it first in each run's transaction, so a run and
-- its month's partition are stored together or not at all. A month that exists costs a
-- catalog lookup and no lock.
CREATE FUNCTION headroom_measurements_partition(at_ms BIGINT) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    month_start TIMESTAMP := date_trunc('month', to_timestamp(at_ms / 1000.0) AT TIME ZONE 'UTC');
    part TEXT := 'measurements_' || to_char(month_start, '"y"YYYY"m"MM');
    lo BIGINT := (extract(epoch FROM month_start) * 1000)::BIGINT;
    hi BIGINT := (extract(epoch FROM month_start + INTERVAL '1 month') * 1000)::BIGINT;
BEGIN
    -- A partition of measurements by that name (not merely a table: a leftover one, detached
    -- by hand, would make the insert fail with a plain "already exists" below).
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'measurements'::regclass AND c.relname = part) THEN
        RETURN part;
    END IF;
    -- The mode ATTACH takes anyway, and one that conflicts with itself: makers of a month queue
    -- here, while inserts and reads go on. Taking it also reads the catalog afresh, so a month
    -- made meanwhile is seen below (an advisory lock would not: the check would miss it).
    LOCK TABLE measurements IN SHARE UPDATE EXCLUSIVE MODE;
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'measurements'::regclass AND c.relname = part) THEN
        RETURN part;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE measurements INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    EXECUTE format('ALTER TABLE measurements ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', part, lo, hi);
    RETURN part;
END
$$;

SELECT headroom_measurements_partition(MIN(started_at_ms)) FROM runs
GROUP BY date_trunc('month', to_timestamp(started_at_ms / 1000.0) AT TIME ZONE 'UTC');

INSERT INTO measurements (run_id, seq, started_at_ms, suite, case_name, parameters_json, unit, status, reason,
    samples, mean, p50, p90, p99, p999, ci95_low, ci95_high, floor_name, floor_value, histogram)
SELECT m.run_id, m.seq, r.started_at_ms, m.suite, m.case_name, m.parameters_json, m.unit, m.status, m.reason,
    m.samples, m.mean, m.p50, m.p90, m.p99, m.p999, m.ci95_low, m.ci95_high, m.floor_name, m.floor_value, m.histogram
FROM measurements_unpartitioned m JOIN runs r ON r.id = m.run_id;

DROP TABLE measurements_unpartitioned;
