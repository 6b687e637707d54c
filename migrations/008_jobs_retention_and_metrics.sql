-- Schema for retention, bulk actions and metrics: how long each final state is kept (read by
-- jobs_maintain), an index over the dead and cancelled jobs, and the shapes jobs_maintain and
-- jobs_metrics return. Tables, types and indexes only; the functions arrive in the next
-- migration.
--
-- Append-only: never edit this file once released; change the schema in a new migration.

-- Retention on by default: jobs_maintain deletes done jobs a day after they finished,
-- cancelled ones after 7 days and dead ones after 30. NULL keeps that state forever. Capped
-- at 1000 years so that now() - retention stays inside the timestamp range.
ALTER TABLE jobs_settings
    ADD COLUMN done_retention      interval DEFAULT '1 day',
    ADD COLUMN cancelled_retention interval DEFAULT '7 days',
    ADD COLUMN dead_retention      interval DEFAULT '30 days',
    ADD CONSTRAINT jobs_settings_done_retention_valid
        CHECK (done_retention >= interval '0' AND done_retention <= interval '1000 years'),
    ADD CONSTRAINT jobs_settings_cancelled_retention_valid
        CHECK (cancelled_retention >= interval '0' AND cancelled_retention <= interval '1000 years'),
    ADD CONSTRAINT jobs_settings_dead_retention_valid
        CHECK (dead_retention >= interval '0' AND dead_retention <= interval '1000 years');

COMMENT ON TABLE jobs_settings IS 'skiplock settings (one row): retry backoff used by jobs_backoff and jobs_fail; retention per final state used by jobs_maintain (NULL keeps forever).';

-- The dead and cancelled jobs, few in a healthy system. jobs_metrics counts them per queue
-- from this index alone, jobs_maintain finds the ones past their retention here, and
-- jobs_retry_many's default ('{dead}') reads them without walking the done jobs. Only jobs
-- that die or are cancelled pay for it; completions, the hot path, do not enter it.
CREATE INDEX jobs_dead_cancelled_idx ON jobs (state, finished_at) INCLUDE (queue)
    WHERE state IN ('dead', 'cancelled');

-- What jobs_maintain returns: what one round of housekeeping did.
CREATE TYPE jobs_maintenance AS (
    ran              boolean,
    requeued         integer,
    pruned_done      integer,
    pruned_cancelled integer,
    pruned_dead      integer,
    more             boolean
);

-- What jobs_metrics returns: one row per queue.
CREATE TYPE jobs_queue_metrics AS (
    queue              text,
    ready              bigint,
    scheduled          bigint,
    running            bigint,
    running_expired    bigint,
    dead               bigint,
    cancelled          bigint,
    done_estimate      bigint,
    oldest_ready_age_s double precision,
    jobs_created_total bigint,
    -- The queue's flow-control settings (jobs_queues); false and NULLs for a queue without a
    -- row, and on the totals row.
    paused             boolean,
    max_running        integer,
    per_key            integer,
    max_starts         integer,
    per                interval
);
