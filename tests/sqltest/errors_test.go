package sqltest

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

// TestInvalidArguments: every bad argument is refused with SQLSTATE 22023, the parameter's
// name in the error's COLUMN field and in its message, and no change to any table.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	// One database for all cases: none of them may change it, so they cannot disturb each
	// other, and a case that did would be caught by the checksum.
	b := setup(t)

	// The table holds a running, a queued and a done job, so that a function that acted
	// before validating would show in the checksum. The running job has id 1 at attempt 1,
	// and the cases aim at it.
	enqueue(t, b.Conn, "queue => 'running'")
	if j := claimOne(t, b.Conn, "w", "running", "1 hour"); j.ID != 1 || j.Attempt != 1 {
		t.Fatalf("setup: running job is %+v, want id 1 at attempt 1", j)
	}
	enqueue(t, b.Conn, "queue => 'queued'")
	enqueue(t, b.Conn, "queue => 'done'")
	j := claimOne(t, b.Conn, "w", "done", "1 hour")
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", j.ID, j.Attempt)
	before := jobstest.TableChecksum(t, b.Conn)

	for _, tc := range []struct {
		name  string
		sql   string
		param string // COLUMN of the error, named in its message too
	}{
		// jobs_enqueue
		{"EnqueueKindNull", "SELECT jobs_enqueue(NULL)", "kind"},
		{"EnqueueKindEmpty", "SELECT jobs_enqueue('')", "kind"},
		{"EnqueueKindTooLong", "SELECT jobs_enqueue(repeat('k', 201))", "kind"},
		{"EnqueuePayloadNull", "SELECT jobs_enqueue('k', payload => NULL)", "payload"},
		{"EnqueueQueueNull", "SELECT jobs_enqueue('k', queue => NULL)", "queue"},
		{"EnqueueQueueEmpty", "SELECT jobs_enqueue('k', queue => '')", "queue"},
		{"EnqueueRunAtNull", "SELECT jobs_enqueue('k', run_at => NULL)", "run_at"},
		{"EnqueuePriorityNull", "SELECT jobs_enqueue('k', priority => NULL)", "priority"},
		{"EnqueueMaxAttemptsZero", "SELECT jobs_enqueue('k', max_attempts => 0)", "max_attempts"},
		{"EnqueueMaxAttemptsNull", "SELECT jobs_enqueue('k', max_attempts => NULL)", "max_attempts"},
		{"EnqueueUniqueKeyEmpty", "SELECT jobs_enqueue('k', unique_key => '')", "unique_key"},

		// jobs_enqueue_many: the whole call fails, including its good elements.
		{"EnqueueManyKindsNull", "SELECT jobs_enqueue_many(NULL)", "kinds"},
		{"EnqueueManyKindNullElement", "SELECT jobs_enqueue_many(ARRAY['ok', NULL])", "kinds[2]"},
		{"EnqueueManyKindEmptyElement", "SELECT jobs_enqueue_many(ARRAY['ok', 'ok', ''])", "kinds[3]"},
		{"EnqueueManyPayloadNullElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], payloads => ARRAY['{}', NULL]::jsonb[])", "payloads[2]"},
		{"EnqueueManyQueueNullElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY[NULL, 'q'])", "queues[1]"},
		{"EnqueueManyQueueEmptyElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', ''])", "queues[2]"},
		{"EnqueueManyRunAtNullElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], run_ats => ARRAY[now(), NULL])", "run_ats[2]"},
		{"EnqueueManyPriorityNullElement", "SELECT jobs_enqueue_many(ARRAY['a'], priorities => ARRAY[NULL]::int[])", "priorities[1]"},
		{"EnqueueManyMaxAttemptsZeroElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], max_attempts => ARRAY[3, 0])", "max_attempts[2]"},
		{"EnqueueManyUniqueKeyEmptyElement", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY['x', ''])", "unique_keys[2]"},
		{"EnqueueManyPayloadsLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], payloads => ARRAY['{}']::jsonb[])", "payloads"},
		{"EnqueueManyQueuesLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'q', 'q'])", "queues"},
		{"EnqueueManyRunAtsLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], run_ats => ARRAY[now()])", "run_ats"},
		{"EnqueueManyPrioritiesLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a'], priorities => ARRAY[1, 2])", "priorities"},
		{"EnqueueManyMaxAttemptsLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], max_attempts => '{}'::int[])", "max_attempts"},
		{"EnqueueManyUniqueKeysLengthMismatch", "SELECT jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY['x'])", "unique_keys"},
		{"EnqueueManyTooMany", "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[100001]))", "kinds"},

		// jobs_claim
		{"ClaimWorkerNull", "SELECT * FROM jobs_claim(NULL)", "worker"},
		{"ClaimWorkerEmpty", "SELECT * FROM jobs_claim('')", "worker"},
		{"ClaimWorkerTooLong", "SELECT * FROM jobs_claim(repeat('w', 201))", "worker"},
		{"ClaimMaxJobsZero", "SELECT * FROM jobs_claim('w', 0)", "max_jobs"},
		{"ClaimMaxJobsNegative", "SELECT * FROM jobs_claim('w', -1)", "max_jobs"},
		{"ClaimMaxJobsOverLimit", "SELECT * FROM jobs_claim('w', 10001)", "max_jobs"},
		{"ClaimMaxJobsNull", "SELECT * FROM jobs_claim('w', NULL)", "max_jobs"},
		{"ClaimQueuesEmpty", "SELECT * FROM jobs_claim('w', 1, '{}')", "queues"},
		{"ClaimQueuesNullElement", "SELECT * FROM jobs_claim('w', 1, ARRAY['q', NULL])", "queues"},
		{"ClaimLeaseZero", "SELECT * FROM jobs_claim('w', 1, NULL, '0')", "lease"},
		{"ClaimLeaseNegative", "SELECT * FROM jobs_claim('w', 1, NULL, '-1 second')", "lease"},
		{"ClaimLeaseNull", "SELECT * FROM jobs_claim('w', 1, NULL, NULL)", "lease"},

		// jobs_complete and jobs_complete_many
		{"CompleteIDNull", "SELECT jobs_complete(NULL, 1)", "id"},
		{"CompleteAttemptNull", "SELECT jobs_complete(1, NULL)", "attempt"},
		{"CompleteManyIDsNull", "SELECT * FROM jobs_complete_many(NULL, ARRAY[1])", "ids"},
		{"CompleteManyAttemptsNull", "SELECT * FROM jobs_complete_many(ARRAY[1]::bigint[], NULL)", "attempts"},
		{"CompleteManyLengthMismatch", "SELECT * FROM jobs_complete_many(ARRAY[1]::bigint[], ARRAY[1, 1])", "attempts"},
		{"CompleteManyIDNullElement", "SELECT * FROM jobs_complete_many(ARRAY[1, NULL]::bigint[], ARRAY[1, 1])", "ids"},
		{"CompleteManyAttemptNullElement", "SELECT * FROM jobs_complete_many(ARRAY[1, 3]::bigint[], ARRAY[1, NULL])", "attempts"},

		// jobs_fail
		{"FailIDNull", "SELECT jobs_fail(NULL, 1, 'e')", "id"},
		{"FailAttemptNull", "SELECT jobs_fail(1, NULL, 'e')", "attempt"},
		{"FailErrorNull", "SELECT jobs_fail(1, 1, NULL)", "error"},

		// jobs_heartbeat and jobs_heartbeat_many
		{"HeartbeatIDNull", "SELECT jobs_heartbeat(NULL, 1)", "id"},
		{"HeartbeatAttemptNull", "SELECT jobs_heartbeat(1, NULL)", "attempt"},
		{"HeartbeatLeaseZero", "SELECT jobs_heartbeat(1, 1, '0')", "lease"},
		{"HeartbeatLeaseNegative", "SELECT jobs_heartbeat(1, 1, '-5 minutes')", "lease"},
		{"HeartbeatLeaseNull", "SELECT jobs_heartbeat(1, 1, NULL)", "lease"},
		{"HeartbeatManyLengthMismatch", "SELECT * FROM jobs_heartbeat_many(ARRAY[1]::bigint[], '{}'::int[])", "attempts"},
		{"HeartbeatManyIDsNull", "SELECT * FROM jobs_heartbeat_many(NULL, ARRAY[1])", "ids"},
		{"HeartbeatManyLeaseZero", "SELECT * FROM jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1], '0')", "lease"},
		{"HeartbeatManyLeaseNull", "SELECT * FROM jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1], NULL)", "lease"},

		// jobs_snooze
		{"SnoozeIDNull", "SELECT jobs_snooze(NULL, 1, now())", "id"},
		{"SnoozeAttemptNull", "SELECT jobs_snooze(1, NULL, now())", "attempt"},
		{"SnoozeRunAtNull", "SELECT jobs_snooze(1, 1, NULL)", "run_at"},

		// jobs_cancel, jobs_retry, jobs_get
		{"CancelIDNull", "SELECT jobs_cancel(NULL)", "id"},
		{"RetryIDNull", "SELECT jobs_retry(NULL)", "id"},
		{"GetIDNull", "SELECT * FROM jobs_get(NULL)", "id"},

		// jobs_backoff
		{"BackoffZero", "SELECT jobs_backoff(0)", "attempt"},
		{"BackoffNegative", "SELECT jobs_backoff(-3)", "attempt"},
		{"BackoffNull", "SELECT jobs_backoff(NULL)", "attempt"},

		// jobs_prune
		{"PruneOlderThanNull", "SELECT jobs_prune(NULL)", "older_than"},
		{"PruneOlderThanNegative", "SELECT jobs_prune('-1 day')", "older_than"},
		{"PruneIncludeDeadNull", "SELECT jobs_prune('0', NULL)", "include_dead"},
		{"PruneMaxJobsZero", "SELECT jobs_prune('0', true, 0)", "max_jobs"},
		{"PruneMaxJobsNull", "SELECT jobs_prune('0', true, NULL)", "max_jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := b.Connect(t)
			rows, err := conn.Query(t.Context(), tc.sql)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
				err = rows.Err()
			}
			pgErr := jobstest.RequireInvalid(t, err, tc.param)
			if !strings.Contains(pgErr.Message, tc.param) {
				t.Errorf("message %q does not name %s", pgErr.Message, tc.param)
			}
			if after := jobstest.TableChecksum(t, conn); after != before {
				t.Errorf("%s changed the tables although it failed", tc.sql)
			}
		})
	}
}

// TestUnknownIDIsNotAnError: the functions that take a job id answer false, NULL or no rows
// for a job that does not exist, and change nothing.
func TestUnknownIDIsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueue(t, b.Conn, "")
	before := jobstest.TableChecksum(t, b.Conn)
	const unknown = 987654321

	for _, sql := range []string{
		"SELECT jobs_complete($1, 1)",
		"SELECT jobs_heartbeat($1, 1)",
		"SELECT jobs_snooze($1, 1, now())",
		"SELECT jobs_cancel($1)",
		"SELECT jobs_retry($1)",
	} {
		if got := queryOne[bool](t, b.Conn, sql, unknown); got {
			t.Errorf("%s with an unknown id returned true", sql)
		}
	}
	if got := queryOne[*string](t, b.Conn, "SELECT jobs_fail($1, 1, 'e')::text", unknown); got != nil {
		t.Errorf("jobs_fail with an unknown id returned %q, want NULL", *got)
	}
	for _, sql := range []string{
		"SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[1])",
		"SELECT * FROM jobs_heartbeat_many(ARRAY[$1::bigint], ARRAY[1])",
		"SELECT count(*) FROM jobs_get($1) WHERE state IS NOT NULL",
	} {
		got := queryList[int64](t, b.Conn, sql, unknown)
		if len(got) != 0 && !(len(got) == 1 && got[0] == 0 && strings.Contains(sql, "count")) {
			t.Errorf("%s with an unknown id returned %v", sql, got)
		}
	}
	if after := jobstest.TableChecksum(t, b.Conn); after != before {
		t.Fatal("calls with an unknown id changed the tables")
	}
}
