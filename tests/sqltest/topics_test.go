package sqltest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// subscription is one (queue, kind) of a topic.
type subscription struct{ Queue, Kind string }

func (s subscription) String() string { return s.Queue + "/" + s.Kind }

// publishedSubs returns, for the ids a jobs_publish returned, the (queue, kind) of each job in
// the order of the ids.
func publishedSubs(t *testing.T, q querier, ids []int64) []subscription {
	t.Helper()
	rows, err := q.Query(context.Background(),
		`SELECT j.queue, j.kind
		 FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord)
		 JOIN jobs j ON j.id = u.id
		 ORDER BY u.ord`, ids)
	if err != nil {
		t.Fatalf("reading published jobs: %v", err)
	}
	subs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[subscription])
	if err != nil {
		t.Fatalf("reading published jobs: %v", err)
	}
	if len(subs) != len(ids) {
		t.Fatalf("%d of the %d published ids name a job", len(subs), len(ids))
	}
	return subs
}

// TestTopics: jobs_publish adds one ordinary job per subscription of its topic, in the
// caller's transaction, from the subscriptions of one moment; jobs_subscribe and
// jobs_unsubscribe say whether they changed anything.
func TestTopics(t *testing.T) {
	t.Parallel()

	t.Run("SubscribeAndUnsubscribeReturnWhetherTheyChangedIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_subscribe('orders', 'mail', 'send_receipt')") {
			t.Fatal("first jobs_subscribe returned false")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_subscribe('orders', 'mail', 'send_receipt')") {
			t.Fatal("second jobs_subscribe of the same subscription returned true")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_subscriptions('orders')"); n != 1 {
			t.Fatalf("%d subscriptions after subscribing twice, want 1", n)
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_unsubscribe('orders', 'mail', 'other_kind')") {
			t.Fatal("jobs_unsubscribe of a subscription that does not exist returned true")
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_unsubscribe('orders', 'mail', 'send_receipt')") {
			t.Fatal("first jobs_unsubscribe returned false")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_unsubscribe('orders', 'mail', 'send_receipt')") {
			t.Fatal("second jobs_unsubscribe returned true")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_subscriptions()"); n != 0 {
			t.Fatalf("%d subscriptions left, want 0", n)
		}
	})

	t.Run("PublishFansOutOneJobPerSubscription", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, s := range []string{
			"('orders', 'mail', 'send_receipt')",
			"('orders', 'billing', 'charge')",
			"('orders', 'mail', 'notify_sales')",
			"('refunds', 'billing', 'refund')",
		} {
			mustExec(t, b.Conn, "SELECT jobs_subscribe"+s)
		}
		ids := queryOne[[]int64](t, b.Conn,
			`SELECT jobs_publish('orders', '{"order": 7}', run_at => '2026-01-02 03:04:05+00', priority => 3,
			                     max_attempts => 2, concurrency_key => 'customer-1', meta => '{"trace": "x"}')`)
		want := []subscription{{"billing", "charge"}, {"mail", "notify_sales"}, {"mail", "send_receipt"}}
		if got := publishedSubs(t, b.Conn, ids); !slices.Equal(got, want) {
			t.Fatalf("jobs_publish made jobs %v, want %v (queue, then kind order)", got, want)
		}
		// The order jobs_subscriptions lists.
		listed := queryList[string](t, b.Conn, "SELECT queue || '/' || kind FROM jobs_subscriptions('orders')")
		if fmt.Sprint(listed) != fmt.Sprint(want) {
			t.Fatalf("jobs_subscriptions lists %v, want %v", listed, want)
		}
		// Every job is an ordinary queued job with the publish's values.
		n := queryOne[int64](t, b.Conn,
			`SELECT count(*) FROM jobs j
			 WHERE j.id = ANY ($1) AND j.state = 'queued' AND j.payload = '{"order": 7}' AND j.priority = 3
			   AND j.max_attempts = 2 AND j.concurrency_key = 'customer-1' AND j.meta = '{"trace": "x"}'
			   AND j.run_at = '2026-01-02 03:04:05+00' AND j.attempts = 0`, ids)
		if n != 3 {
			t.Fatalf("%d of the 3 published jobs carry the publish's values", n)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 3 {
			t.Fatalf("%d jobs after one publish to 3 subscriptions, want 3", n)
		}
		// And each is claimed like any job.
		if jobs := claim(t, b.Conn, "w", 10, []string{"billing"}, "1 minute"); len(jobs) != 1 || jobs[0].Kind != "charge" {
			t.Fatalf("claim of billing returned %+v, want the charge job", jobs)
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatalf("storage problems: %v", p)
		}
	})

	t.Run("PublishWithoutSubscribersReturnsEmptyArray", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_subscribe('other', 'q', 'k')")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_publish('nobody_listens') = '{}'::bigint[]") {
			t.Fatal("jobs_publish to a topic without subscribers did not return '{}' (NULL or jobs?)")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs after publishing to a topic without subscribers", n)
		}
	})

	t.Run("RolledBackPublishLeavesNoJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_subscribe('t', 'a', 'k'), jobs_subscribe('t', 'b', 'k')")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ids := queryOne[[]int64](t, tx, "SELECT jobs_publish('t')"); len(ids) != 2 {
			t.Fatalf("jobs_publish returned %v, want 2 ids", ids)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs after a rolled-back publish", n)
		}
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claim after a rolled-back publish returned %+v", jobs)
		}
	})

	t.Run("PublishCommitsWithTheCallersWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.Connect(t)
		mustExec(t, b.Conn, "CREATE TABLE orders (id int PRIMARY KEY)")
		mustExec(t, b.Conn, "SELECT jobs_subscribe('order_placed', 'a', 'k'), jobs_subscribe('order_placed', 'b', 'k')")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "INSERT INTO orders VALUES (1)")
		ids := queryOne[[]int64](t, tx, "SELECT jobs_publish('order_placed', '{\"order\": 1}')")
		// Until the commit another session sees neither the order nor the jobs.
		if n := queryOne[int64](t, other, "SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM jobs)"); n != 0 {
			t.Fatalf("another session sees %d rows of the uncommitted order and publish", n)
		}
		if jobs := claim(t, other, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claim before the commit returned %+v", jobs)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int64](t, other, "SELECT count(*) FROM orders"); n != 1 {
			t.Fatalf("%d orders after the commit, want 1", n)
		}
		if jobs := claim(t, other, "w", 10, nil, "1 minute"); len(jobs) != 2 ||
			!slices.Contains(ids, jobs[0].ID) || !slices.Contains(ids, jobs[1].ID) {
			t.Fatalf("claim after the commit returned %+v, want the jobs %v", jobs, ids)
		}
	})

	t.Run("NotifiesOncePerQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		for _, s := range []string{"('t', 'a', 'k1')", "('t', 'a', 'k2')", "('t', 'a', 'k3')", "('t', 'b', 'k1')"} {
			mustExec(t, b.Conn, "SELECT jobs_subscribe"+s)
		}
		mustExec(t, b.Conn, "SELECT jobs_publish('t')")
		requirePayloads(t, l.drain(t, b), "a", "b")
		mustExec(t, b.Conn, "SELECT jobs_publish('t', notify => false)")
		mustExec(t, b.Conn, "SELECT jobs_publish('t', run_at => now() + interval '1 hour')")
		requirePayloads(t, l.drain(t, b))
	})

	t.Run("UnsubscribeKeepsPublishedJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_subscribe('t', 'a', 'k')")
		first := queryOne[[]int64](t, b.Conn, "SELECT jobs_publish('t')")
		mustExec(t, b.Conn, "SELECT jobs_unsubscribe('t', 'a', 'k')")
		if ids := queryOne[[]int64](t, b.Conn, "SELECT jobs_publish('t')"); len(ids) != 0 {
			t.Fatalf("jobs_publish after the last unsubscribe returned %v", ids)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE id = ANY ($1) AND state = 'queued'", first); n != 1 {
			t.Fatalf("the job published before the unsubscribe: %d queued, want 1", n)
		}
	})

	// A subscription change committed by another session while a transaction is open is seen
	// by that transaction's next publish (READ COMMITTED: each statement its own snapshot),
	// and an uncommitted one is not, nor is it waited for.
	t.Run("PublishSeesCommittedChangesOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := b.Connect(t)
		mustExec(t, admin, "SELECT jobs_subscribe('t', 'a', 'k')")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background()) //nolint:errcheck // rolled back when the test fails

		change, err := admin.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, change, "SELECT jobs_unsubscribe('t', 'a', 'k'), jobs_subscribe('t', 'b', 'k'), jobs_subscribe('t', 'c', 'k')")
		// Uncommitted: the publish neither waits for it nor sees it.
		if got := publishedSubs(t, tx, queryOne[[]int64](t, tx, "SELECT jobs_publish('t')")); fmt.Sprint(got) != "[a/k]" {
			t.Fatalf("publish beside an uncommitted change made %v, want [a/k]", got)
		}
		if err := change.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := publishedSubs(t, tx, queryOne[[]int64](t, tx, "SELECT jobs_publish('t')")); fmt.Sprint(got) != "[b/k c/k]" {
			t.Fatalf("publish after the change committed made %v, want [b/k c/k]", got)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	})

	// 16 sessions publish while another changes the topic's subscriptions, three at a time
	// in one transaction (state i: queues s<i>_a, s<i>_b, s<i>_c): every publish's jobs are
	// exactly the subscriptions of one state (no partial fan-out, nothing of two states),
	// and each publisher sees the states in their order.
	t.Run("ConcurrentPublishersSeeOneMoment", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const publishers = 16
		states := 60
		if testing.Short() {
			states = 20
		}
		stateSubs := func(i int) []subscription {
			return []subscription{{fmt.Sprintf("s%03d_a", i), "k"}, {fmt.Sprintf("s%03d_b", i), "k"}, {fmt.Sprintf("s%03d_c", i), "k"}}
		}
		change := func(ctx context.Context, conn *pgx.Conn, i int) error {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit, a no-op
			if i > 0 {
				for _, s := range stateSubs(i - 1) {
					if _, err := tx.Exec(ctx, "SELECT jobs_unsubscribe('t', $1, $2)", s.Queue, s.Kind); err != nil {
						return err
					}
				}
			}
			for _, s := range stateSubs(i) {
				if _, err := tx.Exec(ctx, "SELECT jobs_subscribe('t', $1, $2)", s.Queue, s.Kind); err != nil {
					return err
				}
			}
			return tx.Commit(ctx)
		}
		if err := change(t.Context(), b.Conn, 0); err != nil {
			t.Fatal(err)
		}

		var done atomic.Bool
		var wg sync.WaitGroup
		results := make([][][]int64, publishers)
		errs := make(chan error, publishers+1)
		for p := range publishers {
			conn := b.Connect(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					var ids []int64
					if err := conn.QueryRow(context.Background(), "SELECT jobs_publish('t', $1)",
						fmt.Sprintf(`{"publisher": %d}`, p)).Scan(&ids); err != nil {
						errs <- fmt.Errorf("publisher %d: %w", p, err)
						return
					}
					results[p] = append(results[p], ids)
				}
			}()
		}
		changer := b.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Store(true)
			for i := 1; i < states; i++ {
				if err := change(context.Background(), changer, i); err != nil {
					errs <- fmt.Errorf("change to state %d: %w", i, err)
					return
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		stateOf := map[string]int{}
		for i := range states {
			stateOf[fmt.Sprint(stateSubs(i))] = i
		}
		publishes, jobs, seen := 0, 0, map[int]bool{}
		for p, list := range results {
			last := -1
			for _, ids := range list {
				got := publishedSubs(t, b.Conn, ids)
				i, ok := stateOf[fmt.Sprint(got)]
				if !ok {
					t.Fatalf("publisher %d: a publish made jobs for %v, the subscriptions of no moment", p, got)
				}
				if i < last {
					t.Fatalf("publisher %d: a publish saw state %d after one saw state %d", p, i, last)
				}
				last, seen[i] = i, true
				publishes++
				jobs += len(ids)
			}
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != int64(jobs) {
			t.Fatalf("%d jobs in the table, %d returned by the publishes", n, jobs)
		}
		t.Logf("%d publishes (%d jobs) across %d subscription states, %d states seen", publishes, jobs, states, len(seen))
		if len(seen) < 2 {
			t.Fatalf("the publishes saw %d states: the changes did not overlap them", len(seen))
		}
	})
}

// TestPublishChecksWithoutSubscribers: bad values of jobs_publish's job fields are refused before the
// subscriptions are read, so also for a topic without subscribers (tests/badinput has the
// messages; this is the promise that the topic's subscribers do not matter).
func TestPublishChecksWithoutSubscribers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, call := range []string{
		"jobs_publish('t', max_attempts => 0)",
		"jobs_publish('t', meta => '[]')",
	} {
		_, err := b.Conn.Exec(t.Context(), "SELECT "+call)
		pe := pgtest.RequirePgError(t, err, "22023")
		if !strings.HasPrefix(pe.Message, "jobs_publish: ") {
			t.Fatalf("%s: %q", call, pe.Message)
		}
	}
}
