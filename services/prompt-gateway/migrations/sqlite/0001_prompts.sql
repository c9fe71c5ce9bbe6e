-- Prompts, their timeline and their ordered event log. Written only by the gateway.
CREATE TABLE prompts (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL,
    model INTEGER NOT NULL,
    visible INTEGER NOT NULL DEFAULT 1,
    state INTEGER NOT NULL,
    input TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    max_rounds INTEGER NOT NULL DEFAULT 0,
    state_data TEXT NOT NULL DEFAULT '{}',
    last_sequence INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX prompts_by_user ON prompts (user_id, created_at);
CREATE INDEX prompts_by_conversation ON prompts (conversation_id, created_at);
CREATE INDEX prompts_by_state ON prompts (state);

-- One row per entry of Prompt.output; `payload` is an encoded agentic.v1.PromptOutput.
CREATE TABLE prompt_outputs (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    position INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (prompt_id, position)
);

-- `payload` is an encoded agentic.v1.PromptEvent: the log stores exactly what clients get.
CREATE TABLE prompt_events (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    sequence INTEGER NOT NULL,
    at INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (prompt_id, sequence)
);
