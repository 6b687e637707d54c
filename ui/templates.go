package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"time"
)

// pageNames are the templates of templates/, each rendered inside layout.html.
var pageNames = []string{"overview", "queue", "jobs", "job", "workflow", "dead", "confirm", "schedules", "notfound"}

// notFound is the not-found page's subject: "job" or "workflow", and the id asked for.
type notFound struct {
	What string
	ID   int64
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"fmtTime": fmtTime,
		"ago":     ago,
		"query":   func(s string) template.URL { return template.URL(url.PathEscape(s)) },
		"svg":     func(s string) template.HTML { return template.HTML(s) }, // built by throughputChart from numbers only
	}
	h.pages = make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("ui: failed to parse template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// IndexedStates are the states whose jobs jobs_list reads through an index: a list of one
// queue's jobs in them is cheap however many done jobs the table holds (done jobs have no
// index, so a rare queue's done jobs are found by walking all of them).
func (p *page) IndexedStates() []string {
	return []string{"waiting", "queued", "running", "dead", "cancelled"}
}

// URL is a path of the dashboard, with the handler's prefix.
func (p *page) URL(path string) string { return p.Base + path }

// Token is the CSRF token of a form posting to path (without the prefix).
func (p *page) Token(path string) string { return p.csrf.token(p.Base+path, time.Now()) }

func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, true
	case *time.Time:
		if t != nil {
			return *t, true
		}
	}
	return time.Time{}, false
}

// fmtTime prints a time in UTC to the second; "" for a nil *time.Time.
func fmtTime(v any) string {
	t, ok := asTime(v)
	if !ok {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// ago prints how long before now a time is ("in 5m" for a future time); "" for nil.
func ago(v any) string {
	t, ok := asTime(v)
	if !ok {
		return ""
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + formatDuration(-d)
	}
	return formatDuration(d) + " ago"
}
