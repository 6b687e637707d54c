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

	"github.com/jackc/pgx/v5"
)

// attemptError is one entry of a job's error history (the errors column).
type attemptError struct {
	Attempt int        `json:"attempt"`
	At      *time.Time `json:"at"`
	Error   string     `json:"error"`
	Worker  string     `json:"worker"`
}

// timelineEvent is one line of a job's timeline.
type timelineEvent struct {
	At   time.Time
	What string
}

type jobDetailData struct {
	Job      listedJob
	Payload  string         // indented JSON
	Errors   []attemptError // oldest first
	Timeline []timelineEvent
}

// jobByID reads one job in full through jobs_inspect. ok is false for an unknown or pruned id.
func (h *Handler) jobByID(ctx context.Context, id int64) (d jobDetailData, ok bool, err error) {
	var raw, rawErrors []byte
	j := &d.Job
	err = h.db.QueryRow(ctx, `SELECT id, queue, kind, state::text, priority, attempts, max_attempts, run_at, created_at,
		started_at, finished_at, lease_holder, lease_expires_at, unique_key, concurrency_key, last_error, payload, errors
		FROM `+h.fn("jobs_inspect")+`($1)`, id).Scan(&j.ID, &j.Queue, &j.Kind, &j.State, &j.Priority, &j.Attempts, &j.MaxAttempts,
		&j.RunAt, &j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.LeaseHolder, &j.LeaseExpiresAt, &j.UniqueKey, &j.ConcurrencyKey,
		&j.LastError, &raw, &rawErrors)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("failed to read job %d: %w", id, err)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		d.Payload = pretty.String()
	} else {
		d.Payload = string(raw)
	}
	if err := json.Unmarshal(rawErrors, &d.Errors); err != nil {
		return d, false, fmt.Errorf("failed to decode the error history of job %d: %w", id, err)
	}
	d.Timeline = timeline(d.Job, d.Errors)
	return d, true, nil
}

func timeline(j listedJob, history []attemptError) []timelineEvent {
	ev := []timelineEvent{{j.CreatedAt, "created"}}
	for _, e := range history {
		if e.At != nil {
			ev = append(ev, timelineEvent{*e.At, fmt.Sprintf("attempt %d failed on %s: %s", e.Attempt, e.Worker, truncate(e.Error, 120))})
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
		h.renderStatus(w, r, http.StatusNotFound, "notfound", page{Title: "Job not found", Nav: "jobs", Data: id})
		return
	}
	h.render(w, r, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}
