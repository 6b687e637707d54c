package skiplockotel_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	skiplockotel "github.com/skiplock/skiplock/contrib/otel"
	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestWorkerSpanContinuesTheEnqueueTrace enqueues two jobs inside a span, runs them through a
// client with the hook, and checks that each worker span is a child of its enqueue (producer)
// span, in the same trace, with the messaging attributes, and that the metrics were recorded.
func TestWorkerSpanContinuesTheEnqueueTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t, pgtest.NewDatabase(t))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prop := propagation.TraceContext{}

	rootCtx, root := tp.Tracer("test").Start(ctx, "request")
	okID, err := skiplockotel.Enqueue(rootCtx, pool, "ok", nil, &driver.EnqueueOpts{Queue: "mail"}, tp, prop)
	if err != nil {
		t.Fatal(err)
	}
	deadID, err := skiplockotel.Enqueue(rootCtx, pool, "fail", nil, &driver.EnqueueOpts{Queue: "mail", MaxAttempts: 1}, tp, prop)
	if err != nil {
		t.Fatal(err)
	}
	root.End()

	hook, err := skiplockotel.NewHook(&skiplockotel.HookOpts{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ok", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	driver.AddHandler(hs, "fail", func(ctx context.Context, job *driver.Job[struct{}]) error { return errors.New("boom") }, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{"mail": {Slots: 4}},
		Handlers: hs,
		Hook:     hook,
		Logger:   slog.New(slog.NewTextHandler(pgtest.NewLogWriter(t), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(ctx) }()
	processSpans := func() map[string]sdktrace.ReadOnlySpan {
		out := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindConsumer {
				out[attr(s, "messaging.message.id").String()] = s
			}
		}
		return out
	}
	pgtest.WaitFor(t, 20*time.Second, "two worker spans ended", func() bool { return len(processSpans()) == 2 })
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}

	producers := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindProducer {
			producers[attr(s, "messaging.message.id").String()] = s
		}
	}
	for _, tc := range []struct {
		id      int64
		kind    string
		outcome string
		status  codes.Code
	}{{okID, "ok", "done", codes.Unset}, {deadID, "fail", "dead", codes.Error}} {
		id := attribute.Int64Value(tc.id).String()
		worker, producer := processSpans()[id], producers[id]
		if worker == nil || producer == nil {
			t.Fatalf("job %s: worker span %v, producer span %v", id, worker, producer)
		}
		if producer.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("job %s: the enqueue span is not a child of the request span", id)
		}
		if worker.SpanContext().TraceID() != root.SpanContext().TraceID() ||
			worker.Parent().SpanID() != producer.SpanContext().SpanID() || !worker.Parent().IsRemote() {
			t.Errorf("job %s: the worker span (trace %s, parent %s) is not a child of the enqueue span (trace %s, span %s)",
				id, worker.SpanContext().TraceID(), worker.Parent().SpanID(), producer.SpanContext().TraceID(),
				producer.SpanContext().SpanID())
		}
		if worker.Name() != "process mail" {
			t.Errorf("job %s: span name %q, want \"process mail\"", id, worker.Name())
		}
		for key, want := range map[string]string{
			"messaging.system":           "skiplock",
			"messaging.operation.type":   "process",
			"messaging.destination.name": "mail",
			"skiplock.job.kind":          tc.kind,
			"skiplock.job.attempt":       "1",
			"skiplock.job.outcome":       tc.outcome,
		} {
			if got := attr(worker, key).String(); got != want {
				t.Errorf("job %s: %s = %q, want %q", id, key, got, want)
			}
		}
		if worker.Status().Code != tc.status {
			t.Errorf("job %s: status %v, want %v", id, worker.Status().Code, tc.status)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			case metricdata.Histogram[int64]:
				got[m.Name] += int64(len(d.DataPoints))
			}
		}
	}
	for name, want := range map[string]int64{
		"skiplock.jobs.claimed": 2, "skiplock.jobs.finished": 2, "skiplock.job.duration": 2, "skiplock.job.wait": 2,
		"skiplock.claim.batch_size": 1,
	} {
		if got[name] != want {
			t.Errorf("metric %s = %d, want %d (all: %v)", name, got[name], want, got)
		}
	}
}

// attr returns the value of the span's attribute key (an empty value when it has none).
func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func TestInjectKeepsTheCallersMeta(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	meta := map[string]string{"tenant": "a"}
	opts := skiplockotel.Inject(ctx, &driver.EnqueueOpts{Queue: "q", Meta: meta}, propagation.TraceContext{})
	if opts.Queue != "q" || opts.Meta["tenant"] != "a" || opts.Meta["traceparent"] == "" {
		t.Fatalf("Inject = %+v, want the queue, the tenant and a traceparent", opts)
	}
	if len(meta) != 1 {
		t.Fatalf("Inject changed the caller's Meta: %v", meta)
	}
	if o := skiplockotel.Inject(context.Background(), nil, propagation.TraceContext{}); o.Meta != nil {
		t.Fatalf("Inject without a span set Meta %v", o.Meta)
	}
}
