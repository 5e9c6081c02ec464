package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Regression tests for the defects issue 7 lists, each named after its
// defect and each failing on the schedule before it (commit 052de9b).
// Defect 1 (the brief outage) is in outage_test.go, defect 8 in
// refund_test.go; defects 2 and 7 are the distributed package's.

// admission is a wait that went: when, and how many units.
type admission struct {
	at time.Duration
	n  int
}

// overSent replays admissions (in any order) through a GCRA bucket of
// rate units a second and burst, and returns a description of the first
// one that a bucket of that shape would not have let go, or "".
func overSent(adm []admission, rate float64, burst int) string {
	s := slices.Clone(adm)
	slices.SortStableFunc(s, func(a, b admission) int { return int(a.at - b.at) })
	interval := float64(time.Second) / rate
	tau := float64(burst) * interval
	tat := 0.0
	for i, a := range s {
		at := float64(a.at)
		tat = max(tat, at) + float64(a.n)*interval
		if tat-at > tau+1 { // 1 ns of rounding
			return fmt.Sprintf("admission %d (%d units at %v) exceeds burst %d at %v/s: bucket owes %v",
				i, a.n, a.at, burst, rate, time.Duration(tat-at-tau))
		}
	}
	return ""
}

// countAt returns the most admissions at one instant.
// queueWaits starts n waits of one unit on w, one after the other inside
// the bubble, and returns a function that waits for them and returns when
// each went, from start.
func queueWaits(t *testing.T, w Waiter, start time.Time, n int) func() []admission {
	var (
		mu  sync.Mutex
		adm []admission
		wg  sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			if err := w.WaitN(t.Context(), 1); err != nil {
				t.Error(err)
			}
			mu.Lock()
			adm = append(adm, admission{at: time.Since(start), n: 1})
			mu.Unlock()
		})
		synctest.Wait()
	}
	return func() []admission {
		wg.Wait()
		return adm
	}
}

func countAt(adm []admission) int {
	by := map[time.Duration]int{}
	most := 0
	for _, a := range adm {
		by[a.at] += a.n
		most = max(most, by[a.at])
	}
	return most
}

// TestDefect3PausesKeepHistory is issue 7's defect 3 through a Transport:
// ten 429s with Retry-After: 2, all in flight at 10/s (burst 1), each
// extending the pause; after the pause, the queue (retries first) goes at
// 10/s: no 500 ms holds more than 1 + 5 requests. (The old schedule kept
// the last 8 moves only, and let 25 through in the 500 ms after the
// pause.)
func TestDefect3PausesKeepHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var sent []admission
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			at := time.Since(start)
			mu.Lock()
			sent = append(sent, admission{at: at, n: 1})
			mu.Unlock()
			time.Sleep(time.Second) // ten requests in flight at 10/s
			if at < time.Second {
				return respond(r, http.StatusTooManyRequests, "Retry-After", "2"), nil
			}
			return respond(r, http.StatusOK), nil
		})
		tr := &Transport{Base: base, Waiter: &Limiter{Limit: 10, Burst: 1}}
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				resp, err := get(t, tr)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d; want 200", resp.StatusCode)
				}
			})
			synctest.Wait()
		}
		wg.Wait()
		worst, from := 0, time.Duration(0)
		for _, a := range sent {
			k := 0
			for _, b := range sent {
				if b.at >= a.at && b.at < a.at+500*time.Millisecond {
					k++
				}
			}
			if k > worst {
				worst, from = k, a.at
			}
		}
		t.Logf("%d attempts; at most %d in the 500 ms from %v", len(sent), worst, from)
		if worst > 6 {
			t.Errorf("%d requests sent in the 500 ms from %v; want at most 6 (1 + 10/s · 0.5 s)", worst, from)
		}
		if msg := overSent(sent, 10, 1); msg != "" {
			t.Error(msg)
		}
	})
}

// TestDefect3TenPauses is issue 7's defect 3 on a Limiter: 40 waits
// queued at 10/s (burst 1 and 10), then ten pauses of 2 s 10 ms apart,
// each extending the last: every queued wait is held by all of them, and
// the queue goes at 10/s from the last one's end, never over the bucket.
// (The old schedule kept the last 8 queue moves only: the waits queued
// before the first two went at their turns as the 8 moves placed them, 20
// at once.)
func TestDefect3TenPauses(t *testing.T) {
	for _, burst := range []int{1, 10} {
		t.Run(fmt.Sprintf("burst=%d", burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limit: 10, Burst: burst}
				b := l.For("k")
				start := time.Now()
				done := queueWaits(t, b, start, 40)
				for range 10 {
					time.Sleep(10 * time.Millisecond)
					b.(Pauser).Pause(t.Context(), 2*time.Second)
				}
				end := time.Since(start) + 2*time.Second // 2.1 s
				adm := done()
				if most := countAt(adm); most > burst {
					t.Errorf("%d waits went at one instant; want at most the burst, %d", most, burst)
				}
				if msg := overSent(adm, 10, burst); msg != "" {
					t.Error(msg)
				}
				for _, a := range adm {
					if a.at > 0 && a.at < end {
						t.Errorf("a wait went at %v, inside the pauses (until %v)", a.at, end)
					}
				}
			})
		})
	}
}

// TestDefect3PauseExtendedAtItsEnd is issue 7's defect 3 on a Limiter: a
// pause extended at the instant the waits queued in it are due (its end)
// lets at most the burst go at once, and the queue at 10/s after. (The
// old schedule let 13 go at once with burst 10.)
func TestDefect3PauseExtendedAtItsEnd(t *testing.T) {
	for _, early := range []time.Duration{0, 1} {
		t.Run(fmt.Sprintf("extended %v before the end", early), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limit: 10, Burst: 10}
				b := l.For("k")
				start := time.Now()
				b.(Pauser).Pause(t.Context(), time.Second)
				done := queueWaits(t, b, start, 40)
				time.Sleep(time.Second - early)
				b.(Pauser).Pause(t.Context(), time.Second+early) // to 2 s
				adm := done()
				if most := countAt(adm); most > 10 {
					t.Errorf("%d waits went at one instant; want at most the burst, 10", most)
				}
				if msg := overSent(adm, 10, 10); msg != "" {
					t.Error(msg)
				}
				for _, a := range adm {
					if a.at > time.Second && a.at < 2*time.Second {
						t.Errorf("a wait went at %v, inside the extended pause", a.at)
					}
				}
			})
		})
	}
}

// TestDefect4WindowFIFO is issue 7's defect 4: waits blocked on a spent
// server window go in arrival order after its reset, one probe a second
// until a response tells the next window, so the 7th arrival waits its
// FIFO time, 6 s past the reset. (The old schedule polled and raced on
// wake: admission order [4 3 17 18 5 10 7 1 0 …], the 7th arrival after
// 20 s.)
func TestDefect4WindowFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 100, Burst: 10}
		b := l.For("k")
		start := time.Now()
		b.(Adapter).Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 0, Reset: time.Second, Size: 100, Window: time.Minute})
		var mu sync.Mutex
		var order []int
		ends := make([]time.Duration, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := b.WaitN(t.Context(), 1); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, i)
				ends[i] = time.Since(start)
				mu.Unlock()
			})
			synctest.Wait()
		}
		wg.Wait()
		if !slices.IsSorted(order) {
			t.Errorf("admission order %v; want arrival order", order)
		}
		// The reset at 1 s, then one probe a second.
		if got, want := ends[6], 7*time.Second; got != want {
			t.Errorf("7th arrival went at %v; want %v (reset + 6 probes)", got, want)
		}
		t.Logf("order %v; ends %v", order, ends)
	})
}

// TestDefect5CancelledTurnNotShared is issue 7's defect 5: burst 1,
// 10/s; A goes at 0, B (turn 100 ms) and C (turn 200 ms) wait, B is
// cancelled at 10 ms, D arrives at 20 ms: C moves up to 100 ms and D
// takes 200 ms; never two at once. (The old schedule sent C and D both at
// 200 ms.)
func TestDefect5CancelledTurnNotShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 1}
		k := l.For("k")
		start := time.Now()
		var mu sync.Mutex
		ends := map[string]time.Duration{}
		var wg sync.WaitGroup
		wait := func(name string, ctx context.Context) {
			wg.Go(func() {
				err := k.WaitN(ctx, 1)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					ends[name] = time.Since(start)
				}
			})
			synctest.Wait()
		}
		wait("A", t.Context())
		ctxB, cancelB := context.WithCancel(t.Context())
		wait("B", ctxB)
		wait("C", t.Context())
		time.Sleep(10 * time.Millisecond)
		cancelB()
		time.Sleep(10 * time.Millisecond)
		wait("D", t.Context())
		wg.Wait()
		want := map[string]time.Duration{"A": 0, "C": 100 * time.Millisecond, "D": 200 * time.Millisecond}
		if fmt.Sprint(ends) != fmt.Sprint(want) {
			t.Errorf("waits went at %v; want %v", ends, want)
		}
	})
}

// TestDefect6MaxKeysConcurrent is issue 7's defect 6, first half: 32
// goroutines inserting new keys never leave more than MaxKeys
// remembered, sampled while they insert. (The old Limiter ended with
// 986,870 keys for MaxKeys 10,000.)
func TestDefect6MaxKeysConcurrent(t *testing.T) {
	const maxKeys = 10_000
	l := &Limiter{Limit: 1, Burst: 1, MaxKeys: maxKeys}
	var peak int
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, l.Len())
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 4_000 {
				l.For(fmt.Sprint(g, "-", i)).WaitN(context.Background(), 1) // at once: a full bucket
			}
		})
	}
	wg.Wait()
	close(done)
	<-sampled
	peak = max(peak, l.Len())
	t.Logf("128,000 keys from 32 goroutines: peak %d remembered, %d at the end", peak, l.Len())
	if peak > maxKeys {
		t.Errorf("peak of %d keys remembered; want at most MaxKeys, %d", peak, maxKeys)
	}
}

// TestDefect6WindowKeysForgotten is issue 7's defect 6, second half: keys
// that received a server's window are forgotten once idle (the window
// reset and forgotten, the bucket full), so a million such keys arriving
// over time do not stay remembered. (The old Limiter never forgot them:
// 1M keys, 560 MB.)
func TestDefect6WindowKeysForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 100, Burst: 10}
		const n = 1_000_000
		peak := 0
		for i := range n {
			k := l.For(fmt.Sprint("tenant-", i))
			if err := k.WaitN(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			k.(Adapter).Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 50, Reset: time.Second, Size: 100, Window: time.Minute})
			peak = max(peak, l.Len())
			if i%1000 == 999 {
				time.Sleep(time.Second) // 1,000 new keys a second
			}
		}
		// A window is kept windowKeep (10 s) past its reset (1 s): about
		// 11,000 keys hold state at any time, and sweeps run when the
		// count doubles.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("%d keys with windows, 1,000 a second: peak %d remembered, %d at the end; heap %d MB", n, peak, l.Len(), ms.HeapAlloc>>20)
		if peak > 4*11_000 {
			t.Errorf("peak of %d keys remembered; want at most %d", peak, 4*11_000)
		}
	})
}

// TestDefect9VerySlowRate is issue 7's defect 9: at 1e-10 units a second
// (one per 317 years) a second wait with a deadline fails at once with
// ErrWouldExceedDeadline, and one without a deadline blocks until its
// context ends. (The old Limiter's delay overflowed time.Duration to a
// negative value and every wait returned at once.)
func TestDefect9VerySlowRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1e-10, Burst: 1}
		k := l.For("k")
		if err := k.WaitN(t.Context(), 1); err != nil { // the full bucket's unit
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		start := time.Now()
		if err := k.WaitN(ctx, 1); !errors.Is(err, ErrWouldExceedDeadline) || time.Since(start) != 0 {
			t.Errorf("wait with a 1-h deadline = %v after %v; want ErrWouldExceedDeadline at once", err, time.Since(start))
		}
		ctx, cancel = context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- k.WaitN(ctx, 1) }()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Errorf("wait without a deadline returned %v after %v; want it blocked", err, time.Since(start))
			return
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait = %v; want context.Canceled", err)
		}
	})
}
