package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skiplock/skiplock/admin"
)

// queueRow is one row of jobs_metrics: a queue's counts and settings.
type queueRow struct {
	admin.QueueMetrics
	// Queue shadows the embedded *string: "" on the totals row.
	Queue string
}

func rowOf(m admin.QueueMetrics) queueRow {
	r := queueRow{QueueMetrics: m}
	if m.Queue != nil {
		r.Queue = *m.Queue
	}
	return r
}

// Limits describes the queue's flow-control settings in words, "" when it has none.
func (q queueRow) Limits() string {
	var parts []string
	if c := q.Concurrency(); c != "" {
		parts = append(parts, c)
	}
	if q.Fair {
		parts = append(parts, "fair")
	}
	if q.Ordered {
		parts = append(parts, "ordered")
	}
	if r := q.Rate(); r != "" {
		parts = append(parts, r)
	}
	return strings.Join(parts, ", ")
}

// Concurrency describes the concurrency limits, "" when the queue has none.
func (q queueRow) Concurrency() string {
	var parts []string
	if q.MaxRunning != nil {
		parts = append(parts, fmt.Sprintf("max %d running", *q.MaxRunning))
	}
	if q.PerKey != nil {
		parts = append(parts, fmt.Sprintf("%d per key", *q.PerKey))
	}
	return strings.Join(parts, ", ")
}

// Rate describes the rate limit, "" when the queue has none.
func (q queueRow) Rate() string {
	if q.MaxStarts == nil || q.Per == nil {
		return ""
	}
	r := fmt.Sprintf("%d starts per %s", *q.MaxStarts, *q.Per)
	if q.RatePerKey {
		r += " per key"
	}
	return r
}

// OldestAge is the age of the oldest ready job, rounded for display; "" when none is ready.
func (q queueRow) OldestAge() string {
	if q.OldestReadyAgeS == nil {
		return ""
	}
	return formatDuration(time.Duration(*q.OldestReadyAgeS * float64(time.Second)))
}

// queueMetrics calls jobs_metrics: the queues in name order, then the totals row.
func (h *Handler) queueMetrics(ctx context.Context) ([]queueRow, *queueRow, error) {
	ms, total, err := h.admin.Metrics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read jobs_metrics: %w", err)
	}
	queues := make([]queueRow, len(ms))
	for i, m := range ms {
		queues[i] = rowOf(m)
	}
	t := rowOf(total)
	return queues, &t, nil
}

// queuePage is the queue page: the queue's row of jobs_metrics and the topic subscriptions
// whose jobs go to the queue.
type queuePage struct {
	queueRow
	Topics []admin.Subscription
}

type overviewData struct {
	Queues []queueRow
	Total  queueRow
	Chart  string
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	queues, total, err := h.queueMetrics(r.Context())
	if err != nil {
		h.fail(w, r, "failed to read the queues", err)
		return
	}
	h.sampler.add(sample{at: time.Now(), created: deref(total.JobsCreatedTotal), live: total.Ready + total.Scheduled + total.Running})
	chart := throughputChart(rates(h.sampler.snapshot()), time.Now())
	h.render(w, r, "overview", page{Title: "Queues", Nav: "overview", Data: overviewData{Queues: queues, Total: *total, Chart: chart}})
}

func (h *Handler) queueDetail(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	queues, _, err := h.queueMetrics(r.Context())
	if err != nil {
		h.fail(w, r, "failed to read the queues", err)
		return
	}
	q := queueRow{Queue: name}
	for _, row := range queues {
		if row.Queue == name {
			q = row
		}
	}
	topics, err := h.admin.Subscriptions(r.Context(), "")
	if err != nil {
		h.fail(w, r, "failed to read the topic subscriptions", err)
		return
	}
	data := queuePage{queueRow: q}
	for _, s := range topics {
		if s.Queue == name {
			data.Topics = append(data.Topics, s)
		}
	}
	h.render(w, r, "queue", page{Title: "Queue " + name, Nav: "overview", Data: data})
}

func (h *Handler) queuePause(w http.ResponseWriter, r *http.Request) {
	queue := r.PostForm.Get("queue")
	changed, err := h.admin.Pause(r.Context(), queue)
	h.redirectBack(w, r, "/", pick(changed, "paused queue "+queue, "queue "+queue+" was paused already"), err)
}

func (h *Handler) queueResume(w http.ResponseWriter, r *http.Request) {
	queue := r.PostForm.Get("queue")
	changed, err := h.admin.Resume(r.Context(), queue)
	h.redirectBack(w, r, "/", pick(changed, "resumed queue "+queue, "queue "+queue+" was not paused"), err)
}

// queueConcurrency sets max_running and per_key (an empty field is NULL: no limit) and, when
// the form has them, fair and ordered (a form without the field leaves the setting as it is).
func (h *Handler) queueConcurrency(w http.ResponseWriter, r *http.Request) {
	queue := r.PostForm.Get("queue")
	maxRunning, err1 := optionalInt(r.PostForm.Get("max_running"), "max_running")
	perKey, err2 := optionalInt(r.PostForm.Get("per_key"), "per_key")
	fair, err3 := checkbox(r.PostForm, "fair")
	ordered, err4 := checkbox(r.PostForm, "ordered")
	if err := firstErr(err1, err2, err3, err4); err != nil {
		h.redirectBack(w, r, "/", "", err)
		return
	}
	err := h.admin.SetConcurrency(r.Context(), queue, maxRunning, perKey, admin.ConcurrencyOpts{Fair: fair, Ordered: ordered})
	h.redirectBack(w, r, "/", "set the concurrency limits of queue "+queue, err)
}

// checkbox reads a switch of a form: nil when the form lacks the field. A form sends a hidden
// name=off before the checkbox name=on, so the last value is the box's state ("on" or "off";
// "true" and "false" are taken too).
func checkbox(form url.Values, name string) (*bool, error) {
	vals := form[name]
	if len(vals) == 0 {
		return nil, nil
	}
	var on bool
	switch v := vals[len(vals)-1]; v {
	case "on", "true":
		on = true
	case "off", "false", "":
	default:
		return nil, badInput("%s must be on or off, got %q", name, v)
	}
	return &on, nil
}

// queueRate sets max_starts per "per" (a Go duration such as 1s or 1m, or a PostgreSQL
// interval), counted per concurrency key when rate_per_key is on; an empty max_starts removes
// the limit.
func (h *Handler) queueRate(w http.ResponseWriter, r *http.Request) {
	queue := r.PostForm.Get("queue")
	maxStarts, err := optionalInt(r.PostForm.Get("max_starts"), "max_starts")
	if err != nil {
		h.redirectBack(w, r, "/", "", err)
		return
	}
	var per *string
	if p := strings.TrimSpace(r.PostForm.Get("per")); p != "" {
		if d, err := time.ParseDuration(p); err == nil {
			p = fmt.Sprintf("%d microseconds", d.Microseconds())
		}
		per = &p
	}
	perKey, err := checkbox(r.PostForm, "rate_per_key")
	if err != nil {
		h.redirectBack(w, r, "/", "", err)
		return
	}
	err = h.admin.SetRateLimit(r.Context(), queue, maxStarts, per, admin.RateLimitOpts{PerKey: perKey != nil && *perKey && maxStarts != nil})
	h.redirectBack(w, r, "/", "set the rate limit of queue "+queue, err)
}

func optionalInt(s, name string) (*int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, badInput("%s must be a whole number or empty (no limit), got %q", name, s)
	}
	v := int32(n)
	return &v, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// formatDuration rounds d for display: 1.2s, 3m4s, 5h6m, 2d3h.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		if d%time.Minute == 0 {
			return fmt.Sprintf("%dm", d/time.Minute)
		}
		return d.String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") // 5h6m
	default:
		days := int(d / (24 * time.Hour))
		return fmt.Sprintf("%dd%dh", days, int((d%(24*time.Hour))/time.Hour))
	}
}
