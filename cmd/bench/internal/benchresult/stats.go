package benchresult

import (
	"math"
	"slices"
	"time"
)

// Stats summarises a latency sample. Percentiles are nearest-rank: the smallest value with
// at least p% of the sample at or below it.
type Stats struct {
	N                            int
	Min, P50, P95, P99, Max, Avg time.Duration
}

// Summarize returns the Stats of d, which it leaves unsorted; the zero Stats when d is empty.
func Summarize(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Stats{
		N:   len(s),
		Min: s[0],
		P50: Percentile(s, 50),
		P95: Percentile(s, 95),
		P99: Percentile(s, 99),
		Max: s[len(s)-1],
		Avg: sum / time.Duration(len(s)),
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted, which must
// be sorted ascending and non-empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Round rounds f to places decimal places.
func Round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

// MS converts d to milliseconds rounded to microseconds, the unit of the *_ms fields.
func MS(d time.Duration) float64 { return Round(float64(d)/float64(time.Millisecond), 3) }
