package ui

import (
	"fmt"
	"net/http"
	"time"
)

// maxSchedules bounds the schedules page; a database with more shows the first ones by name.
const maxSchedules = 500

// scheduleRow is one row of jobs_schedules.
type scheduleRow struct {
	Name      string
	Cron      string
	Timezone  string
	Kind      string
	Queue     string
	Enabled   bool
	NextRunAt *time.Time
	LastRunAt *time.Time
	LastJobID *int64
}

type scheduleListData struct {
	Schedules []scheduleRow
	Truncated bool
}

func (h *Handler) scheduleList(w http.ResponseWriter, r *http.Request) {
	rows, err := h.db.Query(r.Context(), `SELECT name, cron, timezone, kind, queue, enabled, next_run_at, last_run_at, last_job_id
		FROM `+h.fn("jobs_schedules")+` ORDER BY name LIMIT $1`, maxSchedules+1)
	if err != nil {
		h.fail(w, r, "failed to read the schedules", err)
		return
	}
	defer rows.Close()
	var d scheduleListData
	for rows.Next() {
		var s scheduleRow
		if err := rows.Scan(&s.Name, &s.Cron, &s.Timezone, &s.Kind, &s.Queue, &s.Enabled, &s.NextRunAt, &s.LastRunAt, &s.LastJobID); err != nil {
			h.fail(w, r, "failed to read the schedules", err)
			return
		}
		d.Schedules = append(d.Schedules, s)
	}
	if err := rows.Err(); err != nil {
		h.fail(w, r, "failed to read the schedules", err)
		return
	}
	if len(d.Schedules) > maxSchedules {
		d.Schedules, d.Truncated = d.Schedules[:maxSchedules], true
	}
	h.render(w, r, "schedules", page{Title: "Schedules", Nav: "schedules", Data: d})
}

// scheduleRun enqueues one job of the schedule now (jobs_schedule_run), leaving its next and
// last run alone.
func (h *Handler) scheduleRun(w http.ResponseWriter, r *http.Request) {
	name := r.PostForm.Get("name")
	var id int64
	err := h.db.QueryRow(r.Context(), "SELECT "+h.fn("jobs_schedule_run")+"($1)", name).Scan(&id)
	h.redirectBack(w, r, "/schedules", fmt.Sprintf("schedule %s enqueued job %d", name, id), err)
}

func (h *Handler) scheduleSetEnabled(w http.ResponseWriter, r *http.Request, enabled bool) {
	name := r.PostForm.Get("name")
	var changed bool
	err := h.db.QueryRow(r.Context(), "SELECT "+h.fn("jobs_schedule_set_enabled")+"($1, $2)", name, enabled).Scan(&changed)
	verb := pick(enabled, "enabled", "disabled")
	h.redirectBack(w, r, "/schedules", pick(changed, verb+" schedule "+name, "schedule "+name+" was "+verb+" already"), err)
}

func (h *Handler) scheduleEnable(w http.ResponseWriter, r *http.Request) {
	h.scheduleSetEnabled(w, r, true)
}

func (h *Handler) scheduleDisable(w http.ResponseWriter, r *http.Request) {
	h.scheduleSetEnabled(w, r, false)
}
