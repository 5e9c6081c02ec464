package throttle

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
	"golang.org/x/time/rate"
)

// turns waits n times on w and returns when each wait ended, from start.
func turns(t *testing.T, w Waiter, n int, start time.Time) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		if err := w.WaitN(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAdaptWindow checks that a server's window is spent locally at each
// wait, that a spent window holds waits until its reset, and that after
// the reset one probe goes through until a response tells the new window.
func TestAdaptWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Limiter // no limit of its own
		b := l.For("k").(Adapter)
		start := time.Now()
		b.Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 3, Reset: 10 * time.Second, Size: 3, Window: 10 * time.Second})
		got := turns(t, l.For("k"), 4, start)
		want := []time.Duration{0, 0, 0, 10 * time.Second} // the 4th is the probe after the reset
		if !equalDurations(got, want) {
			t.Errorf("turns %v; want %v", got, want)
		}
		// The probe's response has not come: others wait for it (up to
		// probeWait), and wake as soon as it comes.
		done := make(chan time.Duration)
		go func() {
			l.For("k").WaitN(t.Context(), 1)
			done <- time.Since(start)
		}()
		time.Sleep(100 * time.Millisecond)
		for range 3 { // the first three requests' answers, saying nothing
			b.Adapt(t.Context(), Feedback{})
		}
		// The probe's answer: the new window.
		b.Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 2, Reset: 10 * time.Second, Size: 3, Window: 10 * time.Second})
		if got, want := <-done, 10100*time.Millisecond; got != want {
			t.Errorf("wait behind the probe ended at %v; want %v, when the new window came", got, want)
		}
	})
}

// TestAdaptWindowProbeCost checks that the probe after a reset fits a
// wait of more than one unit.
func TestAdaptWindowProbeCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Limiter
		w := l.For("k")
		w.(Adapter).Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 0, Reset: 5 * time.Second, Window: time.Minute})
		start := time.Now()
		if err := w.WaitN(t.Context(), 3); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), 5*time.Second; got != want {
			t.Errorf("a 3-unit wait after the reset ended at %v; want %v", got, want)
		}
	})
}

// TestAdaptWindowSpread checks that a window running low is spread over
// the time left to its reset.
func TestAdaptWindowSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Limiter
		b := l.For("k").(Adapter)
		start := time.Now()
		// 4 left of 100 (under a tenth), 8 s to the reset: one every 2 s.
		b.Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 4, Reset: 8 * time.Second, Size: 100, Window: time.Minute})
		got := turns(t, l.For("k"), 4, start)
		want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}
		if !equalDurations(got, want) {
			t.Errorf("turns %v; want %v", got, want)
		}
	})
}

// TestAdaptDeclared checks that a declared policy paces a key with no
// configured limit, and leaves a configured one alone.
func TestAdaptDeclared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Limiter{Overrides: map[string]Rate{"configured": {Limit: 100, Burst: 1}}}
		for _, k := range []string{"declared", "configured"} {
			l.For(k).(Adapter).Adapt(t.Context(), Feedback{HasDeclared: true, DeclaredRate: 2, DeclaredBurst: 2})
		}
		start := time.Now()
		got := turns(t, l.For("declared"), 4, start)
		want := []time.Duration{0, 0, 500 * time.Millisecond, time.Second}
		if !equalDurations(got, want) {
			t.Errorf("declared 2/s burst 2: turns %v; want %v", got, want)
		}
		start = time.Now()
		got = turns(t, l.For("configured"), 3, start)
		want = []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond}
		if !equalDurations(got, want) {
			t.Errorf("configured 100/s: turns %v; want %v (declared ignored)", got, want)
		}
	})
}

// TestAdaptThrottled checks a bare rejection through Adapt: the key slows
// to β of its measured rate at once, also for waits already queued.
func TestAdaptThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Limiter
		w := l.For("k")
		for range 10 { // 10 units in the last second, no limit
			w.WaitN(t.Context(), 1)
		}
		time.Sleep(time.Second - time.Nanosecond)
		w.(Adapter).Adapt(t.Context(), Feedback{Throttled: true})
		// measured 10/s → 7/s right after the cut, regrowing: the next
		// waits come further apart than 1/10 s.
		start := time.Now()
		got := turns(t, w, 3, start)
		if got[1]-got[0] < 100*time.Millisecond || got[2]-got[1] < 100*time.Millisecond {
			t.Errorf("turns after a cut from 10/s: %v; want them more than 100ms apart", got)
		}
		if got[1]-got[0] > 143*time.Millisecond {
			t.Errorf("turns after a cut from 10/s: %v; want at most 1/7 s apart", got)
		}
	})
}

// TestTransportRateLimiterKeepsPauses checks that a plain *rate.Limiter
// as Waiter still has the server's pauses kept for it.
func TestTransportRateLimiterKeepsPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "Retry-After", "2"), status(200))
		tr := &Transport{Base: s, Waiter: rate.NewLimiter(100, 10)}
		resp, err := get(t, tr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				resp, err := get(t, tr)
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		for i, at := range s.arrivals[1:] {
			if at < 2*time.Second {
				t.Errorf("attempt %d at %v, inside the 2s pause", i+2, at)
			}
		}
	})
}

// TestPauseReachesQueuedWaits checks that a pause holds off a wait that
// had already reserved an earlier turn.
func TestPauseReachesQueuedWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1, Burst: 1}
		w := l.For("k")
		w.WaitN(t.Context(), 1)
		start := time.Now()
		done := make(chan time.Duration)
		go func() {
			w.WaitN(t.Context(), 1) // turn at 1 s
			done <- time.Since(start)
		}()
		time.Sleep(100 * time.Millisecond)
		w.(Pauser).Pause(t.Context(), 5*time.Second)
		// The pause holds the queued wait: its turn at 1 s is inside the
		// pause, which ends at 5.1 s with the bucket full again (burst 1):
		// it goes then, not at 1 s.
		if got, want := <-done, 5100*time.Millisecond; got != want {
			t.Errorf("queued wait ended at %v; want %v, moved back by the pause", got, want)
		}
	})
}

// TestFeedback checks what Transport reads from a response for the waiter.
// What remains of the counted unit's most restrictive policy not tracked
// as a window caps the key's bucket (Available).
func TestFeedback(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		status int
		h      map[string]string
		tr     *Transport
		want   Feedback
	}{
		{"bare 429", 429, nil, &Transport{}, Feedback{Throttled: true, Refused: true}},
		{"bare 503", 503, nil, &Transport{}, Feedback{Throttled: true, Refused: true}},
		{"bare 429, adaptive off", 429, nil, &Transport{DisableAdaptive: true}, Feedback{}},
		{"429 with Retry-After", 429, map[string]string{"Retry-After": "3"}, &Transport{}, Feedback{Pause: 3 * time.Second, Refused: true}},
		{"Retry-After on a 200 is not a pause", 200, map[string]string{"Retry-After": "3"}, &Transport{}, Feedback{}},
		{"exhausted window on a 200", 200, map[string]string{"RateLimit-Policy": `"h";q=100;w=60`, "RateLimit": `"h";r=0;t=40`}, &Transport{},
			Feedback{Pause: 40 * time.Second, HasRemaining: true, Remaining: 0, Reset: 40 * time.Second, Size: 100, Window: time.Minute,
				HasDeclared: true, DeclaredRate: rate.Limit(100.0 / 60), DeclaredBurst: 100}},
		{"declared off", 200, map[string]string{"RateLimit-Policy": `"h";q=100;w=60`, "RateLimit": `"h";r=5;t=40`}, &Transport{DisableDeclaredLimits: true},
			Feedback{HasRemaining: true, Remaining: 5, Reset: 40 * time.Second, Size: 100, Window: time.Minute}},
		// A window too short to track is a pace: burst 1, and spent it
		// pauses a waiter that follows the declared pace not at all
		// (Paced), one with a pace of its own until its reset.
		{"per-second window is not tracked", 200, map[string]string{"RateLimit-Policy": `"s";q=10;w=1`, "RateLimit": `"s";r=5;t=1`}, &Transport{},
			Feedback{HasDeclared: true, DeclaredRate: 10, DeclaredBurst: 1, Available: 5, HasAvailable: true}},
		{"a spent per-second window is a pace", 200, map[string]string{"RateLimit-Policy": `"s";q=10;w=1`, "RateLimit": `"s";r=0;t=1`}, &Transport{},
			Feedback{Paced: true, HasDeclared: true, DeclaredRate: 10, DeclaredBurst: 1, HasAvailable: true}},
		{"tokens ignored when Cost counts requests", 200, map[string]string{
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s"}, &Transport{},
			Feedback{Pause: 30 * time.Second}},
		// MaxRetryAfter caps the pause (one wait the server asks for), not
		// the window: what remains of it is spread over its whole time.
		{"a long window keeps its reset; its pause is capped", 200, map[string]string{"RateLimit-Policy": `"y";q=1;w=31000000`, "RateLimit": `"y";r=0;t=30000000`}, &Transport{},
			Feedback{Pause: time.Minute, HasRemaining: true, Remaining: 0, Reset: 30000000 * time.Second, Size: 1, Window: 31000000 * time.Second}},
		{"GitHub's hour: 450 left for 50 min", 200, map[string]string{"Date": now.UTC().Format(http.TimeFormat),
			"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "450", "X-RateLimit-Reset": strconv.FormatInt(now.Unix()+3000, 10)}, &Transport{},
			Feedback{HasRemaining: true, Remaining: 450, Reset: 3000 * time.Second, Size: 5000}},
		{"a token bucket's short reset is not a window", 200, map[string]string{"Date": now.UTC().Format(http.TimeFormat),
			"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": strconv.FormatInt(now.Unix()+2, 10)}, &Transport{},
			Feedback{Available: 3, HasAvailable: true}},
		// A bucket that refills (OpenAI: the reset is the time until full)
		// is no window: its rate paces the key, and a spent one pauses it
		// for one unit's refill, not until full; what it holds caps the
		// key's bucket (Available).
		{"tokens counted: a refilling bucket paces at its rate", 200, map[string]string{
			"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "5798", "x-ratelimit-reset-tokens": "2.02s"}, &Transport{CostUnit: "tokens"},
			Feedback{HasDeclared: true, DeclaredRate: 100, DeclaredBurst: 6000, Available: 5798, HasAvailable: true}},
		{"a spent refilling bucket pauses one unit's refill", 200, map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "59.833s"}, &Transport{},
			Feedback{Pause: time.Second, HasDeclared: true, DeclaredRate: 1, DeclaredBurst: 60, HasAvailable: true}},
		{"a refilling bucket's numbers of no standard length", 200, map[string]string{
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "10", "x-ratelimit-reset-tokens": "30s"}, &Transport{CostUnit: "tokens"},
			Feedback{Available: 10, HasAvailable: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := make(http.Header)
			for k, v := range tt.h {
				h.Set(k, v)
			}
			resp := &http.Response{StatusCode: tt.status, Header: h}
			got, _, _ := tt.tr.feedback(resp, ratelimit.Parse(h, now), 0, true)
			if got != tt.want {
				t.Errorf("feedback =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// FuzzFeedback checks that no response, however hostile its headers, makes
// the Transport ask a waiter for a pause longer than MaxRetryAfter, or a
// negative one, and that applying it never panics.
func FuzzFeedback(f *testing.F) {
	f.Add(429, "Retry-After", "3600", "RateLimit", `"a";r=0;t=99999999`)
	f.Add(200, "RateLimit-Policy", `"y";q=1;w=31000000`, "RateLimit", `"y";r=0;t=30000000`)
	f.Add(200, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999999")
	f.Add(503, "x-ratelimit-reset-requests", "2m59.56s", "x-ratelimit-remaining-requests", "-1")
	f.Add(200, "RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "NaN")
	f.Add(200, "x-ratelimit-remaining-tokens", "5000", "x-ratelimit-limit-tokens", "6000")
	f.Add(200, "X-RateLimit-Remaining-Tokens", "1", "X-Ratelimit-Limit-Tokens", "9223372036854775807")
	f.Fuzz(func(t *testing.T, status int, k1, v1, k2, v2 string) {
		h := http.Header{}
		h.Add(k1, v1)
		h.Add(k2, v2)
		tr := &Transport{Retry: RetryPolicy{MaxRetryAfter: 10 * time.Second}}
		limit := tr.Retry.maxRetryAfter()
		// Through the other units' estimate too: the response with the
		// first field, then both, a second later (a fall to learn from).
		now := time.Now()
		h1 := http.Header{}
		h1.Add(k1, v1)
		tr.learned.Read("k", ratelimit.Parse(h1, now), "requests", 1, false, now)
		q := tr.learned.Read("k", ratelimit.Parse(h, now.Add(time.Second)), "requests", 1, false, now.Add(time.Second))
		for _, p := range q.Policies {
			if p.Limit < 0 || p.Remaining < 0 || p.Reset < 0 || p.Window < 0 {
				t.Fatalf("policy %+v: a negative number", p)
			}
		}
		fb, _, _ := tr.feedback(&http.Response{StatusCode: status, Header: h}, q, 0, true)
		if fb.HasAvailable && (fb.Available < 0 || math.IsNaN(fb.Available)) {
			t.Fatalf("feedback %+v: Available negative or NaN", fb)
		}
		// A window's reset is not capped (it is spread over, not waited
		// for), but parsing bounds it at a year.
		if fb.Pause < 0 || fb.Pause > limit || fb.Reset < 0 || fb.Reset > 366*24*time.Hour || fb.Remaining < 0 {
			t.Fatalf("feedback %+v: a pause outside [0, %v], a reset outside a year, or negative remaining", fb, limit)
		}
		if fb.HasDeclared && (fb.DeclaredRate <= 0 || time.Duration(float64(time.Second)/float64(fb.DeclaredRate)) > limit || fb.DeclaredBurst < 1) {
			t.Fatalf("feedback %+v: a declared pace slower than one per %v", fb, limit)
		}
		var l Limiter
		if err := l.For("k").(Adapter).Adapt(t.Context(), fb); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFeedbackRetryDelay checks when a response's wait sets the retry
// delay (said) and when the backoff decides.
func TestFeedbackRetryDelay(t *testing.T) {
	tests := []struct {
		name   string
		status int
		h      map[string]string
		wait   time.Duration
		said   bool
	}{
		{"429 Retry-After", 429, map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{"503 Retry-After 0 means now", 503, map[string]string{"Retry-After": "0"}, 0, true},
		{"Retry-After on a 200 is advice for it alone", 200, map[string]string{"Retry-After": "3"}, 0, false},
		{"Retry-After on a 502 is advice for it alone", 502, map[string]string{"Retry-After": "3600"}, 0, false},
		{"429 saying quota remains: the backoff decides", 429, map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "5"}, 0, false},
		{"spent quota's reset on a 200", 200, map[string]string{"RateLimit-Policy": `"h";q=100;w=60`, "RateLimit": `"h";r=0;t=40`}, 40 * time.Second, true},
		{"bare 429", 429, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := make(http.Header)
			for k, v := range tt.h {
				h.Set(k, v)
			}
			_, wait, said := (&Transport{}).feedback(&http.Response{StatusCode: tt.status, Header: h}, ratelimit.Parse(h, time.Now()), 0, true)
			if wait != tt.wait || said != tt.said {
				t.Errorf("feedback wait, said = %v, %v; want %v, %v", wait, said, tt.wait, tt.said)
			}
		})
	}
}
