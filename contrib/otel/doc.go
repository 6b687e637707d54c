// Package skiplockotel traces and measures skiplock jobs with OpenTelemetry, following
// the messaging semantic conventions.
//
// Trace context goes from the producer to the worker inside the job: [Enqueue] (or
// [Inject] on the options of a driver.Enqueue call) starts a producer span "send QUEUE"
// and stores its W3C trace context (traceparent, tracestate) in driver.EnqueueOpts.Meta,
// the job's meta column. The [Hook], set as driver.Config.Hook, starts a consumer span
// "process QUEUE" for every run of a job, continuing the trace found in the job's meta, and
// ends it with the run's outcome. Its attributes:
//
//	messaging.system             "skiplock"
//	messaging.operation.type     "process" ("send" on the producer's span)
//	messaging.operation.name     "process" ("send")
//	messaging.destination.name   the queue
//	messaging.message.id         the job's id
//	skiplock.job.kind            the job's kind
//	skiplock.job.attempt         the attempt (1 on the first run)
//	skiplock.job.outcome         done, retried, dead, cancelled, snoozed or fenced
//
// A span whose outcome is retried, dead or fenced has status Error, with the handler's
// error recorded as an event.
//
// The hook also records the metrics of contrib/prometheus as OpenTelemetry instruments:
// skiplock.jobs.claimed, skiplock.jobs.finished (with skiplock.job.outcome),
// skiplock.job.duration and skiplock.job.wait (seconds), skiplock.claim.batch_size, and
// skiplock.wakeups.notify and skiplock.wakeups.poll; attributes are the queue
// (messaging.destination.name), the kind and the outcome only.
//
// The hook sees a job's run from the outside: the handler's context does not carry the
// span, so spans a handler starts are not its children.
//
// The package lives in a Go module of its own so that OpenTelemetry stays out of
// skiplock's go.mod.
package skiplockotel
