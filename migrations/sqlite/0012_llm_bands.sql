-- Keep in step with the other backend's 0012_llm_bands.sql.

-- The endpoint suite's digest reading 4 adds only the LLM steps' TTFT and ITL bands, so a
-- digest of reading 3 without an LLM fit is already what reading 4 stores: marked so, the
-- server's backfill refits and simulates only the LLM runs, not every load test stored.
UPDATE run_suites SET digest_version = 4
WHERE suite = 'endpoint' AND digest_version = 3 AND llm = 0 AND digest IS NOT NULL;
