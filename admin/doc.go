// Package admin is the typed Go API of skiplock's operator functions: listing and inspecting
// jobs (jobs_list, jobs_inspect), the bulk and single-job actions (jobs_retry, jobs_cancel,
// jobs_delete and their _many forms), queue settings (jobs_pause, jobs_resume,
// jobs_set_concurrency, jobs_set_rate_limit), schedules, the subscriptions of topics
// (jobs_subscribe, jobs_unsubscribe, jobs_subscriptions), workflows (a workflow's steps,
// jobs_cancel_workflow, a job's outcome with jobs_result), and the metrics read by every
// /metrics endpoint (jobs_metrics). The skiplock command, the dashboard (package ui) and the
// Prometheus exporters all go through it, so among the tools each operator function's call
// and the scanning of its result are written once.
//
// The functions' rules (locks, state moves, errors) are those of docs/sql-api.md; this
// package adds no rule of its own. A worker's and a producer's calls (claim, complete, fail,
// heartbeat, enqueue, publish) are the driver's, listed in its sql.go, not this package's;
// the driver also calls the few functions a service and an operator both need (jobs_result
// for WaitResult, jobs_schedule for Schedule, jobs_schedule_tick and jobs_maintain for its
// maintainer), so that a service needs only the driver. The skiplock command's enqueue and topic publish call jobs_enqueue and
// jobs_publish themselves, with run_at computed from the server's clock (--in).
package admin
