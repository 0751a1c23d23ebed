-- Keep in step with the other backend's 0016_llm_slot_line.sql.

-- The endpoint suite's digest reading 7 changes only the LLM fit (the continuous-batching
-- model now queues the requests waiting for a slot as in M/D/S, and spreads its clusters as
-- the prompts' lengths vary), so a digest of reading 6 without an LLM fit is already what
-- reading 7 stores: marked so, the server's backfill refits and simulates only the LLM runs,
-- not every load test stored.
UPDATE run_suites SET digest_version = 7
WHERE suite = 'endpoint' AND digest_version = 6 AND llm = 0 AND digest IS NOT NULL;
