-- A conversation's queue (on_busy): when each prompt started running (ms since the epoch;
-- 0 while it waits in its conversation's queue, and for one cancelled there), which
-- decides the history a prompt is given; its place in the queue (0: it interrupted the
-- prompt before it, so it goes first; 1: in order of creation); and the run time it asked
-- for, which a queued prompt needs when it starts later.
ALTER TABLE prompts ADD COLUMN started_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN queue_rank INTEGER NOT NULL DEFAULT 1;
ALTER TABLE prompts ADD COLUMN timeout_ms BIGINT NOT NULL DEFAULT 0;
UPDATE prompts SET started_at = created_at;
CREATE INDEX prompts_by_conversation_state ON prompts (conversation_id, state);
-- What a prompt that names no policy does when the conversation is busy (a BusyPolicy).
ALTER TABLE conversations ADD COLUMN on_busy INTEGER NOT NULL DEFAULT 0;
