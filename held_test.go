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

	"github.com/throttle-go/throttle/internal/schedule"
)

// okResponse returns a 200 response whose body is text.
func okResponse(r *http.Request, text string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(text)), Request: r}
}

// TestTransportHoldsSlot: through a Transport, an attempt holds its slot
// until its response body is closed, read to EOF, or fails, a transport
// error, or its context's end; the next request goes at that instant.
func TestTransportHoldsSlot(t *testing.T) {
	cases := []struct {
		name string
		// end ends the first request a second after its response (resp
		// nil if it failed); cancel is its context's.
		end     func(resp *http.Response, cancel context.CancelFunc)
		fail    bool // the first attempt fails with a transport error
		release time.Duration
	}{
		{name: "body closed", end: func(resp *http.Response, _ context.CancelFunc) { resp.Body.Close() }, release: time.Second},
		{name: "read to EOF", end: func(resp *http.Response, _ context.CancelFunc) { io.ReadAll(resp.Body) }, release: time.Second},
		{name: "context ended", end: func(_ *http.Response, cancel context.CancelFunc) { cancel() }, release: time.Second},
		{name: "transport error", fail: true, release: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					calls++
					if tc.fail && calls == 1 {
						return nil, errors.New("connection reset")
					}
					return okResponse(r, "answer"), nil
				})
				var events []Event
				var mu sync.Mutex
				tr := &Transport{Base: base, Waiter: &Limiter{InFlight: 1},
					Retry: RetryPolicy{Classify: func(Outcome) Decision { return Decision{} }}, // no retries
					OnEvent: func(e Event) {
						mu.Lock()
						events = append(events, e)
						mu.Unlock()
					}}
				start := time.Now()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/1", nil)
				resp, err := tr.RoundTrip(req)
				if tc.fail != (err != nil) {
					t.Fatalf("first RoundTrip = %v, %v", resp, err)
				}
				var second time.Duration
				var wg sync.WaitGroup
				wg.Go(func() {
					req, _ := http.NewRequest("GET", "http://api.test/2", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Errorf("second RoundTrip = %v", err)
						return
					}
					second = time.Since(start)
					resp.Body.Close()
				})
				synctest.Wait()
				if !tc.fail {
					time.Sleep(time.Second)
					tc.end(resp, cancel)
				}
				wg.Wait()
				if second != tc.release {
					t.Errorf("second request sent after %v; want %v", second, tc.release)
				}
				if resp != nil {
					resp.Body.Close()
				}
				if tc.release > 0 {
					mu.Lock()
					i := slices.IndexFunc(events, func(e Event) bool { return e.Kind == EventInFlight })
					if i < 0 || events[i].Delay != tc.release || events[i].Key != "api.test" || events[i].Attempt != 1 || events[i].Request == nil {
						t.Errorf("events %+v; want an EventInFlight of %v for api.test, attempt 1, with its request", events, tc.release)
					}
					mu.Unlock()
				}
				if h := tr.Waiter.(*Limiter).key("api.test").k().Held(); h != 0 {
					t.Errorf("held %d at the end; want 0", h)
				}
			})
		})
	}
}

// TestTransportSlotPerAttempt: a retried request gives its slot back
// between attempts (under a cap of 1 its retry would wait for itself
// otherwise), and a wait for quota that fails holds no slot.
func TestTransportSlotPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				resp := okResponse(r, "slow down")
				resp.StatusCode = http.StatusTooManyRequests
				resp.Header.Set("Retry-After", "1")
				return resp, nil
			}
			return okResponse(r, "ok"), nil
		})
		lim := &Limiter{InFlight: 1, Limits: []Limit{{Rate: 1, Burst: 1}}}
		tr := &Transport{Base: base, Waiter: lim}
		start := time.Now()
		req, _ := http.NewRequest("GET", "http://api.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 || calls != 2 {
			t.Fatalf("RoundTrip = %v, %v after %d calls; want 200 after 2", resp, err, calls)
		}
		// The pause, then the unit at the pace the 429 trimmed (see
		// refused in schedule_ops.go): 1 s at 0.99/s.
		second := float64(time.Second)
		if d, want := time.Since(start), time.Duration(second/(1-schedule.TrimStep)); d < want-time.Microsecond || d > want+time.Microsecond {
			t.Errorf("retried after %v; want %v (Retry-After 1, a unit at the trimmed pace)", d, want)
		}
		resp.Body.Close()
		// The bucket is spent for a second: a deadline of half a second
		// fails the wait, and the slot it took first is given back.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("RoundTrip with its turn past the deadline = %v; want ErrWouldExceedDeadline", err)
		}
		if h := lim.key("api.test").k().Held(); h != 0 {
			t.Errorf("held %d after a failed wait; want 0", h)
		}
	})
}

// TestTransportSlotMaxWait: a request that cannot get a slot within
// MaxWait fails then with a *DeadlineError, sends nothing and holds
// nothing.
func TestTransportSlotMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent++
			return okResponse(r, "ok"), nil
		})
		lim := &Limiter{InFlight: 1}
		tr := &Transport{Base: base, Waiter: lim, MaxWait: time.Second}
		first, err := tr.RoundTrip(mustRequest(t, "http://api.test/1"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = tr.RoundTrip(mustRequest(t, "http://api.test/2"))
		if !errors.Is(err, ErrWouldExceedDeadline) || time.Since(start) != time.Second || sent != 1 {
			t.Errorf("RoundTrip with the only slot held = %v after %v, %d sent; want ErrWouldExceedDeadline after MaxWait 1s, 1 sent", err, time.Since(start), sent)
		}
		first.Body.Close()
		if h := lim.key("api.test").k().Held(); h != 0 {
			t.Errorf("held %d; want 0", h)
		}
	})
}

// TestPanickingHookReleasesInFlight: a hook that panics during a request
// (OnEvent, on the pause a 429's Retry-After sets and on the wait before
// the attempt; a Base that panics) gives back the in-flight units the
// attempt held, so that the next request under a cap of 1 is not blocked
// for ever.
func TestPanickingHookReleasesInFlight(t *testing.T) {
	cases := []struct {
		name  string
		panic func(Event) bool // OnEvent panics on such events
		base  bool             // the Base panics
	}{
		{name: "OnEvent on a pause", panic: func(e Event) bool { return e.Kind == EventPause }},
		{name: "OnEvent on the wait", panic: func(e Event) bool { return e.Kind == EventWait }},
		{name: "Base", base: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					calls++
					if tc.base && calls == 1 {
						panic("base")
					}
					resp := okResponse(r, "slow down")
					if calls == 1 {
						resp.StatusCode = http.StatusTooManyRequests
						resp.Header.Set("Retry-After", "1")
					}
					return resp, nil
				})
				armed := true
				lim := &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}, InFlight: 1}
				tr := &Transport{Base: base, Waiter: lim, OnEvent: func(e Event) {
					if armed && tc.panic != nil && tc.panic(e) {
						armed = false
						panic("on event")
					}
				}}
				if tc.panic != nil && tc.panic(Event{Kind: EventWait}) {
					// The first wait blocks only behind another unit.
					_ = lim.For("api.test").WaitN(t.Context(), 1)
				}
				func() {
					defer func() {
						if recover() == nil {
							t.Fatal("the first request did not panic")
						}
					}()
					req, _ := http.NewRequest("GET", "http://api.test/", nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					}
				}()
				if h := lim.key("api.test").k().Held(); h != 0 {
					t.Errorf("held %d after the panic; want 0", h)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("the next request: %v; want its slot", err)
				}
				resp.Body.Close()
			})
		})
	}
}
