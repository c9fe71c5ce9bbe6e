-- Runs once, when the postgres container initialises an empty data volume (compose mounts
-- it into /docker-entrypoint-initdb.d). POSTGRES_DB creates `gateway`; this adds the
-- tool-host's database.
CREATE DATABASE tool_host;
