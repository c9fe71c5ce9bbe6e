-- The kind of an artifact as its creator names it (`artifact.store`'s `type`: "report",
-- "dataset", …), returned by `artifact.list`; empty when none was given.
ALTER TABLE artifacts ADD COLUMN kind TEXT NOT NULL DEFAULT '';
