package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/skiplock/skiplock/admin"
)

type deadListData struct {
	jobListData
	DeadTotal int64 // dead jobs of the filter's queue (or of all queues), from jobs_metrics
}

func (h *Handler) deadList(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), "dead")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, err := h.pageOf(r.Context(), f)
	if err != nil {
		h.fail(w, r, "failed to list dead jobs", err)
		return
	}
	total, err := h.deadCount(r.Context(), f.Queue)
	if err != nil {
		h.fail(w, r, "failed to count dead jobs", err)
		return
	}
	h.render(w, r, "dead", page{Title: "Dead jobs", Nav: "dead", Data: deadListData{jobListData: d, DeadTotal: total}})
}

// deadCount is the exact number of dead jobs of queue ("" for every queue), from jobs_metrics
// (read from the index of dead and cancelled jobs: no finished row of another state).
func (h *Handler) deadCount(ctx context.Context, queue string) (int64, error) {
	queues, total, err := h.queueMetrics(ctx)
	if err != nil {
		return 0, err
	}
	if queue == "" {
		return total.Dead, nil
	}
	for _, q := range queues {
		if q.Queue == queue {
			return q.Dead, nil
		}
	}
	return 0, nil
}

// bulkRequest is a dead-jobs action's form: the selected ids, or scope=all for every dead
// job matching queue and kind, which needs confirm=yes (else the confirmation page is shown).
type bulkRequest struct {
	IDs       []int64
	All       bool
	Confirmed bool
	Filter    jobFilter
}

func parseBulk(form url.Values) (bulkRequest, error) {
	b := bulkRequest{
		All:       form.Get("scope") == "all",
		Confirmed: form.Get("confirm") == "yes",
		Filter:    jobFilter{State: "dead", Queue: form.Get("queue"), Kind: form.Get("kind")},
	}
	if b.All {
		return b, nil
	}
	for _, s := range form["id"] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return b, badInput("id must be a job id, got %q", s)
		}
		b.IDs = append(b.IDs, id)
	}
	if len(b.IDs) == 0 {
		return b, badInput("no job selected: tick the jobs to act on, or use the action on all matching jobs")
	}
	if len(b.IDs) > bulkBatch {
		return b, badInput("at most %d jobs can be selected at once, got %d", bulkBatch, len(b.IDs))
	}
	return b, nil
}

type confirmData struct {
	Action string // "retry" or "delete"
	Path   string // the form's action
	Filter jobFilter
	Count  int64 // dead jobs of the queue (all kinds), an upper bound of what the action touches
	Back   string
}

// bulkDead runs action (admin.Retry or admin.Delete) on the request's dead jobs: once with
// the ids, or, for all matching, with admin.BulkMatching, whose calls each commit on their
// own (as the SQL API asks, so workers are never held up for long) and act on every job at
// most once, so the action ends while workers fail the retried jobs straight back to dead.
func (h *Handler) bulkDead(w http.ResponseWriter, r *http.Request, verb string, action admin.BulkAction) {
	b, err := parseBulk(r.PostForm)
	if err != nil {
		h.redirectBack(w, r, "/dead", "", err)
		return
	}
	if b.All && !b.Confirmed {
		count, err := h.deadCount(r.Context(), b.Filter.Queue)
		if err != nil {
			h.fail(w, r, "failed to count dead jobs", err)
			return
		}
		back := r.PostForm.Get("back")
		h.render(w, r, "confirm", page{Title: "Confirm: " + verb + " all matching dead jobs", Nav: "dead",
			Data: confirmData{Action: verb, Path: r.URL.Path, Filter: b.Filter, Count: count, Back: back}})
		return
	}
	var total int
	if b.All {
		total, err = h.admin.BulkMatching(r.Context(), action, b.Filter.Queue, b.Filter.Kind, []string{"dead"}, bulkBatch)
		if err != nil {
			h.redirectBack(w, r, "/dead", "", fmt.Errorf("%s stopped after %d jobs: %w", verb, total, err))
			return
		}
	} else if total, err = h.admin.Bulk(r.Context(), action, admin.BulkOpts{IDs: b.IDs, States: []string{"dead"}, MaxJobs: bulkBatch}); err != nil {
		h.redirectBack(w, r, "/dead", "", err)
		return
	}
	past := map[string]string{"retry": "retried", "delete": "deleted"}[verb]
	h.redirectBack(w, r, "/dead", fmt.Sprintf("%s %d dead jobs", past, total), nil)
}

func (h *Handler) deadRetry(w http.ResponseWriter, r *http.Request) {
	h.bulkDead(w, r, "retry", admin.Retry)
}

func (h *Handler) deadDelete(w http.ResponseWriter, r *http.Request) {
	h.bulkDead(w, r, "delete", admin.Delete)
}
