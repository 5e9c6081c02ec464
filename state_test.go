package throttle

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// keyState returns key's state now (a Limiter key's State never fails).
func keyState(l *Limiter, key string) State {
	st, _ := l.For(key).State(context.Background())
	return st
}

// TestState reads a key through waits, a queue and a pause.
func TestState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 4}}}
		st := keyState(l, "k")
		if st.Tokens != 4 || st.Remaining != 4 || st.Next != 0 || st.Rate != 10 || st.Burst != 4 || st.Queued != 0 {
			t.Errorf("new key: %+v; want 4 tokens, 4 remaining, next 0, limit 10, burst 4", st)
		}
		if l.Len() != 0 {
			t.Errorf("State created the key: Len() = %d", l.Len())
		}
		for range 3 {
			_ = l.For("k").WaitN(t.Context(), 1)
		}
		if st := keyState(l, "k"); st.Tokens != 1 || st.Remaining != 1 || st.Next != 0 {
			t.Errorf("after 3 of 4: %+v; want 1 token, 1 remaining, next 0", st)
		}
		r := reserve(t, l, 1)
		_ = reserve(t, l, 1)
		_ = reserve(t, l, 1)
		st = keyState(l, "k")
		if math.Abs(st.Tokens+2) > 1e-9 || st.Remaining != 0 || st.Queued != 2 || st.Next != 300*time.Millisecond {
			t.Errorf("two queued: %+v; want tokens -2, remaining 0, queued 2, next 300ms", st)
		}
		if r.Delay() != 0 {
			t.Errorf("the fourth unit's Delay() = %v; want 0", r.Delay())
		}
		time.Sleep(250 * time.Millisecond)
		st = keyState(l, "k")
		if st.Queued != 0 || math.Abs(st.Tokens-0.5) > 1e-9 || st.Remaining != 0 || st.Next != 50*time.Millisecond {
			t.Errorf("250ms later: %+v; want queued 0, tokens 0.5, remaining 0, next 50ms", st)
		}
		_ = l.For("k").Pause(t.Context(), time.Second)
		st = keyState(l, "k")
		if st.Paused != time.Second || st.Next != time.Second || st.Remaining != 0 {
			t.Errorf("paused: %+v; want paused 1s, next 1s, remaining 0", st)
		}
		_, _ = l.For("k").Observe(t.Context(), Feedback{Window: &ServerWindow{Remaining: 30, Reset: 20 * time.Second, Size: 100}})
		st = keyState(l, "k")
		// 30 as the server counts them, less the 5 units that went
		// and whose responses have not come.
		if w := st.Window; w == nil || w.Reset != 20*time.Second || w.Remaining != 25 {
			t.Errorf("window: %+v; want window of 25 left for 20s", st)
		}
		if st := keyState(&Limiter{}, "x"); !math.IsInf(st.Remaining, 1) || st.Rate != rate.Inf {
			t.Errorf("no limit: %+v; want remaining +Inf, limit Inf", st)
		}
	})
}

// TestSetRate: queued waits take the new pace from the change on, and
// the bucket keeps the units it holds.
func TestSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		_ = l.For("k").WaitN(t.Context(), 1)
		rs := []Reservation{reserve(t, l, 1), reserve(t, l, 1), reserve(t, l, 1)}
		if err := l.SetRate("k", 100, 1); err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if got, want := r.Delay(), time.Duration(i+1)*10*time.Millisecond; got != want {
				t.Errorf("reservation %d after a change to 100/s: Delay() = %v; want %v", i, got, want)
			}
		}
		// Units kept across a change: a full bucket of 1 stays 1 unit
		// when its burst grows to 10 (as x/time/rate's SetBurst)...
		time.Sleep(time.Second)
		_ = l.SetRate("k", 10, 10)
		if st := keyState(l, "k"); st.Tokens != 1 {
			t.Errorf("a full bucket of 1 set to burst 10 holds %v units; want 1", st.Tokens)
		}
		// ... and 6 of 10 stay 6 when the pace slows to 1/s.
		time.Sleep(time.Second)
		for range 4 {
			_ = l.For("k").WaitN(t.Context(), 1)
		}
		_ = l.SetRate("k", 1, 10)
		went := 0
		for {
			ok, d, _ := l.For("k").Try(t.Context(), Cost{N: 1})
			if !ok {
				if d != time.Second {
					t.Errorf("after the kept units: retry in %v; want 1s", d)
				}
				break
			}
			went++
		}
		if went != 6 {
			t.Errorf("units kept across a change of pace: %d; want 6", went)
		}
		// A key seen later gets the rate too.
		_ = l.SetRate("new", 1, 2)
		if st := keyState(l, "new"); st.Rate != 1 || st.Burst != 2 {
			t.Errorf("new key after SetRate: %+v; want limit 1, burst 2", st)
		}
		if err := l.SetRate("k", -1, 0); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("SetRate(-1): %v; want ErrInvalidLimit", err)
		}
		if st := keyState(l, "k"); st.Rate != 1 {
			t.Errorf("a refused SetRate changed the rate: %v", st.Rate)
		}
		// To and from no limit.
		_ = l.SetRate("k", 0, 0)
		if ok, _, _ := l.For("k").Try(t.Context(), Cost{N: 5}); !ok {
			t.Error("no limit: Try(5) refused")
		}
		_ = l.SetRate("k", 2, 2)
		start := time.Now()
		for range 3 {
			_ = l.For("k").WaitN(t.Context(), 1)
		}
		if got := time.Since(start); got != 500*time.Millisecond {
			t.Errorf("3 waits at 2/s burst 2 after a change from no limit took %v; want 500ms", got)
		}
	})
}

// TestSetRateWakes: a wait sleeping at the old pace goes at the new one.
func TestSetRateWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}
		_ = l.For("k").WaitN(t.Context(), 1)
		start := time.Now()
		done := make(chan time.Duration)
		go func() {
			_ = l.For("k").WaitN(t.Context(), 1) // 1s at 1/s
			done <- time.Since(start)
		}()
		time.Sleep(100 * time.Millisecond)
		// The bucket has gathered 0.1 unit at 1/s; the 0.9 it lacks take
		// 180ms at 5/s.
		_ = l.SetRate("k", 5, 1)
		if got := <-done; got != 280*time.Millisecond {
			t.Errorf("a wait sleeping through a change from 1/s to 5/s went after %v; want 280ms", got)
		}
	})
}

// TestStatePace: the pace in force shows a cut and a declared limit.
func TestStatePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 5}}}
		a := l.For("k")
		_, _ = a.Observe(t.Context(), Feedback{Verdict: RefusedBare, Spent: 1}) // a lone rejection trims 1%
		if st := keyState(l, "k"); !st.SlowedDown || math.Abs(float64(st.Rate)-9.9) > 1e-9 {
			t.Errorf("trimmed: %+v; want Cut, limit 9.9", st)
		}
		for range 10 { // trims to 10%, then cuts to 0.7 of the limit
			_, _ = a.Observe(t.Context(), Feedback{Verdict: RefusedBare, Spent: 1})
		}
		if st := keyState(l, "k"); !st.SlowedDown || math.Abs(float64(st.Rate)-7) > 1e-9 {
			t.Errorf("cut: %+v; want Cut, limit 7", st)
		}
		time.Sleep(3 * time.Second) // regrown
		if st := keyState(l, "k"); st.SlowedDown || st.Rate != 10 {
			t.Errorf("regrown: %+v; want no cut, limit 10", st)
		}
		var free Limiter
		_, _ = free.For("k").Observe(t.Context(), Feedback{Declared: &Declared{Rate: 5, Burst: 2}})
		if st := keyState(&free, "k"); !st.Declared || st.Rate != 5 || st.Burst != 2 || st.Remaining != 2 {
			t.Errorf("declared: %+v; want Declared, limit 5, burst 2, remaining 2", st)
		}
	})
}

// TestSetRateConcurrent: SetRate while waits, tries and states run
// (for -race), and the rate set last holds.
func TestSetRateConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}}}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for range 50 {
					_ = l.For("k").WaitN(t.Context(), 1)
					_, _, _ = l.For("k").Try(t.Context(), Cost{N: 1})
					_ = keyState(l, "k")
				}
			})
			wg.Go(func() {
				for j := range 20 {
					_ = l.SetRate("k", rate.Limit(50+10*((i+j)%5)), 10)
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		_ = l.SetRate("k", 20, 3)
		if st := keyState(l, "k"); st.Rate != 20 || st.Burst != 3 {
			t.Errorf("after the last SetRate: %+v; want limit 20, burst 3", st)
		}
	})
}

// TestWindowInFlightOnce: a burst of 5 units goes, and its answers come
// out of order, each telling the window's units left after the server
// counted it (50 − its place). The window starts at the first answer
// less the 4 still in flight; every later answer raises the count to
// the fewest told less those still in flight, never above a count told.
// With all answered the count is the server's, 45 (the count taken at
// the first answer less everything in flight, and nothing back, kept 43).
func TestWindowInFlightOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 2, Burst: 5}}}
		k := l.For("k")
		if err := l.For("k").WaitN(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			told, want float64
		}{
			{47, 43}, // the 3rd counted answers first: 4 in flight
			{49, 44}, // the 1st: the fewest told is 47, 3 in flight
			{45, 44}, // the 5th: 45 told, 2 in flight (43), the count stays
			{46, 44}, // the 4th: 45 − 1 in flight
			{48, 45}, // the 2nd: none in flight
		} {
			_, _ = k.Observe(t.Context(), Feedback{Spent: 1, Window: &ServerWindow{Remaining: step.told, Reset: 10 * time.Second, Size: 50}})
			if w := keyState(l, "k").Window; w == nil || w.Remaining != step.want {
				t.Fatalf("after an answer telling %v left: window %+v; want %v left", step.told, w, step.want)
			}
		}
	})
}
