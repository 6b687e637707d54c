-- 005: jobs_claim, jobs_complete_many, jobs_heartbeat_many and jobs_requeue_expired lock
-- rows FOR NO KEY UPDATE (the lock their UPDATE takes anyway) instead of FOR UPDATE, so the
-- FOR KEY SHARE locks of inserts into tables with a foreign key to jobs neither hide jobs
-- from claims nor make completions wait. Same signatures: installed from the snapshot.
{{ install_snapshot "005" }}
