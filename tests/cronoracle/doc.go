// Package cronoracle property-tests jobs_cron_next against github.com/robfig/cron/v3.
//
// It is a Go module of its own so that robfig/cron, a test-only dependency, stays out of
// skiplock's go.mod; scripts/test vets and tests it in its folder, as it does the other
// nested modules.
//
// robfig/cron is the oracle wherever its rules are the issue's. Where they differ, the
// test compares with a small reference implementation of skiplock's rules instead, built on
// the field sets robfig parsed (reference_test.go):
//
//   - DST: robfig steps through absolute time, so it skips a daily 02:30 on a
//     spring-forward day and runs it twice on a fall-back day that repeats 02:30; skiplock
//     runs a skipped local time when the clocks jump, and a repeated one at its first
//     occurrence only, unless the minute or hour field starts with '*' (then in both
//     occurrences): Vixie cron's rules. Cases whose search crosses a zone transition go
//     to the reference.
//   - The day-of-month/day-of-week rule: crontab(5), and skiplock, join the two day fields
//     with OR when neither starts with '*'. robfig does so unless a field's list has an
//     element '*' or '*/1' anywhere, so it reads '*/2' as restricted and '2,*/1' as not.
//     Those cases go to the reference.
//   - Day-of-week '*' and 'a/step' end at 6 in both; robfig refuses the value 7 (Sunday),
//     which skiplock accepts, so it is not generated.
//   - Horizon: robfig gives up after five years, skiplock after ten.
//   - @every: robfig's runs a fixed delay after the previous run; skiplock's runs at the
//     multiples of the interval since the Unix epoch. Not generated here; tests/sqltest
//     covers it.
package cronoracle
