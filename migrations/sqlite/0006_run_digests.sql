-- Keep in step with the other backend's 0006_run_digests.sql.

-- What the pages read of each suite of a run (model::wire::measured::SuiteDigest as JSON),
-- written when the run is stored, so that a page over the whole fleet reads one row per node
-- instead of every node's measurements. Rows stored before this column, or by a server whose
-- reading of runs was older (digest_version below the model's DIGEST_VERSION), are computed
-- again from the measurements: at once when a page reads them, and for good by the server's
-- start-up backfill.
ALTER TABLE run_suites ADD COLUMN digest_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_suites ADD COLUMN digest TEXT;

-- Each node's newest run of each suite, kept at ingest, so "every node's latest run with this
-- suite" reads a row per node off an index, however long the history. Ties on the start time go
-- to the lower run id, as in run_suites_by_node's order.
CREATE TABLE node_latest (
    node_id TEXT NOT NULL REFERENCES nodes (id),
    suite TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    started_at_ms INTEGER NOT NULL,
    PRIMARY KEY (node_id, suite)
);
CREATE INDEX node_latest_by_start ON node_latest (suite, started_at_ms DESC, run_id);
INSERT INTO node_latest (node_id, suite, run_id, started_at_ms)
SELECT rs.node_id, rs.suite, rs.run_id, rs.started_at_ms FROM run_suites rs
WHERE rs.run_id = (SELECT x.run_id FROM run_suites x WHERE x.node_id = rs.node_id AND x.suite = rs.suite
                   ORDER BY x.started_at_ms DESC, x.run_id LIMIT 1);
