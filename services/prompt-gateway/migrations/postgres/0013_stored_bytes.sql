-- Each user's stored bytes, for their byte budget (GATEWAY_MAX_STORED_BYTES_PER_USER): what
-- their conversations and prompts hold (an unfinished prompt its input and state, an ended
-- one also its events, outputs and recording), as the background accounting last counted it (src/store/accounting.rs). A row's
-- `stored_bytes` is what the counter holds of it; `bytes_stale` marks a row to count again:
-- 1 new or changed, 2 a prompt counted by its input and state until it ends. Deleting a row
-- takes its `stored_bytes` off the counter in the same transaction.
CREATE TABLE user_storage (
    user_id TEXT PRIMARY KEY NOT NULL,
    bytes BIGINT NOT NULL
);
ALTER TABLE prompts ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN bytes_stale INTEGER NOT NULL DEFAULT 1;
ALTER TABLE conversations ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN bytes_stale INTEGER NOT NULL DEFAULT 1;
CREATE INDEX prompts_stale_bytes ON prompts (id) WHERE bytes_stale = 1;
CREATE INDEX prompts_counted_till_ended ON prompts (state) WHERE bytes_stale = 2;
CREATE INDEX conversations_stale_bytes ON conversations (id) WHERE bytes_stale = 1;
-- Retention's look for ended prompts outside any conversation, oldest first.
CREATE INDEX prompts_alone_by_update ON prompts (conversation_id, updated_at);
