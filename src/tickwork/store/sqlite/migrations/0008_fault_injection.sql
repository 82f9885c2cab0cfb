-- v8: fault injection (tickwork worker --inject-faults). Each run keeps the faults
-- injected into its attempts (a JSON array of marks; NULL for nearly every run), and the
-- database's opt-in (tickwork db allow-fault-injection) is a row of a settings table.
ALTER TABLE tickwork_runs ADD COLUMN injected TEXT;
CREATE INDEX tickwork_runs_injected ON tickwork_runs (id) WHERE injected IS NOT NULL;
CREATE TABLE tickwork_settings (
    name       TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
