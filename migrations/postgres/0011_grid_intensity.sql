-- Keep in step with the other backend's 0011_grid_intensity.sql.

-- The grid-intensity table (issue 18, carbon): each cloud region's grid emissions and its
-- provider's PUE. Small (thousands of rows at most), so each version is kept whole as the CSV
-- it was imported as; the newest version is the table in force, and reports record which one
-- they used.
CREATE TABLE grid_versions (
    version BIGINT PRIMARY KEY,
    created_at_ms BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    origin TEXT NOT NULL,
    row_count BIGINT NOT NULL,
    csv TEXT NOT NULL
);
