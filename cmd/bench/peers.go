package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// peer is a peer harness: another job queue, measured by a program of skiplock's own
// under cmd/bench/peers/<name>, on the same server and with the same job count, slots,
// producers, latency schedule and steady length as skiplock's run. A harness prints one
// JSON line per scenario in the format of -json. Which scenarios a peer runs is in the
// scenario table (scenario.peers).
type peer struct {
	name string
	// prepare builds the harness in dir (its folder) or installs its dependencies, and
	// returns the command that runs it, before the common flags.
	prepare func(ctx context.Context, dir string) ([]string, error)
	// tuning are the harness flags that give the peer its best settings.
	tuning []string
	// database is the database the harness gets to itself on the throwaway server.
	database string
}

// peers are the peer harnesses -peers can name; they run in the order it names them.
var peers = []peer{
	{
		name:    "river",
		prepare: prepareRiver,
		// River's own benchmark sets these (riverbench: fetch cooldown 2 ms, fetch poll
		// interval 20 ms); River's defaults are 100 ms and 1 s.
		tuning:   []string{"--fetch-cooldown-ms", "2", "--fetch-poll-interval-ms", "20"},
		database: "river_bench",
	},
	{
		name:    "graphile-worker",
		prepare: prepareGraphileWorker,
		// A local queue of 500 jobs per pool, completions batched as soon as possible, and a
		// pool of 20 connections (graphile-worker warns that it is below its concurrency).
		// At 1,000 slots (work_drain_1000) the same: with the local queue a slot needs no
		// connection of its own, and a local queue of 1,000 (graphile-worker's advice for a
		// concurrency of 1,000) measured the same as 500 (docs/performance.md).
		tuning: []string{"--pool-max", "20", "--local-queue-size", "500", "--local-queue-size-1000", "500",
			"--complete-job-batch-delay-ms", "0"},
		database: "gw_bench",
	},
}

// knownPeers are the names -peers accepts.
var knownPeers = func() []string {
	var names []string
	for _, p := range peers {
		names = append(names, p.name)
	}
	return names
}()

func peerNamed(name string) *peer {
	for i := range peers {
		if peers[i].name == name {
			return &peers[i]
		}
	}
	return nil
}

// preparedPeer is a peer harness ready to run: its command, before the flags.
type preparedPeer struct {
	*peer
	command []string
}

// preparePeers finds the harnesses (in -peers-dir, or in this checkout) and builds or
// installs each of cfg.peers. A peer that cannot be prepared is reported and left out,
// as one that fails while running is: the error names what is missing.
func preparePeers(ctx context.Context, cfg *config) ([]preparedPeer, error) {
	if len(cfg.peers) == 0 {
		return nil, nil
	}
	dir := cfg.peersDir
	if dir == "" {
		var err error
		if dir, err = findPeersDir(); err != nil {
			return nil, err
		}
	}
	var out []preparedPeer
	for _, name := range cfg.peers {
		p := peerNamed(name)
		logf("peer %s: preparing the harness in %s", name, filepath.Join(dir, name))
		command, err := p.prepare(ctx, filepath.Join(dir, name))
		if err != nil {
			logf("peer %s: %v", name, err)
			continue
		}
		out = append(out, preparedPeer{p, command})
	}
	return out, nil
}

// runPeer runs one prepared peer harness on one scenario (a round of it) against a fresh
// database of its own on the throwaway server, and returns its JSON lines.
func (r *runner) runPeer(ctx context.Context, p preparedPeer, scenario string) ([]peerLine, error) {
	url, err := r.e.freshDatabase(ctx, p.database)
	if err != nil {
		return nil, err
	}
	msec := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
	}
	args := append(slices.Clone(p.command[1:]),
		"--database-url", url,
		"--scenarios", scenario,
		"--jobs", strconv.Itoa(r.cfg.jobs),
		"--workers", strconv.Itoa(r.cfg.workers),
		"--producers", strconv.Itoa(r.cfg.producers),
		"--latency-jobs", strconv.Itoa(r.cfg.latencyJobs),
		"--latency-interval-ms", msec(r.cfg.latencyInterval),
		"--steady-duration-ms", msec(r.cfg.steadyDuration),
		"--rate", strconv.FormatFloat(r.arrivalRate, 'f', 1, 64),
		"--warmup-ms", msec(r.cfg.warmup),
		"--timeout-ms", msec(r.cfg.timeout))
	args = append(args, p.tuning...)
	args = append(args, "--cost-marks")
	cmd := exec.CommandContext(ctx, p.command[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf("peer %s: running %s", p.name, strings.Join(cmd.Args, " "))
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peer %s: %w", p.name, err)
	}
	var out bytes.Buffer
	costs := map[string][2]dbCost{} // scenario -> drain, deferred
	marks := &peerMarks{r: r, p: p, url: url}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if scenario, mark, ok := parseMark(sc.Bytes()); ok {
			if c, err := marks.handle(ctx, scenario, mark); err != nil {
				logf("peer %s: %s: no database cost: %v", p.name, scenario, err)
			} else if c != nil {
				costs[scenario] = *c
			}
			// The harness waits for this line before it goes on.
			if _, err := io.WriteString(stdin, "\n"); err != nil {
				logf("peer %s: %v", p.name, err)
			}
			continue
		}
		out.Write(sc.Bytes())
		out.WriteByte('\n')
	}
	marks.close()
	runErr := cmd.Wait()
	lines, err := parsePeerOutput(out.Bytes())
	for i, pl := range lines {
		if c, ok := costs[pl.Result.Scenario]; ok {
			n := len(pl.Result.Extra)
			addCost(pl.Result, c[0], c[1])
			lines[i].Raw = withFields(pl.Raw, pl.Result.Extra[n:])
		}
	}
	if err != nil {
		return lines, err
	}
	if runErr != nil {
		return lines, fmt.Errorf("peer %s failed after %s: %w", p.name, time.Since(began).Round(time.Second), runErr)
	}
	return lines, nil
}

// Cost marks: with --cost-marks a harness prints {"mark":"drain_begin","scenario":…} on
// stdout right before its workers start and {"mark":"drain_end",…} once they have
// stopped, and after each reads one line from stdin before it goes on, so that the bench
// reads the server's CPU time and WAL position (and at the end runs the peer's deferred
// work) while the harness does nothing.

// parseMark reports whether line is a cost mark, and which.
func parseMark(line []byte) (scenario, mark string, ok bool) {
	if !bytes.HasPrefix(bytes.TrimSpace(line), []byte(`{"mark"`)) {
		return "", "", false
	}
	var m struct{ Mark, Scenario string }
	if err := json.Unmarshal(line, &m); err != nil || m.Mark == "" {
		return "", "", false
	}
	return m.Scenario, m.Mark, true
}

// peerMarks measures a peer's drains between its marks.
type peerMarks struct {
	r     *runner
	p     preparedPeer
	url   string
	meter *costMeter
	conn  *pgx.Conn // to the peer's database, for its deferred work
	began costMark
}

// handle takes a mark; at drain_end it returns the drain's cost and that of the deferred
// work.
func (m *peerMarks) handle(ctx context.Context, scenario, mark string) (*[2]dbCost, error) {
	switch mark {
	case "drain_begin":
		if m.meter == nil {
			meter, err := m.r.e.newCostMeter(ctx)
			if err != nil {
				return nil, err
			}
			m.meter = meter
		}
		if m.conn == nil {
			conn, err := pgx.Connect(ctx, m.url)
			if err != nil {
				return nil, fmt.Errorf("failed to connect to %s's database: %w", m.p.name, err)
			}
			m.conn = conn
		}
		var err error
		m.began, err = m.meter.mark(ctx)
		return nil, err
	case "drain_end":
		if m.meter == nil || m.began.lsn == "" {
			return nil, errors.New("drain_end without drain_begin")
		}
		drained, err := m.meter.since(ctx, m.began)
		m.began = costMark{}
		if err != nil {
			return nil, err
		}
		deferred, err := m.meter.runDeferred(ctx, m.conn, m.p.name)
		if err != nil {
			return nil, err
		}
		return &[2]dbCost{drained, deferred}, nil
	}
	return nil, fmt.Errorf("unknown mark %q", mark)
}

func (m *peerMarks) close() {
	if m.meter != nil {
		m.meter.close()
	}
	if m.conn != nil {
		_ = m.conn.Close(context.Background())
	}
}

// prepareRiver builds the River harness, a Go module of its own (so skiplock's go.mod
// never requires River), into the user's cache directory.
func prepareRiver(ctx context.Context, dir string) ([]string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the river harness is built with the go command, which is not on PATH: %w", err)
	}
	// One binary per checkout, so that two checkouts' runs do not overwrite each other's.
	h := fnv.New32a()
	h.Write([]byte(dir))
	bin := filepath.Join(cacheDir(), fmt.Sprintf("river-harness-%08x", h.Sum32()))
	cmd := exec.CommandContext(ctx, goCmd, "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off") // the harness's own go.mod, whatever workspace is around
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("failed to build the river harness in %s: %w", dir, err)
	}
	return []string{bin}, nil
}

// prepareGraphileWorker installs the graphile-worker harness's npm dependencies, pinned
// by its package-lock.json, into its node_modules when they are missing or older than the
// lock file.
func prepareGraphileWorker(ctx context.Context, dir string) ([]string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("the graphile-worker harness needs Node.js 20 or later (node and npm on PATH): %w", err)
	}
	// graphile-worker 0.18 declares engines node >= 22.18, but runs on Node 20 too (all
	// seven scenarios, Node 20.20); the harness needs Node 20 for util.parseArgs and ES2022.
	out, err := exec.CommandContext(ctx, node, "-p", "process.versions.node").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to run %s: %w", node, err)
	}
	version := strings.TrimSpace(string(out))
	if major, _, _ := strings.Cut(version, "."); atoi(major) < 20 {
		return nil, fmt.Errorf("the graphile-worker harness needs Node.js 20 or later, found %s at %s", version, node)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, fmt.Errorf("the graphile-worker harness needs npm on PATH to install its dependencies: %w", err)
	}
	if stale(filepath.Join(dir, "node_modules", ".package-lock.json"), filepath.Join(dir, "package-lock.json")) {
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("npm ci in %s failed: %w", dir, err)
		}
	}
	return []string{node, filepath.Join(dir, "bench.mjs")}, nil
}

// atoi is s as a number, or 0.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// stale reports whether target is missing or older than source.
func stale(target, source string) bool {
	t, err := os.Stat(target)
	if err != nil {
		return true
	}
	s, err := os.Stat(source)
	return err == nil && s.ModTime().After(t.ModTime())
}

// cacheDir is where built harnesses go: the user's cache directory, else the temporary one.
func cacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "skiplock-bench")
}

// peerLine is one JSON line of a peer harness, kept whole for -json.
type peerLine struct {
	System, Version string
	Result          *result
	Raw             []byte
}

// parsePeerOutput reads the JSON lines of a peer harness; other lines are ignored.
func parsePeerOutput(out []byte) ([]peerLine, error) {
	var lines []peerLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		pl, err := parsePeerLine(b)
		if err != nil {
			return lines, err
		}
		lines = append(lines, pl)
	}
	return lines, sc.Err()
}

func parsePeerLine(b []byte) (peerLine, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return peerLine{}, fmt.Errorf("failed to parse peer line %q: %w", b, err)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	num := func(k string) (float64, bool) { f, ok := m[k].(float64); return f, ok }
	res := &result{Result: benchresult.Result{Scenario: str("scenario")}}
	if res.Scenario == "" || str("system") == "" {
		return peerLine{}, fmt.Errorf("peer line without system or scenario: %s", b)
	}
	if v, ok := num("jobs"); ok {
		res.Jobs = int64(v)
	}
	if v, ok := num("seconds"); ok {
		res.Seconds = v
	}
	toDur := func(msv float64) time.Duration { return time.Duration(math.Round(msv * float64(time.Millisecond))) }
	// Enqueue -> start latency (p50_ms…) where measured, else the insert call's (insert_p50_ms…).
	for _, prefix := range []string{"", "insert_"} {
		p50, ok := num(prefix + "p50_ms")
		if !ok {
			continue
		}
		l := benchresult.Stats{P50: toDur(p50)}
		for key, d := range map[string]*time.Duration{"p95_ms": &l.P95, "p99_ms": &l.P99, "max_ms": &l.Max} {
			if v, ok := num(prefix + key); ok {
				*d = toDur(v)
			}
		}
		res.Latency = &l
		break
	}
	return peerLine{System: str("system"), Version: str("version"), Result: res, Raw: append([]byte(nil), b...)}, nil
}
