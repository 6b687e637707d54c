-- 006: flow control (issue 9): per-queue settings (pause, concurrency limits, rate limits),
-- the concurrency key and start time of a job, and the indexes the limited claim reads.
-- Schema only; the functions that use it arrive with the next install.
--
-- Append-only: never edit this file once released; change the schema in a new migration.

-- concurrency_key: jobs sharing a key count against their queue's per_key limit together.
-- started_at: the now() of the claim that started the current or last attempt.
-- Both are NULL for existing jobs, so the check is added NOT VALID: it binds every new or
-- updated row without scanning the table under the ADD COLUMN lock.
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
