package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/skiplock/skiplock/admin"
)

var topicSubscribeCommand = &command{
	name:     "topic subscribe",
	synopsis: "TOPIC QUEUE KIND [flags]",
	summary:  "add a job of KIND to QUEUE at every publish of TOPIC (jobs_subscribe)",
	help: `Subscribes QUEUE and KIND to TOPIC: every later 'skiplock topic publish' (or jobs_publish,
driver.Publish, a client's publish) of TOPIC adds one job of KIND to QUEUE. The same
arguments again change nothing. Needs a role granted jobs_admin.

  skiplock topic subscribe order_placed mail send_receipt

Output: "subscribed QUEUE/KIND to TOPIC" or "QUEUE/KIND was already subscribed to TOPIC";
-o json: {"topic": T, "queue": Q, "kind": K, "changed": BOOL}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			return changeSubscription(ctx, c, "subscribe", (*admin.Client).Subscribe)
		}
	},
}

var topicUnsubscribeCommand = &command{
	name:     "topic unsubscribe",
	synopsis: "TOPIC QUEUE KIND [flags]",
	summary:  "stop adding jobs of KIND to QUEUE for TOPIC; published jobs stay (jobs_unsubscribe)",
	help: `Removes the subscription of QUEUE and KIND to TOPIC: later publishes add no job for it. Jobs
already published stay (cancel them with 'skiplock cancel --queue QUEUE --kind KIND' if they
must not run). Exit code 3 when there is no such subscription. Needs a role granted
jobs_admin.

Output: "unsubscribed QUEUE/KIND from TOPIC"; -o json: {"topic": T, "queue": Q, "kind": K,
"changed": true}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			return changeSubscription(ctx, c, "unsubscribe", (*admin.Client).Unsubscribe)
		}
	},
}

func changeSubscription(ctx context.Context, c *call, verb string,
	change func(*admin.Client, context.Context, string, string, string) (bool, error)) error {
	if len(c.args) != 3 {
		return usageErrorf("topic %s: want TOPIC QUEUE KIND, got %d arguments", verb, len(c.args))
	}
	topic, queue, kind := c.args[0], c.args[1], c.args[2]
	changed, err := change(c.admin(), ctx, topic, queue, kind)
	if err != nil {
		return fmt.Errorf("failed to %s %s/%s %s %q: %w", verb, queue, kind, map[string]string{"subscribe": "to", "unsubscribe": "from"}[verb], topic, err)
	}
	if verb == "unsubscribe" && !changed {
		return notFoundErrorf("no subscription of %s/%s to %q", queue, kind, topic)
	}
	if c.format == outputJSON {
		return writeJSON(c.stdout, struct {
			Topic   string `json:"topic"`
			Queue   string `json:"queue"`
			Kind    string `json:"kind"`
			Changed bool   `json:"changed"`
		}{topic, queue, kind, changed})
	}
	switch {
	case verb == "unsubscribe":
		_, err = fmt.Fprintf(c.stdout, "unsubscribed %s/%s from %s\n", queue, kind, topic)
	case changed:
		_, err = fmt.Fprintf(c.stdout, "subscribed %s/%s to %s\n", queue, kind, topic)
	default:
		_, err = fmt.Fprintf(c.stdout, "%s/%s was already subscribed to %s\n", queue, kind, topic)
	}
	return err
}

var topicListCommand = &command{
	name:     "topic list",
	synopsis: "[TOPIC] [flags]",
	summary:  "list the subscriptions of a topic or of all (jobs_subscriptions)",
	help: `Lists the subscriptions of TOPIC, or of every topic without one, by topic, queue and kind:
the order of the ids 'skiplock topic publish' prints. Needs a role granted jobs_admin.

Output (-o json): a list of {topic, queue, kind, created_at}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 1 {
				return usageErrorf("topic list: want at most one TOPIC, got %d arguments", len(c.args))
			}
			topic := ""
			if len(c.args) == 1 {
				topic = c.args[0]
				if topic == "" {
					return usageErrorf("topic list: TOPIC must not be empty")
				}
			}
			subs, err := c.admin().Subscriptions(ctx, topic)
			if err != nil {
				return fmt.Errorf("failed to read the subscriptions: %w", err)
			}
			if c.format == outputJSON {
				if subs == nil {
					subs = []admin.Subscription{}
				}
				return writeJSON(c.stdout, subs)
			}
			tw := newTable(c.stdout)
			fmt.Fprintln(tw, "TOPIC\tQUEUE\tKIND\tCREATED")
			for _, s := range subs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(s.Topic, 40), cell(s.Queue, 30), cell(s.Kind, 30), cell(s.CreatedAt, 0))
			}
			return tw.Flush()
		}
	},
}

var topicPublishCommand = &command{
	name:     "topic publish",
	synopsis: "TOPIC [PAYLOAD | -] [flags]",
	summary:  "add one job per subscription of TOPIC and print their ids (jobs_publish)",
	help: `Publishes the JSON PAYLOAD (default {}; - reads it from stdin) to TOPIC: adds one job per
subscription of the topic, of the subscription's kind in its queue, all in one transaction,
and prints their ids, one a line, in the order of the subscriptions by queue, then kind. A
topic without subscribers adds nothing and prints nothing. Needs a role granted
jobs_producer.

  skiplock topic publish order_placed '{"order":42}' --priority -1

Output: the ids; -o json: {"ids": [N, ...]} ([] without subscribers).
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		runAt := fs.String("run-at", "", "when to run the jobs, RFC 3339 (2026-12-24T18:00:00Z) or any PostgreSQL timestamptz (default now)")
		in := fs.Duration("in", 0, "run them this long from now (5m, 1h30m); not with --run-at")
		priority := fs.Int("priority", 0, "priority of the jobs: lower runs first")
		maxAttempts := fs.Int("max-attempts", 5, "attempts before a job is dead")
		concurrencyKey := fs.String("concurrency-key", "", "key counted against each queue's --per-key limit")
		return func(ctx context.Context, c *call) error {
			if len(c.args) < 1 || len(c.args) > 2 {
				return usageErrorf("topic publish: want TOPIC [PAYLOAD | -], got %d arguments", len(c.args))
			}
			if *runAt != "" && *in != 0 {
				return usageErrorf("topic publish: --run-at and --in exclude each other")
			}
			if err := checkInt32("topic publish", "priority", *priority); err != nil {
				return err
			}
			if err := checkInt32("topic publish", "max-attempts", *maxAttempts); err != nil {
				return err
			}
			payload := "{}"
			if len(c.args) == 2 {
				payload = c.args[1]
				if payload == "-" {
					b, err := io.ReadAll(c.stdin)
					if err != nil {
						return fmt.Errorf("failed to read the payload from stdin: %w", err)
					}
					payload = string(b)
				}
			}
			// --in is added to the server's now(), so a skewed local clock does not move it.
			var ids []int64
			err := c.conn.QueryRow(ctx, `
				SELECT jobs_publish(
				    topic           => $1,
				    payload         => $2::jsonb,
				    run_at          => coalesce($3::timestamptz, now() + $4::interval),
				    priority        => $5,
				    max_attempts    => $6,
				    concurrency_key => $7)`,
				c.args[0], payload, nullIfEmpty(*runAt), durationInterval(*in), *priority, *maxAttempts,
				nullIfEmpty(*concurrencyKey)).Scan(&ids)
			if err != nil {
				return fmt.Errorf("failed to publish to %q: %w", c.args[0], err)
			}
			if c.format == outputJSON {
				if ids == nil {
					ids = []int64{}
				}
				return writeJSON(c.stdout, map[string][]int64{"ids": ids})
			}
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(strconv.FormatInt(id, 10))
				b.WriteByte('\n')
			}
			_, err = io.WriteString(c.stdout, b.String())
			return err
		}
	},
}
