package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// states are the values of jobs_state, in the order the pages offer them.
var states = []string{"queued", "running", "done", "dead", "cancelled"}

// listedJob is one row of jobs_list.
type listedJob struct {
	ID             int64
	Queue          string
	Kind           string
	State          string
	Priority       int32
	Attempts       int32
	MaxAttempts    int32
	RunAt          time.Time
	CreatedAt      time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	LeaseHolder    *string
	LeaseExpiresAt *time.Time
	UniqueKey      *string
	ConcurrencyKey *string
	LastError      *string
}

// ShortError is the last error cut to one line of at most 120 characters, for lists.
func (j listedJob) ShortError() string {
	if j.LastError == nil {
		return ""
	}
	return truncate(*j.LastError, 120)
}

func truncate(s string, n int) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i] + " …"
		}
		if i >= n {
			return s[:i] + "…"
		}
	}
	return s
}

// jobFilter is a list page's filter, from its query string.
type jobFilter struct {
	State  string
	Queue  string
	Kind   string
	Before int64 // keyset: only ids below it; 0 for the first page
}

func parseFilter(q url.Values, state string) (jobFilter, error) {
	f := jobFilter{State: state, Queue: q.Get("queue"), Kind: q.Get("kind")}
	if state == "" {
		f.State = q.Get("state")
	}
	if f.State != "" {
		ok := false
		for _, s := range states {
			ok = ok || s == f.State
		}
		if !ok {
			return f, fmt.Errorf("state must be one of queued, running, done, dead, cancelled, got %q", f.State)
		}
	}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			return f, fmt.Errorf("before must be a job id, got %q", b)
		}
		f.Before = n
	}
	return f, nil
}

// Query is the filter as a query string, without the page position.
func (f jobFilter) Query() string {
	v := url.Values{}
	if f.State != "" {
		v.Set("state", f.State)
	}
	if f.Queue != "" {
		v.Set("queue", f.Queue)
	}
	if f.Kind != "" {
		v.Set("kind", f.Kind)
	}
	return v.Encode()
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// listJobs calls jobs_list for one page of the filter; limit jobs at most.
func (h *Handler) listJobs(ctx context.Context, f jobFilter, limit int) ([]listedJob, error) {
	var before *int64
	if f.Before > 0 {
		before = &f.Before
	}
	rows, err := h.db.Query(ctx, `SELECT id, queue, kind, state::text, priority, attempts, max_attempts, run_at, created_at,
		started_at, finished_at, lease_holder, lease_expires_at, unique_key, concurrency_key, last_error
		FROM `+h.fn("jobs_list")+`(state => $1::text::`+h.fn("jobs_state")+`, queue => $2, kind => $3, max_jobs => $4, before_id => $5)`,
		nullIfEmpty(f.State), nullIfEmpty(f.Queue), nullIfEmpty(f.Kind), limit, before)
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	defer rows.Close()
	var jobs []listedJob
	for rows.Next() {
		var j listedJob
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.State, &j.Priority, &j.Attempts, &j.MaxAttempts, &j.RunAt, &j.CreatedAt,
			&j.StartedAt, &j.FinishedAt, &j.LeaseHolder, &j.LeaseExpiresAt, &j.UniqueKey, &j.ConcurrencyKey, &j.LastError); err != nil {
			return nil, fmt.Errorf("failed to list jobs: %w", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	return jobs, nil
}

type jobListData struct {
	Filter jobFilter
	States []string
	Jobs   []listedJob
	Next   template.URL // the next page's query string (url.Values-encoded); "" on the last page
}

// pageOf reads one page (PageSize jobs, asking for one more to know whether a next page
// exists) and the link to the next.
func (h *Handler) pageOf(ctx context.Context, f jobFilter) (jobListData, error) {
	jobs, err := h.listJobs(ctx, f, PageSize+1)
	if err != nil {
		return jobListData{}, err
	}
	d := jobListData{Filter: f, States: states, Jobs: jobs}
	if len(jobs) > PageSize {
		d.Jobs = jobs[:PageSize]
		next := f
		next.Before = d.Jobs[PageSize-1].ID
		q := next.Query()
		if q != "" {
			q += "&"
		}
		d.Next = template.URL(q + "before=" + strconv.FormatInt(next.Before, 10))
	}
	return d, nil
}

func (h *Handler) jobList(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), "")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, err := h.pageOf(r.Context(), f)
	if err != nil {
		h.fail(w, r, "failed to list jobs", err)
		return
	}
	title := "Jobs"
	if f.State != "" {
		title = "Jobs: " + f.State
	}
	h.render(w, r, "jobs", page{Title: title, Nav: "jobs", Data: d})
}
