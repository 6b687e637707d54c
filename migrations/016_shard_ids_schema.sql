-- 016: shard numbers (issue 14). jobs_settings records which shard of a sharded skiplock
-- this database is (NULL: not a shard); jobs_set_shard, in the next migration, sets it
-- together with the identity sequence that puts the number in every new job id's low 10
-- bits. Schema only.
--
-- Append-only: never edit this file once released; change the schema in a new migration.

ALTER TABLE jobs_settings
    ADD COLUMN shard integer,
    ADD CONSTRAINT jobs_settings_shard_valid CHECK (shard BETWEEN 0 AND 1023);

COMMENT ON COLUMN jobs_settings.shard IS
    'skiplock: this database''s shard number (jobs_set_shard); every job id created since has id % 1024 = shard. NULL: not a shard.';
