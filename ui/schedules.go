package ui

import (
	"fmt"
	"net/http"

	"github.com/skiplock/skiplock/admin"
)

// maxSchedules bounds the schedules page; a database with more shows the first ones by name.
const maxSchedules = 500

type scheduleListData struct {
	Schedules []admin.Schedule
	Truncated bool
}

func (h *Handler) scheduleList(w http.ResponseWriter, r *http.Request) {
	schedules, err := h.admin.Schedules(r.Context(), maxSchedules+1)
	if err != nil {
		h.fail(w, r, "failed to read the schedules", err)
		return
	}
	d := scheduleListData{Schedules: schedules}
	if len(d.Schedules) > maxSchedules {
		d.Schedules, d.Truncated = d.Schedules[:maxSchedules], true
	}
	h.render(w, r, "schedules", page{Title: "Schedules", Nav: "schedules", Data: d})
}

// scheduleRun enqueues one job of the schedule now (jobs_schedule_run), leaving its next and
// last run alone.
func (h *Handler) scheduleRun(w http.ResponseWriter, r *http.Request) {
	name := r.PostForm.Get("name")
	id, err := h.admin.RunSchedule(r.Context(), name)
	h.redirectBack(w, r, "/schedules", fmt.Sprintf("schedule %s enqueued job %d", name, id), err)
}

func (h *Handler) scheduleSetEnabled(w http.ResponseWriter, r *http.Request, enabled bool) {
	name := r.PostForm.Get("name")
	changed, err := h.admin.SetScheduleEnabled(r.Context(), name, enabled)
	verb := pick(enabled, "enabled", "disabled")
	h.redirectBack(w, r, "/schedules", pick(changed, verb+" schedule "+name, "schedule "+name+" was "+verb+" already"), err)
}

func (h *Handler) scheduleEnable(w http.ResponseWriter, r *http.Request) {
	h.scheduleSetEnabled(w, r, true)
}

func (h *Handler) scheduleDisable(w http.ResponseWriter, r *http.Request) {
	h.scheduleSetEnabled(w, r, false)
}
