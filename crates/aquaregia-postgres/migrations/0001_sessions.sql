-- Schema version 1: sessions and their turns.
--
-- `meta` is the whole SessionMeta as JSON (new fields need no migration); `cwd`, `updated_at`
-- and `turns` are copied out of it for listing and for the version check of an append, and are
-- what the store trusts. The JSON columns are `json`, not `jsonb`: they keep the text as
-- written, and they accept "\u0000", which `jsonb` refuses (a tool's output may hold a NUL).
-- Ids compare bytewise (COLLATE "C"), as they do in the file store.

CREATE TABLE aquaregia_sessions (
    id          text COLLATE "C" PRIMARY KEY,
    cwd         text NOT NULL,
    updated_at  bigint NOT NULL,
    turns       bigint NOT NULL DEFAULT 0,
    meta        json NOT NULL
);

-- Newest first, all sessions or those of one cwd (scanned backwards).
CREATE INDEX aquaregia_sessions_by_update ON aquaregia_sessions (updated_at, id);
CREATE INDEX aquaregia_sessions_by_cwd ON aquaregia_sessions (cwd, updated_at, id);

-- One row per completed turn; `seq` counts from 0 in the order they were appended.
CREATE TABLE aquaregia_session_turns (
    session_id  text COLLATE "C" NOT NULL REFERENCES aquaregia_sessions (id) ON DELETE CASCADE,
    seq         bigint NOT NULL,
    turn        json NOT NULL,
    PRIMARY KEY (session_id, seq)
);
