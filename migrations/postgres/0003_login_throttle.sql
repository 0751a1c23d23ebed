-- Failed sign-ins, per account and per client address, kept in the database so that every
-- server replica throttles alike. Keep in step with migrations/sqlite/0003_login_throttle.sql.

CREATE TABLE login_throttle (
    key TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    locked_until_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
