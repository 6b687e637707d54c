package skiplockprom

import (
	"fmt"
	"math"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestUIAndCollectorExposeTheSameMetrics scrapes the two /metrics of skiplock over one
// database, `skiplock ui`'s (admin's MetricsHandler) and a registry holding the Collector,
// and fails on any difference in the families' names, help texts, types, label sets or values.
func TestUIAndCollectorExposeTheSameMetrics(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	weird := "we\"ird\\q\u03b4" // a quote, a backslash and a non-ASCII letter: escaped alike
	for _, stmt := range []string{
		"SELECT jobs_enqueue('mail', queue => 'email') FROM generate_series(1, 3)",
		"SELECT jobs_enqueue('mail', queue => 'email', run_at => now() + interval '1 hour')",
		"SELECT jobs_enqueue('x', queue => '" + strings.ReplaceAll(weird, "'", "''") + "')",
		"SELECT jobs_enqueue('doomed', queue => 'bulk', max_attempts => 1)",
		"SELECT jobs_fail(id, attempt, 'boom') FROM jobs_claim('w', queues => ARRAY['bulk'])",
		"SELECT jobs_enqueue('done', queue => 'bulk')",
		"SELECT jobs_complete(id, attempt) FROM jobs_claim('w', queues => ARRAY['bulk'])",
		"SELECT jobs_pause('email')",
		"SELECT jobs_set_concurrency('bulk', 4)",
		"SELECT jobs_set_rate_limit('email', 10, '1 minute')",
		"ANALYZE jobs",
	} {
		pgtest.MustExec(t, db.Conn, stmt)
	}
	pool := pgtest.NewPool(t, db.URL)

	rec := httptest.NewRecorder()
	admin.New(pool, nil).MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("skiplock ui's /metrics answered %d: %s", rec.Code, rec.Body)
	}
	uiText := rec.Body.String()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	ui, err := parser.TextToMetricFamilies(strings.NewReader(uiText))
	if err != nil {
		t.Fatalf("parsing skiplock ui's /metrics: %v\n%s", err, uiText)
	}

	c, err := NewCollector(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	collector := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		collector[f.GetName()] = f
	}

	names := func(m map[string]*dto.MetricFamily) []string {
		var ns []string
		for n := range m {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		return ns
	}
	if a, b := names(ui), names(collector); !slices.Equal(a, b) {
		t.Fatalf("the families differ: skiplock ui %v, the Collector %v", a, b)
	}
	if len(ui) != len(admin.MetricDefs) {
		t.Fatalf("%d families exposed, admin.MetricDefs has %d (is one empty?): %v", len(ui), len(admin.MetricDefs), names(ui))
	}
	for name, u := range ui {
		k := collector[name]
		if u.GetHelp() != k.GetHelp() || u.GetType() != k.GetType() {
			t.Errorf("%s: skiplock ui has help %q type %v, the Collector help %q type %v", name, u.GetHelp(), u.GetType(), k.GetHelp(), k.GetType())
		}
		uv, kv := samples(u), samples(k)
		if a, b := sortedKeys(uv), sortedKeys(kv); !slices.Equal(a, b) {
			t.Errorf("%s: label sets differ: skiplock ui %q, the Collector %q", name, a, b)
			continue
		}
		for labels, v := range uv {
			// The two reads are a moment apart: only the age of the oldest ready job moves.
			if tol := 0.0; name == "skiplock_queue_oldest_ready_age_seconds" {
				tol = 5
				if math.Abs(v-kv[labels]) > tol {
					t.Errorf("%s%s: skiplock ui %v, the Collector %v", name, labels, v, kv[labels])
				}
			} else if v != kv[labels] {
				t.Errorf("%s%s: skiplock ui %v, the Collector %v", name, labels, v, kv[labels])
			}
		}
	}
	if got := samples(ui["skiplock_queue_ready_jobs"])[fmt.Sprintf("{queue=%q}", weird)]; got != 1 {
		t.Errorf("the queue %q has %v ready jobs in skiplock ui's /metrics, want 1:\n%s", weird, got, uiText)
	}

	if path, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = strings.NewReader(uiText)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics on skiplock ui's /metrics: %v\n%s\non:\n%s", err, out, uiText)
		}
	}
}

// samples maps each metric of f, by its labels written out, to its value.
func samples(f *dto.MetricFamily) map[string]float64 {
	m := map[string]float64{}
	for _, metric := range f.GetMetric() {
		var labels []string
		for _, l := range metric.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		v := metric.GetGauge().GetValue()
		if metric.Counter != nil {
			v = metric.GetCounter().GetValue()
		}
		if metric.Untyped != nil {
			v = metric.GetUntyped().GetValue()
		}
		m["{"+strings.Join(labels, ",")+"}"] = v
	}
	return m
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
