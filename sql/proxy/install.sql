-- skiplock proxy SQL API: the complete current install of the PL/Proxy side (docs/scaling.md),
-- as a tern code package: the search_path preamble, every proxy function in dependency
-- order, then the grants. The schema (types, jobs_proxy_queues) comes from the proxy
-- migrations (migrations/proxy), which install frozen copies of these files.
{{ template "search_path.sql" . }}

{{ template "functions/_jobs_invalid.sql" . }}
{{ template "functions/_jobs_check_fence_arrays.sql" . }}
{{ template "functions/_jobs_proxy_shard_count.sql" . }}
{{ template "functions/_jobs_proxy_check_shard.sql" . }}
{{ template "functions/_jobs_proxy_id_shard.sql" . }}
{{ template "functions/_jobs_proxy_queue_shard.sql" . }}
{{ template "functions/_jobs_proxy_unreachable.sql" . }}
{{ template "functions/_jobs_proxy_queues_on.sql" . }}
{{ template "functions/jobs_proxy_set_shards.sql" . }}
{{ template "functions/jobs_enqueue.sql" . }}
{{ template "functions/_jobs_proxy_enqueue_many_on.sql" . }}
{{ template "functions/jobs_enqueue_many.sql" . }}
{{ template "functions/jobs_notify.sql" . }}
{{ template "functions/jobs_claim_on.sql" . }}
{{ template "functions/jobs_claim.sql" . }}
{{ template "functions/jobs_complete.sql" . }}
{{ template "functions/_jobs_proxy_complete_many_split.sql" . }}
{{ template "functions/jobs_complete_many.sql" . }}
{{ template "functions/jobs_fail.sql" . }}
{{ template "functions/jobs_heartbeat.sql" . }}
{{ template "functions/_jobs_proxy_heartbeat_many_split.sql" . }}
{{ template "functions/jobs_heartbeat_many.sql" . }}
{{ template "functions/jobs_snooze.sql" . }}
{{ template "functions/_jobs_proxy_sum_each.sql" . }}
{{ template "functions/_jobs_proxy_requeue_expired_on.sql" . }}
{{ template "functions/jobs_requeue_expired.sql" . }}
{{ template "functions/jobs_cancel.sql" . }}
{{ template "functions/jobs_retry.sql" . }}
{{ template "functions/jobs_stats.sql" . }}
{{ template "functions/jobs_get.sql" . }}
{{ template "functions/jobs_pause.sql" . }}
{{ template "functions/jobs_resume.sql" . }}
{{ template "functions/jobs_set_concurrency.sql" . }}
{{ template "functions/jobs_set_rate_limit.sql" . }}
{{ template "functions/jobs_next_start.sql" . }}
{{ template "functions/jobs_queue_limited.sql" . }}
{{ template "functions/_jobs_proxy_maintain_on.sql" . }}
{{ template "functions/jobs_maintain.sql" . }}
{{ template "functions/_jobs_proxy_metrics_all.sql" . }}
{{ template "functions/jobs_metrics.sql" . }}
{{ template "functions/_jobs_proxy_schedule_tick_on.sql" . }}
{{ template "functions/jobs_schedule_tick.sql" . }}
{{ template "functions/jobs_inspect.sql" . }}
{{ template "grants.sql" . }}
