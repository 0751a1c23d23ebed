-- Keep in step with migrations/postgres/0004_ownership_and_token_life.sql.

-- A node belongs to the agent that first reported it; another agent cannot overwrite it until
-- an admin binds the node to that agent (`headroom-server admin bind-node`).
ALTER TABLE nodes ADD COLUMN owner_agent_id TEXT;
UPDATE nodes SET owner_agent_id = (
    SELECT r.agent_id FROM runs r WHERE r.node_id = nodes.id ORDER BY r.received_at_ms, r.id LIMIT 1
);

-- API tokens get an id to name them by (the first 12 hex digits of the hash: the secret cannot
-- be recovered from it), an optional expiry and a revocation time.
ALTER TABLE api_tokens ADD COLUMN id TEXT;
ALTER TABLE api_tokens ADD COLUMN expires_at_ms INTEGER;
ALTER TABLE api_tokens ADD COLUMN revoked_at_ms INTEGER;
UPDATE api_tokens SET id = substr(token_hash, 1, 12);
