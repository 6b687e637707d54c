package ui

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/admin"
)

// DB is what the handler queries: a *pgxpool.Pool satisfies it. Each action runs its
// statements outside any transaction of the handler's, so a loop over jobs_retry_many commits
// after every call, as the SQL API asks.
type DB = admin.DB

// Options configure a [Handler]. The zero value is a read-write dashboard at the root path.
type Options struct {
	// Schema is the schema skiplock is installed in. Defaults to empty: the connection's
	// search_path.
	Schema string
	// ReadOnly hides every form and refuses every POST with 403. Defaults to false.
	ReadOnly bool
	// PathPrefix is the path the handler is mounted under, with the prefix stripped from
	// requests (http.StripPrefix), e.g. "/jobs-ui"; links and form actions start with it.
	// Defaults to empty: mounted at the root.
	PathPrefix string
	// Logger receives errors of the database. Defaults to slog.Default().
	Logger *slog.Logger
	// AllowedHosts are the names the handler answers for besides IP addresses, localhost
	// and names under .localhost, which it always answers: a request with any other Host
	// header gets 421 Misdirected Request, whatever its path. This defeats DNS rebinding,
	// where a page of the attacker's name, resolved to this server's address, would read
	// pages and post forms as same-origin. Each entry is a name or an IP address, with or
	// without a port (the port is ignored), compared case-insensitively; AnyHost ("*")
	// answers every Host, for a handler whose proxy or middleware checks the Host itself.
	// Defaults to nil: only IP addresses and localhost, so a handler reached by name
	// (dashboard.example.com) must list that name.
	AllowedHosts []string
}

// PageSize is the number of jobs on one page of a list.
const PageSize = 50

// bulkBatch is max_jobs of each call of an "all matching" action's loop.
const bulkBatch = 1000

//go:embed templates/*.html
var templateFS embed.FS

// Handler serves the dashboard. Create it with [New]; it is safe for concurrent use.
type Handler struct {
	db       DB
	admin    *admin.Client // the operator functions, through db
	opts     Options
	mux      *http.ServeMux
	pages    map[string]*template.Template
	csrf     *csrfSigner
	sampler  *sampler
	log      *slog.Logger
	protect  *http.CrossOriginProtection
	root     http.Handler // serve behind the Host check
	basePath string
}

// New returns the dashboard's handler for the database db.
func New(db DB, opts *Options) (*Handler, error) {
	if db == nil {
		return nil, errors.New("ui: db must not be nil")
	}
	h := &Handler{db: db, sampler: newSampler()}
	if opts != nil {
		h.opts = *opts
	}
	h.admin = admin.New(db, &admin.Options{Schema: h.opts.Schema})
	h.basePath = strings.TrimRight(h.opts.PathPrefix, "/")
	if h.basePath != "" && !strings.HasPrefix(h.basePath, "/") {
		return nil, fmt.Errorf("ui: PathPrefix %q must start with /", h.opts.PathPrefix)
	}
	hosts, err := newHostAllowList(h.opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("ui: failed to draw the CSRF secret: %w", err)
	}
	h.csrf = &csrfSigner{secret: secret, ttl: csrfTokenTTL}
	h.protect = http.NewCrossOriginProtection()
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	h.root = hosts.wrap(http.HandlerFunc(h.serve))
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /jobs", h.jobList)
	m.HandleFunc("GET /jobs/{id}", h.jobDetail)
	m.HandleFunc("GET /workflows/{id}", h.workflowDetail)
	m.HandleFunc("POST /workflows/cancel", h.action(h.workflowCancel))
	m.HandleFunc("GET /dead", h.deadList)
	m.HandleFunc("POST /dead/retry", h.action(h.deadRetry))
	m.HandleFunc("POST /dead/delete", h.action(h.deadDelete))
	m.HandleFunc("GET /queues/{queue}", h.queueDetail)
	m.HandleFunc("POST /queues/pause", h.action(h.queuePause))
	m.HandleFunc("POST /queues/resume", h.action(h.queueResume))
	m.HandleFunc("POST /queues/concurrency", h.action(h.queueConcurrency))
	m.HandleFunc("POST /queues/rate", h.action(h.queueRate))
	m.HandleFunc("GET /schedules", h.scheduleList)
	m.HandleFunc("POST /schedules/run", h.action(h.scheduleRun))
	m.HandleFunc("POST /schedules/enable", h.action(h.scheduleEnable))
	m.HandleFunc("POST /schedules/disable", h.action(h.scheduleDisable))
	m.HandleFunc("GET /throughput.svg", h.throughputSVG)
	h.mux = m
}

// ServeHTTP serves the dashboard's pages and actions, to requests whose Host it answers
// for (see [Options.AllowedHosts]).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.root.ServeHTTP(w, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy",
		"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

// action wraps a POST handler: refused when read-only, cross-origin or without a valid token
// for its form; the form is parsed (at most 1 MiB) before fn runs.
func (h *Handler) action(fn func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		if err := h.protect.Check(r); err != nil {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
			return
		}
		if !h.validToken(r) {
			http.Error(w, "missing or expired form token: reload the page and try again", http.StatusForbidden)
			return
		}
		fn(w, r)
	}
}

// validToken reports whether the form carries a valid token for the path it was posted to.
// A form with buttons posting to two actions (formaction) carries a token for each.
func (h *Handler) validToken(r *http.Request) bool {
	tokens := r.PostForm[csrfField]
	if len(tokens) > 4 {
		return false
	}
	for _, tok := range tokens {
		if h.csrf.valid(tok, h.basePath+r.URL.Path, time.Now()) {
			return true
		}
	}
	return false
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string
	Base     string
	ReadOnly bool
	Flash    string
	Error    string
	Data     any
	Self     string // this page's path and query, without the prefix: where actions return
	csrf     *csrfSigner
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, p page) {
	h.renderStatus(w, r, http.StatusOK, name, p)
}

// renderStatus renders page name inside the layout, with status code.
func (h *Handler) renderStatus(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	p.Base = h.basePath
	p.ReadOnly = h.opts.ReadOnly
	p.csrf = h.csrf
	p.Self = r.URL.RequestURI()
	if p.Flash == "" {
		p.Flash = r.URL.Query().Get("msg")
	}
	if p.Error == "" {
		p.Error = r.URL.Query().Get("err")
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", &p); err != nil {
		h.log.Error("ui: failed to render page", "page", name, "error", err)
		http.Error(w, "failed to render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = buf.WriteTo(w)
}

// fail answers a request whose database call failed: 400 for a rejected argument (SQLSTATE
// 22023, whose message names the parameter), 500 otherwise.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22023" {
		http.Error(w, pgErr.Message, http.StatusBadRequest)
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	h.log.Error("ui: "+what, "path", r.URL.Path, "error", err)
	http.Error(w, what+": "+err.Error(), http.StatusInternalServerError)
}

// redirectBack answers an action with 303 to the page given by the form's "back" field (a
// path of this dashboard only), with a message or an error for the page to show.
func (h *Handler) redirectBack(w http.ResponseWriter, r *http.Request, fallback, msg string, actionErr error) {
	back := r.PostForm.Get("back")
	if back == "" || !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.Contains(back, "\\") {
		back = fallback
	}
	u, err := url.Parse(back)
	if err != nil {
		u = &url.URL{Path: fallback}
	}
	q := u.Query()
	q.Del("msg")
	q.Del("err")
	if actionErr != nil {
		var pgErr *pgconn.PgError
		var inErr *inputError
		if errors.As(actionErr, &pgErr) {
			q.Set("err", pgErr.Message)
		} else if errors.As(actionErr, &inErr) {
			q.Set("err", inErr.Error())
		} else {
			h.log.Error("ui: action failed", "path", r.URL.Path, "error", actionErr)
			q.Set("err", actionErr.Error())
		}
	} else {
		q.Set("msg", msg)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, h.basePath+u.String(), http.StatusSeeOther)
}

// inputError is a form value the handler rejected before calling the database: shown to the
// user, not logged.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error { return &inputError{fmt.Sprintf(format, args...)} }
