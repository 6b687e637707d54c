package pgtest

import (
	"context"
	"testing"
)

// storageProblems lists every way the tables that list jobs (jobs_queued, jobs_claims,
// jobs_unique_keys, jobs_dead_cancelled) can disagree with jobs itself, one row per problem.
// Unqualified: it reads the schema the connection's search_path names first.
const storageProblems = `
SELECT format('queued job %s has no jobs_queued row with its (queue, priority, run_at, id)', j.id)
FROM jobs j
WHERE j.state = 'queued'
  AND NOT EXISTS (SELECT FROM jobs_queued q
                  WHERE (q.queue, q.priority, q.run_at, q.id) = (j.queue, j.priority, j.run_at, j.id)
                    AND q.concurrency_key IS NOT DISTINCT FROM j.concurrency_key)
UNION ALL
SELECT format('jobs_queued row of job %s, which is %s', q.id, coalesce(j.state::text, 'missing'))
FROM jobs_queued q
LEFT JOIN jobs j ON j.id = q.id
WHERE j.state IS DISTINCT FROM 'queued'
UNION ALL
SELECT format('job %s has %s jobs_queued rows', q.id, count(*))
FROM jobs_queued q
GROUP BY q.id
HAVING count(*) > 1
UNION ALL
SELECT format('running job %s is not listed by its claim %s', j.id, j.claim_id)
FROM jobs j
WHERE j.state = 'running'
  AND NOT EXISTS (SELECT FROM jobs_claims c WHERE c.claim_id = j.claim_id AND j.id = ANY (c.ids)
                    AND c.queue = j.queue AND c.expires_at <= j.lease_expires_at)
UNION ALL
SELECT format('claim %s counts %s running jobs, %s run under it', c.claim_id, c.running, count(j.id))
FROM jobs_claims c
LEFT JOIN jobs j ON j.claim_id = c.claim_id AND j.state = 'running'
GROUP BY c.claim_id, c.running
HAVING c.running <> count(j.id)
UNION ALL
SELECT format('live job %s with unique_key %s has no jobs_unique_keys row', j.id, j.unique_key)
FROM jobs j
WHERE j.unique_key IS NOT NULL AND j.state IN ('queued', 'running')
  AND NOT EXISTS (SELECT FROM jobs_unique_keys k
                  WHERE (k.queue, k.unique_key, k.id) = (j.queue, j.unique_key, j.id))
UNION ALL
SELECT format('jobs_unique_keys row %s/%s of job %s, which is %s', k.queue, k.unique_key, k.id,
              coalesce(j.state::text, 'missing'))
FROM jobs_unique_keys k
LEFT JOIN jobs j ON j.id = k.id
WHERE j.state IS NULL OR j.state NOT IN ('queued', 'running')
UNION ALL
SELECT format('%s job %s has no matching jobs_dead_cancelled row', j.state, j.id)
FROM jobs j
WHERE j.state IN ('dead', 'cancelled')
  AND NOT EXISTS (SELECT FROM jobs_dead_cancelled d
                  WHERE (d.id, d.state, d.queue, d.finished_at) = (j.id, j.state, j.queue, j.finished_at))
UNION ALL
SELECT format('jobs_dead_cancelled row of job %s, which is %s', d.id, coalesce(j.state::text, 'missing'))
FROM jobs_dead_cancelled d
LEFT JOIN jobs j ON j.id = d.id
WHERE j.state IS NULL OR j.state NOT IN ('dead', 'cancelled')`

// StorageProblems returns what disagrees between jobs and the tables that list its queued,
// running, keyed, dead and cancelled jobs (see docs/sql-api.md, "Where the functions find
// jobs"): nil when they agree. A problem there loses a job (a queued job no claim can find),
// runs one twice, or miscounts a limit, so the suites that change jobs check it at their end.
func StorageProblems(t testing.TB, q Querier) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), storageProblems)
	if err != nil {
		t.Fatalf("checking the tables that list jobs: %v", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatalf("checking the tables that list jobs: %v", err)
		}
		problems = append(problems, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("checking the tables that list jobs: %v", err)
	}
	return problems
}
