package badinput

import (
	"fmt"
	"testing"
	"time"
)

// TestHarmlessArguments: calls whose arguments are strange but valid and that the fixture
// gives nothing to do: unknown or extreme ids and attempts, queues that do not exist
// (including injection-looking names), empty batches, the largest limits. Each returns its
// documented "nothing happened" answer and changes nothing.
func TestHarmlessArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const unknownID = int64(987654321)
	for _, tc := range []struct {
		name string
		sql  string
		args []any
		want string // the rows, formatted with fmt.Sprint
	}{
		{"CompleteMaxInt64ID", "SELECT jobs_complete($1, 1)", []any{int64(maxInt64)}, "[[false]]"},
		{"CompleteNegativeID", "SELECT jobs_complete(-1, 1)", nil, "[[false]]"},
		{"CompleteZeroID", "SELECT jobs_complete(0, 1)", nil, "[[false]]"},
		{"CompleteAttemptMaxInt", "SELECT jobs_complete(1, $1)", []any{int32(maxInt32)}, "[[false]]"},
		{"CompleteAttemptMinInt", "SELECT jobs_complete(1, $1)", []any{int32(minInt32)}, "[[false]]"},
		{"CompleteAttemptZero", "SELECT jobs_complete(1, 0)", nil, "[[false]]"},
		{"CompleteDoneJob", "SELECT jobs_complete(3, 1)", nil, "[[false]]"},
		{"CompleteDeadJob", "SELECT jobs_complete(4, 1)", nil, "[[false]]"},
		{"CompleteQueuedJobAttemptZero", "SELECT jobs_complete(2, 0)", nil, "[[false]]"},
		{"FailAttemptMinusOne", "SELECT jobs_fail(1, -1, 'e')::text", nil, "[[<nil>]]"},
		{"FailMaxInt64ID", "SELECT jobs_fail($1, 1, 'e', '294276-12-31 23:59:59.999999+00')::text", []any{int64(maxInt64)}, "[[<nil>]]"},
		{"HeartbeatStaleAttemptLease100Years", "SELECT jobs_heartbeat(1, 2, '100 years')", nil, "[[false]]"},
		{"HeartbeatNegativeID", "SELECT jobs_heartbeat(-9223372036854775808, 1)", nil, "[[false]]"},
		{"SnoozeStaleAttemptToLatestTimestamp", "SELECT jobs_snooze(1, 2, '294276-12-31 23:59:59.999999+00')", nil, "[[false]]"},
		{"SnoozeUnknownIDToEarliestTimestamp", "SELECT jobs_snooze(99, 1, '4714-11-24 00:00:00+00 BC')", nil, "[[false]]"},
		{"CancelFencedStaleAttempt", "SELECT jobs_cancel(1, 0, '')", nil, "[[false]]"},
		{"CancelMaxInt64ID", "SELECT jobs_cancel($1)", []any{int64(maxInt64)}, "[[false]]"},
		{"CancelDoneJob", "SELECT jobs_cancel(3)", nil, "[[false]]"},
		{"RetryQueuedJob", "SELECT jobs_retry(2)", nil, "[[false]]"},
		{"RetryRunningJob", "SELECT jobs_retry(1)", nil, "[[false]]"},
		{"RetryNegativeID", "SELECT jobs_retry(-1)", nil, "[[false]]"},
		{"GetZeroID", "SELECT * FROM jobs_get(0)", nil, "[]"},
		{"CronNextAfterLatestTimestamp", "SELECT jobs_cron_next('* * * * *', '294276-12-31 23:59:59.999999+00')::text", nil, "[[<nil>]]"},
		{"CronNextAfterEarliestTimestamp", "SELECT jobs_cron_next('* * * * *', '4714-11-24 00:00:00+00 BC')::text", nil, "[[<nil>]]"},
		{"CronNextEveryAfterLatestTimestamp", "SELECT jobs_cron_next('@every 1 second', '294276-12-31 23:59:59.999999+00')::text", nil, "[[<nil>]]"},
		{"CronNextEvery100Years", "SELECT jobs_cron_next('@every 36500 days', '2000-01-01 00:00:00+00')::text", nil, "[[2069-12-07 00:00:00+00]]"},
		{"CronNextEveryAtEpoch", "SELECT jobs_cron_next('@every 1 second', '1970-01-01 00:00:00+00')::text", nil, "[[1970-01-01 00:00:01+00]]"},
		{"CronNextNeverRuns", "SELECT jobs_cron_next('0 0 30 2 *', now())::text", nil, "[[<nil>]]"},
		{"CronNextManySpaces", "SELECT jobs_cron_next(E' 0\\t 0   1 1 *\\n', '2024-06-01 00:00:00+00')::text", nil, "[[2025-01-01 00:00:00+00]]"},
		{"CronNextLowerCaseNames", "SELECT jobs_cron_next('0 0 * jan sun', '2024-06-01 00:00:00+00')::text", nil, "[[2025-01-05 00:00:00+00]]"},
		{"UnscheduleUnknownName", "SELECT jobs_unschedule('no such schedule')", nil, "[[false]]"},
		{"UnscheduleEmptyName", "SELECT jobs_unschedule('')", nil, "[[false]]"},
		{"ScheduleSetEnabledUnchanged", "SELECT jobs_schedule_set_enabled('fixed', false)", nil, "[[false]]"},
		{"InspectMaxInt64ID", "SELECT id FROM jobs_inspect($1)", []any{int64(maxInt64)}, "[]"},
		{"InspectNegativeID", "SELECT id FROM jobs_inspect(-1)", nil, "[]"},
		{"ListBeforeIDZero", "SELECT id FROM jobs_list(before_id => 0)", nil, "[]"},
		{"ListBeforeIDMinInt64", "SELECT id FROM jobs_list(before_id => -9223372036854775808)", nil, "[]"},
		{"ListUnknownQueueAndKind", "SELECT id FROM jobs_list(queue => '', kind => '')", nil, "[]"},
		{"ListOneJob", "SELECT id FROM jobs_list(max_jobs => 1)", nil, "[[7]]"},
		{"ListMaxJobs1000", "SELECT id FROM jobs_list(state => 'dead', max_jobs => 1000)", nil, "[[6] [4]]"},
		{"GetMaxInt64ID", "SELECT * FROM jobs_get($1)", []any{int64(maxInt64)}, "[]"},
		{"CompleteManyEmpty", "SELECT * FROM jobs_complete_many('{}', '{}')", nil, "[]"},
		{"CompleteManyUnknownIDs", "SELECT * FROM jobs_complete_many(ARRAY[0, -1, $1::bigint], ARRAY[1, 1, 1])", []any{int64(maxInt64)}, "[]"},
		{"CompleteManyStaleAttempts", "SELECT * FROM jobs_complete_many(ARRAY[1, 1, 2], ARRAY[0, 2, 0])", nil, "[]"},
		{"CompleteMany100000Unknown", "SELECT * FROM jobs_complete_many(array_fill(0::bigint, ARRAY[100000]), array_fill(1, ARRAY[100000]))", nil, "[]"},
		{"CompleteAndClaimNothing", "SELECT completed, id FROM jobs_complete_and_claim('w', '{}', '{}', 0)", nil, "[[[] <nil>]]"},
		{"CompleteAndClaimStalePairsUnknownQueue", "SELECT completed, id FROM jobs_complete_and_claim('w', ARRAY[0, 1, 2], ARRAY[1, 2, 0], 10000, ARRAY['nope'])", nil, "[[[] <nil>]]"},
		{"CompleteAndClaimInjectionQueueName", "SELECT completed, id FROM jobs_complete_and_claim('w', '{}', '{}', 1, ARRAY[$1])", []any{"queued' OR '1'='1"}, "[[[] <nil>]]"},
		{"HeartbeatManyEmpty", "SELECT * FROM jobs_heartbeat_many('{}', '{}', '1 microsecond')", nil, "[]"},
		{"HeartbeatManyStale", "SELECT * FROM jobs_heartbeat_many(ARRAY[1, 3, 4], ARRAY[2, 1, 1])", nil, "[]"},
		{"EnqueueManyEmpty", "SELECT * FROM jobs_enqueue_many('{}')", nil, "[]"},
		{"EnqueueManyEmptyWithEmptyArrays", "SELECT * FROM jobs_enqueue_many('{}', '{}', '{}', '{}', '{}', '{}', '{}')", nil, "[]"},
		{"ClaimUnknownQueue", "SELECT id FROM jobs_claim('w', 10000, ARRAY['nope'])", nil, "[]"},
		{"ClaimEmptyQueueName", "SELECT id FROM jobs_claim('w', 1, ARRAY[''])", nil, "[]"},
		{"ClaimInjectionQueueName", "SELECT id FROM jobs_claim('w', 1, ARRAY[$1])", []any{"queued' OR '1'='1"}, "[]"},
		{"ClaimInjectionQueueNames", "SELECT id FROM jobs_claim('w', 5, $1)", []any{[]string{"queued'; --", "u\\", "%", "_", "queued "}}, "[]"},
		{"ClaimRunningQueueOnly", "SELECT id FROM jobs_claim('w', 1, ARRAY['running', 'done', 'dead', 'cancelled'])", nil, "[]"},
		{"PruneNothingOldEnough", "SELECT jobs_prune('1000 years', true, $1)", []any{int32(maxInt32)}, "[[0]]"},
		// now() - older_than would overflow the timestamp range: nothing finished that long
		// ago, so 0, not an error.
		{"PruneOlderThanBeyondTimestampRange", "SELECT jobs_prune('300000 years', true, $1)", []any{int32(maxInt32)}, "[[0]]"},
		{"PruneOlderThanMostPositive", "SELECT jobs_prune('178000000 years', true)", nil, "[[0]]"},
		{"PruneOlderThanMaxMicroseconds", "SELECT jobs_prune('9223372036854775807 microseconds', true)", nil, "[[0]]"},
		{"RequeueExpiredNothingExpired", "SELECT jobs_requeue_expired()", nil, "[[0]]"},
		// An id no job has: false, NULL or no rows, from every function that takes one.
		{"CompleteUnknownID", "SELECT jobs_complete($1, 1)", []any{unknownID}, "[[false]]"},
		{"FailUnknownID", "SELECT jobs_fail($1, 1, 'e')::text", []any{unknownID}, "[[<nil>]]"},
		{"HeartbeatUnknownID", "SELECT jobs_heartbeat($1, 1)", []any{unknownID}, "[[false]]"},
		{"SnoozeUnknownID", "SELECT jobs_snooze($1, 1, now())", []any{unknownID}, "[[false]]"},
		{"CancelUnknownID", "SELECT jobs_cancel($1)", []any{unknownID}, "[[false]]"},
		{"RetryUnknownID", "SELECT jobs_retry($1)", []any{unknownID}, "[[false]]"},
		{"GetUnknownID", "SELECT * FROM jobs_get($1)", []any{unknownID}, "[]"},
		{"CompleteManyUnknownID", "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[1])", []any{unknownID}, "[]"},
		{"HeartbeatManyUnknownID", "SELECT * FROM jobs_heartbeat_many(ARRAY[$1::bigint], ARRAY[1])", []any{unknownID}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			got, err := call(t.Context(), conn, tc.sql, tc.args...)
			if err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("%s = %s, want %s", tc.sql, s, tc.want)
			}
			f.unchanged(t, conn, tc.sql)
		})
	}

	t.Run("BackoffExtremeAttempts", func(t *testing.T) {
		t.Parallel()
		conn := f.Connect(t)
		// Defaults: base 1 s, cap 1 h, jitter 25%.
		for _, tc := range []struct {
			attempt  int32
			min, max time.Duration
		}{
			{1, 750 * time.Millisecond, 1250 * time.Millisecond},
			{32, 45 * time.Minute, 75 * time.Minute},
			{101, 45 * time.Minute, 75 * time.Minute},
			{maxInt32, 45 * time.Minute, 75 * time.Minute},
		} {
			d := queryOne[time.Duration](t, conn, "SELECT jobs_backoff($1)", tc.attempt)
			if d < tc.min || d > tc.max {
				t.Errorf("jobs_backoff(%d) = %s, want between %s and %s", tc.attempt, d, tc.min, tc.max)
			}
		}
		f.unchanged(t, conn, "jobs_backoff")
	})
}
