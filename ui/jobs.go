package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

	"github.com/skiplock/skiplock/admin"
)

// states are the values of jobs_state, in the order the pages offer them.
var states = []string{"waiting", "queued", "running", "done", "dead", "cancelled"}

// listedJob is one row of jobs_list, with what the pages show of it.
type listedJob struct{ admin.ListedJob }

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
			return f, fmt.Errorf("state must be one of waiting, queued, running, done, dead, cancelled, got %q", f.State)
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

// listJobs calls jobs_list for one page of the filter; limit jobs at most.
func (h *Handler) listJobs(ctx context.Context, f jobFilter, limit int) ([]listedJob, error) {
	jobs, err := h.admin.List(ctx, admin.ListOpts{State: f.State, Queue: f.Queue, Kind: f.Kind, MaxJobs: limit, BeforeID: f.Before})
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	listed := make([]listedJob, len(jobs))
	for i, j := range jobs {
		listed[i] = listedJob{j}
	}
	return listed, nil
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
