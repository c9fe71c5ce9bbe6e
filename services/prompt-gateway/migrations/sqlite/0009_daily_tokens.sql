-- A user's tokens of the day are those of their prompts written to that day (see
-- Store::tokens_since): read by user and time of the last write.
CREATE INDEX prompts_by_user_updated ON prompts (user_id, updated_at);
