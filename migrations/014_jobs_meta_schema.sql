-- 014: a job's meta (issue 11): a JSON object stored with the job for tools rather than for
-- its handler, such as the W3C trace context that contrib/otel carries from enqueue to the
-- worker. jobs_enqueue and jobs_enqueue_many take it, jobs_claim and jobs_get return it.
-- Schema only; the functions that use it arrive with the next migration.
--
-- Append-only: never edit this file once released; change the schema in a new migration.

-- NULL by default, so adding it rewrites no row. The check is NOT VALID for the same
-- reason as 006's: it binds every new or updated row without scanning the table.
ALTER TABLE jobs
    ADD COLUMN meta jsonb,
    ADD CONSTRAINT jobs_meta_valid CHECK (jsonb_typeof(meta) = 'object') NOT VALID;

-- jobs_claim's row gains the meta at the end, so that readers by position keep working.
ALTER TYPE jobs_claimed ADD ATTRIBUTE meta jsonb;
