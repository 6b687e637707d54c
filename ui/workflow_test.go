package ui_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
	"github.com/skiplock/skiplock/ui"
)

// seedWorkflow enqueues a workflow of five steps in queue wf and moves them to five states:
// fetch done (with progress and a result), resize running (with progress), thumbs dead,
// publish (after resize and thumbs) cancelled by thumbs' death, archive (after resize)
// waiting. It returns the step ids by name; the workflow's id is fetch's.
func seedWorkflow(t *testing.T, b *testBundle, fetchName string) map[string]int64 {
	t.Helper()
	rows, err := b.db.Conn.Query(t.Context(), `SELECT name, id FROM jobs_enqueue_workflow(jsonb_build_array(
		jsonb_build_object('name', $1::text, 'kind', 'fetch', 'queue', 'wf'),
		jsonb_build_object('name', 'resize', 'kind', 'resize', 'queue', 'wf', 'depends_on', jsonb_build_array($1::text)),
		jsonb_build_object('name', 'thumbs', 'kind', 'thumbs', 'queue', 'wf', 'depends_on', jsonb_build_array($1::text), 'max_attempts', 1),
		jsonb_build_object('name', 'publish', 'kind', 'publish', 'queue', 'wf', 'depends_on', '["resize", "thumbs"]'::jsonb),
		jsonb_build_object('name', 'archive', 'kind', 'archive', 'queue', 'wf', 'depends_on', '["resize"]'::jsonb)))`, fetchName)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
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
	ids["fetch"] = ids[fetchName]
	exec(t, b, `SELECT jobs_progress(id, attempt, '{"pct": 100}'), jobs_complete(id, attempt, '{"files": 3}')
		FROM jobs_claim('w', 5, ARRAY['wf'])`)
	claimed := pgtest.QueryList[int64](t, b.db.Conn, `SELECT c.id FROM jobs_claim('w', 5, ARRAY['wf']) c
		CROSS JOIN LATERAL (SELECT CASE WHEN c.id = $1 THEN jobs_progress(c.id, c.attempt, '{"pct": 40}')::text
		                                ELSE jobs_fail(c.id, c.attempt, 'no disk')::text END) AS x`, ids["resize"])
	if len(claimed) != 2 {
		t.Fatalf("claimed %v after fetch, want resize and thumbs", claimed)
	}
	return ids
}

var nodeRE = regexp.MustCompile(`<a class="node st-(\w+)" href="([^"]+)" data-id="(\d+)" data-state="(\w+)" data-depth="(\d+)"`)

func TestWorkflowPage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ids := seedWorkflow(t, b, "fetch")
	wf := ids["fetch"]
	path := fmt.Sprintf("/workflows/%d", wf)

	body := b.mustGet(t, path)
	want := map[string][2]string{ // id -> state, depth
		fmt.Sprint(ids["fetch"]):   {"done", "0"},
		fmt.Sprint(ids["resize"]):  {"running", "1"},
		fmt.Sprint(ids["thumbs"]):  {"dead", "1"},
		fmt.Sprint(ids["publish"]): {"cancelled", "2"},
		fmt.Sprint(ids["archive"]): {"waiting", "2"},
	}
	nodes := nodeRE.FindAllStringSubmatch(body, -1)
	if len(nodes) != 5 {
		t.Fatalf("the graph has %d nodes, want 5:\n%s", len(nodes), body)
	}
	for _, n := range nodes {
		w, ok := want[n[3]]
		if !ok || n[1] != w[0] || n[4] != w[0] || n[5] != w[1] || n[2] != "/jobs/"+n[3] {
			t.Errorf("node %v, want job %s in state %s at depth %s linking to its page", n[1:], n[3], w[0], w[1])
		}
		delete(want, n[3])
	}
	if len(want) != 0 {
		t.Errorf("steps without a node: %v", want)
	}
	edges := regexp.MustCompile(`class="edge" data-from="(\d+)" data-to="(\d+)"`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, e := range edges {
		got = append(got, e[1]+">"+e[2])
	}
	wantEdges := fmt.Sprintf("%d>%d %d>%d %d>%d %d>%d %d>%d", ids["fetch"], ids["resize"], ids["fetch"], ids["thumbs"],
		ids["resize"], ids["publish"], ids["thumbs"], ids["publish"], ids["resize"], ids["archive"])
	if strings.Join(got, " ") != wantEdges {
		t.Errorf("edges %v, want %s", got, wantEdges)
	}
	contains(t, "workflow page", body, "5 steps:", "1 waiting", "1 running", "1 done", "1 dead", "1 cancelled",
		`id="cancel"`, "cancels its 2 unfinished steps", "running · {&#34;pct&#34;:40}", "no disk")

	// The job pages link to the workflow and the parents, and show progress and result.
	publish := b.mustGet(t, fmt.Sprintf("/jobs/%d", ids["publish"]))
	contains(t, "publish's page", publish, fmt.Sprintf(`id="workflow" href="/workflows/%d"`, wf), "step <strong>publish</strong>",
		fmt.Sprintf(`<a href="/jobs/%d">%d</a>, <a href="/jobs/%d">%d</a>`, ids["resize"], ids["resize"], ids["thumbs"], ids["thumbs"]),
		"(when a parent fails: cancel)", fmt.Sprintf(`id="cancelled-by">the failure of its parent <a href="/jobs/%d">`, ids["thumbs"]))
	fetch := b.mustGet(t, fmt.Sprintf("/jobs/%d", ids["fetch"]))
	contains(t, "fetch's page", fetch, `<pre id="result">{
  &#34;files&#34;: 3
}</pre>`, `<code>{&#34;pct&#34;:100}</code>`)
	contains(t, "resize's page", b.mustGet(t, fmt.Sprintf("/jobs/%d", ids["resize"])), "No result yet.", "{&#34;pct&#34;:40}")

	// Read-only: the graph without the button.
	ro, err := ui.New(b.pool, &ui.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	roBody := (&testBundle{db: b.db, pool: b.pool, h: ro}).mustGet(t, path)
	if strings.Contains(roBody, `method="post"`) || len(nodeRE.FindAllString(roBody, -1)) != 5 {
		t.Errorf("the read-only workflow page has a form, or not the 5 nodes")
	}

	loc := b.mustPost(t, "/workflows/cancel", url.Values{"workflow_id": {fmt.Sprint(wf)}, "back": {path}})
	u, _ := url.Parse(loc)
	if u.Path != path || !strings.HasPrefix(u.Query().Get("msg"), "cancelled ") {
		t.Errorf("cancel redirected to %q, want the workflow page with a message", loc)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state IN ('waiting', 'queued')`, wf); n != 0 {
		t.Errorf("%d steps waiting or queued after the cancel", n)
	}
	contains(t, "the page after the cancel", b.mustGet(t, loc), u.Query().Get("msg"), `data-state="cancelled" data-depth="2"`)

	if code, _ := b.get(t, "/workflows/999999"); code != http.StatusNotFound {
		t.Errorf("GET /workflows/999999: %d, want 404", code)
	}
	if code, _ := b.get(t, "/workflows/x"); code != http.StatusBadRequest {
		t.Errorf("GET /workflows/x: %d, want 400", code)
	}
	rec := b.post(t, "/workflows/cancel", url.Values{"workflow_id": {"x"}}, true)
	if l := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(l, "err=workflow_id") {
		t.Errorf("cancel of workflow x: %d %q, want a redirect with an error", rec.Code, l)
	}
	if rec := b.post(t, "/workflows/cancel", url.Values{"workflow_id": {fmt.Sprint(wf)}}, false); rec.Code != http.StatusForbidden {
		t.Errorf("cancel without a token: %d, want 403", rec.Code)
	}
}

// TestWorkflowPageEscapes: a step's name is text in the graph, its title and the table.
func TestWorkflowPageEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	evil := `<script>alert("x")</script>`
	ids := seedWorkflow(t, b, evil)
	body := b.mustGet(t, fmt.Sprintf("/workflows/%d", ids["fetch"]))
	if strings.Contains(body, evil) || strings.Contains(body, "<script>alert") {
		t.Fatal("a step's name is not escaped on the workflow page")
	}
	contains(t, "workflow page", body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
}
