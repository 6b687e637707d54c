-- 012: the jobs_listed type, the row jobs_list returns (the operator's tools: the CLI and the
-- dashboard). Types only; the function arrives in the next migration. No new index:
-- jobs_list reads the partial indexes that exist (jobs_ready_idx, jobs_running_lease_idx,
-- jobs_dead_cancelled_idx) or jobs_pkey.
--
-- Append-only: never edit this file once released; change the schema in a new migration.

-- What jobs_list returns: every column of a job but its payload and error history, a stable
-- shape for every client language.
CREATE TYPE jobs_listed AS (
    id               bigint,
    queue            text,
    kind             text,
    state            jobs_state,
    priority         integer,
    attempts         integer,
    max_attempts     integer,
    run_at           timestamptz,
    created_at       timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    lease_holder     text,
    lease_expires_at timestamptz,
    unique_key       text,
    concurrency_key  text,
    last_error       text
);
