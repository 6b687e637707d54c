-- 006, release v0.1.0: everything since version 5 in one migration. Flow control (per-queue
-- pause, concurrency limits per queue and per key, rate limits), retention and housekeeping
-- (jobs_maintain), metrics (jobs_metrics), bulk actions and job listing for operators
-- (jobs_list, jobs_retry_many, jobs_cancel_many, jobs_delete_many), cron schedules
-- (jobs_schedules, jobs_schedule_tick), a job's meta, shard ids (jobs_set_shard), enqueues
-- without NOTIFY (jobs_notify), completion fused with the next claim
-- (jobs_complete_and_claim), and the lease's login (jobs.lease_role), which the fenced calls
-- of other logins do not match. See CHANGELOG.md, [0.1.0].
--
-- It folds the development migrations 006 to 022, which were never released: a database
-- migrated by a development build past version 5 is refused (reinstall it), see Migrate.
--
-- Released (migrations/RELEASED): never edit this file or migrations/snapshots/006.

-- Flow control. concurrency_key: jobs sharing a key count against their queue's per_key
-- limit together. started_at: the now() of the claim that started the current or last
-- attempt. Both are NULL for existing jobs, so the check is added NOT VALID: it binds every
-- new or updated row without scanning the table under the ADD COLUMN lock.
ALTER TABLE jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN started_at      timestamptz,
    ADD CONSTRAINT jobs_concurrency_key_valid
        CHECK (concurrency_key <> '' AND octet_length(concurrency_key) <= 200) NOT VALID;

-- One row per queue that has settings; a queue without a row is not paused and has no
-- limits. Readable with plain SELECT; changed only through jobs_pause, jobs_resume,
-- jobs_set_concurrency and jobs_set_rate_limit, which delete a row once nothing is set.
-- A limited claim locks its queue's row (FOR UPDATE) until its transaction ends: that lock
-- is what makes the limits exact.
CREATE TABLE jobs_queues (
    queue       text        NOT NULL,
    paused      boolean     NOT NULL DEFAULT false,
    max_running integer,
    per_key     integer,
    max_starts  integer,
    per         interval,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_queues_pkey PRIMARY KEY (queue),
    CONSTRAINT jobs_queues_queue_valid CHECK (queue <> '' AND octet_length(queue) <= 200),
    CONSTRAINT jobs_queues_max_running_valid CHECK (max_running >= 1),
    CONSTRAINT jobs_queues_per_key_valid CHECK (per_key >= 1),
    CONSTRAINT jobs_queues_rate_valid CHECK ((max_starts IS NULL) = (per IS NULL)
                                             AND max_starts >= 1
                                             AND per > interval '0')
);

COMMENT ON TABLE jobs_queues IS 'skiplock per-queue settings: paused, concurrency limits (max_running, per_key) and rate limit (max_starts per per). Change only through jobs_pause, jobs_resume, jobs_set_concurrency, jobs_set_rate_limit.';

-- The sliding log of a rate-limited queue: one row per job started, kept for one window
-- (per). Written and trimmed only by jobs_claim under the queue's jobs_queues row lock. A
-- job's started_at cannot serve: a retried job overwrites it.
CREATE TABLE jobs_queue_starts (
    queue      text        NOT NULL,
    started_at timestamptz NOT NULL
);
CREATE INDEX jobs_queue_starts_idx ON jobs_queue_starts (queue, started_at);

COMMENT ON TABLE jobs_queue_starts IS 'skiplock (private): start times of the last window of each rate-limited queue, read by jobs_claim and jobs_next_start.';

-- No index of running jobs per queue: every claim would maintain it, limited or not, and it
-- cost an unlimited drain about 10 % in cmd/bench. The limited claim counts running jobs
-- through jobs_running_lease_idx instead (see _jobs_claim_limited).

-- Ready jobs with a key, per key in claim order: the per_key claim walks the keys of a
-- queue here (one probe per key) and takes the best jobs of each key that has room, so a
-- key at its limit blocks no other. Jobs without a key are not in it and cost it nothing.
CREATE INDEX jobs_ready_key_idx ON jobs (queue, concurrency_key, priority, run_at, id)
    WHERE state = 'queued' AND concurrency_key IS NOT NULL;

-- Retention, housekeeping and metrics.
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

-- Cron schedules.
-- One row per named schedule. Change rows only through jobs_schedule and jobs_unschedule;
-- jobs_schedule_tick advances them. Readable with SELECT by jobs_admin.
CREATE TABLE jobs_schedules (
    name         text        NOT NULL,
    cron         text        NOT NULL,
    timezone     text        NOT NULL DEFAULT 'UTC',
    kind         text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{}',
    queue        text        NOT NULL DEFAULT 'default',
    priority     integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL DEFAULT 5,
    enabled      boolean     NOT NULL DEFAULT true,
    -- The next instant to enqueue; NULL when the expression has no run left in the
    -- supported range.
    next_run_at  timestamptz,
    -- The latest instant enqueued, and the job it got (the job may since have been pruned).
    last_run_at  timestamptz,
    last_job_id  bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_schedules_pkey PRIMARY KEY (name),
    CONSTRAINT jobs_schedules_name_valid CHECK (name <> '' AND octet_length(name) <= 200),
    CONSTRAINT jobs_schedules_queue_valid CHECK (queue <> '' AND octet_length(queue) <= 200),
    CONSTRAINT jobs_schedules_kind_valid CHECK (kind <> '' AND octet_length(kind) <= 200),
    CONSTRAINT jobs_schedules_max_attempts_valid CHECK (max_attempts >= 1),
    -- The dedupe jobs_schedule_tick relies on: an instant is enqueued only when it is later
    -- than last_run_at, under the row lock, and the next one to enqueue is later still.
    CONSTRAINT jobs_schedules_next_after_last CHECK (next_run_at > last_run_at)
);

COMMENT ON TABLE jobs_schedules IS 'skiplock schedules: one row per named cron schedule. Change rows only through jobs_schedule and jobs_unschedule.';

-- jobs_schedule_tick's one probe when nothing is due: the earliest next_run_at of the
-- enabled schedules.
CREATE INDEX jobs_schedules_due_idx ON jobs_schedules (next_run_at) WHERE enabled;

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

-- A job's meta: a JSON object stored with the job for tools rather than for its handler,
-- such as the W3C trace context that contrib/otel carries from enqueue to the worker.
-- NULL by default, so adding it rewrites no row. The check is NOT VALID for the same
-- reason as concurrency_key's: it binds every new or updated row without scanning the table.
ALTER TABLE jobs
    ADD COLUMN meta jsonb,
    ADD CONSTRAINT jobs_meta_valid CHECK (jsonb_typeof(meta) = 'object') NOT VALID;

-- jobs_claim's row gains the meta at the end, so that readers by position keep working.
ALTER TYPE jobs_claimed ADD ATTRIBUTE meta jsonb;

-- Shard ids: a shard's number, so that the ids of its jobs say where they live.
ALTER TABLE jobs_settings
    ADD COLUMN shard integer,
    ADD CONSTRAINT jobs_settings_shard_valid CHECK (shard BETWEEN 0 AND 1023);

COMMENT ON COLUMN jobs_settings.shard IS
    'skiplock: this database''s shard number (jobs_set_shard); every job id created since has id % 1024 = shard. NULL: not a shard.';

-- The lease's login.
-- NULL by default, so adding it rewrites no row. The check is NOT VALID, as meta's: it binds
-- every new or updated row without scanning the table (every existing row has NULL).
-- oid, not regrole: a regrole is written out as the login's name (pg_dump, COPY, logical
-- replication) and read back only where that login exists, so the jobs table of a database
-- holding a running job would not load into another cluster (42704), queued jobs included.
-- pg_upgrade keeps role oids; elsewhere a restored lease names no login, or another one,
-- until it expires, and jobs_requeue_expired takes it back.
ALTER TABLE jobs
    ADD COLUMN lease_role oid,
    ADD CONSTRAINT jobs_lease_role_running CHECK (state = 'running' OR lease_role IS NULL) NOT VALID;

COMMENT ON COLUMN jobs.lease_role IS
    'skiplock: the oid of the login (session_user) that took the running job''s lease; the fenced calls of other logins do not match it. NULL when not running, or for a lease taken before it was recorded.';

-- jobs_enqueue and jobs_enqueue_many gained arguments (concurrency_key, meta, notify), and
-- jobs_get's result gained columns: the old functions are dropped before the new ones are
-- created; their grants come back from grants.sql.
DROP FUNCTION IF EXISTS jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text);
DROP FUNCTION IF EXISTS jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[]);
DROP FUNCTION IF EXISTS jobs_get(bigint);

-- Generated by scripts/new-migration from here to the end (do not edit): the preamble,
-- the functions frozen in migrations/snapshots/006, the grants.
{{ template "snapshots/004/search_path.sql" . }}
{{ template "snapshots/006/functions/_jobs_errors_append.sql" . }}
{{ template "snapshots/006/functions/_jobs_check_bulk_args.sql" . }}
{{ template "snapshots/006/functions/_jobs_completion_deletes.sql" . }}
{{ template "snapshots/006/functions/jobs_enqueue.sql" . }}
{{ template "snapshots/006/functions/jobs_enqueue_many.sql" . }}
{{ template "snapshots/006/functions/jobs_notify.sql" . }}
{{ template "snapshots/006/functions/_jobs_claim_limited.sql" . }}
{{ template "snapshots/006/functions/jobs_claim.sql" . }}
{{ template "snapshots/006/functions/jobs_complete.sql" . }}
{{ template "snapshots/006/functions/jobs_complete_many.sql" . }}
{{ template "snapshots/006/functions/jobs_complete_and_claim.sql" . }}
{{ template "snapshots/006/functions/jobs_fail.sql" . }}
{{ template "snapshots/006/functions/jobs_heartbeat.sql" . }}
{{ template "snapshots/006/functions/jobs_heartbeat_many.sql" . }}
{{ template "snapshots/006/functions/jobs_snooze.sql" . }}
{{ template "snapshots/006/functions/jobs_requeue_expired.sql" . }}
{{ template "snapshots/006/functions/jobs_cancel.sql" . }}
{{ template "snapshots/006/functions/jobs_retry.sql" . }}
{{ template "snapshots/006/functions/jobs_get.sql" . }}
{{ template "snapshots/006/functions/jobs_pause.sql" . }}
{{ template "snapshots/006/functions/jobs_resume.sql" . }}
{{ template "snapshots/006/functions/jobs_set_concurrency.sql" . }}
{{ template "snapshots/006/functions/jobs_set_rate_limit.sql" . }}
{{ template "snapshots/006/functions/jobs_next_start.sql" . }}
{{ template "snapshots/006/functions/jobs_retry_many.sql" . }}
{{ template "snapshots/006/functions/jobs_cancel_many.sql" . }}
{{ template "snapshots/006/functions/jobs_delete_many.sql" . }}
{{ template "snapshots/006/functions/jobs_maintain.sql" . }}
{{ template "snapshots/006/functions/jobs_metrics.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_field.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_parse.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_timezone.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_instant.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_next.sql" . }}
{{ template "snapshots/006/functions/_jobs_cron_latest.sql" . }}
{{ template "snapshots/006/functions/jobs_cron_next.sql" . }}
{{ template "snapshots/006/functions/jobs_schedule.sql" . }}
{{ template "snapshots/006/functions/jobs_unschedule.sql" . }}
{{ template "snapshots/006/functions/jobs_schedule_tick.sql" . }}
{{ template "snapshots/006/functions/jobs_schedule_run.sql" . }}
{{ template "snapshots/006/functions/jobs_schedule_set_enabled.sql" . }}
{{ template "snapshots/006/functions/jobs_list.sql" . }}
{{ template "snapshots/006/functions/jobs_inspect.sql" . }}
{{ template "snapshots/006/functions/jobs_set_shard.sql" . }}
{{ template "snapshots/006/functions/jobs_shard.sql" . }}
{{ template "snapshots/006/grants.sql" . }}
