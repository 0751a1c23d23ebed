-- Keep in step with the other backend's 0008_page_indexes.sql.

-- Whether a run's endpoint digest holds an LLM engine (model::wire::measured::SuiteDigest's
-- llm), so the LLM page finds the newest load tests of OpenAI-compatible servers off an index,
-- however many other endpoint runs were stored since. Written with the digest: at ingest and
-- by the start-up backfill.
ALTER TABLE run_suites ADD COLUMN llm BIGINT NOT NULL DEFAULT 0;
-- serde_json writes the digest's llm field as "llm":{...} only when it is set; a quote inside a
-- string value is escaped, so no target or model name can read as it.
UPDATE run_suites SET llm = 1 WHERE suite = 'endpoint' AND digest LIKE '%"llm":{%';
CREATE INDEX run_suites_llm ON run_suites (suite, started_at_ms DESC, run_id) WHERE llm = 1;

-- The pages read an instance type's price under each purchase option per measured node type;
-- a catalog may hold 50,000 rows.
CREATE INDEX price_catalog_by_type ON price_catalog (instance_type, purchase_option, as_of);
