-- Sub-agents: each prompt a call `agent.<name>` started (`prompt_id`, the child), the prompt
-- and call that started it, and the prompt at the top of its tree, whose budget the tree
-- spends. `answered` once the child's answer (or why there is none) reached the call.
-- The row goes with the child prompt (deletion's prompt tables).
CREATE TABLE sub_prompts (
    prompt_id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    answered INTEGER NOT NULL DEFAULT 0,
    -- The budget the child was given (an encoded agentic.v1.Budget; empty: none), held
    -- back from its siblings' while it runs.
    budget BYTEA NOT NULL DEFAULT ''::bytea,
    created_at BIGINT NOT NULL
);
-- One child per call, whoever asks twice.
CREATE UNIQUE INDEX sub_prompts_by_call ON sub_prompts (parent_id, tool_call_id);
CREATE INDEX sub_prompts_by_root ON sub_prompts (root_id);
-- The calls still waiting for an answer, which the gateway looks over every few seconds.
CREATE INDEX sub_prompts_unanswered ON sub_prompts (prompt_id) WHERE answered = 0;
