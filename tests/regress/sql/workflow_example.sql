-- A workflow: resize 100 images (fan-out), then build one archive from their results
-- (fan-in). One call adds all 101 jobs; the archive step waits for every resize.
SELECT count(*) AS steps, min(id) AS workflow_id
FROM jobs_enqueue_workflow((
    SELECT jsonb_agg(jsonb_build_object(
               'name', 'resize-' || i, 'kind', 'resize_image', 'queue', 'images',
               'payload', jsonb_build_object('image', i, 'width', 256)))
           || jsonb_build_array(jsonb_build_object(
               'name', 'archive', 'kind', 'build_archive', 'queue', 'archives',
               'depends_on', (SELECT jsonb_agg('resize-' || i) FROM generate_series(1, 100) AS i),
               'notify_finished', true))
    FROM generate_series(1, 100) AS i)) \gset

SELECT state, count(*) FROM jobs WHERE workflow_id = :workflow_id GROUP BY state ORDER BY state;

-- A worker resizes every image and completes each job with its result.
CREATE TEMP TABLE resized AS
SELECT id, attempt, payload FROM jobs_claim('psql-worker', max_jobs => 100, queues => ARRAY['images']);
SELECT count(*) AS completed
FROM jobs_complete_many(
    (SELECT array_agg(id ORDER BY id) FROM resized),
    (SELECT array_agg(attempt ORDER BY id) FROM resized),
    (SELECT array_agg(jsonb_build_object('thumbnail', format('thumbs/%s-256.jpg', payload->>'image')) ORDER BY id)
     FROM resized));

-- The last resize released the archive step: it gets all 100 results, by step name.
LISTEN jobs_finished;
SELECT id AS archive_job, attempt, jsonb_array_length(jsonb_path_query_array(parent_results, '$.*')) AS results,
       parent_results->'resize-7' AS resize_7
FROM jobs_claim('psql-worker', queues => ARRAY['archives']) \gset
SELECT :results AS results, :'resize_7' AS resize_7;
SELECT jobs_complete(:archive_job, :attempt, jsonb_build_object('archive', 'thumbs.zip', 'files', :results));

-- Anyone can read (or wait for) the outcome.
SELECT state, result FROM jobs_result(:archive_job);
SELECT state, count(*) FROM jobs WHERE workflow_id = :workflow_id GROUP BY state ORDER BY state;
