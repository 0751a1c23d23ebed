-- Keep in step with the other backend's 0017_llm_cheaper_predictions.sql.

-- The endpoint suite's digest reading 8 changes only the LLM fit (the continuous-batching
-- model's prompt spreads past 32 prompts are shared between nearby counts, sums of 1,000
-- prompts' worth of shape take Wilson and Hilferty's quantiles, and the gaps group the
-- resident counts as the first tokens do), so a digest of reading 7 without an LLM fit is
-- already what reading 8 stores: marked so, the server's backfill refits and simulates only
-- the LLM runs, not every load test stored. (A service-time cv below 10⁻³ is now constant,
-- which could move a plain run's predictions by under 0.5 % where its fitted cv is that
-- small: not worth refitting every load test for.)
UPDATE run_suites SET digest_version = 8
WHERE suite = 'endpoint' AND digest_version = 7 AND llm = 0 AND digest IS NOT NULL;
