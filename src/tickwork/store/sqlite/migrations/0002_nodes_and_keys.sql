-- v2: the cluster view (nodes) and HTTP API keys.

CREATE TABLE tickwork_nodes (
    id           TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    running      INTEGER NOT NULL DEFAULT 0,
    info         TEXT    NOT NULL DEFAULT '{}'
);

CREATE TABLE tickwork_api_keys (
    id         INTEGER PRIMARY KEY,
    prefix     TEXT    NOT NULL UNIQUE,
    key_hash   TEXT    NOT NULL UNIQUE,
    tenant     TEXT    NOT NULL,
    admin      INTEGER NOT NULL,
    label      TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

CREATE INDEX tickwork_runs_started ON tickwork_runs (started_at) WHERE attempt = 1;
