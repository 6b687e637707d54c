package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/skiplock/skiplock/admin"
)

// timelineEvent is one line of a job's timeline.
type timelineEvent struct {
	At   time.Time
	What string
}

type jobDetailData struct {
	Job      listedJob
	Payload  string               // indented JSON
	Errors   []admin.AttemptError // oldest first
	Timeline []timelineEvent
	// The workflow's side: the step's name, its parents and what their failure does, the
	// parent whose failure cancelled it; nil or empty for a job without them.
	WorkflowStep    *string
	DependsOn       []int64
	OnParentFailure *string
	CancelledBy     *int64
	Progress        string // the reported progress, on one line; "" when none
	Result          string // indented JSON; "" when the job has no result
	Checkpoints     string // indented JSON; "" when none
}

// jobByID reads one job in full through jobs_inspect. ok is false for an unknown or pruned id.
func (h *Handler) jobByID(ctx context.Context, id int64) (d jobDetailData, ok bool, err error) {
	j, err := h.admin.Inspect(ctx, id)
	if errors.Is(err, admin.ErrJobNotFound) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("failed to read job %d: %w", id, err)
	}
	d.Job, d.Errors = listedJob{j.ListedJob}, j.Errors
	d.Payload = indentJSON(j.Payload)
	d.WorkflowStep, d.DependsOn, d.OnParentFailure, d.CancelledBy = j.WorkflowStep, j.DependsOn, j.OnParentFailure, j.CancelledBy
	if j.Progress != nil {
		d.Progress = compactJSON(j.Progress)
	}
	if j.Result != nil {
		d.Result = indentJSON(j.Result)
	}
	if j.Checkpoints != nil {
		d.Checkpoints = indentJSON(j.Checkpoints)
	}
	d.Timeline = timeline(d.Job, d.Errors)
	return d, true, nil
}

// indentJSON is stored JSON indented; as stored when it does not parse.
func indentJSON(raw json.RawMessage) string {
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") != nil {
		return string(raw)
	}
	return pretty.String()
}

func timeline(j listedJob, history []admin.AttemptError) []timelineEvent {
	ev := []timelineEvent{{j.CreatedAt, "created"}}
	for _, e := range history {
		if !e.At.IsZero() {
			worker := ""
			if e.Worker != nil {
				worker = *e.Worker
			}
			ev = append(ev, timelineEvent{e.At, fmt.Sprintf("attempt %d failed on %s: %s", e.Attempt, worker, truncate(e.Error, 120))})
		}
	}
	if j.StartedAt != nil {
		ev = append(ev, timelineEvent{*j.StartedAt, fmt.Sprintf("attempt %d started", j.Attempts)})
	}
	if j.State == "queued" {
		ev = append(ev, timelineEvent{j.RunAt, "due to run"})
	}
	if j.LeaseExpiresAt != nil && j.State == "running" {
		ev = append(ev, timelineEvent{*j.LeaseExpiresAt, "lease expires"})
	}
	if j.FinishedAt != nil {
		ev = append(ev, timelineEvent{*j.FinishedAt, "finished: " + j.State})
	}
	sort.SliceStable(ev, func(a, b int) bool { return ev[a].At.Before(ev[b].At) })
	return ev
}

func (h *Handler) jobDetail(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		http.Error(w, "job id must be a positive whole number", http.StatusBadRequest)
		return
	}
	d, ok, err := h.jobByID(r.Context(), id)
	if err != nil {
		h.fail(w, r, "failed to read the job", err)
		return
	}
	if !ok {
		h.renderStatus(w, r, http.StatusNotFound, "notfound", page{Title: "Job not found", Nav: "jobs", Data: notFound{What: "job", ID: id}})
		return
	}
	h.render(w, r, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}
