package cronoracle

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// zones mixes UTC, fixed odd offsets, one-hour DST on both hemispheres, Lord Howe's
// half-hour DST, Chatham's +12:45/+13:45 and Casablanca's DST that pauses for Ramadan.
var zones = []string{
	"UTC", "Asia/Kolkata", "Asia/Kathmandu", "America/New_York", "America/Los_Angeles", "Europe/Berlin",
	"Europe/London", "America/Santiago", "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Chatham",
	"Africa/Casablanca",
}

// cronCase is one random expression, instant and zone.
type cronCase struct {
	cron  string
	after time.Time
	zone  string
}

// TestCronNextAgainstRobfig compares jobs_cron_next with robfig/cron/v3 (and, where the
// issue's rules differ from robfig's, with the reference) on random expressions, instants
// and zones: 10,000 cases, 2,000 under -short.
func TestCronNextAgainstRobfig(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	n := 10000
	if testing.Short() {
		n = 2000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	cases := make([]cronCase, n)
	for i := range cases {
		zone := zones[rng.IntN(len(zones))]
		cases[i] = cronCase{cron: randomCron(rng), after: randomInstant(rng, zone), zone: zone}
	}

	got := make([]*time.Time, 0, n)
	for start := 0; start < n; start += 1000 {
		batch := cases[start:min(start+1000, n)]
		crons, afters, tzs := make([]string, len(batch)), make([]time.Time, len(batch)), make([]string, len(batch))
		for i, c := range batch {
			crons[i], afters[i], tzs[i] = c.cron, c.after, c.zone
		}
		got = append(got, pgtest.QueryList[*time.Time](t, db.Conn, `
			SELECT jobs_cron_next(c.cron, c.after, c.zone)
			FROM unnest($1::text[], $2::timestamptz[], $3::text[]) WITH ORDINALITY AS c(cron, after, zone, i)
			ORDER BY c.i`, crons, afters, tzs)...)
	}

	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	var byRobfig, byRobfigDST, byReference, crossChecked, transitions, dayStar, beyondHorizon, none int
	for i, c := range cases {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		sched, err := parser.Parse(c.cron)
		if err != nil {
			t.Fatalf("robfig cannot parse generated %q: %v", c.cron, err)
		}
		spec := sched.(*cron.SpecSchedule)
		ref := reference{spec: spec, domRestricted: restricted(c.cron, 2), dowRestricted: restricted(c.cron, 4),
			timeWildcard: timeWildcard(c.cron)}
		want := ref.next(c.after, loc)
		oracle := spec.Next(c.after.In(loc))

		// robfig is the oracle unless the rules differ from its own here.
		robfigApplies := true
		if oracle.IsZero() {
			robfigApplies = false
			beyondHorizon++
		} else if crossesTransition(c.after, loc, oracle, want) {
			robfigApplies = false
			transitions++
		} else if dayRuleDiffers(spec, c.cron) {
			robfigApplies = false
			dayStar++
		}
		if robfigApplies {
			byRobfig++
			if _, end := c.after.In(loc).ZoneBounds(); !end.IsZero() {
				byRobfigDST++
			}
			if !want.Equal(oracle) {
				t.Errorf("reference and robfig disagree on %q after %v in %s: %v vs %v", c.cron, c.after, c.zone, want, oracle)
			} else {
				crossChecked++
			}
			want = oracle
		} else {
			byReference++
		}

		switch {
		case want.IsZero() && got[i] != nil:
			t.Errorf("jobs_cron_next(%q, %s, %s) = %v, want NULL", c.cron, c.after.Format(time.RFC3339Nano), c.zone, got[i])
		case want.IsZero():
			none++
		case got[i] == nil || !got[i].Equal(want):
			t.Errorf("jobs_cron_next(%q, %s, %s) = %v, want %v (robfig: %v)", c.cron, c.after.Format(time.RFC3339Nano),
				c.zone, fmtTime(got[i], loc), want.In(loc), oracle)
		}
	}
	t.Logf("%d cases in %d zones: %d compared with robfig/cron (%d of them in zones with transitions ahead; the reference agreed on %d), "+
		"%d with the reference (%d crossing a zone transition, %d where robfig joins the day fields differently, %d beyond robfig's 5-year horizon); "+
		"%d have no run within ten years",
		n, len(zones), byRobfig, byRobfigDST, crossChecked, byReference, transitions, dayStar, beyondHorizon, none)
	// Most exclusions are transitions: a third of the instants are near one on purpose.
	if byRobfig < n*2/5 {
		t.Errorf("only %d of %d cases compared with robfig/cron", byRobfig, n)
	}
}

func fmtTime(t *time.Time, loc *time.Location) string {
	if t == nil {
		return "NULL"
	}
	return t.In(loc).String()
}

// crossesTransition reports whether loc changes offset or name between the start of
// after's local month (less a day) and the later of the two results. robfig steps through
// absolute time from the first of the month when a month does not match, so a transition
// anywhere in there can change its answer (Casablanca's 2008-06-01 00:00 jump turned its
// July 1 00:38 into 01:38), as can after being a repeated local time.
func crossesTransition(after time.Time, loc *time.Location, a, b time.Time) bool {
	last := a
	if b.After(last) {
		last = b
	}
	local := after.In(loc)
	from := time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, loc).Add(-24 * time.Hour)
	_, end := from.ZoneBounds()
	return !end.IsZero() && !end.After(last)
}

// restricted reports whether day field i (2: day of month, 4: day of week) of a five-field
// expression does not start with '*'. Macros restrict neither (their day fields are '*',
// except @weekly's day of week, whose day of month is '*').
func restricted(expr string, i int) bool {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return false
	}
	return !strings.HasPrefix(fields[i], "*")
}

// timeWildcard reports whether the minute or hour field of an expression starts with '*'
// (Vixie cron's MIN_STAR and HR_STAR), which makes it run in both occurrences of a local
// time repeated at fall-back. Of the macros only @hourly ('0 * * * *') is such.
func timeWildcard(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr == "@hourly"
	}
	fields := strings.Fields(expr)
	return strings.HasPrefix(fields[0], "*") || strings.HasPrefix(fields[1], "*")
}

// dayRuleDiffers reports whether robfig joins the day fields differently from crontab(5),
// which joins them with OR only when neither starts with '*'. robfig joins them with OR
// unless a field has an element '*' or '*/1' anywhere in its list (its star bit, 1<<63),
// so it reads '*/2' as restricted and '2,*/1' as not.
func dayRuleDiffers(spec *cron.SpecSchedule, expr string) bool {
	const starBit = 1 << 63
	robfigOr := spec.Dom&starBit == 0 && spec.Dow&starBit == 0
	return robfigOr != (restricted(expr, 2) && restricted(expr, 4))
}

var (
	monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dayNames   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

// randomCron returns a random expression in the syntax robfig's standard parser and
// jobs_cron_next share.
func randomCron(rng *rand.Rand) string {
	if rng.IntN(20) == 0 {
		return []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}[rng.IntN(7)]
	}
	return strings.Join([]string{
		randomField(rng, 0, 59, nil, 3),
		randomField(rng, 0, 23, nil, 3),
		randomField(rng, 1, 31, nil, 2),
		randomField(rng, 1, 12, monthNames, 2),
		randomField(rng, 0, 6, dayNames, 2),
	}, " ")
}

// randomField returns a field over lo..hi; star weighs how often it is '*'.
func randomField(rng *rand.Rand, lo, hi int, names []string, star int) string {
	value := func(v int) string {
		if names != nil && rng.IntN(3) == 0 {
			name := names[v-lo]
			if rng.IntN(2) == 0 {
				name = strings.ToLower(name)
			}
			return name
		}
		return fmt.Sprint(v)
	}
	element := func() string {
		a := lo + rng.IntN(hi-lo+1)
		b := a + rng.IntN(hi-a+1)
		switch rng.IntN(6) {
		case 0:
			return fmt.Sprintf("*/%d", 1+rng.IntN(max(1, (hi-lo)/2)))
		case 1:
			return fmt.Sprintf("%s-%s", value(a), value(b))
		case 2:
			// jobs_cron_field takes steps up to hi-lo (robfig any): 0-23/24 is not generated.
			return fmt.Sprintf("%s-%s/%d", value(a), value(b), 1+rng.IntN(max(1, min(b-a+1, hi-lo))))
		case 3:
			return fmt.Sprintf("%d/%d", a, 1+rng.IntN(max(1, (hi-lo)/2)))
		default:
			return value(a)
		}
	}
	if rng.IntN(10) < star {
		return "*"
	}
	parts := []string{element()}
	for rng.IntN(3) == 0 {
		parts = append(parts, element())
	}
	return strings.Join(parts, ",")
}

// randomInstant returns an instant between 1990 and 2060 to the microsecond; a third of
// them fall within a day and a half of one of zone's transitions.
func randomInstant(rng *rand.Rand, zone string) time.Time {
	lo := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	hi := time.Date(2060, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	at := time.UnixMicro(lo + rng.Int64N(hi-lo)).UTC()
	if rng.IntN(3) == 0 {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			panic(err)
		}
		if _, end := at.In(loc).ZoneBounds(); !end.IsZero() {
			at = end.Add(time.Duration(rng.Int64N(int64(72*time.Hour))) - 36*time.Hour).Truncate(time.Microsecond)
		}
	}
	// Minute boundaries matter: a run exactly at after is not after it.
	if rng.IntN(4) == 0 {
		at = at.Truncate(time.Minute)
	}
	return at.UTC()
}
