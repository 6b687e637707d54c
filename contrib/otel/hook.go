package skiplockotel

import (
	"context"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiplock/skiplock/driver"
)

const (
	messagingSystem = "skiplock"
	attrQueue       = "messaging.destination.name"
	attrKind        = "skiplock.job.kind"
	attrAttempt     = "skiplock.job.attempt"
	attrOutcome     = "skiplock.job.outcome"
)

// HookOpts configures a Hook. A nil *HookOpts means every default.
type HookOpts struct {
	// TracerProvider makes the spans. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator reads the trace context from a job's meta. Defaults to
	// otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

// Hook traces every job run as a consumer span and records the worker metrics; set it as
// driver.Config.Hook (it implements driver.Hook and driver.ClaimHook). It is safe for
// concurrent use, and one Hook may serve several clients. A run whose outcome could not be
// recorded at all (the database unreachable until shutdown; the job runs again after its
// lease expires) gets no outcome event, and its span is never ended.
type Hook struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator

	claimed       metric.Int64Counter
	finished      metric.Int64Counter
	duration      metric.Float64Histogram
	wait          metric.Float64Histogram
	batch         metric.Int64Histogram
	wakeupsNotify metric.Int64Counter
	wakeupsPoll   metric.Int64Counter

	spans sync.Map // runKey -> trace.Span, from EventStarted to the run's outcome
}

// runKey is one run of a job: the attempt tells a job's runs apart.
type runKey struct {
	id      int64
	attempt int
}

var (
	_ driver.Hook      = (*Hook)(nil)
	_ driver.ClaimHook = (*Hook)(nil)
)

// NewHook makes a Hook. It fails only when an instrument cannot be created.
func NewHook(opts *HookOpts) (*Hook, error) {
	var o HookOpts
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = otel.GetTextMapPropagator()
	}
	m := o.MeterProvider.Meter(instrumentationName)
	h := &Hook{tracer: o.TracerProvider.Tracer(instrumentationName), propagator: o.Propagator}
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		var c metric.Int64Counter
		if err == nil {
			c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		var hist metric.Float64Histogram
		if err == nil {
			hist, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		}
		return hist
	}
	h.claimed = counter("skiplock.jobs.claimed", "{job}", "Jobs claimed by this process's fetch loops.")
	h.finished = counter("skiplock.jobs.finished", "{job}", "Job runs finished by this process, by outcome.")
	h.duration = seconds("skiplock.job.duration", "How long handlers ran.")
	h.wait = seconds("skiplock.job.wait", "How long jobs waited to start: from their run_at to the start of the handler.")
	if err == nil {
		h.batch, err = m.Int64Histogram("skiplock.claim.batch_size", metric.WithUnit("{job}"),
			metric.WithDescription("Jobs per claim, empty claims included."))
	}
	h.wakeupsNotify = counter("skiplock.wakeups.notify", "{wakeup}", "Claims made because a notification woke the fetch loop.")
	h.wakeupsPoll = counter("skiplock.wakeups.poll", "{wakeup}", "Claims made because the poll timer woke the fetch loop.")
	if err != nil {
		return nil, err
	}
	return h, nil
}

// HandleEvent starts a job run's span (continuing the trace in the job's meta) and records
// its wait, or ends the span with the run's outcome and records it.
func (h *Hook) HandleEvent(e *driver.Event) {
	job := e.Job
	key := runKey{job.ID, job.Attempt}
	queueKind := metric.WithAttributes(attribute.String(attrQueue, job.Queue), attribute.String(attrKind, job.Kind))
	if e.Kind == driver.EventStarted {
		ctx := context.Background()
		if job.Meta != nil {
			ctx = h.propagator.Extract(ctx, propagation.MapCarrier(job.Meta))
		}
		_, span := h.tracer.Start(ctx, "process "+job.Queue,
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", messagingSystem),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.operation.name", "process"),
				attribute.String(attrQueue, job.Queue),
				attribute.String("messaging.message.id", strconv.FormatInt(job.ID, 10)),
				attribute.String(attrKind, job.Kind),
				attribute.Int(attrAttempt, job.Attempt),
			))
		h.spans.Store(key, span)
		h.wait.Record(context.Background(), max(e.Wait.Seconds(), 0), queueKind)
		return
	}
	outcome := e.Outcome()
	if outcome == "" {
		return
	}
	h.finished.Add(context.Background(), 1, metric.WithAttributes(attribute.String(attrQueue, job.Queue),
		attribute.String(attrKind, job.Kind), attribute.String(attrOutcome, outcome)))
	h.duration.Record(context.Background(), e.Duration.Seconds(), queueKind)
	v, ok := h.spans.LoadAndDelete(key)
	if !ok {
		return
	}
	span := v.(trace.Span)
	span.SetAttributes(attribute.String(attrOutcome, outcome))
	if e.Err != nil {
		span.RecordError(e.Err)
	}
	switch outcome {
	case "retried", "dead", "fenced":
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// HandleClaim records a claim: its jobs, its batch size and what woke the fetch loop.
func (h *Hook) HandleClaim(e *driver.ClaimEvent) {
	ctx := context.Background()
	queue := metric.WithAttributes(attribute.String(attrQueue, e.Queue))
	h.claimed.Add(ctx, int64(e.Claimed), queue)
	h.batch.Record(ctx, int64(e.Claimed), queue)
	switch e.Wake {
	case driver.WakeNotify:
		h.wakeupsNotify.Add(ctx, 1, queue)
	case driver.WakePoll:
		h.wakeupsPoll.Add(ctx, 1, queue)
	}
}
