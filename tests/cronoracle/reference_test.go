package cronoracle

import (
	"slices"
	"time"

	"github.com/robfig/cron/v3"
)

// reference is skiplock's cron rules written plainly in Go, over the field sets robfig
// parsed: a local minute matches when its minute, hour and month bits are set and its day
// matches (either day field when both are restricted, both otherwise); a local time the
// clocks skip runs at the first local minute after it that exists; a repeated one runs at
// its first occurrence, and also at its later ones when the minute or hour field starts
// with '*' (timeWildcard: Vixie cron's rule). It walks every minute of every candidate day
// and takes the earliest instant after after among all the runs of all the minutes near
// it, so it is slow but obviously right.
type reference struct {
	spec                         *cron.SpecSchedule
	domRestricted, dowRestricted bool
	timeWildcard                 bool
}

// next returns the first instant after after, or the zero time when there is none within
// ten years.
func (r reference) next(after time.Time, loc *time.Location) time.Time {
	// Wall-clock times are handled as UTC times with those fields. A run of wall time w is
	// later than after only if w is later than after's wall time less the largest change
	// of offset (an hour in the zones tested; Vixie's rules, and skiplock's, count jumps up
	// to three hours as DST), so the walk starts three hours before after's wall time and
	// stops three hours past the wall time of the best run found.
	local := after.In(loc)
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), 0, 0, time.UTC)
	from := wall.Add(-3 * time.Hour)
	day := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	start := from.Hour()*60 + from.Minute()
	var best time.Time
	var stop time.Time
	for range 3663 {
		if !best.IsZero() && day.After(stop) {
			break
		}
		if r.spec.Month&(1<<uint(day.Month())) != 0 && r.dayMatches(day) {
			for m := start; m < 24*60; m++ {
				h, mi := m/60, m%60
				if r.spec.Hour&(1<<uint(h)) == 0 || r.spec.Minute&(1<<uint(mi)) == 0 {
					continue
				}
				for _, at := range r.runs(day.Year(), day.Month(), day.Day(), h, mi, loc) {
					if at.After(after) && (best.IsZero() || at.Before(best)) {
						best = at
						bl := best.In(loc)
						stop = time.Date(bl.Year(), bl.Month(), bl.Day(), bl.Hour(), bl.Minute(), 0, 0, time.UTC).Add(3 * time.Hour)
					}
				}
			}
		}
		day = day.AddDate(0, 0, 1)
		start = 0
	}
	return best
}

// runs returns the instants at which the local wall-clock minute y-mo-d h:mi runs: every
// occurrence for a wildcard expression, the first otherwise, or, when the clocks skip it,
// the first existing local minute after it.
func (r reference) runs(y int, mo time.Month, d, h, mi int, loc *time.Location) []time.Time {
	all := occurrences(time.Date(y, mo, d, h, mi, 0, 0, time.UTC), loc)
	switch {
	case len(all) == 0:
		return []time.Time{instant(y, mo, d, h, mi, loc)}
	case r.timeWildcard:
		return all
	default:
		return all[:1]
	}
}

func (r reference) dayMatches(day time.Time) bool {
	dom := r.spec.Dom&(1<<uint(day.Day())) != 0
	dow := r.spec.Dow&(1<<uint(day.Weekday())) != 0
	if r.domRestricted && r.dowRestricted {
		return dom || dow
	}
	return dom && dow
}

// instant is when the local wall-clock minute y-mo-d h:mi happens in loc: its first
// occurrence, or, when the clocks skip it, the first existing local minute after it.
func instant(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	for skipped := range 48 * 60 {
		wall := time.Date(y, mo, d, h, mi+skipped, 0, 0, time.UTC)
		if at, ok := firstOccurrence(wall, loc); ok {
			return at
		}
	}
	panic("no existing local time within two days")
}

// firstOccurrence finds the earliest instant whose wall clock in loc reads wall (given as
// a UTC time with those fields), trying every offset in force within a day of it.
func firstOccurrence(wall time.Time, loc *time.Location) (time.Time, bool) {
	var best time.Time
	found := false
	for probe := -26; probe <= 26; probe++ {
		_, offset := wall.Add(time.Duration(probe) * time.Hour).In(loc).Zone()
		at := wall.Add(-time.Duration(offset) * time.Second)
		w := at.In(loc)
		if w.Year() == wall.Year() && w.Month() == wall.Month() && w.Day() == wall.Day() &&
			w.Hour() == wall.Hour() && w.Minute() == wall.Minute() && w.Second() == 0 {
			if !found || at.Before(best) {
				best, found = at, true
			}
		}
	}
	return best, found
}

// occurrences returns, earliest first, every instant whose wall clock in loc reads wall
// (given as a UTC time with those fields), trying the offset of every zone period in force
// within 26 hours of it.
func occurrences(wall time.Time, loc *time.Location) []time.Time {
	var all []time.Time
	for t, periods := wall.Add(-26*time.Hour), 0; periods < 8; periods++ {
		z := t.In(loc)
		_, offset := z.Zone()
		at := wall.Add(-time.Duration(offset) * time.Second)
		w := at.In(loc)
		if w.Year() == wall.Year() && w.Month() == wall.Month() && w.Day() == wall.Day() &&
			w.Hour() == wall.Hour() && w.Minute() == wall.Minute() && w.Second() == 0 && !slices.ContainsFunc(all, at.Equal) {
			all = append(all, at)
		}
		_, end := z.ZoneBounds()
		if end.IsZero() || !end.After(t) || end.After(wall.Add(26*time.Hour)) {
			break
		}
		t = end
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	return all
}
