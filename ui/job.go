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

	"github.com/jackc/pgx/v5/pgconn"
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
	Payload  string         // indented JSON; "" when not readable
	Errors   []attemptError // oldest first
	Hidden   string         // why the payload and errors are not shown, if they are not
	Timeline []timelineEvent
}

// jobByID reads one job's row through jobs_list (the newest job with an id below id+1: a
// single step back along the primary key). ok is false for an unknown or pruned id.
func (h *Handler) jobByID(ctx context.Context, id int64) (listedJob, bool, error) {
	jobs, err := h.listJobs(ctx, jobFilter{Before: id + 1}, 1)
	if err != nil || len(jobs) == 0 || jobs[0].ID != id {
		return listedJob{}, false, err
	}
	return jobs[0], true, nil
}

// payloadAndErrors reads what no SQL function returns to an operator: the payload and the
// error history. It needs SELECT on the jobs table (the owner has it; jobs_admin does not), so
// a permission error is not a failure: the page says the role cannot read them.
func (h *Handler) payloadAndErrors(ctx context.Context, id int64) (payload string, history []attemptError, hidden string, err error) {
	var raw, rawErrors []byte
	err = h.db.QueryRow(ctx, "SELECT payload, errors FROM "+h.fn("jobs")+" WHERE id = $1", id).Scan(&raw, &rawErrors)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return "", nil, "this database role may not read the jobs table (jobs_admin reads jobs through functions only), so the payload and error history are not shown", nil
	}
	if err != nil {
		return "", nil, "", fmt.Errorf("failed to read the payload: %w", err)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		payload = pretty.String()
	} else {
		payload = string(raw)
	}
	if err := json.Unmarshal(rawErrors, &history); err != nil {
		return payload, nil, "", fmt.Errorf("failed to decode the error history: %w", err)
	}
	return payload, history, "", nil
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
	j, ok, err := h.jobByID(r.Context(), id)
	if err != nil {
		h.fail(w, r, "failed to read the job", err)
		return
	}
	if !ok {
		h.renderStatus(w, r, http.StatusNotFound, "notfound", page{Title: "Job not found", Nav: "jobs", Data: id})
		return
	}
	d := jobDetailData{Job: j}
	d.Payload, d.Errors, d.Hidden, err = h.payloadAndErrors(r.Context(), id)
	if err != nil {
		h.fail(w, r, "failed to read the job", err)
		return
	}
	d.Timeline = timeline(j, d.Errors)
	h.render(w, r, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}
