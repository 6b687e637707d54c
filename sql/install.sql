-- skiplock SQL API: the complete current install, as a tern code package: the search_path
-- preamble, every function in dependency order, then the grants.
--
-- sql/ is the one place to edit. Migrations never include it directly: each freezes copies of
-- the files it changes (migrations/snapshots/NNN, made with scripts/new-migration), so an
-- old migration always installs what it was written with. The tests check that every file here
-- equals its newest frozen copy, and that applying this package to a migrated database
-- changes nothing. A new function gets a line here and one in grants.sql.
{{ template "search_path.sql" . }}

{{ template "functions/_jobs_invalid.sql" . }}
{{ template "functions/_jobs_errors_append.sql" . }}
{{ template "functions/_jobs_check_fence_arrays.sql" . }}
{{ template "functions/_jobs_check_bulk_args.sql" . }}
{{ template "functions/_jobs_completion_deletes.sql" . }}
{{ template "functions/_jobs_claims_release.sql" . }}
{{ template "functions/_jobs_queued_sync.sql" . }}
{{ template "functions/_jobs_unique_key_sync.sql" . }}
{{ template "functions/_jobs_unique_key_superseded.sql" . }}
{{ template "functions/_jobs_dead_cancelled_sync.sql" . }}
{{ template "functions/_jobs_truncate_sync.sql" . }}
{{ template "functions/_jobs_dependencies_release.sql" . }}
{{ template "functions/_jobs_finished.sql" . }}
{{ template "functions/_jobs_finished_cascade.sql" . }}
{{ template "functions/_jobs_revive.sql" . }}
{{ template "functions/_jobs_prunable.sql" . }}
{{ template "functions/jobs_backoff.sql" . }}
{{ template "functions/_jobs_enqueue_child.sql" . }}
{{ template "functions/_jobs_enqueue_duplicate.sql" . }}
{{ template "functions/jobs_enqueue.sql" . }}
{{ template "functions/jobs_enqueue_workflow.sql" . }}
{{ template "functions/jobs_enqueue_many.sql" . }}
{{ template "functions/jobs_subscribe.sql" . }}
{{ template "functions/jobs_unsubscribe.sql" . }}
{{ template "functions/jobs_subscriptions.sql" . }}
{{ template "functions/jobs_publish.sql" . }}
{{ template "functions/jobs_notify.sql" . }}
{{ template "functions/_jobs_parent_results.sql" . }}
{{ template "functions/_jobs_claim_take.sql" . }}
{{ template "functions/_jobs_claim_limited.sql" . }}
{{ template "functions/_jobs_claim_unkeyed.sql" . }}
{{ template "functions/jobs_claim.sql" . }}
{{ template "functions/jobs_complete.sql" . }}
{{ template "functions/jobs_complete_many.sql" . }}
{{ template "functions/jobs_complete_and_claim.sql" . }}
{{ template "functions/jobs_checkpoint.sql" . }}
{{ template "functions/jobs_progress.sql" . }}
{{ template "functions/jobs_fail.sql" . }}
{{ template "functions/jobs_heartbeat.sql" . }}
{{ template "functions/jobs_heartbeat_many.sql" . }}
{{ template "functions/jobs_snooze.sql" . }}
{{ template "functions/jobs_requeue_expired.sql" . }}
{{ template "functions/jobs_cancel.sql" . }}
{{ template "functions/jobs_cancel_workflow.sql" . }}
{{ template "functions/jobs_workflow.sql" . }}
{{ template "functions/jobs_retry.sql" . }}
{{ template "functions/jobs_stats.sql" . }}
{{ template "functions/jobs_get.sql" . }}
{{ template "functions/jobs_result.sql" . }}
{{ template "functions/jobs_prune.sql" . }}
{{ template "functions/jobs_pause.sql" . }}
{{ template "functions/jobs_resume.sql" . }}
{{ template "functions/jobs_set_concurrency.sql" . }}
{{ template "functions/jobs_set_rate_limit.sql" . }}
{{ template "functions/jobs_next_start.sql" . }}
{{ template "functions/jobs_queue_limited.sql" . }}
{{ template "functions/jobs_retry_many.sql" . }}
{{ template "functions/jobs_cancel_many.sql" . }}
{{ template "functions/jobs_delete_many.sql" . }}
{{ template "functions/jobs_maintain.sql" . }}
{{ template "functions/jobs_metrics.sql" . }}
{{ template "functions/_jobs_cron_field.sql" . }}
{{ template "functions/_jobs_cron_parse.sql" . }}
{{ template "functions/_jobs_cron_timezone.sql" . }}
{{ template "functions/_jobs_cron_instant.sql" . }}
{{ template "functions/_jobs_cron_next.sql" . }}
{{ template "functions/_jobs_cron_latest.sql" . }}
{{ template "functions/jobs_cron_next.sql" . }}
{{ template "functions/jobs_schedule.sql" . }}
{{ template "functions/jobs_unschedule.sql" . }}
{{ template "functions/jobs_schedule_tick.sql" . }}
{{ template "functions/jobs_schedule_run.sql" . }}
{{ template "functions/jobs_schedule_set_enabled.sql" . }}
{{ template "functions/jobs_list.sql" . }}
{{ template "functions/jobs_inspect.sql" . }}
{{ template "functions/jobs_set_shard.sql" . }}
{{ template "functions/jobs_shard.sql" . }}

{{ template "grants.sql" . }}
