-- Conversations: an ordered list of prompts plus shared state and a default mode.
CREATE TABLE conversations (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    default_mode TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX conversations_by_user ON conversations (user_id, created_at);

-- Every file output of every prompt, so files can be listed per conversation and fetched by id.
CREATE TABLE prompt_files (
    file_id TEXT PRIMARY KEY NOT NULL,
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    position INTEGER NOT NULL,
    payload BLOB NOT NULL
);

CREATE INDEX prompt_files_by_conversation ON prompt_files (conversation_id, prompt_id, position);

-- Approval decisions for tool calls a paused prompt waits on; they survive restarts.
CREATE TABLE approval_decisions (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    tool_call_id TEXT NOT NULL,
    approved INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    decided_at INTEGER NOT NULL,
    PRIMARY KEY (prompt_id, tool_call_id)
);

-- 1 while a live run waits for decisions on its open Execute stream (code mode): such a
-- pause cannot outlive the gateway process that holds the stream.
ALTER TABLE prompts ADD COLUMN paused_live INTEGER NOT NULL DEFAULT 0;
