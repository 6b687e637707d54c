package ui

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Microsecond:            "2ms",
		1234 * time.Millisecond:            "1.2s",
		time.Minute:                        "1m",
		2*time.Minute + 10*time.Second:     "2m10s",
		5*time.Hour + 6*time.Minute:        "5h6m",
		50*time.Hour + 10*time.Minute:      "2d2h",
		15 * time.Minute:                   "15m",
		59*time.Minute + 59*time.Second:    "59m59s",
		3*time.Hour + 100*time.Millisecond: "3h0m",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := rates([]sample{
		{at: t0, created: 100, live: 10},
		{at: t0.Add(30 * time.Second), created: 160, live: 20}, // 60 created, 50 finished in half a minute
		{at: t0.Add(90 * time.Second), created: 160, live: 30}, // 10 retried: no finishing, not negative
	})
	if len(got) != 2 || got[0].created != 120 || got[0].finished != 100 || got[1].created != 0 || got[1].finished != 0 {
		t.Fatalf("rates = %+v, want 120 and 100 per minute, then 0 and 0", got)
	}
}

func TestCSRFToken(t *testing.T) {
	s := &csrfSigner{secret: []byte("0123456789abcdef0123456789abcdef"), ttl: time.Hour}
	now := time.Now()
	tok := s.token("/queues/pause", now)
	if !s.valid(tok, "/queues/pause", now) {
		t.Fatal("a fresh token is not valid")
	}
	if s.valid(tok, "/queues/resume", now) {
		t.Error("a token is valid for another action")
	}
	if s.valid(tok, "/queues/pause", now.Add(2*time.Hour)) {
		t.Error("an expired token is valid")
	}
	for _, bad := range []string{"", ".", "x.y", "99999999999.", tok + "A"} {
		if s.valid(bad, "/queues/pause", now) {
			t.Errorf("token %q is valid", bad)
		}
	}
}
