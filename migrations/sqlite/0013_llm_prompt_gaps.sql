-- Keep in step with the other backend's 0013_llm_prompt_gaps.sql.

-- The endpoint suite's digest reading 5 changes only the LLM fit (the continuous-batching
-- model now counts the gaps between tokens that hold a prompt from the prompts' side), so a
-- digest of reading 4 without an LLM fit is already what reading 5 stores: marked so, the
-- server's backfill refits and simulates only the LLM runs, not every load test stored.
UPDATE run_suites SET digest_version = 5
WHERE suite = 'endpoint' AND digest_version = 4 AND llm = 0 AND digest IS NOT NULL;
