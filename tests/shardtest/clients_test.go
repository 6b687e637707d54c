package shardtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Python and Node clients keep working through the proxy unchanged: one lifecycle
// (enqueue, claim, heartbeat, fail, claim again, complete) of each, given the proxy's URL.
// LISTEN through a proxy hears nothing (notifications stay on the shard), so workers
// there poll; see docs/scaling.md.

const pythonLifecycle = `
import os
from datetime import timedelta
from skiplock import Client

c = Client(os.environ["SKIPLOCK_TEST_DATABASE_URL"])
q = os.environ["QUEUE"]
jid = c.enqueue("py", {"n": 1}, queue=q)
jobs = c.claim("py-worker", 5, queues=[q])
assert [j.id for j in jobs] == [jid], jobs
j = jobs[0]
assert c.heartbeat(j.id, j.attempt, lease=timedelta(minutes=10))
assert c.fail(j.id, j.attempt, "boom", retry_at=None) in ("queued",), "fail"
c.enqueue("py2", queue=q)
# the failed job is back with a backoff; complete the other one
jobs = c.claim("py-worker", 5, queues=[q])
assert len(jobs) == 1 and jobs[0].kind == "py2", jobs
assert c.complete(jobs[0].id, jobs[0].attempt)
assert c.get(jobs[0].id)["state"] == "done"
print("python lifecycle through the proxy: ok", jid % 1024)
`

const nodeLifecycle = `
import assert from 'node:assert/strict';
import { Client } from './src/index.js';
const c = new Client(process.env.SKIPLOCK_TEST_DATABASE_URL);
const q = process.env.QUEUE;
try {
  const id = await c.enqueue('js', { n: 1 }, { queue: q });
  let jobs = await c.claim({ worker: 'js-worker', maxJobs: 5, queues: [q] });
  assert.equal(jobs.length, 1);
  assert.equal(String(jobs[0].id), String(id));
  assert.equal(await c.heartbeat(jobs[0].id, jobs[0].attempt, { lease: 600000 }), true);
  assert.equal(await c.fail(jobs[0].id, jobs[0].attempt, 'boom'), 'queued');
  await c.enqueue('js2', {}, { queue: q });
  jobs = await c.claim({ worker: 'js-worker', maxJobs: 5, queues: [q] });
  assert.equal(jobs.length, 1);
  assert.equal(jobs[0].kind, 'js2');
  assert.equal(await c.complete(jobs[0].id, jobs[0].attempt), true);
  console.log('node lifecycle through the proxy: ok');
} finally {
  await c.close();
}
`

func TestClientsThroughProxy(t *testing.T) {
	s := newSharded(t, 2)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, dir, queue string, name string, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SKIPLOCK_TEST_DATABASE_URL="+s.proxyURL, "QUEUE="+queue,
			"PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1", "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	t.Run("Python", func(t *testing.T) {
		py := "/usr/bin/python3"
		if out, err := exec.Command(py, "-c", "import psycopg").CombinedOutput(); err != nil {
			t.Skipf("%s cannot import psycopg (apt-get install python3-psycopg): %s", py, strings.TrimSpace(string(out)))
		}
		// A queue on shard 1, so the calls really cross the proxy to a second server.
		run(t, filepath.Join(root, "clients/python"), s.queueOnShard(t, "py", 1), py, "-c", pythonLifecycle)
	})

	t.Run("Node", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node not found: install Node.js 20 or later")
		}
		dir := filepath.Join(root, "clients/node")
		if _, err := os.Stat(filepath.Join(dir, "node_modules/pg")); err != nil {
			t.Skip("clients/node/node_modules is missing: go test ./clients/node/ (or npm ci there) installs it")
		}
		run(t, dir, s.queueOnShard(t, "js", 1), node, "--input-type=module", "-e", nodeLifecycle)
	})
}
