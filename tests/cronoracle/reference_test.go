package cronoracle

import (
	"time"

	"github.com/robfig/cron/v3"
)

// reference is skiplock's cron rules written plainly in Go, over the field sets robfig
// parsed: a local minute matches when its minute, hour and month bits are set and its day
// matches (either day field when both are restricted, both otherwise); a local time the
// clocks skip runs at the first local minute after it that exists, a repeated one at its
// first occurrence. It walks every minute of every candidate day, so it is slow but
// obviously right.
type reference struct {
	spec                         *cron.SpecSchedule
	domRestricted, dowRestricted bool
}

// next returns the first instant after after, or the zero time when there is none within
// ten years.
func (r reference) next(after time.Time, loc *time.Location) time.Time {
	local := after.In(loc)
	// Civil dates are walked in UTC, where every day has 24 hours.
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	start := local.Hour()*60 + local.Minute() + 1
	for range 3661 {
		if r.spec.Month&(1<<uint(day.Month())) != 0 && r.dayMatches(day) {
			for m := start; m < 24*60; m++ {
				h, mi := m/60, m%60
				if r.spec.Hour&(1<<uint(h)) == 0 || r.spec.Minute&(1<<uint(mi)) == 0 {
					continue
				}
				if at := instant(day.Year(), day.Month(), day.Day(), h, mi, loc); at.After(after) {
					return at
				}
			}
		}
		day = day.AddDate(0, 0, 1)
		start = 0
	}
	return time.Time{}
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
