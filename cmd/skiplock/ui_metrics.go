package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plainMetrics is the /metrics of `skiplock ui`: jobs_metrics() in the Prometheus text
// format, one read per scrape, with the metric names of contrib/prometheus's collector. It
// keeps the command free of the Prometheus client library; see metricsHandler.
type plainMetrics struct {
	db     *pgxpool.Pool
	schema string
}

// plainGauges are jobs_metrics' columns exposed per queue: column, metric name, help.
var plainGauges = []struct{ column, name, help string }{
	{"ready", "skiplock_queue_ready_jobs", "Queued jobs due now."},
	{"scheduled", "skiplock_queue_scheduled_jobs", "Queued jobs due in the future."},
	{"running", "skiplock_queue_running_jobs", "Running jobs."},
	{"running_expired", "skiplock_queue_expired_lease_jobs", "Running jobs whose lease has expired."},
	{"dead", "skiplock_queue_dead_jobs", "Dead jobs."},
	{"cancelled", "skiplock_queue_cancelled_jobs", "Cancelled jobs."},
	{"done_estimate", "skiplock_queue_done_jobs_estimate", "Done jobs, estimated from the planner's statistics."},
	{"oldest_ready_age_s", "skiplock_queue_oldest_ready_age_seconds", "Age of the oldest ready job (0 when none is ready)."},
	{"paused::int", "skiplock_queue_paused", "1 when the queue is paused."},
}

func (m *plainMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn := pgx.Identifier{"jobs_metrics"}
	if m.schema != "" {
		fn = pgx.Identifier{m.schema, "jobs_metrics"}
	}
	cols := make([]string, len(plainGauges))
	for i, g := range plainGauges {
		cols[i] = "coalesce(" + g.column + ", 0)::float8"
	}
	rows, err := m.db.Query(r.Context(), "SELECT queue, jobs_created_total, "+strings.Join(cols, ", ")+" FROM "+fn.Sanitize()+"()")
	if err != nil {
		http.Error(w, "failed to read jobs_metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer rows.Close()
	values := make([][]string, len(plainGauges)) // per gauge, its sample lines
	var created int64
	for rows.Next() {
		var queue *string
		var total *int64
		vals := make([]float64, len(plainGauges))
		dest := []any{&queue, &total}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			http.Error(w, "failed to read jobs_metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if queue == nil {
			if total != nil {
				created = *total
			}
			continue
		}
		for i, g := range plainGauges {
			values[i] = append(values[i], fmt.Sprintf("%s{queue=%s} %s", g.name, strconv.Quote(*queue), strconv.FormatFloat(vals[i], 'g', -1, 64)))
		}
	}
	if err := rows.Err(); err != nil {
		http.Error(w, "failed to read jobs_metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	for i, g := range plainGauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, line := range values[i] {
			b.WriteString(line + "\n")
		}
	}
	fmt.Fprintf(&b, "# HELP skiplock_jobs_created_total Jobs ever created (the jobs.id sequence).\n# TYPE skiplock_jobs_created_total counter\nskiplock_jobs_created_total %d\n", created)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = b.WriteTo(w)
}
