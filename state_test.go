package throttle

import (
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// TestState reads a key through waits, a queue and a pause.
func TestState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 4}
		st := l.State("k")
		if st.Tokens != 4 || st.Remaining != 4 || st.Next != 0 || st.Limit != 10 || st.Burst != 4 || st.Queued != 0 {
			t.Errorf("new key: %+v; want 4 tokens, 4 remaining, next 0, limit 10, burst 4", st)
		}
		if l.Len() != 0 {
			t.Errorf("State created the key: Len() = %d", l.Len())
		}
		for range 3 {
			_ = l.For("k").WaitN(t.Context(), 1)
		}
		if st := l.State("k"); st.Tokens != 1 || st.Remaining != 1 || st.Next != 0 {
			t.Errorf("after 3 of 4: %+v; want 1 token, 1 remaining, next 0", st)
		}
		r := reserve(t, l, 1)
		_ = reserve(t, l, 1)
		_ = reserve(t, l, 1)
		st = l.State("k")
		if math.Abs(st.Tokens+2) > 1e-9 || st.Remaining != 0 || st.Queued != 2 || st.Next != 300*time.Millisecond {
			t.Errorf("two queued: %+v; want tokens -2, remaining 0, queued 2, next 300ms", st)
		}
		if r.Delay() != 0 {
			t.Errorf("the fourth unit's Delay() = %v; want 0", r.Delay())
		}
		time.Sleep(250 * time.Millisecond)
		st = l.State("k")
		if st.Queued != 0 || math.Abs(st.Tokens-0.5) > 1e-9 || st.Remaining != 0 || st.Next != 50*time.Millisecond {
			t.Errorf("250ms later: %+v; want queued 0, tokens 0.5, remaining 0, next 50ms", st)
		}
		_ = l.For("k").(Pauser).Pause(t.Context(), time.Second)
		st = l.State("k")
		if st.Paused != time.Second || st.Next != time.Second || st.Remaining != 0 {
			t.Errorf("paused: %+v; want paused 1s, next 1s, remaining 0", st)
		}
		_ = l.For("k").(Adapter).Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 30, Size: 100, Reset: 20 * time.Second})
		st = l.State("k")
		// 30 as the server counts them, less the 5 units that went
		// and whose responses have not come.
		if !st.Window || st.WindowReset != 20*time.Second || st.WindowLeft != 25 {
			t.Errorf("window: %+v; want window of 25 left for 20s", st)
		}
		if st := (&Limiter{}).State("x"); !math.IsInf(st.Remaining, 1) || st.Limit != rate.Inf {
			t.Errorf("no limit: %+v; want remaining +Inf, limit Inf", st)
		}
	})
}

// TestSetRate: queued waits take the new pace from the change on, and
// the bucket keeps the units it holds.
func TestSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 1}
		_ = l.For("k").WaitN(t.Context(), 1)
		rs := []Reservation{reserve(t, l, 1), reserve(t, l, 1), reserve(t, l, 1)}
		if err := l.SetRate("k", Rate{Limit: 100, Burst: 1}); err != nil {
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
		_ = l.SetRate("k", Rate{Limit: 10, Burst: 10})
		if st := l.State("k"); st.Tokens != 1 {
			t.Errorf("a full bucket of 1 set to burst 10 holds %v units; want 1", st.Tokens)
		}
		// ... and 6 of 10 stay 6 when the pace slows to 1/s.
		time.Sleep(time.Second)
		for range 4 {
			_ = l.For("k").WaitN(t.Context(), 1)
		}
		_ = l.SetRate("k", Rate{Limit: 1, Burst: 10})
		went := 0
		for {
			ok, d, _ := trier(l, "k").TryN(t.Context(), 1)
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
		_ = l.SetRate("new", Rate{Limit: 1, Burst: 2})
		if st := l.State("new"); st.Limit != 1 || st.Burst != 2 {
			t.Errorf("new key after SetRate: %+v; want limit 1, burst 2", st)
		}
		if err := l.SetRate("k", Rate{Limit: -1}); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("SetRate(-1): %v; want ErrInvalidLimit", err)
		}
		if st := l.State("k"); st.Limit != 1 {
			t.Errorf("a refused SetRate changed the rate: %v", st.Limit)
		}
		// To and from no limit.
		_ = l.SetRate("k", Rate{})
		if ok, _, _ := trier(l, "k").TryN(t.Context(), 5); !ok {
			t.Error("no limit: TryN(5) refused")
		}
		_ = l.SetRate("k", Rate{Limit: 2, Burst: 2})
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
		l := &Limiter{Limit: 1, Burst: 1}
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
		_ = l.SetRate("k", Rate{Limit: 5, Burst: 1})
		if got := <-done; got != 280*time.Millisecond {
			t.Errorf("a wait sleeping through a change from 1/s to 5/s went after %v; want 280ms", got)
		}
	})
}

// TestStatePace: the pace in force shows a cut and a declared limit.
func TestStatePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 5}
		a := l.For("k").(Adapter)
		_ = a.Adapt(t.Context(), Feedback{Throttled: true, Cost: 1}) // a lone rejection trims 1%
		if st := l.State("k"); !st.Cut || math.Abs(float64(st.Limit)-9.9) > 1e-9 {
			t.Errorf("trimmed: %+v; want Cut, limit 9.9", st)
		}
		for range 10 { // trims to 10%, then cuts to 0.7 of the limit
			_ = a.Adapt(t.Context(), Feedback{Throttled: true, Cost: 1})
		}
		if st := l.State("k"); !st.Cut || math.Abs(float64(st.Limit)-7) > 1e-9 {
			t.Errorf("cut: %+v; want Cut, limit 7", st)
		}
		time.Sleep(3 * time.Second) // regrown
		if st := l.State("k"); st.Cut || st.Limit != 10 {
			t.Errorf("regrown: %+v; want no cut, limit 10", st)
		}
		var free Limiter
		_ = free.For("k").(Adapter).Adapt(t.Context(), Feedback{HasDeclared: true, DeclaredRate: 5, DeclaredBurst: 2})
		if st := free.State("k"); !st.Declared || st.Limit != 5 || st.Burst != 2 || st.Remaining != 2 {
			t.Errorf("declared: %+v; want Declared, limit 5, burst 2, remaining 2", st)
		}
	})
}

// TestSetRateConcurrent: SetRate while waits, tries and states run
// (for -race), and the rate set last holds.
func TestSetRateConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 100, Burst: 10}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for range 50 {
					_ = l.For("k").WaitN(t.Context(), 1)
					_, _, _ = trier(l, "k").TryN(t.Context(), 1)
					_ = l.State("k")
				}
			})
			wg.Go(func() {
				for j := range 20 {
					_ = l.SetRate("k", Rate{Limit: rate.Limit(50 + 10*((i+j)%5)), Burst: 10})
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		_ = l.SetRate("k", Rate{Limit: 20, Burst: 3})
		if st := l.State("k"); st.Limit != 20 || st.Burst != 3 {
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
		l := &Limiter{Limit: 2, Burst: 5}
		k := l.For("k").(Adapter)
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
			_ = k.Adapt(t.Context(), Feedback{Cost: 1, HasRemaining: true, Remaining: step.told, Size: 50, Reset: 10 * time.Second})
			if st := l.State("k"); !st.Window || st.WindowLeft != step.want {
				t.Fatalf("after an answer telling %v left: window %v, %v left; want %v", step.told, st.Window, st.WindowLeft, step.want)
			}
		}
	})
}
