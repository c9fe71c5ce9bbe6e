-- People in the loop beyond yes or no: a call approved with an input the person edited (JSON
-- text; empty: as asked), a call the person answered instead of running it (JSON text of the
-- result; empty: not answered), and who decided (a user id; empty: nobody, as for an expiry).
ALTER TABLE approval_decisions ADD COLUMN edited_input TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_decisions ADD COLUMN response TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_decisions ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
