-- Keep in step with the other backend's 0015_llm_clusters.sql.

-- The endpoint suite's digest reading 6 changes only the LLM fit (the continuous-batching
-- model now reads prompts in clusters and runs of prompt iterations), so a digest of reading 5
-- without an LLM fit is already what reading 6 stores: marked so, the server's backfill refits
-- and simulates only the LLM runs, not every load test stored.
UPDATE run_suites SET digest_version = 6
WHERE suite = 'endpoint' AND digest_version = 5 AND llm = 0 AND digest IS NOT NULL;
