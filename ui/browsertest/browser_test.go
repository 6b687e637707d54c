package browsertest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/skiplock/skiplock/tests/pgtest"
	"github.com/skiplock/skiplock/ui"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// findChromium returns the browser to drive: $CHROMIUM, else the first of Debian's and
// others' names on PATH; "" when there is none.
func findChromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless chromium with a fresh profile and returns a context driving
// one tab of it; everything stops when the test ends.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	bin := findChromium()
	if bin == "" {
		t.Skip("chromium not found (install Debian's chromium, or set CHROMIUM): skipping the browser tests")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("failed to start %s: %v", bin, err)
	}
	// The delete button asks with confirm(); accept it, as a user clicking OK. The dialog is
	// handled from another goroutine than the one receiving the events.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			go func() {
				_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}()
	return ctx
}

// screenshotDir is $SKIPLOCK_SCREENSHOTS (created if needed), or the test's temporary
// directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SKIPLOCK_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// step runs browser actions with a deadline, failing the test with what it was doing.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	db := pgtest.NewTestDB(t)
	exec := func(sql string, args ...any) { pgtest.MustExec(t, db.Conn, sql, args...) }
	count := func(sql string, args ...any) int64 { return pgtest.QueryOne[int64](t, db.Conn, sql, args...) }

	// A small, plausible day: mail being sent, webhooks dying on a partner's outage, a
	// rate-limited queue, schedules.
	exec(`SELECT jobs_enqueue_many(array_fill('send-welcome'::text, ARRAY[40]), queues => array_fill('mail'::text, ARRAY[40]),
		payloads => array_fill('{"to": "ann@example.com", "template": "welcome"}'::jsonb, ARRAY[40]))`)
	exec(`SELECT count(*) FROM jobs_claim('worker-7f3a', 5, ARRAY['mail'])`)
	exec(`SELECT jobs_enqueue_many(array_fill('deliver-webhook'::text, ARRAY[12]), queues => array_fill('hooks'::text, ARRAY[12]),
		payloads => array_fill('{"url": "https://partner.example/hook", "event": "invoice.paid"}'::jsonb, ARRAY[12]),
		max_attempts => array_fill(1, ARRAY[12]))`)
	exec(`SELECT jobs_fail(c.id, c.attempt, 'POST https://partner.example/hook: 503 Service Unavailable') FROM jobs_claim('worker-2b91', 12, ARRAY['hooks']) c`)
	exec(`SELECT jobs_enqueue_many(array_fill('resize-image'::text, ARRAY[8]), queues => array_fill('images'::text, ARRAY[8]))`)
	exec(`SELECT jobs_set_concurrency('images', 4, per_key => 1)`)
	exec(`SELECT jobs_set_rate_limit('images', 100, interval '1 minute')`)
	exec(`SELECT jobs_schedule('nightly-report', '0 3 * * *', 'build-report', queue => 'reports', timezone => 'Europe/Berlin')`)
	exec(`SELECT jobs_schedule('hourly-cleanup', '0 * * * *', 'cleanup')`)

	pool := pgtest.NewPool(t, db.URL)
	h, err := ui.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Samples an hour apart are not possible in a test; a few seconds of traffic draw the line.
	samplerCtx, stopSampler := context.WithCancel(t.Context())
	defer stopSampler()
	go func() { _ = h.RunSampler(samplerCtx, time.Second) }()
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i, n := range []int{12, 30, 18, 40, 25, 35} {
		time.Sleep(1100 * time.Millisecond)
		exec(`SELECT jobs_enqueue_many(array_fill('send-welcome'::text, ARRAY[$1::int]), queues => array_fill('mail'::text, ARRAY[$1::int]))`, n)
		exec(`SELECT jobs_complete(c.id, c.attempt) FROM jobs_claim('worker-7f3a', $1, ARRAY['mail']) c`, 10+5*i)
	}
	time.Sleep(1100 * time.Millisecond)

	shots := screenshotDir(t)
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	deadID := count(`SELECT max(id) FROM jobs WHERE state = 'dead'`)

	t.Run("EveryPageLoads", func(t *testing.T) {
		for _, p := range []struct{ name, path, wait, want string }{
			{"overview", "/", "#queues", "hooks"},
			{"jobs", "/jobs", "#jobs", "send-welcome"},
			{"jobs-running", "/jobs?state=running&queue=mail", "#jobs", "send-welcome"},
			{"dead", "/dead", "#bulk", "503 Service Unavailable"},
			{"job", fmt.Sprintf("/jobs/%d", deadID), "#timeline", "partner.example"},
			{"queue", "/queues/images", "#concurrency", "4 running"},
			{"schedules", "/schedules", "#schedules", "nightly-report"},
		} {
			var text string
			step(t, ctx, "load "+p.path,
				chromedp.Navigate(srv.URL+p.path),
				chromedp.WaitVisible(chromedp.CSS(p.wait)),
				textOf("main", &text),
				shoot(p.name))
			if !strings.Contains(text, p.want) {
				t.Errorf("page %s does not show %q:\n%s", p.path, p.want, text)
			}
		}
	})

	t.Run("PauseQueue", func(t *testing.T) {
		var flash string
		step(t, ctx, "pause mail",
			chromedp.Navigate(srv.URL+"/"),
			chromedp.Click(chromedp.CSS(`tr[data-queue="mail"] button[name=pause]`)),
			chromedp.WaitVisible(chromedp.CSS("#flash")),
			textOf("#flash", &flash),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="mail"] button[name=resume]`)))
		if flash != "paused queue mail" {
			t.Errorf("flash %q, want paused queue mail", flash)
		}
		if n := count(`SELECT count(*) FROM jobs_queues WHERE queue = 'mail' AND paused`); n != 1 {
			t.Fatal("the queue is not paused in the database")
		}
		step(t, ctx, "screenshot", shoot("overview-paused"))
	})

	t.Run("RetrySelectedDeadJobs", func(t *testing.T) {
		step(t, ctx, "retry two selected",
			chromedp.Navigate(srv.URL+"/dead"),
			chromedp.WaitVisible(chromedp.CSS("#bulk")),
			chromedp.Click(chromedp.CSS(`#jobs tbody tr:nth-child(1) input[name=id]`)),
			chromedp.Click(chromedp.CSS(`#jobs tbody tr:nth-child(2) input[name=id]`)),
			shoot("dead-selected"),
			chromedp.Click(chromedp.CSS("#retry-selected")),
			chromedp.WaitVisible(chromedp.CSS("#flash")))
		if n := count(`SELECT count(*) FROM jobs WHERE queue = 'hooks' AND state = 'dead'`); n != 10 {
			t.Fatalf("%d hooks jobs dead after retrying 2 of 12, want 10", n)
		}
	})

	t.Run("DeleteSelectedDeadJob", func(t *testing.T) {
		step(t, ctx, "delete one selected (accepting the confirm dialog)",
			chromedp.Navigate(srv.URL+"/dead"),
			chromedp.WaitVisible(chromedp.CSS("#bulk")),
			chromedp.Click(chromedp.CSS(`#jobs tbody tr:nth-child(1) input[name=id]`)),
			chromedp.Click(chromedp.CSS("#delete-selected")),
			chromedp.WaitVisible(chromedp.CSS("#flash")))
		if n := count(`SELECT count(*) FROM jobs WHERE queue = 'hooks' AND state = 'dead'`); n != 9 {
			t.Fatalf("%d hooks jobs dead after deleting 1 of 10, want 9", n)
		}
	})

	t.Run("RetryAllMatchingDeadJobs", func(t *testing.T) {
		var flash string
		step(t, ctx, "retry all matching through the confirmation page",
			chromedp.Navigate(srv.URL+"/dead?queue=hooks"),
			chromedp.WaitVisible(chromedp.CSS("#bulk")),
			chromedp.Click(chromedp.CSS("#retry-all")),
			chromedp.WaitVisible(chromedp.CSS("#confirm")),
			shoot("dead-confirm"),
			chromedp.Click(chromedp.CSS("#confirm")),
			chromedp.WaitVisible(chromedp.CSS("#flash")),
			textOf("#flash", &flash))
		if flash != "retried 9 dead jobs" {
			t.Errorf("flash %q, want retried 9 dead jobs", flash)
		}
		if n := count(`SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 0 {
			t.Fatalf("%d jobs dead after retrying all", n)
		}
	})

	t.Run("RunScheduleNow", func(t *testing.T) {
		step(t, ctx, "run nightly-report now",
			chromedp.Navigate(srv.URL+"/schedules"),
			chromedp.Click(chromedp.CSS(`tr[data-schedule="nightly-report"] button[name=run]`)),
			chromedp.WaitVisible(chromedp.CSS("#flash")))
		if n := count(`SELECT count(*) FROM jobs WHERE kind = 'build-report'`); n != 1 {
			t.Fatalf("%d build-report jobs after run now, want 1", n)
		}
	})
	t.Logf("screenshots in %s", shots)
}

// textOf is an action that stores the visible text of the element sel in out.
func textOf(sel string, out *string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		text, err := chromedp.Text(chromedp.CSS(sel))(ctx, tg)
		*out = text
		return err
	})
}

// TestDNSRebindingInBrowser: chromium resolves an attacker's name to the dashboard's
// address (--host-resolver-rules stands in for the attacker's DNS server), which makes the
// attacker's page same-origin with the dashboard; the dashboard answers it 421, with no form
// and no token to take. A name the dashboard is given works as usual, its forms included.
func TestDNSRebindingInBrowser(t *testing.T) {
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.attacker.example 127.0.0.1, MAP jobs.example.test 127.0.0.1"))
	db := pgtest.NewTestDB(t)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue('send-welcome', queue => 'mail')`)
	h, err := ui.New(pgtest.NewPool(t, db.URL), &ui.Options{AllowedHosts: []string{"jobs.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	shots := screenshotDir(t)

	var text, html string
	step(t, ctx, "load the dashboard by the attacker's name",
		chromedp.Navigate("http://rebind.attacker.example:"+port+"/"),
		chromedp.WaitVisible(chromedp.CSS("body")),
		textOf("body", &text),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			html, err = chromedp.OuterHTML(chromedp.CSS("html"))(ctx, tg)
			return err
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, "rebinding-refused.png"), png, 0o644)
		}))
	if !strings.Contains(text, "misdirected request") || !strings.Contains(text, `"rebind.attacker.example:`+port+`"`) {
		t.Errorf("the page by the attacker's name says %q, want the 421 text naming the host", text)
	}
	if strings.Contains(html, "csrf") || strings.Contains(html, "<form") {
		t.Errorf("the page by the attacker's name has a form or a token:\n%s", html)
	}

	var flash string
	step(t, ctx, "pause mail by the dashboard's own name",
		chromedp.Navigate("http://jobs.example.test:"+port+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-queue="mail"] button[name=pause]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
		textOf("#flash", &flash))
	if flash != "paused queue mail" {
		t.Errorf("flash %q, want paused queue mail", flash)
	}
	if n := pgtest.QueryOne[int64](t, db.Conn, `SELECT count(*) FROM jobs_queues WHERE queue = 'mail' AND paused`); n != 1 {
		t.Fatal("the queue is not paused in the database")
	}
}

// svgNode is what the browser shows of one node of the workflow graph.
type svgNode struct {
	ID     string  `json:"id"`
	State  string  `json:"state"`
	Href   string  `json:"href"`
	Label  string  `json:"label"`
	Fill   string  `json:"fill"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// evalInto is an action that evaluates the JavaScript expression and stores its result in out.
func evalInto[T any](expr string, out *T) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := chromedp.Evaluate[T](expr)(ctx, tg)
		*out = v
		return err
	})
}

// readGraph reads every node of the workflow page's graph as laid out and painted.
const readGraph = `Array.from(document.querySelectorAll('#dag a.node')).map(a => {
	const box = a.getBoundingClientRect();
	return {id: a.dataset.id, state: a.dataset.state, href: a.getAttribute('href'),
		label: a.querySelector('text.name').textContent, fill: getComputedStyle(a.querySelector('rect')).fill,
		width: box.width, height: box.height};
})`

// TestWorkflowInBrowser: the workflow page of a real workflow, its steps in five states,
// draws one node per step in its state's colour, linking to the step's job page, whose link
// leads back; the cancel button (accepting its confirm dialog) cancels the unfinished steps.
func TestWorkflowInBrowser(t *testing.T) {
	ctx := browser(t)
	db := pgtest.NewTestDB(t)
	exec := func(sql string, args ...any) { pgtest.MustExec(t, db.Conn, sql, args...) }
	ids := map[string]int64{}
	rows, err := db.Conn.Query(t.Context(), `SELECT name, id FROM jobs_enqueue_workflow('[
		{"name": "fetch-photos", "kind": "fetch", "queue": "photos", "payload": {"album": 42}},
		{"name": "resize", "kind": "resize", "queue": "photos", "depends_on": ["fetch-photos"]},
		{"name": "thumbnails", "kind": "thumbnail", "queue": "photos", "depends_on": ["fetch-photos"], "max_attempts": 1},
		{"name": "publish", "kind": "publish", "queue": "photos", "depends_on": ["resize", "thumbnails"]},
		{"name": "archive", "kind": "archive", "queue": "photos", "depends_on": ["resize"]}
	]')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var id int64
		if err := rows.Scan(&name, &id); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	if err := rows.Err(); err != nil || len(ids) != 5 {
		t.Fatalf("jobs_enqueue_workflow gave %v (%v)", ids, err)
	}
	wf := ids["fetch-photos"]
	// fetch-photos done, resize running at 40%, thumbnails dead, so publish cancelled;
	// archive waiting for resize.
	exec(`SELECT jobs_progress(id, attempt, '{"pct": 100}'), jobs_complete(id, attempt, '{"photos": 12}') FROM jobs_claim('worker-1', 5, ARRAY['photos'])`)
	exec(`SELECT c.id FROM jobs_claim('worker-1', 5, ARRAY['photos']) c
		CROSS JOIN LATERAL (SELECT CASE WHEN c.id = $1 THEN jobs_progress(c.id, c.attempt, '{"pct": 40}')::text
		                                ELSE jobs_fail(c.id, c.attempt, 'thumbnailer: out of memory')::text END) AS x`, ids["resize"])
	dbStates := func() map[string]string {
		states := map[string]string{}
		rows, err := db.Conn.Query(t.Context(), `SELECT id::text, state::text FROM jobs WHERE workflow_id = $1`, wf)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, state string
			if err := rows.Scan(&id, &state); err != nil {
				t.Fatal(err)
			}
			states[id] = state
		}
		return states
	}
	if got := fmt.Sprint(dbStates()); got != fmt.Sprint(map[string]string{
		fmt.Sprint(ids["fetch-photos"]): "done", fmt.Sprint(ids["resize"]): "running", fmt.Sprint(ids["thumbnails"]): "dead",
		fmt.Sprint(ids["publish"]): "cancelled", fmt.Sprint(ids["archive"]): "waiting"}) {
		t.Fatalf("the steps are %s, want one in each of five states", got)
	}

	srv := httptest.NewServer(mustHandler(t, db))
	defer srv.Close()
	shots := screenshotDir(t)
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	wfURL := fmt.Sprintf("%s/workflows/%d", srv.URL, wf)

	t.Run("OneNodePerStepInItsState", func(t *testing.T) {
		var nodes []svgNode
		step(t, ctx, "load the workflow page",
			chromedp.Navigate(wfURL),
			chromedp.WaitVisible(chromedp.CSS("#dag")),
			evalInto(readGraph, &nodes),
			shoot("workflow"))
		states := dbStates()
		if len(nodes) != len(states) {
			t.Fatalf("the graph has %d nodes, the workflow %d steps: %+v", len(nodes), len(states), nodes)
		}
		fills := map[string]string{}
		for _, n := range nodes {
			if n.State != states[n.ID] || n.Href != "/jobs/"+n.ID || n.Width < 100 || n.Height < 30 {
				t.Errorf("node %+v: want state %s, a link to /jobs/%s, a drawn box", n, states[n.ID], n.ID)
			}
			fills[n.State] = n.Fill
		}
		seen := map[string]string{}
		for state, fill := range fills {
			if other, ok := seen[fill]; ok {
				t.Errorf("states %s and %s are drawn in the same colour %s", state, other, fill)
			}
			seen[fill] = state
		}
		var edges int
		step(t, ctx, "count the arrows", evalInto(`document.querySelectorAll('#dag path.edge').length`, &edges))
		if edges != 5 {
			t.Errorf("%d arrows, want 5 (one per parent of each step)", edges)
		}
	})

	t.Run("NodeLinksToJobAndBack", func(t *testing.T) {
		var state, loc, cancelledBy string
		step(t, ctx, "click publish's node, then the job page's workflow link",
			chromedp.Navigate(wfURL),
			chromedp.WaitVisible(chromedp.CSS("#dag")),
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`#dag a.node[data-id="%d"]`, ids["publish"]))),
			chromedp.WaitVisible(chromedp.CSS("#state")),
			textOf("#state", &state),
			textOf("#cancelled-by", &cancelledBy),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				var err error
				loc, err = chromedp.Location()(ctx, tg)
				return err
			}),
			shoot("workflow-step-job"))
		if loc != fmt.Sprintf("%s/jobs/%d", srv.URL, ids["publish"]) || state != "cancelled" ||
			!strings.Contains(cancelledBy, fmt.Sprint(ids["thumbnails"])) {
			t.Errorf("after the click: %s, state %q, cancelled by %q; want publish's page, cancelled by thumbnails", loc, state, cancelledBy)
		}
		step(t, ctx, "follow the workflow link back",
			chromedp.Click(chromedp.CSS("#workflow")),
			chromedp.WaitVisible(chromedp.CSS("#dag")),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				var err error
				loc, err = chromedp.Location()(ctx, tg)
				return err
			}))
		if loc != wfURL {
			t.Errorf("the workflow link led to %s, want %s", loc, wfURL)
		}
	})

	t.Run("CancelButtonCancels", func(t *testing.T) {
		var flash string
		var nodes []svgNode
		step(t, ctx, "cancel the workflow (accepting the confirm dialog)",
			chromedp.Navigate(wfURL),
			chromedp.WaitVisible(chromedp.CSS("#cancel")),
			chromedp.Click(chromedp.CSS("#cancel")),
			chromedp.WaitVisible(chromedp.CSS("#flash")),
			textOf("#flash", &flash),
			evalInto(readGraph, &nodes),
			shoot("workflow-cancelled"))
		states := dbStates()
		for id, s := range states {
			if s == "waiting" || s == "queued" {
				t.Errorf("step %s is still %s after the cancel", id, s)
			}
		}
		if states[fmt.Sprint(ids["archive"])] != "cancelled" || !strings.HasPrefix(flash, "cancelled ") ||
			!strings.HasSuffix(flash, fmt.Sprintf(" jobs of workflow %d", wf)) {
			t.Errorf("flash %q, archive %s; want the cancel reported and archive cancelled", flash, states[fmt.Sprint(ids["archive"])])
		}
		for _, n := range nodes {
			if n.State != states[n.ID] {
				t.Errorf("after the cancel node %s shows %s, the database %s", n.ID, n.State, states[n.ID])
			}
		}
	})
	t.Logf("screenshots in %s", shots)
}

// mustHandler is a dashboard on db, through a pool of its own.
func mustHandler(t *testing.T, db *pgtest.TestDB) *ui.Handler {
	t.Helper()
	h, err := ui.New(pgtest.NewPool(t, db.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestQueueFlowShapingInBrowser: the page of a fair, ordered queue with a per-key rate limit
// and two topic subscriptions shows each of them; unchecking "ordered" in the form and
// submitting it turns ordering off and leaves the rest.
func TestQueueFlowShapingInBrowser(t *testing.T) {
	ctx := browser(t)
	db := pgtest.NewTestDB(t)
	exec := func(sql string, args ...any) { pgtest.MustExec(t, db.Conn, sql, args...) }
	exec(`SELECT jobs_enqueue_many(array_fill('sync-account'::text, ARRAY[30]), queues => array_fill('tenants'::text, ARRAY[30]),
		concurrency_keys => ARRAY(SELECT 'tenant-' || (i % 3) FROM generate_series(1, 30) i))`)
	exec(`SELECT jobs_set_concurrency('tenants', 8, per_key => 2, fair => true, ordered => true)`)
	exec(`SELECT jobs_set_rate_limit('tenants', 10, interval '1 second', per_key => true)`)
	exec(`SELECT jobs_subscribe('account.created', 'tenants', 'sync-account')`)
	exec(`SELECT jobs_subscribe('account.closed', 'tenants', 'archive-account')`)
	exec(`SELECT jobs_subscribe('account.created', 'mail', 'send-welcome')`)
	srv := httptest.NewServer(mustHandler(t, db))
	defer srv.Close()
	shots := screenshotDir(t)
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}

	var limits, fair, ordered, rate, topics string
	var boxes []bool
	step(t, ctx, "load the queue page",
		chromedp.Navigate(srv.URL+"/queues/tenants"),
		chromedp.WaitVisible(chromedp.CSS("#concurrency")),
		textOf("#limits", &limits), textOf("#fair", &fair), textOf("#ordered", &ordered),
		textOf("#rate-limit", &rate), textOf("#topics", &topics),
		evalInto(`['fair', 'ordered'].map(n => document.querySelector('#concurrency input[type=checkbox][name=' + n + ']').checked)
			.concat([document.querySelector('#rate input[type=checkbox][name=rate_per_key]').checked])`, &boxes),
		shoot("queue-flow-shaping"))
	for _, c := range []struct{ what, got, want string }{
		{"limits", limits, "max 8 running, 2 per key"},
		{"fair sharing", fair, "on: claims take ready jobs round-robin across concurrency keys"},
		{"ordered keys", ordered, "on: the jobs of each concurrency key run one at a time, in enqueue order"},
		{"rate limit", rate, "10 starts per 00:00:01 per key"},
		{"topics", topics, "account.closed → kind archive-account\naccount.created → kind sync-account"},
	} {
		if c.got != c.want {
			t.Errorf("the page shows %s %q, want %q", c.what, c.got, c.want)
		}
	}
	if len(boxes) != 3 || !boxes[0] || !boxes[1] || !boxes[2] {
		t.Errorf("the fair, ordered and per-key boxes are checked %v, want all three", boxes)
	}

	var flash string
	step(t, ctx, "uncheck ordered and set",
		chromedp.Click(chromedp.CSS(`#concurrency input[type=checkbox][name=ordered]`)),
		chromedp.Click(chromedp.CSS(`#concurrency button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
		textOf("#flash", &flash),
		textOf("#ordered", &ordered), textOf("#fair", &fair),
		shoot("queue-flow-shaping-unordered"))
	if flash != "set the concurrency limits of queue tenants" || ordered != "off" || !strings.HasPrefix(fair, "on") {
		t.Errorf("after unchecking ordered: flash %q, ordered %q, fair %q", flash, ordered, fair)
	}
	got := pgtest.QueryOne[string](t, db.Conn, `SELECT format('%s %s %s %s %s %s', max_running, per_key, fair, ordered,
		max_starts, rate_per_key) FROM jobs_queues WHERE queue = 'tenants'`)
	if got != "8 2 t f 10 t" {
		t.Fatalf("jobs_queues row %q, want only ordered turned off", got)
	}
}
