-- Enqueue two jobs. jobs_enqueue returns the new job's id.
SELECT jobs_enqueue('send_email', '{"to": "ada@example.com"}') AS email_job \gset
SELECT jobs_enqueue(kind => 'resize_image', payload => '{"image": 7}', queue => 'images', max_attempts => 2) AS image_job \gset

-- A worker claims ready jobs and gets each one's attempt number: its fencing token.
SELECT id, queue, kind, payload, attempt FROM jobs_claim(worker => 'psql-worker', queues => ARRAY['default']);

-- Done: true while you still hold the job at that attempt.
SELECT jobs_complete(:email_job, 1);

-- Failure: the job is queued again (here at once) until max_attempts, then it is dead.
SELECT id, attempt FROM jobs_claim('psql-worker', queues => ARRAY['images']);
SELECT jobs_fail(:image_job, 1, 'image 7 not found', retry_at => now());
SELECT id, attempt FROM jobs_claim('psql-worker', queues => ARRAY['images']);
SELECT jobs_fail(:image_job, 2, 'image 7 still not found');

-- Dead jobs keep their whole error history.
SELECT j.id, j.kind, e.attempt, e.error, e.worker
FROM jobs j, jsonb_to_recordset(j.errors) AS e(attempt int, error text, worker text)
WHERE j.state = 'dead';

-- Queue health, then give the dead job another try.
SELECT * FROM jobs_stats();
SELECT jobs_retry(:image_job);
