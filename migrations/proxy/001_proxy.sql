-- proxy 001: the PL/Proxy side of a sharded skiplock (issue 14, docs/scaling.md): the plproxy
-- extension, the types the shards' functions return (so the proxy functions can return them),
-- jobs_proxy_queues (which shard each queue is pinned to), the proxy functions with the names
-- and arguments of the shard SQL API, and their grants. The shards themselves are set by
-- jobs_proxy_set_shards (skiplock migrate --proxy --shards URL,... calls it after migrating).
--
-- The proxy migrations are a set of their own (version table jobs_proxy_schema_version), run
-- on the proxy database only; a shard is an ordinary skiplock install.
--
-- Append-only: never edit this file once released.

-- PL/Proxy is not a trusted extension: a superuser migrates the proxy, or creates the
-- extension first.
CREATE EXTENSION IF NOT EXISTS plproxy;

{{ template "snapshots/001/search_path.sql" . }}

-- The shards' result types, column for column (PL/Proxy matches result columns by name).
CREATE TYPE jobs_state AS ENUM ('queued', 'running', 'done', 'dead', 'cancelled');

CREATE TYPE jobs_claimed AS (
    id               bigint,
    queue            text,
    kind             text,
    payload          jsonb,
    attempt          integer,
    max_attempts     integer,
    priority         integer,
    run_at           timestamptz,
    lease_expires_at timestamptz,
    created_at       timestamptz,
    meta             jsonb
);

CREATE TYPE jobs_maintenance AS (
    ran              boolean,
    requeued         integer,
    pruned_done      integer,
    pruned_cancelled integer,
    pruned_dead      integer,
    more             boolean
);

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
    paused             boolean,
    max_running        integer,
    per_key            integer,
    max_starts         integer,
    per                interval
);

CREATE TYPE jobs_queue_stats AS (
    queue            text,
    state            jobs_state,
    jobs             bigint,
    oldest_ready_age interval
);

-- jobs_inspect's row: the shards' jobs table, as a type (the proxy holds no jobs).
CREATE TYPE jobs AS (
    id               bigint,
    queue            text,
    kind             text,
    payload          jsonb,
    state            jobs_state,
    priority         integer,
    attempts         integer,
    max_attempts     integer,
    run_at           timestamptz,
    lease_holder     text,
    lease_expires_at timestamptz,
    last_error       text,
    errors           jsonb,
    unique_key       text,
    created_at       timestamptz,
    finished_at      timestamptz,
    concurrency_key  text,
    started_at       timestamptz,
    meta             jsonb
);

CREATE TABLE jobs_proxy_cluster (
    one    boolean PRIMARY KEY DEFAULT true CONSTRAINT jobs_proxy_cluster_one_row CHECK (one),
    shards integer NOT NULL DEFAULT 0 CONSTRAINT jobs_proxy_cluster_shards_valid CHECK (shards BETWEEN 0 AND 1024)
);
INSERT INTO jobs_proxy_cluster DEFAULT VALUES;

COMMENT ON TABLE jobs_proxy_cluster IS
    'skiplock proxy: how many shards the skiplock_shards cluster has (p0..pN-1); set only by jobs_proxy_set_shards.';

CREATE TABLE jobs_proxy_queues (
    queue     text PRIMARY KEY,
    shard     integer NOT NULL CONSTRAINT jobs_proxy_queues_shard_valid CHECK (shard BETWEEN 0 AND 1023),
    pinned_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE jobs_proxy_queues IS
    'skiplock proxy: the shard each queue lives on, pinned by its first enqueue (or pause, limit) through the proxy. Never move a queue that has jobs.';

{{ template "snapshots/001/functions/_jobs_invalid.sql" . }}
{{ template "snapshots/001/functions/_jobs_check_fence_arrays.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_shard_count.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_check_shard.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_id_shard.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_queue_shard.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_unreachable.sql" . }}
{{ template "snapshots/001/functions/jobs_proxy_set_shards.sql" . }}
{{ template "snapshots/001/functions/jobs_enqueue.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_enqueue_many_on.sql" . }}
{{ template "snapshots/001/functions/jobs_enqueue_many.sql" . }}
{{ template "snapshots/001/functions/jobs_notify.sql" . }}
{{ template "snapshots/001/functions/jobs_claim_on.sql" . }}
{{ template "snapshots/001/functions/jobs_claim.sql" . }}
{{ template "snapshots/001/functions/jobs_complete.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_complete_many_split.sql" . }}
{{ template "snapshots/001/functions/jobs_complete_many.sql" . }}
{{ template "snapshots/001/functions/jobs_fail.sql" . }}
{{ template "snapshots/001/functions/jobs_heartbeat.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_heartbeat_many_split.sql" . }}
{{ template "snapshots/001/functions/jobs_heartbeat_many.sql" . }}
{{ template "snapshots/001/functions/jobs_snooze.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_sum_each.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_requeue_expired_on.sql" . }}
{{ template "snapshots/001/functions/jobs_requeue_expired.sql" . }}
{{ template "snapshots/001/functions/jobs_cancel.sql" . }}
{{ template "snapshots/001/functions/jobs_retry.sql" . }}
{{ template "snapshots/001/functions/jobs_stats.sql" . }}
{{ template "snapshots/001/functions/jobs_get.sql" . }}
{{ template "snapshots/001/functions/jobs_pause.sql" . }}
{{ template "snapshots/001/functions/jobs_resume.sql" . }}
{{ template "snapshots/001/functions/jobs_set_concurrency.sql" . }}
{{ template "snapshots/001/functions/jobs_set_rate_limit.sql" . }}
{{ template "snapshots/001/functions/jobs_next_start.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_maintain_on.sql" . }}
{{ template "snapshots/001/functions/jobs_maintain.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_metrics_all.sql" . }}
{{ template "snapshots/001/functions/jobs_metrics.sql" . }}
{{ template "snapshots/001/functions/_jobs_proxy_schedule_tick_on.sql" . }}
{{ template "snapshots/001/functions/jobs_schedule_tick.sql" . }}
{{ template "snapshots/001/functions/jobs_inspect.sql" . }}
{{ template "snapshots/001/grants.sql" . }}
