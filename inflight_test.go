package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// acquirer returns the Acquirer of l's key.
func acquirer(t *testing.T, l *Limiter, key string) Acquirer {
	t.Helper()
	a, ok := l.For(key).(Acquirer)
	if !ok {
		t.Fatalf("For(%q) is a %T, not an Acquirer", key, l.For(key))
	}
	return a
}

// mustAcquire acquires n units of a at once, or fails the test.
func mustAcquire(t *testing.T, a Acquirer, n int) func() {
	t.Helper()
	release, err := a.AcquireN(t.Context(), n)
	if err != nil {
		t.Fatalf("AcquireN(%d) = %v", n, err)
	}
	return release
}

// TestAcquireFIFO: acquisitions are served in arrival order, at the
// instant the units they need are released; a large one at the head is
// not overtaken by a small one that would fit.
func TestAcquireFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 3}
		a := acquirer(t, l, "k")
		start := time.Now()
		r1 := mustAcquire(t, a, 2)
		r2 := mustAcquire(t, a, 1)

		var (
			mu    sync.Mutex
			order = map[string]time.Duration{} // when each was granted
			wg    sync.WaitGroup
			rels  = map[string]func(){}
		)
		for _, w := range []struct {
			name string
			n    int
		}{{"A2", 2}, {"B1", 1}, {"C3", 3}, {"D1", 1}} {
			wg.Go(func() {
				release, err := a.AcquireN(context.Background(), w.n)
				if err != nil {
					t.Errorf("%s: AcquireN = %v", w.name, err)
					return
				}
				mu.Lock()
				order[w.name] = time.Since(start)
				rels[w.name] = release
				mu.Unlock()
			})
			synctest.Wait() // arrivals in this order
		}
		time.Sleep(time.Second)
		r2() // 1 free: A2 needs 2 and blocks B1 behind it
		synctest.Wait()
		mu.Lock()
		if len(order) != 0 {
			t.Fatalf("granted %v with 1 unit free and A2 (2) at the head; want none", order)
		}
		mu.Unlock()
		// A newcomer does not take the free unit ahead of them either.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if _, err := a.AcquireN(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AcquireN(1) arriving with 1 unit free behind A2 = %v; want DeadlineExceeded", err)
		}
		cancel()
		time.Sleep(500 * time.Millisecond)
		r1() // 3 free: A2 and B1
		synctest.Wait()
		time.Sleep(time.Second)
		mu.Lock()
		rels["A2"]()
		rels["B1"]() // 3 free: C3
		mu.Unlock()
		synctest.Wait()
		time.Sleep(time.Second)
		mu.Lock()
		rels["C3"]() // D1
		mu.Unlock()
		wg.Wait()
		want := map[string]time.Duration{"A2": 2 * time.Second, "B1": 2 * time.Second, "C3": 3 * time.Second, "D1": 4 * time.Second}
		if !maps.Equal(order, want) {
			t.Errorf("granted %v; want %v", order, want)
		}
		rels["D1"]()
		if h := l.bucket("k").k().Held(); h != 0 {
			t.Errorf("held %d after every release; want 0", h)
		}
	})
}

// TestAcquireDeadline: an acquisition whose ctx's deadline passes first
// returns ctx's error at the deadline, holds nothing, and the one behind
// it moves up at once.
func TestAcquireDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 2}
		a := acquirer(t, l, "k")
		start := time.Now()
		hold := mustAcquire(t, a, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := a.AcquireN(ctx, 2) // the head: needs both
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
				t.Errorf("AcquireN(2) past its deadline = %v after %v; want DeadlineExceeded after 1s", err, time.Since(start))
			}
		})
		synctest.Wait()
		var behind time.Duration
		wg.Go(func() {
			release, err := a.AcquireN(context.Background(), 1)
			if err != nil {
				t.Errorf("AcquireN(1) behind = %v", err)
				return
			}
			behind = time.Since(start)
			release()
		})
		wg.Wait()
		if behind != time.Second {
			t.Errorf("the acquisition behind went after %v; want 1s (when the head's deadline passed)", behind)
		}
		hold()
		if h := l.bucket("k").k().Held(); h != 0 {
			t.Errorf("held %d; want 0", h)
		}
	})
}

// TestAcquireCancel: a cancelled acquisition returns at once with
// ctx's error, and the units it waited for go to the next in line.
func TestAcquireCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 1}
		a := acquirer(t, l, "k")
		hold := mustAcquire(t, a, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := a.AcquireN(ctx, 1); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled AcquireN = %v; want context.Canceled", err)
			}
		})
		synctest.Wait()
		got := make(chan time.Duration, 1)
		start := time.Now()
		wg.Go(func() {
			release, err := a.AcquireN(context.Background(), 1)
			if err != nil {
				t.Errorf("AcquireN = %v", err)
				return
			}
			got <- time.Since(start)
			release()
		})
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		time.Sleep(time.Second)
		hold()
		if d := <-got; d != 2*time.Second {
			t.Errorf("the second went after %v; want 2s (at the release, the cancelled one holding nothing)", d)
		}
		wg.Wait()
		if _, err := a.AcquireN(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("AcquireN with an ended ctx = %v; want context.Canceled", err)
		}
	})
}

// TestReleaseOnce: a second release does nothing; it never frees units
// another acquisition holds.
func TestReleaseOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 2}
		a := acquirer(t, l, "k")
		r1 := mustAcquire(t, a, 1)
		r2 := mustAcquire(t, a, 1)
		r1()
		r1()
		r1()
		r3 := mustAcquire(t, a, 1) // the one r1 freed
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := a.AcquireN(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a third unit under a cap of 2, after a release called three times = %v; want DeadlineExceeded", err)
		}
		r2()
		r3()
		if h := l.bucket("k").k().Held(); h != 0 {
			t.Errorf("held %d; want 0", h)
		}
	})
}

// TestAcquireLimits: the cost checks, a key without a cap, overrides.
func TestAcquireLimits(t *testing.T) {
	l := &Limiter{InFlight: 2, InFlightOverrides: map[string]int{"one": 1, "free": 0}}
	ctx := context.Background()
	if _, err := acquirer(t, l, "k").AcquireN(ctx, 3); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("AcquireN(3) under a cap of 2 = %v; want ErrCostExceedsBurst", err)
	}
	if _, err := acquirer(t, l, "one").AcquireN(ctx, 2); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("AcquireN(2) under an override of 1 = %v; want ErrCostExceedsBurst", err)
	}
	if _, err := acquirer(t, l, "k").AcquireN(ctx, -1); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("AcquireN(-1) = %v; want ErrInvalidLimit", err)
	}
	for range 1000 { // no cap: never blocks, nothing held
		if _, err := acquirer(t, l, "free").AcquireN(ctx, 1000); err != nil {
			t.Fatalf("AcquireN on a key without a cap = %v", err)
		}
	}
	var zero Limiter
	if _, err := zero.AcquireN(ctx, 1<<30); err != nil {
		t.Errorf("AcquireN on the zero Limiter = %v; want nil (no cap)", err)
	}
}

// TestInFlightNotIdle: a key with units in flight is not forgotten by a
// sweep, and the Limiter remembers at most MaxKeys keys.
func TestInFlightNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 1, MaxKeys: 8}
		release := mustAcquire(t, acquirer(t, l, "held"), 1)
		for i := range 100 {
			r := mustAcquire(t, acquirer(t, l, fmt.Sprint(i)), 1)
			r()
			if n := l.Len(); n > 8 {
				t.Fatalf("Len = %d after %d keys; want ≤ MaxKeys 8", n, i+2)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if r, err := acquirer(t, l, "held").AcquireN(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a second unit of a key with its one slot held, after 100 other keys = %v; want DeadlineExceeded (the key was forgotten)", err)
			if err == nil {
				r()
			}
		}
		release()
		mustAcquire(t, acquirer(t, l, "held"), 1)()
	})
}

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
				if h := tr.Waiter.(*Limiter).bucket("api.test").k().Held(); h != 0 {
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
		lim := &Limiter{InFlight: 1, Limit: 1, Burst: 1}
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
		if h := lim.bucket("api.test").k().Held(); h != 0 {
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
		if h := lim.bucket("api.test").k().Held(); h != 0 {
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
				lim := &Limiter{Limit: 1, Burst: 1, InFlight: 1}
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
				if h := lim.bucket("api.test").k().Held(); h != 0 {
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
