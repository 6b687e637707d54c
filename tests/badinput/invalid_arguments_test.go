package badinput

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestInvalidArguments: empty strings, values over the documented limits (10000+ characters,
// 1e6-element arrays), zero, negative and mixed-sign intervals, leases over 100 years,
// out-of-range integers. Each is refused with 22023 naming the parameter (or another
// documented SQLSTATE) and changes nothing, not even the good elements of a batch.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("x", 10001)
	million := 1_000_000
	kinds1e6 := make([]string, million)
	for i := range kinds1e6 {
		kinds1e6[i] = "k"
	}
	ids1e6 := make([]int64, million)
	attempts1e6 := make([]int32, million)
	for i := range ids1e6 {
		ids1e6[i] = 1
		attempts1e6[i] = 1
	}

	for _, tc := range []struct {
		name  string
		sql   string
		args  []any
		fn    string
		param string
		code  string // a documented SQLSTATE other than 22023; param is then unused
	}{
		// jobs_enqueue: kind, queue and unique_key are 1 to 200 bytes, counted in bytes.
		{name: "EnqueueKindEmpty", sql: "SELECT jobs_enqueue('')", fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind201Bytes", sql: "SELECT jobs_enqueue(repeat('k', 201))", fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind10001Chars", sql: "SELECT jobs_enqueue($1)", args: []any{long}, fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind51Emoji204Bytes", sql: "SELECT jobs_enqueue($1)", args: []any{strings.Repeat("😀", 51)}, fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueQueueEmpty", sql: "SELECT jobs_enqueue('k', queue => '')", fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueQueue10001Chars", sql: "SELECT jobs_enqueue('k', queue => $1)", args: []any{long}, fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueQueue201BytesOfCombiningMarks", sql: "SELECT jobs_enqueue('k', queue => 'e' || repeat(U&'\\0301', 100))", fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueUniqueKeyEmpty", sql: "SELECT jobs_enqueue('k', unique_key => '')", fn: "jobs_enqueue", param: "unique_key"},
		{name: "EnqueueUniqueKey10001Chars", sql: "SELECT jobs_enqueue('k', unique_key => $1)", args: []any{long}, fn: "jobs_enqueue", param: "unique_key"},
		{name: "EnqueueMaxAttemptsZero", sql: "SELECT jobs_enqueue('k', max_attempts => 0)", fn: "jobs_enqueue", param: "max_attempts"},
		{name: "EnqueueMaxAttemptsMinInt", sql: "SELECT jobs_enqueue('k', max_attempts => $1)", args: []any{int32(minInt32)}, fn: "jobs_enqueue", param: "max_attempts"},
		// The kind is checked first, but whichever bad parameter is named, nothing changes.
		{name: "EnqueueEverythingWrong", sql: "SELECT jobs_enqueue('', NULL, '', NULL, NULL, 0, '')", fn: "jobs_enqueue", param: "kind"},

		// jobs_enqueue_many: all or nothing, the bad element named with its index.
		{name: "EnqueueManyKinds1e6", sql: "SELECT * FROM jobs_enqueue_many($1)", args: []any{kinds1e6}, fn: "jobs_enqueue_many", param: "kinds"},
		{name: "EnqueueManyKinds100001", sql: "SELECT * FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[100001]))", fn: "jobs_enqueue_many", param: "kinds"},
		{name: "EnqueueManyQueues1e6ForOneKind", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['k'], queues => $1)", args: []any{kinds1e6}, fn: "jobs_enqueue_many", param: "queues"},
		{name: "EnqueueManyLastKindEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b', 'c', ''])", fn: "jobs_enqueue_many", param: "kinds[4]"},
		{name: "EnqueueManyKind201Bytes", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', repeat('k', 201)])", fn: "jobs_enqueue_many", param: "kinds[2]"},
		{name: "EnqueueManyQueueEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', ''])", fn: "jobs_enqueue_many", param: "queues[2]"},
		{name: "EnqueueManyQueue10001Chars", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => ARRAY[$1])", args: []any{long}, fn: "jobs_enqueue_many", param: "queues[1]"},
		{name: "EnqueueManyUniqueKeyEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY[NULL, ''])", fn: "jobs_enqueue_many", param: "unique_keys[2]"},
		{name: "EnqueueManyUniqueKey201Bytes", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], unique_keys => ARRAY[repeat('u', 201)])", fn: "jobs_enqueue_many", param: "unique_keys[1]"},
		{name: "EnqueueManyMaxAttemptsNegative", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], max_attempts => ARRAY[1, -1])", fn: "jobs_enqueue_many", param: "max_attempts[2]"},
		{name: "EnqueueManyPrioritiesTooShort", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], priorities => ARRAY[1])", fn: "jobs_enqueue_many", param: "priorities"},
		{name: "EnqueueManyRunAtsEmptyForTwoKinds", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], run_ats => '{}')", fn: "jobs_enqueue_many", param: "run_ats"},
		{name: "EnqueueManyUniqueKeysTooLong", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], unique_keys => ARRAY['x', 'y'])", fn: "jobs_enqueue_many", param: "unique_keys"},
		{name: "EnqueueManyThirdKindEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['ok', 'ok', ''])", fn: "jobs_enqueue_many", param: "kinds[3]"},
		{name: "EnqueueManyFirstQueueNull", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY[NULL, 'q'])", fn: "jobs_enqueue_many", param: "queues[1]"},
		{name: "EnqueueManyOnlyPriorityNull", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], priorities => ARRAY[NULL]::int[])", fn: "jobs_enqueue_many", param: "priorities[1]"},
		{name: "EnqueueManyRunAtsTooShort", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], run_ats => ARRAY[now()])", fn: "jobs_enqueue_many", param: "run_ats"},
		{name: "EnqueueManyPrioritiesTooLong", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], priorities => ARRAY[1, 2])", fn: "jobs_enqueue_many", param: "priorities"},
		{name: "EnqueueManyMaxAttemptsEmptyForTwoKinds", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], max_attempts => '{}'::int[])", fn: "jobs_enqueue_many", param: "max_attempts"},

		// jobs_claim
		{name: "ClaimWorkerEmpty", sql: "SELECT * FROM jobs_claim('')", fn: "jobs_claim", param: "worker"},
		{name: "ClaimWorker10001Chars", sql: "SELECT * FROM jobs_claim($1)", args: []any{long}, fn: "jobs_claim", param: "worker"},
		{name: "ClaimWorker51Emoji204Bytes", sql: "SELECT * FROM jobs_claim($1)", args: []any{strings.Repeat("🚀", 51)}, fn: "jobs_claim", param: "worker"},
		{name: "ClaimMaxJobsZero", sql: "SELECT * FROM jobs_claim('w', 0)", fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobsMinusOne", sql: "SELECT * FROM jobs_claim('w', -1)", fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobs10001", sql: "SELECT * FROM jobs_claim('w', 10001)", fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobsMaxInt", sql: "SELECT * FROM jobs_claim('w', $1)", args: []any{int32(maxInt32)}, fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobsMinInt", sql: "SELECT * FROM jobs_claim('w', $1)", args: []any{int32(minInt32)}, fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimQueuesEmpty", sql: "SELECT * FROM jobs_claim('w', 1, '{}')", fn: "jobs_claim", param: "queues"},
		{name: "ClaimQueuesOnlyNull", sql: "SELECT * FROM jobs_claim('w', 1, ARRAY[NULL]::text[])", fn: "jobs_claim", param: "queues"},
		{name: "ClaimLeaseZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '0')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMinusOneMicrosecond", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '-1 microsecond')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMonthMinus30DaysIsZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 mon -30 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseDayMinus86400SecondsIsZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 day -86400 seconds')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMonthMinus31DaysIsNegative", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 mon -31 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMostNegative", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '-178000000 years')", fn: "jobs_claim", param: "lease"},
		// A lease is at most 100 years; longer ones, up to those that overflow now() + lease,
		// are refused before any job is claimed. Intervals compare with 1 month = 30 days,
		// so 100 years is 36000 days.
		{name: "ClaimLease100YearsOneMicrosecond", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '100 years 1 microsecond')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLease36001Days", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '36001 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseThousandYears", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseBeyondTimestampRange", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '300000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMostPositive", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '178000000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMaxMicroseconds", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '9223372036854775807 microseconds')", fn: "jobs_claim", param: "lease"},

		// jobs_complete_many and jobs_heartbeat_many: at most 100000 pairs.
		{name: "CompleteMany1e6", sql: "SELECT * FROM jobs_complete_many($1, $2)", args: []any{ids1e6, attempts1e6}, fn: "jobs_complete_many", param: "ids"},
		{name: "CompleteMany100001", sql: "SELECT * FROM jobs_complete_many(array_fill(1::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]))", fn: "jobs_complete_many", param: "ids"},
		{name: "CompleteManyAttempts1e6ForOneID", sql: "SELECT * FROM jobs_complete_many(ARRAY[1::bigint], $1)", args: []any{attempts1e6}, fn: "jobs_complete_many", param: "attempts"},
		// jobs_complete_and_claim: every argument is checked before anything is completed, and
		// the error names this function; max_jobs may be 0 (complete only).
		{name: "CompleteAndClaimWorkerEmpty", sql: "SELECT * FROM jobs_complete_and_claim('', ARRAY[1], ARRAY[1])", fn: "jobs_complete_and_claim", param: "worker"},
		{name: "CompleteAndClaimWorker201Bytes", sql: "SELECT * FROM jobs_complete_and_claim(repeat('w', 201), ARRAY[1], ARRAY[1])", fn: "jobs_complete_and_claim", param: "worker"},
		{name: "CompleteAndClaimMaxJobsMinusOne", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], -1)", fn: "jobs_complete_and_claim", param: "max_jobs"},
		{name: "CompleteAndClaimMaxJobs10001", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 10001)", fn: "jobs_complete_and_claim", param: "max_jobs"},
		{name: "CompleteAndClaimMaxJobsMinInt", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], $1)", args: []any{int32(minInt32)}, fn: "jobs_complete_and_claim", param: "max_jobs"},
		{name: "CompleteAndClaimQueuesEmpty", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, '{}')", fn: "jobs_complete_and_claim", param: "queues"},
		{name: "CompleteAndClaimQueuesTwoDimensional", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, '{{queued}}'::text[])", fn: "jobs_complete_and_claim", param: "queues"},
		{name: "CompleteAndClaimLeaseZero", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, NULL, '0')", fn: "jobs_complete_and_claim", param: "lease"},
		{name: "CompleteAndClaimLeaseMixedSignNegative", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, NULL, '1 mon -31 days')", fn: "jobs_complete_and_claim", param: "lease"},
		{name: "CompleteAndClaimLease100YearsOneMicrosecond", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, NULL, '100 years 1 microsecond')", fn: "jobs_complete_and_claim", param: "lease"},
		{name: "CompleteAndClaim100001Pairs", sql: "SELECT * FROM jobs_complete_and_claim('w', array_fill(1::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]))", fn: "jobs_complete_and_claim", param: "ids"},
		{name: "CompleteAndClaimAttemptsTooShort", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1, 3], ARRAY[1])", fn: "jobs_complete_and_claim", param: "attempts"},
		// A valid pair does not make a bad claim argument acceptable: job 1 stays running.
		{name: "CompleteAndClaimValidPairBadLease", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], 1, NULL, '-1 second')", fn: "jobs_complete_and_claim", param: "lease"},

		{name: "CompleteManyIDsEmptyAttemptsNot", sql: "SELECT * FROM jobs_complete_many('{}', ARRAY[1])", fn: "jobs_complete_many", param: "attempts"},
		{name: "HeartbeatMany1e6", sql: "SELECT * FROM jobs_heartbeat_many($1, $2)", args: []any{ids1e6, attempts1e6}, fn: "jobs_heartbeat_many", param: "ids"},
		{name: "HeartbeatManyAttemptsEmptyForOneID", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1]::bigint[], '{}'::int[])", fn: "jobs_heartbeat_many", param: "attempts"},
		{name: "HeartbeatManyLeaseZero", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '0')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseNegative", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '-1 hour')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseMixedSignZero", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '1 mon -30 days')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLease100YearsOneMicrosecond", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '100 years 1 microsecond')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseBeyondTimestampRange", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '178000000 years')", fn: "jobs_heartbeat_many", param: "lease"},

		// jobs_heartbeat
		{name: "HeartbeatLeaseZero", sql: "SELECT jobs_heartbeat(1, 1, '0')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseMinusOneMicrosecond", sql: "SELECT jobs_heartbeat(1, 1, '-1 microsecond')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseMonthMinus31Days", sql: "SELECT jobs_heartbeat(1, 1, '1 mon -31 days')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLease100YearsOneMicrosecond", sql: "SELECT jobs_heartbeat(1, 1, '100 years 1 microsecond')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseBeyondTimestampRange", sql: "SELECT jobs_heartbeat(1, 1, '178000000 years')", fn: "jobs_heartbeat", param: "lease"},
		// The lease is checked before the job is looked up: a stale attempt is no excuse.
		{name: "HeartbeatStaleAttemptLeaseBeyondTimestampRange", sql: "SELECT jobs_heartbeat(1, 2, '178000000 years')", fn: "jobs_heartbeat", param: "lease"},

		// The bulk actions: states only from the action's own, max_jobs at least 1.
		{name: "RetryManyStatesQueued", sql: "SELECT jobs_retry_many(states => '{dead, queued}')", fn: "jobs_retry_many", param: "states"},
		{name: "RetryManyStatesEmpty", sql: "SELECT jobs_retry_many(states => '{}')", fn: "jobs_retry_many", param: "states"},
		{name: "RetryManyMaxJobsZero", sql: "SELECT jobs_retry_many(max_jobs => 0)", fn: "jobs_retry_many", param: "max_jobs"},
		{name: "CancelManyStatesDone", sql: "SELECT jobs_cancel_many(states => '{done}')", fn: "jobs_cancel_many", param: "states"},
		{name: "CancelManyMaxJobsMinInt", sql: "SELECT jobs_cancel_many(max_jobs => $1)", args: []any{int32(minInt32)}, fn: "jobs_cancel_many", param: "max_jobs"},
		{name: "DeleteManyStatesQueued", sql: "SELECT jobs_delete_many(states => '{queued}')", fn: "jobs_delete_many", param: "states"},
		{name: "DeleteManyStatesRunning", sql: "SELECT jobs_delete_many(ids => ARRAY[1], states => '{done, running}')", fn: "jobs_delete_many", param: "states"},
		{name: "DeleteManyMaxJobsNegative", sql: "SELECT jobs_delete_many(max_jobs => -1)", fn: "jobs_delete_many", param: "max_jobs"},
		{name: "MaintainMaxJobsZero", sql: "SELECT jobs_maintain(0)", fn: "jobs_maintain", param: "max_jobs"},

		// jobs_prune
		{name: "PruneOlderThanMinusOneMicrosecond", sql: "SELECT jobs_prune('-1 microsecond')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneOlderThanMixedSignNegative", sql: "SELECT jobs_prune('1 mon -31 days')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneOlderThanMostNegative", sql: "SELECT jobs_prune('-178000000 years')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneMaxJobsZero", sql: "SELECT jobs_prune('0', true, 0)", fn: "jobs_prune", param: "max_jobs"},
		{name: "PruneMaxJobsMinInt", sql: "SELECT jobs_prune('0', true, $1)", args: []any{int32(minInt32)}, fn: "jobs_prune", param: "max_jobs"},

		// jobs_backoff
		{name: "BackoffZero", sql: "SELECT jobs_backoff(0)", fn: "jobs_backoff", param: "attempt"},
		{name: "BackoffMinInt", sql: "SELECT jobs_backoff($1)", args: []any{int32(minInt32)}, fn: "jobs_backoff", param: "attempt"},

		// jobs_cron_next: the offending field of cron is named in the message.
		{name: "CronNextMinute60", sql: "SELECT jobs_cron_next('60 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextHour24", sql: "SELECT jobs_cron_next('0 24 * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextDayOfMonthZero", sql: "SELECT jobs_cron_next('0 0 0 * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextMonth13", sql: "SELECT jobs_cron_next('0 0 1 13 *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextDayOfWeek8", sql: "SELECT jobs_cron_next('0 0 * * 8', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextUnknownName", sql: "SELECT jobs_cron_next('0 0 * FOO *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextDayNameInMonthField", sql: "SELECT jobs_cron_next('0 0 * MON *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextBackwardsRange", sql: "SELECT jobs_cron_next('0 0 * * FRI-MON', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextStepZero", sql: "SELECT jobs_cron_next('*/0 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextStepNotANumber", sql: "SELECT jobs_cron_next('*/x * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextStepFiveDigits", sql: "SELECT jobs_cron_next('*/99999 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextValueTwentyDigits", sql: "SELECT jobs_cron_next('99999999999999999999 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextTwoSteps", sql: "SELECT jobs_cron_next('*/2/3 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextEmptyListElement", sql: "SELECT jobs_cron_next('1,,2 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextNegative", sql: "SELECT jobs_cron_next('-1 * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextFourFields", sql: "SELECT jobs_cron_next('* * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextSixFields", sql: "SELECT jobs_cron_next('0 * * * * *', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextBlank", sql: "SELECT jobs_cron_next(' ', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNext10001Chars", sql: "SELECT jobs_cron_next($1, now())", args: []any{long}, fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextUnknownMacro", sql: "SELECT jobs_cron_next('@reboot', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextEveryNotAnInterval", sql: "SELECT jobs_cron_next('@every often', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextEveryHalfSecond", sql: "SELECT jobs_cron_next('@every 0.5 seconds', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextEveryMonth", sql: "SELECT jobs_cron_next('@every 1 month', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextEveryNegative", sql: "SELECT jobs_cron_next('@every -1 minute', now())", fn: "jobs_cron_next", param: "cron"},
		{name: "CronNextTimezoneUnknown", sql: "SELECT jobs_cron_next('* * * * *', now(), 'Mars/Olympus_Mons')", fn: "jobs_cron_next", param: "timezone"},
		{name: "CronNextTimezoneEmpty", sql: "SELECT jobs_cron_next('* * * * *', now(), '')", fn: "jobs_cron_next", param: "timezone"},
		{name: "CronNextTimezone10001Chars", sql: "SELECT jobs_cron_next('* * * * *', now(), $1)", args: []any{long}, fn: "jobs_cron_next", param: "timezone"},
		{name: "CronNextAfterInfinity", sql: "SELECT jobs_cron_next('* * * * *', 'infinity')", fn: "jobs_cron_next", param: "after"},
		{name: "CronNextAfterMinusInfinity", sql: "SELECT jobs_cron_next('* * * * *', '-infinity')", fn: "jobs_cron_next", param: "after"},

		// jobs_schedule: name, kind and queue are 1 to 200 bytes; cron must run.
		{name: "ScheduleNameEmpty", sql: "SELECT jobs_schedule('', '* * * * *', 'k')", fn: "jobs_schedule", param: "name"},
		{name: "ScheduleName201Bytes", sql: "SELECT jobs_schedule(repeat('n', 201), '* * * * *', 'k')", fn: "jobs_schedule", param: "name"},
		{name: "ScheduleCronBadField", sql: "SELECT jobs_schedule('s', '* * 32 * *', 'k')", fn: "jobs_schedule", param: "cron"},
		{name: "ScheduleCronNeverRuns", sql: "SELECT jobs_schedule('s', '0 0 30 2 *', 'k')", fn: "jobs_schedule", param: "cron"},
		{name: "ScheduleKindEmpty", sql: "SELECT jobs_schedule('s', '* * * * *', '')", fn: "jobs_schedule", param: "kind"},
		{name: "ScheduleQueue10001Chars", sql: "SELECT jobs_schedule('s', '* * * * *', 'k', queue => $1)", args: []any{long}, fn: "jobs_schedule", param: "queue"},
		{name: "ScheduleTimezoneUnknown", sql: "SELECT jobs_schedule('s', '* * * * *', 'k', timezone => 'Europe/Atlantis')", fn: "jobs_schedule", param: "timezone"},
		{name: "ScheduleMaxAttemptsZero", sql: "SELECT jobs_schedule('s', '* * * * *', 'k', max_attempts => 0)", fn: "jobs_schedule", param: "max_attempts"},
		{name: "ScheduleMaxAttemptsMinInt", sql: "SELECT jobs_schedule('s', '* * * * *', 'k', max_attempts => $1)", args: []any{int32(minInt32)}, fn: "jobs_schedule", param: "max_attempts"},
		// jobs_list: a page is 1 to 1000 jobs; jobs_schedule_run and _set_enabled need a schedule.
		{name: "ListMaxJobsZero", sql: "SELECT * FROM jobs_list(max_jobs => 0)", fn: "jobs_list", param: "max_jobs"},
		{name: "ListMaxJobs1001", sql: "SELECT * FROM jobs_list(max_jobs => 1001)", fn: "jobs_list", param: "max_jobs"},
		{name: "ListMaxJobsMinInt", sql: "SELECT * FROM jobs_list(max_jobs => $1)", args: []any{int32(minInt32)}, fn: "jobs_list", param: "max_jobs"},
		{name: "ScheduleRunUnknown", sql: "SELECT jobs_schedule_run('s')", fn: "jobs_schedule_run", param: "name"},
		{name: "ScheduleRunEmpty", sql: "SELECT jobs_schedule_run('')", fn: "jobs_schedule_run", param: "name"},
		{name: "ScheduleRun10001Chars", sql: "SELECT jobs_schedule_run($1)", args: []any{long}, fn: "jobs_schedule_run", param: "name"},
		{name: "ScheduleSetEnabledUnknown", sql: "SELECT jobs_schedule_set_enabled('s', true)", fn: "jobs_schedule_set_enabled", param: "name"},

		// Topics: topic, queue and kind are 1 to 200 bytes, counted in bytes; jobs_publish
		// checks the job fields as jobs_enqueue does.
		{name: "SubscribeTopicEmpty", sql: "SELECT jobs_subscribe('', 'q', 'k')", fn: "jobs_subscribe", param: "topic"},
		{name: "SubscribeTopic201Bytes", sql: "SELECT jobs_subscribe(repeat('t', 201), 'q', 'k')", fn: "jobs_subscribe", param: "topic"},
		{name: "SubscribeTopic101TwoByteChars", sql: "SELECT jobs_subscribe(repeat('é', 101), 'q', 'k')", fn: "jobs_subscribe", param: "topic"},
		{name: "SubscribeQueueEmpty", sql: "SELECT jobs_subscribe('t', '', 'k')", fn: "jobs_subscribe", param: "queue"},
		{name: "SubscribeQueue10001Chars", sql: "SELECT jobs_subscribe('t', $1, 'k')", args: []any{long}, fn: "jobs_subscribe", param: "queue"},
		{name: "SubscribeKindEmpty", sql: "SELECT jobs_subscribe('t', 'q', '')", fn: "jobs_subscribe", param: "kind"},
		{name: "SubscribeKind201Bytes", sql: "SELECT jobs_subscribe('t', 'q', repeat('k', 201))", fn: "jobs_subscribe", param: "kind"},
		{name: "UnsubscribeTopicEmpty", sql: "SELECT jobs_unsubscribe('', 'queued', 'k')", fn: "jobs_unsubscribe", param: "topic"},
		{name: "UnsubscribeQueue201Bytes", sql: "SELECT jobs_unsubscribe('t', repeat('q', 201), 'k')", fn: "jobs_unsubscribe", param: "queue"},
		{name: "UnsubscribeKindEmpty", sql: "SELECT jobs_unsubscribe('t', 'queued', '')", fn: "jobs_unsubscribe", param: "kind"},
		{name: "SubscriptionsTopicEmpty", sql: "SELECT * FROM jobs_subscriptions('')", fn: "jobs_subscriptions", param: "topic"},
		{name: "SubscriptionsTopic201Bytes", sql: "SELECT * FROM jobs_subscriptions(repeat('t', 201))", fn: "jobs_subscriptions", param: "topic"},
		{name: "PublishTopicEmpty", sql: "SELECT jobs_publish('')", fn: "jobs_publish", param: "topic"},
		{name: "PublishTopic10001Chars", sql: "SELECT jobs_publish($1)", args: []any{long}, fn: "jobs_publish", param: "topic"},
		{name: "PublishRunAtInfinity", sql: "SELECT jobs_publish('t', run_at => 'infinity')", fn: "jobs_publish", param: "run_at"},
		{name: "PublishMaxAttemptsZero", sql: "SELECT jobs_publish('t', max_attempts => 0)", fn: "jobs_publish", param: "max_attempts"},
		{name: "PublishMaxAttemptsMinInt", sql: "SELECT jobs_publish('t', max_attempts => $1)", args: []any{int32(minInt32)}, fn: "jobs_publish", param: "max_attempts"},
		{name: "PublishConcurrencyKeyEmpty", sql: "SELECT jobs_publish('t', concurrency_key => '')", fn: "jobs_publish", param: "concurrency_key"},
		{name: "PublishConcurrencyKey201Bytes", sql: "SELECT jobs_publish('t', concurrency_key => repeat('c', 201))", fn: "jobs_publish", param: "concurrency_key"},
		{name: "PublishMetaArray", sql: "SELECT jobs_publish('t', meta => '[1]')", fn: "jobs_publish", param: "meta"},
		{name: "PublishBadFieldWithoutSubscribers", sql: "SELECT jobs_publish('nobody', max_attempts => 0)", fn: "jobs_publish", param: "max_attempts"},

		// jobs_set_shard: shard numbers are 0..1023 (the low 10 bits of every id); not
		// with unfinished jobs whose id a router could not reach (55000).
		{name: "SetShardNull", sql: "SELECT jobs_set_shard(NULL)", fn: "jobs_set_shard", param: "shard"},
		{name: "SetShardNegative", sql: "SELECT jobs_set_shard(-1)", fn: "jobs_set_shard", param: "shard"},
		{name: "SetShard1024", sql: "SELECT jobs_set_shard(1024)", fn: "jobs_set_shard", param: "shard"},
		{name: "SetShardStrandsUnfinishedJobs", sql: "SELECT jobs_set_shard(1023)", code: "55000"},

		// jobs_retry: documented 23505 when the job's unique_key is held by a live job.
		{name: "RetryUniqueKeyHeldByLiveJob", sql: "SELECT jobs_retry(6)", code: "23505"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql, tc.args...)
			if tc.code != "" {
				if err == nil {
					t.Fatalf("%s succeeded, want SQLSTATE %s", tc.sql, tc.code)
				}
				pgtest.RequirePgError(t, err, tc.code)
			} else {
				requireInvalid(t, err, tc.fn, tc.param)
			}
			f.unchanged(t, conn, tc.sql)
		})
	}
}
