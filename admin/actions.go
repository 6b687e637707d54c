package admin

import (
	"context"
	"fmt"
	"slices"
)

// BulkAction is one of the operator's bulk functions, each taking (ids, queue, kind, states,
// max_jobs) and returning how many jobs it acted on, each call in its own transaction.
type BulkAction string

const (
	// Retry (jobs_retry_many) puts dead or cancelled jobs back in their queue.
	Retry BulkAction = "jobs_retry_many"
	// Cancel (jobs_cancel_many) cancels queued or running jobs.
	Cancel BulkAction = "jobs_cancel_many"
	// Delete (jobs_delete_many) deletes finished jobs.
	Delete BulkAction = "jobs_delete_many"
)

// BulkOpts select the jobs of a bulk action. The zero value selects nothing but what the
// function's own defaults select (jobs_retry_many: every dead job).
type BulkOpts struct {
	// IDs keeps only these jobs. Defaults to nil: any id.
	IDs []int64
	// Queue and Kind keep only the jobs that match; "" for any.
	Queue, Kind string
	// States keeps only the jobs in these states. Defaults to nil: the function's default.
	States []string
	// MaxJobs bounds the call (max_jobs). Defaults to 0: the function's default.
	MaxJobs int
}

// Bulk calls action once with opts: the jobs it acted on.
func (c *Client) Bulk(ctx context.Context, action BulkAction, opts BulkOpts) (int, error) {
	args := []any{opts.IDs, nullIfEmpty(opts.Queue), nullIfEmpty(opts.Kind)}
	call := "(ids => $1, queue => $2, kind => $3"
	if opts.States != nil {
		args = append(args, opts.States)
		call += fmt.Sprintf(", states => $%d::text[]::%s[]", len(args), c.fn("jobs_state"))
	}
	if opts.MaxJobs != 0 {
		args = append(args, opts.MaxJobs)
		call += fmt.Sprintf(", max_jobs => $%d", len(args))
	}
	var n int
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn(string(action))+call+")", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", action, err)
	}
	return n, nil
}

// BulkMatching calls action on every job matching queue and kind ("" for any) in one of
// states (at least one), going down the ids in rounds: each round reads one page of
// batch jobs of jobs_list per state below the cursor, all in one statement (one snapshot),
// and calls action once (its own transaction) with the ids of the range every state's page
// covers, for all the states. So every job is acted on at most once and the loop ends:
// calling action by filter until it returns 0 never ends while the set refills (workers
// failing retried jobs straight back to dead, producers enqueuing what is being cancelled),
// and retries a failing job again and again. A job that moves from one of the states to
// another meanwhile is neither missed nor acted on twice, as a pass per state would be.
//
// It returns the jobs acted on, also when an error stops it part way.
func (c *Client) BulkMatching(ctx context.Context, action BulkAction, queue, kind string, states []string, batch int) (int, error) {
	if len(states) == 0 {
		return 0, fmt.Errorf("%s: BulkMatching needs the states to act on", action)
	}
	if batch < 1 || batch > 1000 {
		return 0, fmt.Errorf("%s: BulkMatching's batch must be 1 to 1000 (jobs_list's max_jobs), got %d", action, batch)
	}
	total := 0
	// Each state once: a state listed twice would double its page and hide that it is full.
	states = slices.Compact(slices.Sorted(slices.Values(states)))
	var before *int64
	for {
		rows, err := c.db.Query(ctx, `SELECT s.state::text, l.id
			FROM unnest($1::text[]::`+c.fn("jobs_state")+`[]) AS s(state)
			CROSS JOIN LATERAL `+c.fn("jobs_list")+`(state => s.state, queue => $2, kind => $3, max_jobs => $4, before_id => $5) AS l`,
			states, nullIfEmpty(queue), nullIfEmpty(kind), batch, before)
		if err != nil {
			return total, fmt.Errorf("jobs_list: %w", err)
		}
		count := map[string]int{}
		lowest := map[string]int64{}
		var listed []int64
		for rows.Next() {
			var state string
			var id int64
			if err := rows.Scan(&state, &id); err != nil {
				rows.Close()
				return total, fmt.Errorf("jobs_list: %w", err)
			}
			count[state]++
			if l, ok := lowest[state]; !ok || id < l {
				lowest[state] = id
			}
			listed = append(listed, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("jobs_list: %w", err)
		}
		// A full page covers its state down to its lowest id only; the others, everything.
		var boundary int64
		for state, n := range count {
			if n == batch && lowest[state] > boundary {
				boundary = lowest[state]
			}
		}
		seen := map[int64]bool{}
		var ids []int64
		for _, id := range listed {
			if id >= boundary && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			n, err := c.Bulk(ctx, action, BulkOpts{IDs: ids, Queue: queue, Kind: kind, States: states, MaxJobs: len(ids)})
			total += n
			if err != nil {
				return total, err
			}
		}
		if boundary == 0 {
			return total, nil
		}
		before = &boundary
	}
}

// CountIDs counts the distinct ids whose job is in one of states (jobs_get).
func (c *Client) CountIDs(ctx context.Context, ids []int64, states []string) (int, error) {
	var n int
	err := c.db.QueryRow(ctx, `SELECT count(*)
		FROM (SELECT DISTINCT unnest($1::bigint[]) AS id) i
		CROSS JOIN LATERAL `+c.fn("jobs_get")+`(i.id) g
		WHERE g.state::text = ANY ($2::text[])`, ids, states).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("jobs_get: %w", err)
	}
	return n, nil
}

// CountMatching counts the jobs in states matching queue and kind ("" for any), a page of
// jobs_list at a time (the reads jobs_list makes cheap: the table that lists a state, or the
// primary key for done).
func (c *Client) CountMatching(ctx context.Context, queue, kind string, states []string) (int, error) {
	n := 0
	for _, state := range states {
		var before int64
		for {
			page, err := c.List(ctx, ListOpts{State: state, Queue: queue, Kind: kind, MaxJobs: 1000, BeforeID: before})
			if err != nil {
				return 0, err
			}
			n += len(page)
			if len(page) < 1000 {
				break
			}
			before = page[len(page)-1].ID
		}
	}
	return n, nil
}
