-- How long a person may take to decide on a call a prompt waits on (ms; 0: the operator's
-- limit, for prompts stored before there was one), and when the pause it waits in now
-- expires (ms since the epoch; NULL while it is not waiting). A decision the gateway made
-- for nobody, when the pause expired, says so.
ALTER TABLE prompts ADD COLUMN approval_timeout_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN approval_expires_at INTEGER;
CREATE INDEX prompts_by_approval_expiry ON prompts (approval_expires_at)
    WHERE approval_expires_at IS NOT NULL;
ALTER TABLE approval_decisions ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
