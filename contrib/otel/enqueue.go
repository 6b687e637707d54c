package skiplockotel

import (
	"context"
	"maps"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiplock/skiplock/driver"
)

// instrumentationName names the tracer and the meter.
const instrumentationName = "github.com/skiplock/skiplock/contrib/otel"

// Inject returns a copy of opts (nil: the defaults) whose Meta also holds ctx's trace
// context, in the W3C format of propagator (nil: otel.GetTextMapPropagator()). A worker's
// Hook continues that trace.
func Inject(ctx context.Context, opts *driver.EnqueueOpts, propagator propagation.TextMapPropagator) *driver.EnqueueOpts {
	if propagator == nil {
		propagator = otel.GetTextMapPropagator()
	}
	var o driver.EnqueueOpts
	if opts != nil {
		o = *opts
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return &o // no trace to carry
	}
	meta := maps.Clone(o.Meta)
	if meta == nil {
		meta = make(map[string]string, len(carrier))
	}
	maps.Copy(meta, carrier)
	o.Meta = meta
	return &o
}

// Enqueue is driver.Enqueue in a producer span "send QUEUE" (a child of ctx's span), whose
// trace context the job carries to the worker (see [Inject]). tp nil means
// otel.GetTracerProvider(), propagator nil otel.GetTextMapPropagator().
func Enqueue(ctx context.Context, db driver.Executor, kind string, payload any, opts *driver.EnqueueOpts,
	tp trace.TracerProvider, propagator propagation.TextMapPropagator) (int64, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	queue := driver.QueueDefault
	if opts != nil && opts.Queue != "" {
		queue = opts.Queue
	}
	ctx, span := tp.Tracer(instrumentationName).Start(ctx, "send "+queue,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", messagingSystem),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "send"),
			attribute.String("messaging.destination.name", queue),
			attribute.String(attrKind, kind),
		))
	defer span.End()
	id, err := driver.Enqueue(ctx, db, kind, payload, Inject(ctx, opts, propagator))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "enqueue failed")
		return 0, err
	}
	span.SetAttributes(attribute.String("messaging.message.id", strconv.FormatInt(id, 10)))
	return id, nil
}
