-- v3: the dashboard's sessions. A browser signs in with an API key once; its cookie then
-- carries a session token, never the key, and signing out ends the session here.
-- Only sha256 of the token is stored. Times in microseconds, as everywhere in this file.

CREATE TABLE tickwork_sessions (
    id           INTEGER PRIMARY KEY,
    token_hash   TEXT    NOT NULL UNIQUE,
    key_id       INTEGER NOT NULL REFERENCES tickwork_api_keys (id),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    idle_timeout INTEGER NOT NULL,  -- microseconds
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);

-- Revoking a key ends its live sessions.
CREATE INDEX tickwork_sessions_key ON tickwork_sessions (key_id) WHERE revoked_at IS NULL;
