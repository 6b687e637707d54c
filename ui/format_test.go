package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/admin"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Microsecond:            "2ms",
		1234 * time.Millisecond:            "1.2s",
		time.Minute:                        "1m",
		2*time.Minute + 10*time.Second:     "2m10s",
		5*time.Hour + 6*time.Minute:        "5h6m",
		50*time.Hour + 10*time.Minute:      "2d2h",
		15 * time.Minute:                   "15m",
		59*time.Minute + 59*time.Second:    "59m59s",
		3*time.Hour + 100*time.Millisecond: "3h0m",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := rates([]sample{
		{at: t0, created: 100, live: 10},
		{at: t0.Add(30 * time.Second), created: 160, live: 20}, // 60 created, 50 finished in half a minute
		{at: t0.Add(90 * time.Second), created: 160, live: 30}, // 10 retried: no finishing, not negative
	})
	if len(got) != 2 || got[0].created != 120 || got[0].finished != 100 || got[1].created != 0 || got[1].finished != 0 {
		t.Fatalf("rates = %+v, want 120 and 100 per minute, then 0 and 0", got)
	}
}

func TestCSRFToken(t *testing.T) {
	s := &csrfSigner{secret: []byte("0123456789abcdef0123456789abcdef"), ttl: time.Hour}
	now := time.Now()
	tok := s.token("/queues/pause", now)
	if !s.valid(tok, "/queues/pause", now) {
		t.Fatal("a fresh token is not valid")
	}
	if s.valid(tok, "/queues/resume", now) {
		t.Error("a token is valid for another action")
	}
	if s.valid(tok, "/queues/pause", now.Add(2*time.Hour)) {
		t.Error("an expired token is valid")
	}
	for _, bad := range []string{"", ".", "x.y", "99999999999.", tok + "A"} {
		if s.valid(bad, "/queues/pause", now) {
			t.Errorf("token %q is valid", bad)
		}
	}
}

func TestWorkflowLayout(t *testing.T) {
	step := func(id int64, parents ...int64) admin.WorkflowJob {
		return admin.WorkflowJob{ID: id, State: "queued", DependsOn: parents}
	}
	// 1 -> 2 -> 3 and the shortcut 1 -> 3; 4 after 3 and a parent outside the steps (99);
	// 5 a second root; 6 lists its parent twice.
	jobs := []admin.WorkflowJob{step(1), step(2, 1), step(3, 1, 2), step(4, 3, 99), step(5), step(6, 5, 5)}
	depth := workflowDepths(jobs)
	if fmt.Sprint(depth) != "map[1:0 2:1 3:2 4:3 5:0 6:1]" {
		t.Fatalf("depths %v, want the longest path from a root", depth)
	}
	d := layoutWorkflow(1, jobs)
	if len(d.Nodes) != 6 || len(d.Edges) != 5 || d.Unfinished != 6 || len(d.Counts) != 1 || d.Counts[0] != (stateCount{"queued", 6}) {
		t.Fatalf("layout = %+v, want 6 nodes, 5 edges (one per distinct parent among the steps), 6 unfinished", d)
	}
	boxes := map[int64]workflowNode{}
	for i, n := range d.Nodes {
		boxes[n.ID] = n
		if n.X != graphPad+n.Depth*(nodeWidth+columnGap) || n.X+nodeWidth > d.Width || n.Y < 0 || n.Y+nodeHeight > d.Height {
			t.Errorf("node %d at (%d, %d), depth %d, outside its column or the %dx%d graph", n.ID, n.X, n.Y, n.Depth, d.Width, d.Height)
		}
		for _, o := range d.Nodes[:i] {
			if o.X == n.X && o.Y < n.Y+nodeHeight+rowGap && n.Y < o.Y+nodeHeight+rowGap {
				t.Errorf("nodes %d and %d overlap", o.ID, n.ID)
			}
		}
	}
	// Within a column, a child sits in the order of its parents: 2 (after 1) above 6 (after 5).
	if boxes[2].Y >= boxes[6].Y {
		t.Errorf("node 2 at y %d, node 6 at y %d: want 2 above 6, as 1 is above 5", boxes[2].Y, boxes[6].Y)
	}
	for _, e := range d.Edges {
		from, to := boxes[e.From], boxes[e.To]
		if !strings.HasPrefix(e.Path, fmt.Sprintf("M%d %d C", from.X+nodeWidth, from.Y+nodeHeight/2)) ||
			!strings.HasSuffix(e.Path, fmt.Sprintf(" %d %d", to.X, to.Y+nodeHeight/2)) {
			t.Errorf("edge %d -> %d is %q: want from the parent's right side to the child's left", e.From, e.To, e.Path)
		}
	}
	if shorten("abcdef", 4) != "abc…" || shorten("abc", 3) != "abc" || shorten("ééééé", 3) != "éé…" {
		t.Error("shorten does not cut at runes with an ellipsis")
	}
}
