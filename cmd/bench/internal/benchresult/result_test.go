package benchresult

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestJSONLine(t *testing.T) {
	t.Parallel()

	t.Run("PeerFieldsFirstInOrder", func(t *testing.T) {
		t.Parallel()
		s := Summarize([]time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 3500 * time.Microsecond, 10 * time.Millisecond})
		r := &Result{Scenario: "latency", Jobs: 500, Seconds: 5.123456, Latency: &s}
		r.Add("interval_ms", 10.0)
		line, err := r.JSONLine("skiplock", "devel", []Field{{Key: "workers", Value: 100}, {Key: "interval_ms", Value: 99.0}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("not one line: %q", line)
		}
		// interval_ms once, the scenario's own value.
		want := `{"system":"skiplock","version":"devel","scenario":"latency","jobs":500,"seconds":5.1235,"jobs_per_sec":97.6,` +
			`"p50_ms":2,"p95_ms":10,"p99_ms":10,"max_ms":10,"min_ms":1,"mean_ms":4.125,"latency_samples":4,` +
			`"interval_ms":10,"workers":100}` + "\n"
		if string(line) != want {
			t.Errorf("got  %s\nwant %s", line, want)
		}
	})

	t.Run("InsertCallLatencyWithoutHTMLEscaping", func(t *testing.T) {
		t.Parallel()
		s := Summarize([]time.Duration{4 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
		r := &Result{Scenario: "insert_single", Jobs: 4, Seconds: 2, Latency: &s, LatencyPrefix: "insert_"}
		r.Add("timing", "a -> b")
		line, err := r.JSONLine("river", "v0.51.2", []Field{{Key: "workers", Value: 100}})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"system":"river","version":"v0.51.2","scenario":"insert_single","jobs":4,"seconds":2,"jobs_per_sec":2,` +
			`"insert_p50_ms":2,"insert_p95_ms":4,"insert_p99_ms":4,"insert_max_ms":4,"insert_min_ms":1,"insert_mean_ms":2.5,` +
			`"insert_latency_samples":4,"timing":"a -> b","workers":100}` + "\n"
		if string(line) != want {
			t.Errorf("got  %s\nwant %s", line, want)
		}
	})

	t.Run("NoLatencyFieldsWithoutLatency", func(t *testing.T) {
		t.Parallel()
		r := &Result{Scenario: "work_drain", Jobs: 1000, Seconds: 0.5}
		line, err := r.JSONLine("skiplock", "devel", nil)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["p50_ms"]; ok {
			t.Errorf("p50_ms present without a latency: %s", line)
		}
		if m["jobs_per_sec"] != 2000.0 {
			t.Errorf("jobs_per_sec = %v", m["jobs_per_sec"])
		}
	})

	t.Run("UnencodableValue", func(t *testing.T) {
		t.Parallel()
		r := &Result{Scenario: "steady"}
		r.Add("bad", func() {})
		if _, err := r.JSONLine("skiplock", "devel", nil); err == nil {
			t.Error("a func value was encoded")
		}
	})
}
