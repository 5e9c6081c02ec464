package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// roundTripFunc is a fake Base for timing tests inside synctest bubbles,
// where a real socket would keep the bubble from going idle.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// respond builds a response with the given status and headers (pairs).
func respond(req *http.Request, status int, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader("body")), Request: req, ProtoMajor: 1, ProtoMinor: 1,
	}
}

// script returns a Base that answers with the given responses in turn
// (the last one repeats) and records when each attempt arrived.
type script struct {
	mu       sync.Mutex
	answers  []func(*http.Request) *http.Response
	arrivals []time.Duration
	start    time.Time
}

func newScript(answers ...func(*http.Request) *http.Response) *script {
	return &script{answers: answers, start: time.Now()}
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(len(s.arrivals), len(s.answers)-1)
	s.arrivals = append(s.arrivals, time.Since(s.start))
	return s.answers[i](r), nil
}

func status(code int, kv ...string) func(*http.Request) *http.Response {
	return func(r *http.Request) *http.Response { return respond(r, code, kv...) }
}

func get(t *testing.T, rt http.RoundTripper) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://api.example/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

// TestTransportRetryAfterFloor checks that a 429's Retry-After is waited
// exactly, in seconds and as a date measured against the response's Date.
func TestTransportRetryAfterFloor(t *testing.T) {
	tests := []struct {
		name string
		kv   func(now time.Time) []string
		want time.Duration
	}{
		{"seconds", func(time.Time) []string { return []string{"Retry-After", "3"} }, 3 * time.Second},
		{"date", func(now time.Time) []string {
			return []string{"Retry-After", now.Add(2 * time.Second).UTC().Format(http.TimeFormat)}
		}, 2 * time.Second},
		{"date with server clock 30s ahead", func(now time.Time) []string {
			srv := now.Add(30 * time.Second)
			return []string{"Date", srv.UTC().Format(http.TimeFormat), "Retry-After", srv.Add(2 * time.Second).UTC().Format(http.TimeFormat)}
		}, 2 * time.Second},
		{"date with server clock 1h behind", func(now time.Time) []string {
			srv := now.Add(-time.Hour)
			return []string{"Date", srv.UTC().Format(http.TimeFormat), "Retry-After", srv.Add(4 * time.Second).UTC().Format(time.RFC850)}
		}, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(func(r *http.Request) *http.Response {
					return respond(r, 429, tt.kv(time.Now())...)
				}, status(200))
				tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 100, Burst: 1}}}}
				resp, err := get(t, tr)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
				}
				resp.Body.Close()
				if len(s.arrivals) != 2 || s.arrivals[1] != tt.want {
					t.Errorf("attempts arrived at %v; want [0s %v]", s.arrivals, tt.want)
				}
			})
		})
	}
}

// TestTransportPauseHoldsOthers checks that after one caller's 429, no
// other caller of the key walks into the same wall.
func TestTransportPauseHoldsOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "Retry-After", "2"), status(200))
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 1000, Burst: 100}}}}
		resp, err := get(t, tr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The first caller retried at 2 s. Now 20 more callers: none
		// arrived before 2 s.
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				resp, err := get(t, tr)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		for i, at := range s.arrivals[1:] {
			if at < 2*time.Second {
				t.Errorf("attempt %d arrived at %v, during the 2s pause", i+2, at)
			}
		}
		if len(s.arrivals) != 22 {
			t.Errorf("%d attempts; want 22", len(s.arrivals))
		}
	})
}

// TestTransportPauseConcurrent checks the same with callers already in
// flight: they wait for the pause instead of collecting 429s.
func TestTransportPauseConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int32
		release := make(chan struct{})
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if sent.Add(1) == 1 {
				<-release // answer once the others hold their turns
				return respond(r, 429, "Retry-After", "1"), nil
			}
			return respond(r, 200), nil
		})
		tr := &Transport{Base: base, Waiter: &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}}
		start := time.Now()
		var wg sync.WaitGroup
		send := func() {
			resp, err := get(t, tr)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}
		wg.Go(send)
		synctest.Wait() // the first request is in flight
		for range 4 {
			wg.Go(send)
		}
		synctest.Wait() // the other four hold turns at 0.1-0.4 s
		close(release)
		wg.Wait()
		if n := sent.Load(); n != 6 {
			t.Errorf("%d attempts for 5 requests and one 429; want 6", n)
		}
		// The 429 comes at 0 s; the 1 s pause holds the four queued turns;
		// the retry goes ahead of them (Cost.Retry) at 1 s, when the
		// bucket holds its burst of 1, and they follow at 10/s trimmed by
		// the 429 (9.9/s: see refused in schedule_ops.go; they do not all go
		// at 1 s): 1.1-1.4 s.
		interval := float64(100 * time.Millisecond)
		step := time.Duration(interval / (1 - schedule.TrimStep))
		if got, want := time.Since(start), time.Second+4*step; got < want-time.Microsecond || got > want+time.Microsecond {
			t.Errorf("5 requests took %v; want %v", got, want)
		}
	})
}

// TestTransportBackoff checks the delays of retries without Retry-After:
// 500ms·2^k each within ±50% (backoff/v4's jitter), and the attempt limit.
func TestTransportBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(503))
		var delays []time.Duration
		var gaveUp Event
		tr := &Transport{Base: s, Retry: RetryPolicy{MaxAttempts: 4}, DisableAdaptive: true, OnEvent: func(e Event) {
			switch e.Kind {
			case EventRetry:
				delays = append(delays, e.Delay)
			case EventGiveUp:
				gaveUp = e
			}
		}}
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the last 503", resp, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "body" {
			t.Errorf("last response's body = %q; want it as received", b)
		}
		resp.Body.Close()
		if len(s.arrivals) != 4 || len(delays) != 3 {
			t.Fatalf("%d attempts, %d retries; want 4, 3", len(s.arrivals), len(delays))
		}
		base := 500 * time.Millisecond
		for i, d := range delays {
			lo, hi := base/2, base*3/2
			if d < lo || d > hi {
				t.Errorf("retry %d delay %v; want in [%v, %v]", i+1, d, lo, hi)
			}
			if got := s.arrivals[i+1] - s.arrivals[i]; got != d {
				t.Errorf("retry %d arrived %v after the previous attempt; want %v", i+1, got, d)
			}
			base *= 2
		}
		if gaveUp.Kind != EventGiveUp || gaveUp.Attempt != 4 || gaveUp.StatusCode != 503 {
			t.Errorf("give-up event = %+v; want attempt 4, status 503", gaveUp)
		}
	})
}

// TestTransportMaxRetryAfter checks that a Retry-After beyond the cap
// returns the response at once and pauses the key for the cap only.
func TestTransportMaxRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "Retry-After", "3600"), status(200))
		tr := &Transport{Base: s, Retry: RetryPolicy{MaxRetryAfter: 10 * time.Second}}
		start := time.Now()
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("RoundTrip = %v, %v; want the 429", resp, err)
		}
		resp.Body.Close()
		if time.Since(start) != 0 {
			t.Errorf("returned after %v; want at once", time.Since(start))
		}
		resp, err = get(t, tr) // the key is paused for 10 s, not an hour
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := time.Since(start), 10*time.Second; got != want {
			t.Errorf("next request sent after %v; want %v", got, want)
		}
	})
}

// TestTransportCancelDuringRetryWait checks that cancelling a request
// while it sleeps before a retry returns at once with ctx's error.
func TestTransportCancelDuringRetryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "Retry-After", "30"))
		var ev events
		tr := &Transport{Base: s, OnEvent: ev.add}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip = %v, %v; want nil, context.Canceled", resp, err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("returned after %v; want 1s, when cancelled", got)
		}
		if g := ev.of(EventGiveUp); len(g) != 1 || g[0].Reason != "context ended" || !errors.Is(g[0].Err, context.Canceled) {
			t.Errorf("give-up events %+v; want one: context ended", g)
		}
	})
}

// TestTransportWaitFails checks that a wait past the deadline sends
// nothing, closes the body and returns an error the http.Client reports as
// a timeout.
func TestTransportWaitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200))
		lim := &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}
		var ev events
		client := &http.Client{Transport: &Transport{Base: s, Waiter: lim, OnEvent: ev.add}}
		lim.For("api.example").WaitN(t.Context(), 1) // spend the burst
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		body := &closeCounter{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://api.example/", body)
		_, err := client.Do(req)
		if !errors.Is(err, ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do = %v; want ErrWouldExceedDeadline and context.DeadlineExceeded", err)
		}
		var te interface{ Timeout() bool }
		if !errors.As(err, &te) || !te.Timeout() {
			t.Errorf("Do = %v; want a Timeout() error", err)
		}
		if len(s.arrivals) != 0 {
			t.Errorf("%d attempts sent; want none", len(s.arrivals))
		}
		if body.closed.Load() != 1 {
			t.Errorf("request body closed %d times; want 1", body.closed.Load())
		}
		if g := ev.of(EventGiveUp); len(g) != 1 || g[0].Reason != "wait for quota failed" || !errors.Is(g[0].Err, ErrWouldExceedDeadline) {
			t.Errorf("give-up events %+v; want one: wait for quota failed", g)
		}
	})
}

type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// TestTransportBudget checks that retries stop at the budget: with a
// failing upstream, retries are at most 20% of requests plus 10.
func TestTransportBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(503))
		var retries, gaveUpBudget int
		tr := &Transport{Base: s, Retry: RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
			DisableAdaptive: true, // this test is about the budget alone
			OnEvent: func(e Event) {
				if e.Kind == EventRetry {
					retries++
				}
				if e.Kind == EventGiveUp && e.Reason == "retry budget spent" {
					gaveUpBudget++
				}
			}}
		for range 100 {
			resp, err := get(t, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if want := 20 + 10; retries != want {
			t.Errorf("%d retries for 100 failing requests; want %d (20%% + 10)", retries, want)
		}
		if gaveUpBudget == 0 {
			t.Error("no request gave up for the budget")
		}
	})
}
