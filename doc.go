// Package skiplock installs skiplock, a PostgreSQL job queue whose semantics live in the
// database.
//
// The queue is a jobs table plus PL/pgSQL functions: jobs_enqueue and jobs_enqueue_many
// add jobs, jobs_claim leases ready jobs with FOR NO KEY UPDATE SKIP LOCKED, and jobs_complete,
// jobs_fail, jobs_heartbeat and jobs_snooze act on a leased job only while the caller
// still holds it at the attempt it was given (the attempt number is a fencing token).
// jobs_requeue_expired takes back jobs whose worker died. Because every rule is in SQL,
// psql, Python or any other client gets the same queue as the Go driver
// (package driver), which only calls these functions and runs worker loops.
//
// The function sources live one per file in sql/functions, with the roles' grants in
// sql/grants.sql (together a tern code package). The tern migrations in migrations/ are one
// per release (migrations/RELEASED lists them): each installs frozen copies of the files that
// changed since the release before, then re-applies the grants. Migrate applies them from Go,
// InstallSQL prints the same as a psql script, and the skiplock command (cmd/skiplock) does
// both from a shell and operates the queue (docs/cli.md). docs/sql-api.md is the SQL
// reference.
//
// Package admin is the Go API of the operator's functions (listing, inspecting, bulk actions,
// queue settings, schedules, metrics): the skiplock command, the dashboard (package ui) and
// both /metrics exporters (skiplock ui's and contrib/prometheus) call it.
package skiplock
