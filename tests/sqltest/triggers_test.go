package sqltest

import (
	"strings"
	"testing"
)

// TestNoBeforeUpdateRowTriggerOnJobs: jobs has no BEFORE UPDATE row trigger. PostgreSQL locks
// each row such a trigger could fire for before updating it, whatever the trigger's WHEN
// says: a WAL record of about 54 bytes for every claim and completion of every job (the
// superseded-job rule was such a trigger once and cost the drain 5 % more WAL). Rules that
// act on a state change are AFTER triggers.
func TestNoBeforeUpdateRowTriggerOnJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// tgtype bits: 1 row, 2 before, 16 update.
	names := queryList[string](t, b.Conn, `
		SELECT tgname::text FROM pg_trigger
		WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal
		  AND tgtype & 1 <> 0 AND tgtype & 2 <> 0 AND tgtype & 16 <> 0
		ORDER BY 1`)
	if len(names) > 0 {
		t.Fatalf("BEFORE UPDATE row triggers on jobs: %s", strings.Join(names, ", "))
	}
}
