-- PostgreSQL's owner leases are part of 0001_gateway.sql (the PostgreSQL schema began after
-- SQLite's third migration). This migration keeps both backends' migrations numbered in
-- step: version N is the same change on each.
SELECT 1;
