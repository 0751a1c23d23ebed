-- Keep in step with the other backend's 0014_plain_endpoint_runs.sql.

-- Right-sizing and the Planner offer the newest load tests of services that are not streamed
-- LLM servers (run_suites.llm = 0; those are sized on the LLM page): read off their own index,
-- however many LLM load tests were stored since, as the LLM page reads run_suites_llm.
CREATE INDEX run_suites_plain ON run_suites (suite, started_at_ms DESC, run_id) WHERE llm = 0;
