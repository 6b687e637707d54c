-- 010: the jobs_schedules table of durable cron (jobs_schedule, jobs_unschedule,
-- jobs_schedule_tick). Tables and indexes only; the functions arrive in the next migration.
--
-- Append-only: never edit this file once released.

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
