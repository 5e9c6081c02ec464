package learn

import (
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

func TestWindowFromResets(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type resp struct {
		at    time.Duration // from the first response
		reset time.Duration
	}
	tests := []struct {
		name  string
		resps []resp
		want  time.Duration // 0: none yet
	}{
		// A short window is told from the first response.
		{"one response tells a short window", []resp{{0, time.Second}}, time.Second},
		{"a long reset withdraws it", []resp{{0, time.Second}, {1500 * time.Millisecond, 59 * time.Second}}, 0},
		// httprate: the reset is the end of the current second.
		{"a second's window, once a second has passed", []resp{{0, time.Second}, {500 * time.Millisecond, time.Second}, {time.Second, time.Second}}, time.Second},
		{"before it is spanned", []resp{{0, time.Second}, {999 * time.Millisecond, time.Second}}, time.Second},
		// A fixed minute first seen 20 s before its end: 20 s is no
		// window until 20 s have passed, by when the next one began.
		{"a minute first seen near its end", []resp{{0, 20 * time.Second}, {19 * time.Second, time.Second}, {21 * time.Second, 59 * time.Second}, {50 * time.Second, 30 * time.Second}}, 0},
		// … and not told even once the responses span it: a window that
		// long paces the key by what remains until its reset.
		{"a minute is tracked, not told", []resp{{0, 20 * time.Second}, {21 * time.Second, 59 * time.Second}, {59 * time.Second, 21 * time.Second}, {80 * time.Second, time.Second}, {81 * time.Second, 60 * time.Second}}, 0},
		// A rolling window gives its length at every response.
		{"a rolling second", []resp{{0, time.Second}, {300 * time.Millisecond, time.Second}, {time.Second, time.Second}}, time.Second},
		// Resets finer than a second are seen after their window began.
		{"a fine reset rounds up to whole seconds", []resp{{0, 980 * time.Millisecond}, {time.Second, 990 * time.Millisecond}}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Keys
			var q ratelimit.Reading
			for _, r := range tt.resps {
				q = l.Read("api", ratelimit.Reading{Policies: []ratelimit.Policy{{Limit: 50, Remaining: 10, Reset: r.reset,
					HasLimit: true, HasRemaining: true, HasReset: true}}}, "requests", 1, false, t0.Add(r.at))
			}
			p := q.Policies[0]
			switch {
			case tt.want == 0 && p.HasWindow:
				t.Errorf("window %v; want none yet", p.Window)
			case tt.want != 0 && (!p.HasWindow || p.Window != tt.want):
				t.Errorf("window %v (%v); want %v", p.Window, p.HasWindow, tt.want)
			}
		})
	}
}

func TestWindowFromResetsSpent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(l *Keys, at, reset time.Duration, left int64) ratelimit.Policy {
		return l.Read("api", ratelimit.Reading{Policies: []ratelimit.Policy{{Limit: 5, Remaining: left, Reset: reset,
			HasLimit: true, HasRemaining: true, HasReset: true}}}, "requests", 1, false, t0.Add(at)).Policies[0]
	}
	var l Keys
	if p := read(&l, 0, 50*time.Millisecond, 0); p.HasWindow {
		t.Errorf("a spent window, first response: window %v; want none", p.Window)
	}
	var l2 Keys
	read(&l2, 0, time.Second, 3)
	if p := read(&l2, time.Second, time.Second, 0); !p.HasWindow || p.Window != time.Second {
		t.Errorf("a spent window, spanned: window %v (%v); want 1s", p.Window, p.HasWindow)
	}
}

func TestWindowFromResetsKeepsStated(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l Keys
	stated := ratelimit.Policy{Limit: 100, Remaining: 5, Reset: 30 * time.Second, Window: 10 * time.Minute,
		HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}
	bare := ratelimit.Policy{Name: "b", Limit: 10, Remaining: 5, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
	q := ratelimit.Reading{Policies: []ratelimit.Policy{stated, bare}}
	l.Read("api", q, "requests", 1, false, t0)
	got := l.Read("api", q, "requests", 1, false, t0.Add(2*time.Second))
	if got.Policies[0] != stated {
		t.Errorf("stated window changed: %+v", got.Policies[0])
	}
	if !got.Policies[1].HasWindow || got.Policies[1].Window != time.Second {
		t.Errorf("bare policy = %+v; want a window of 1s", got.Policies[1])
	}
	if q.Policies[1].HasWindow {
		t.Errorf("the caller's Reading was changed: %+v", q.Policies[1])
	}
}
