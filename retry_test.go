package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// events collects what a Transport reports, safe for concurrent use.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// of returns the events of kind k.
func (e *events) of(k EventKind) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// TestTransportSecondaryLimit checks GitHub's secondary rate limits: a 403
// with Retry-After, or with x-ratelimit-remaining 0 and a reset, pauses
// the key and is retried after the wait; a plain 403 is an answer.
func TestTransportSecondaryLimit(t *testing.T) {
	tests := []struct {
		name     string
		kv       func(now time.Time) []string
		arrivals []time.Duration
		status   int
	}{
		{"retry-after", func(time.Time) []string { return []string{"Retry-After", "2"} },
			[]time.Duration{0, 2 * time.Second}, 200},
		// GitHub's reset is in epoch seconds, which a synctest bubble's
		// clock (in 2000) cannot tell from a delay: a delay here.
		{"remaining 0 and a reset", func(now time.Time) []string {
			return []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3"}
		}, []time.Duration{0, 3 * time.Second}, 200},
		{"plain 403", func(time.Time) []string { return nil }, []time.Duration{0}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(func(r *http.Request) *http.Response {
					return respond(r, 403, tt.kv(time.Now())...)
				}, status(200))
				var ev events
				tr := &Transport{Base: s, OnEvent: ev.add}
				resp, err := get(t, tr)
				if err != nil || resp.StatusCode != tt.status {
					t.Fatalf("RoundTrip = %v, %v; want %d", resp, err, tt.status)
				}
				resp.Body.Close()
				if !slices.Equal(s.arrivals, tt.arrivals) {
					t.Errorf("attempts arrived at %v; want %v", s.arrivals, tt.arrivals)
				}
				if len(tt.arrivals) == 1 {
					if len(ev.all) != 0 {
						t.Errorf("events %+v; want none for an answer", ev.all)
					}
					return
				}
				want := tt.arrivals[1]
				if p := ev.of(EventPause); len(p) != 1 || p[0].Delay != want || p[0].StatusCode != 403 {
					t.Errorf("pause events %+v; want one of %v", p, want)
				}
				// Another caller of the key holds off too.
				resp, err = get(t, tr)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := s.arrivals[2]; got < want {
					t.Errorf("next request sent at %v; want after the pause, %v", got, want)
				}
			})
		})
	}
}

// TestTransportGiveUpEvents checks that each request that fails and is not
// retried reports one EventGiveUp with its reason, and an answer that is
// not a failure reports nothing.
func TestTransportGiveUpEvents(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		status   []int
		header   []string // on every response
		noRewind bool     // a streamed body, without GetBody
		attempts int
		reason   string // "" for no EventGiveUp
	}{
		{name: "500 on POST", method: "POST", status: []int{500, 200}, attempts: 1, reason: "method is not idempotent"},
		{name: "503 on POST", method: "POST", status: []int{503, 200}, attempts: 1, reason: "method is not idempotent"},
		{name: "429 on POST with a streamed body", method: "POST", status: []int{429, 200}, noRewind: true, attempts: 1, reason: "request body cannot be replayed"},
		{name: "501 on GET", method: "GET", status: []int{501, 200}, attempts: 1, reason: "status is not retried"},
		{name: "500 on GET retried", method: "GET", status: []int{500, 200}, attempts: 2},
		{name: "404 is an answer", method: "GET", status: []int{404, 200}, attempts: 1},
		{name: "429 with x-should-retry false", method: "GET", status: []int{429, 200}, header: []string{"X-Should-Retry", "false"},
			attempts: 1, reason: "server said x-should-retry: false"},
		{name: "500 on POST with x-should-retry true", method: "POST", status: []int{500, 200}, header: []string{"X-Should-Retry", "true"}, attempts: 2},
		{name: "budget of attempts", method: "GET", status: []int{503}, attempts: 2, reason: "MaxAttempts reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var answers []func(*http.Request) *http.Response
				for _, code := range tt.status {
					answers = append(answers, status(code, tt.header...))
				}
				s := newScript(answers...)
				var ev events
				tr := &Transport{Base: s, Retry: RetryPolicy{MaxAttempts: 2}, DisableAdaptive: true, OnEvent: ev.add}
				var body io.Reader = strings.NewReader("payload")
				if tt.noRewind {
					body = io.NopCloser(body)
				}
				req, _ := http.NewRequestWithContext(t.Context(), tt.method, "http://api.example/x", body)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if len(s.arrivals) != tt.attempts {
					t.Errorf("%d attempts; want %d", len(s.arrivals), tt.attempts)
				}
				g := ev.of(EventGiveUp)
				switch {
				case tt.reason == "" && len(g) != 0:
					t.Errorf("give-up events %+v; want none", g)
				case tt.reason != "" && (len(g) != 1 || g[0].Reason != tt.reason || g[0].StatusCode != resp.StatusCode):
					t.Errorf("give-up events %+v; want one with reason %q, status %d", g, tt.reason, resp.StatusCode)
				}
			})
		})
	}
}

// TestTransportMaxElapsedIncludesWaits checks that MaxElapsed bounds the
// quota wait of a retry too: a retry whose turn comes after it gives up
// with the last response, at once, reserving nothing.
func TestTransportMaxElapsedIncludesWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(503), status(200))
		lim := &Limiter{Limits: []Limit{{Rate: rate.Every(30 * time.Second), Burst: 1}}}
		var ev events
		tr := &Transport{Base: s, Waiter: lim, DisableAdaptive: true, OnEvent: ev.add,
			Retry: RetryPolicy{MaxElapsed: time.Second, InitialInterval: 200 * time.Millisecond, MaxInterval: 200 * time.Millisecond}}
		start := time.Now()
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the 503", resp, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "body" {
			t.Errorf("last response's body = %q; want it whole", b)
		}
		resp.Body.Close()
		if len(s.arrivals) != 1 {
			t.Errorf("attempts at %v; want 1, the retry's turn is 30s away", s.arrivals)
		}
		r := ev.of(EventRetry)
		if len(r) != 1 {
			t.Fatalf("retry events %+v; want 1", r)
		}
		if got := time.Since(start); got != r[0].Delay {
			t.Errorf("gave up after %v; want %v, once the backoff ended", got, r[0].Delay)
		}
		if g := ev.of(EventGiveUp); len(g) != 1 || g[0].Reason != "MaxElapsed reached" || g[0].StatusCode != 503 {
			t.Errorf("give-up events %+v; want MaxElapsed reached with the 503", g)
		}
	})
}

// stallBody is a response body that sends a little and then nothing, until
// closed.
type stallBody struct {
	sent   bool
	closed chan struct{}
	once   sync.Once
}

func (b *stallBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "{\"error\":"), nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *stallBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestTransportStalledBody checks that a 429 whose body stalls does not
// hold RoundTrip: the retry goes at its Retry-After, and the stalled body
// is closed.
func TestTransportStalledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stalled := &stallBody{closed: make(chan struct{})}
		s := newScript(func(r *http.Request) *http.Response {
			resp := respond(r, 429, "Retry-After", "1")
			resp.Body = stalled
			return resp
		}, status(200))
		tr := &Transport{Base: s}
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
		if want := []time.Duration{0, time.Second}; !slices.Equal(s.arrivals, want) {
			t.Errorf("attempts at %v; want %v", s.arrivals, want)
		}
		select {
		case <-stalled.closed:
		default:
			t.Error("stalled body not closed")
		}
	})
}

// TestTransportResponseAndError checks that a Base breaking the
// RoundTripper contract (a response and an error) does not leak the body:
// it is closed, and only the error is returned.
func TestTransportResponseAndError(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("x")}
	boom := errors.New("boom")
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp := respond(r, 502)
		resp.Body = body
		return resp, boom
	})
	var ev events
	tr := &Transport{Base: base, OnEvent: ev.add}
	resp, err := get(t, tr)
	if resp != nil || !errors.Is(err, boom) {
		t.Errorf("RoundTrip = %v, %v; want nil, boom", resp, err)
	}
	if n := body.closed.Load(); n != 1 {
		t.Errorf("body closed %d times; want 1", n)
	}
	if g := ev.of(EventGiveUp); len(g) != 1 || !errors.Is(g[0].Err, boom) {
		t.Errorf("give-up events %+v; want one with the error", g)
	}
}

// TestTransportDeadlineLeavesNoTime checks that a turn that would leave
// less time before the deadline than the fastest recent round trip is not
// sent: the request fails at once with the deadline error and reserves
// nothing.
func TestTransportDeadlineLeavesNoTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []time.Duration
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			mu.Unlock()
			select {
			case <-time.After(100 * time.Millisecond): // the server's time
				return respond(r, 200), nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		})
		tr := &Transport{Base: base, Waiter: &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}}
		resp, err := get(t, tr) // turn at 0, answered at 0.1 s
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Next turn at 1 s; the deadline at 1.05 s leaves 50 ms, less than
		// the 100 ms a round trip takes.
		ctx, cancel := context.WithDeadline(t.Context(), start.Add(1050*time.Millisecond))
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/x", nil)
		before := time.Now()
		resp, err = tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RoundTrip = %v, %v; want ErrWouldExceedDeadline", resp, err)
		}
		if got := time.Since(before); got != 0 {
			t.Errorf("failed after %v; want at once", got)
		}
		// Nothing was reserved: the next request has the 1 s turn.
		resp, err = get(t, tr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := []time.Duration{0, time.Second}; !slices.Equal(sent, want) {
			t.Errorf("sent at %v; want %v", sent, want)
		}
		// Quota is free at 2.1 s, but a 50 ms timeout is shorter than a
		// round trip: not sent either.
		time.Sleep(time.Second)
		ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, "GET", "http://api.example/x", nil)
		if resp, err = tr.RoundTrip(req); resp != nil || !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("RoundTrip with 50ms left = %v, %v; want ErrWouldExceedDeadline", resp, err)
		}
		if len(sent) != 2 {
			t.Errorf("sent at %v; want nothing more", sent)
		}
	})
}

// TestTransportKeyNormalised checks that the default key is one quota for
// the spellings of one host: case and the scheme's default port.
func TestTransportKeyNormalised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200))
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}}
		for _, u := range []string{"https://api.example.com/a", "https://API.example.com/b", "https://api.example.com:443/c"} {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", u, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second}; !slices.Equal(s.arrivals, want) {
			t.Errorf("sent at %v; want %v, one quota", s.arrivals, want)
		}
	})
}

// TestTransportRetryPastDeadline checks that a retry whose turn for quota
// comes after the request's deadline is given up before it is sent, and
// the last response returned.
func TestTransportRetryPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "Retry-After", "0"), status(200))
		var ev events
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}, OnEvent: ev.add}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/x", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("RoundTrip = %v, %v; want the 429", resp, err)
		}
		resp.Body.Close()
		if len(s.arrivals) != 1 {
			t.Errorf("attempts at %v; want 1: the retry's turn is at 1s, past the deadline", s.arrivals)
		}
		if g := ev.of(EventGiveUp); len(g) != 1 || g[0].Reason != "context deadline before the retry" || g[0].StatusCode != 429 || g[0].Attempt != 1 {
			t.Errorf("give-up events %+v; want one: context deadline before the retry, with the 429", g)
		}
	})
}

// TestTransportOverridesNormalised checks that an override written as
// HostKey writes it applies to every spelling of the host.
func TestTransportOverridesNormalised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200))
		lim := &Limiter{Limits: []Limit{{Rate: 100, Burst: 100}}, Overrides: map[string][]Limit{"api.example.com": {{Rate: 1, Burst: 1}}}}
		tr := &Transport{Base: s, Waiter: lim}
		for _, u := range []string{"https://API.example.com:443/a", "https://api.EXAMPLE.com/b"} {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", u, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if want := []time.Duration{0, time.Second}; !slices.Equal(s.arrivals, want) {
			t.Errorf("sent at %v; want %v, the override's pace", s.arrivals, want)
		}
	})
}

// TestTransportPermanent429 checks that a 429 the server marks permanent
// (x-should-retry: false, as OpenAI's insufficient_quota) is returned at
// once and does not slow the key down: retrying or pacing cannot help.
func TestTransportPermanent429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(429, "X-Should-Retry", "false"))
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}}
		for range 5 {
			resp, err := get(t, tr)
			if err != nil || resp.StatusCode != 429 {
				t.Fatalf("RoundTrip = %v, %v; want the 429", resp, err)
			}
			resp.Body.Close()
		}
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
		if !slices.Equal(s.arrivals, want) {
			t.Errorf("sent at %v; want %v, the configured pace", s.arrivals, want)
		}
	})
}

// TestRetriesWaitFailed checks the give-up that follows a failed wait for
// quota: a retry refused at a bound answers with the last response; else
// the request fails, for its context, its waiter, or the bound.
func TestRetriesWaitFailed(t *testing.T) {
	live, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended, end := context.WithCancel(context.Background())
	end()
	tests := []struct {
		name       string
		ctx        context.Context
		attempt    int
		bound      string
		last       bool
		wantAnswer bool
		wantReason string
	}{
		{"retry past MaxElapsed answers with the last response", live, 2, reasonMaxElapsed, true, true, reasonMaxElapsed},
		{"retry past the deadline answers with the last response", ended, 3, reasonDeadline, true, true, reasonDeadline},
		{"context ended", ended, 2, "", true, false, reasonContextEnded},
		{"first attempt refused at the deadline", live, 1, reasonDeadline, false, false, reasonWaitFailed},
		{"waiter's own failure", live, 2, "", false, false, reasonWaitFailed},
		{"retry refused with nothing kept", live, 2, reasonMaxElapsed, false, false, reasonMaxElapsed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(tt.ctx, "GET", "http://api.example/", nil)
			rs := &retries{t: &Transport{}, req: req, start: time.Now()}
			answer, reason := rs.waitFailed(tt.attempt, tt.bound, tt.last)
			if answer != tt.wantAnswer || reason != tt.wantReason {
				t.Errorf("waitFailed(%d, %q, %v) = %v, %q; want %v, %q", tt.attempt, tt.bound, tt.last, answer, reason, tt.wantAnswer, tt.wantReason)
			}
		})
	}
}
