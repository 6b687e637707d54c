package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/skiplock/skiplock/admin"
)

// The workflow graph's geometry, in pixels: each step is a box in the column of its depth.
const (
	nodeWidth  = 176
	nodeHeight = 46
	columnGap  = 56
	rowGap     = 14
	graphPad   = 10
)

// workflowNode is one step of the workflow graph, placed.
type workflowNode struct {
	admin.WorkflowJob
	Name   string // the step's name, or #id for a job without one
	Label  string // Name cut to fit the box
	Detail string // the state, and the progress when there is one, cut to fit
	Depth  int    // the longest path from a root
	X, Y   int    // the box's top left corner
}

// workflowEdge is an arrow from a parent to a child.
type workflowEdge struct {
	From, To int64
	Path     string // SVG path data, from numbers only
}

type workflowData struct {
	ID            int64
	Nodes         []workflowNode
	Edges         []workflowEdge
	Width, Height int
	Counts        []stateCount // steps per state, in the order of states
	Unfinished    int          // steps neither done, dead nor cancelled: what a cancel acts on
}

type stateCount struct {
	State string
	N     int
}

// workflowDepths is each step's depth: 0 for a root (a step none of whose parents is among
// jobs), else one more than its deepest parent's, the longest path from a root. A step left
// over, which only a cycle could leave, has depth 0.
func workflowDepths(jobs []admin.WorkflowJob) map[int64]int {
	depth := make(map[int64]int, len(jobs))
	in := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		in[j.ID] = true
		depth[j.ID] = 0
	}
	children := map[int64][]int64{}
	waiting := map[int64]int{}
	for _, j := range jobs {
		for _, p := range dedupParents(j, in) {
			children[p] = append(children[p], j.ID)
			waiting[j.ID]++
		}
	}
	var ready []int64
	for _, j := range jobs {
		if waiting[j.ID] == 0 {
			ready = append(ready, j.ID)
		}
	}
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		for _, c := range children[id] {
			depth[c] = max(depth[c], depth[id]+1)
			if waiting[c]--; waiting[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	for _, j := range jobs {
		if waiting[j.ID] > 0 {
			depth[j.ID] = 0
		}
	}
	return depth
}

// dedupParents are j's parents that are among the steps (in), each once.
func dedupParents(j admin.WorkflowJob, in map[int64]bool) []int64 {
	var ps []int64
	for _, p := range j.DependsOn {
		if in[p] && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// layoutWorkflow places the steps (in id order): a column per depth, left to right, each
// column centred vertically; within a column, steps are ordered by the mean height of their
// parents (then by id), which keeps most arrows short and uncrossed.
func layoutWorkflow(id int64, jobs []admin.WorkflowJob) workflowData {
	d := workflowData{ID: id}
	depth := workflowDepths(jobs)
	in := make(map[int64]bool, len(jobs))
	maxDepth := 0
	for _, j := range jobs {
		in[j.ID] = true
		maxDepth = max(maxDepth, depth[j.ID])
	}
	columns := make([][]admin.WorkflowJob, maxDepth+1)
	for _, j := range jobs {
		columns[depth[j.ID]] = append(columns[depth[j.ID]], j)
	}
	rows := 0
	for _, col := range columns {
		rows = max(rows, len(col))
	}
	d.Width = 2*graphPad + len(columns)*nodeWidth + (len(columns)-1)*columnGap
	d.Height = 2*graphPad + rows*nodeHeight + (rows-1)*rowGap
	centre := map[int64]float64{} // the vertical middle of each placed box
	pos := map[int64][2]int{}
	for c, col := range columns {
		meanParent := func(j admin.WorkflowJob) float64 {
			sum, n := 0.0, 0
			for _, p := range dedupParents(j, in) {
				if y, ok := centre[p]; ok {
					sum, n = sum+y, n+1
				}
			}
			if n == 0 {
				return 0
			}
			return sum / float64(n)
		}
		slices.SortStableFunc(col, func(a, b admin.WorkflowJob) int {
			ma, mb := meanParent(a), meanParent(b)
			switch {
			case ma < mb:
				return -1
			case ma > mb:
				return 1
			}
			return 0
		})
		offset := (rows - len(col)) * (nodeHeight + rowGap) / 2
		for i, j := range col {
			x := graphPad + c*(nodeWidth+columnGap)
			y := graphPad + offset + i*(nodeHeight+rowGap)
			pos[j.ID] = [2]int{x, y}
			centre[j.ID] = float64(y) + nodeHeight/2
			name := "#" + strconv.FormatInt(j.ID, 10)
			if j.WorkflowStep != nil {
				name = *j.WorkflowStep
			}
			detail := j.State
			if j.Progress != nil {
				detail += " · " + compactJSON(j.Progress)
			}
			d.Nodes = append(d.Nodes, workflowNode{WorkflowJob: j, Name: name, Label: shorten(name, 22),
				Detail: shorten(detail, 26), Depth: c, X: x, Y: y})
		}
	}
	for _, j := range jobs {
		to := pos[j.ID]
		for _, p := range dedupParents(j, in) {
			from := pos[p]
			x1, y1 := from[0]+nodeWidth, from[1]+nodeHeight/2
			x2, y2 := to[0], to[1]+nodeHeight/2
			bend := (x2 - x1) / 2
			d.Edges = append(d.Edges, workflowEdge{From: p, To: j.ID,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+bend, y1, x2-bend, y2, x2, y2)})
		}
	}
	counts := map[string]int{}
	for _, j := range jobs {
		counts[j.State]++
		if j.State != "done" && j.State != "dead" && j.State != "cancelled" {
			d.Unfinished++
		}
	}
	for _, s := range states {
		if counts[s] > 0 {
			d.Counts = append(d.Counts, stateCount{s, counts[s]})
		}
	}
	return d
}

// compactJSON is stored JSON on one line; as stored when it does not parse.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// shorten cuts s to at most n characters, the last an ellipsis when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (h *Handler) workflowDetail(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		http.Error(w, "workflow id must be a positive whole number", http.StatusBadRequest)
		return
	}
	jobs, err := h.admin.Workflow(r.Context(), id)
	if errors.Is(err, admin.ErrWorkflowNotFound) {
		h.renderStatus(w, r, http.StatusNotFound, "notfound", page{Title: "Workflow not found", Nav: "jobs",
			Data: notFound{What: "workflow", ID: id}})
		return
	}
	if err != nil {
		h.fail(w, r, "failed to read the workflow", err)
		return
	}
	h.render(w, r, "workflow", page{Title: fmt.Sprintf("Workflow %d", id), Nav: "jobs", Data: layoutWorkflow(id, jobs)})
}

// workflowCancel cancels the workflow's unfinished steps (jobs_cancel_workflow).
func (h *Handler) workflowCancel(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PostForm.Get("workflow_id"), 10, 64)
	if err != nil || id < 1 {
		h.redirectBack(w, r, "/jobs", "", badInput("workflow_id must be a workflow id, got %q", r.PostForm.Get("workflow_id")))
		return
	}
	n, err := h.admin.CancelWorkflow(r.Context(), id)
	h.redirectBack(w, r, fmt.Sprintf("/workflows/%d", id), fmt.Sprintf("cancelled %d jobs of workflow %d", n, id), err)
}
