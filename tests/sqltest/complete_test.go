package sqltest

import (
	"slices"
	"strings"
	"testing"
)

// TestCompleteMany covers the batch complete's own promises.
func TestCompleteMany(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnlyCompletedIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			enqueue(t, b.Conn, "")
		}
		jobs := claim(t, b.Conn, "w", 3, nil, "1 minute")
		ids := []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[0].ID, 999999}
		attempts := []int32{jobs[0].Attempt, jobs[1].Attempt + 1, jobs[2].Attempt, jobs[0].Attempt, 1}
		got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many($1, $2) ORDER BY 1", ids, attempts)
		if want := []int64{jobs[0].ID, jobs[2].ID}; !slices.Equal(got, want) {
			t.Fatalf("jobs_complete_many returned %v, want %v (duplicate pair once, wrong attempt and unknown id left out)", got, want)
		}
		if r := getJob(t, b.Conn, jobs[1].ID); r.State != "running" {
			t.Fatalf("job with the wrong attempt is %s, want running", r.State)
		}
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(state::text, ',' ORDER BY id) FROM jobs"); !strings.EqualFold(got, "done,running,done") {
			t.Fatalf("states = %s", got)
		}
	})
}
