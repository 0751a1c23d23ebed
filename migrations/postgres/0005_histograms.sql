-- Keep in step with migrations/sqlite/0005_histograms.sql.

-- Every sample of a latency case, as an HdrHistogram in the V2 compressed encoding of
-- HdrHistogram log files (base64 text). Last column, so a scan that does not read it does not
-- pay for it (Postgres keeps long text out of line; SQLite reads a row's columns in order).
ALTER TABLE measurements ADD COLUMN histogram TEXT;
