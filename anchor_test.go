package throttle

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestTransportStrictAnchored is nginx's limit_req of 50/s without burst
// (whole milliseconds, bare 429s), up to 1 ms of dispatch jitter on the
// way in, and a Transport told 50/s, burst 1: 8 workers, 1,000 requests.
// With the trim's margin alone, 10 of them were refused and 0.94 of the
// capacity used (the margin rests where 1% are refused); anchored on
// when the server may have taken the last request, the gaps it sees are
// never short by that request's jitter: a refusal, then none.
func TestTransportStrictAnchored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(317 * time.Microsecond) // a phase against the server's whole ms
		s := throttletest.NewLeakyBucket(50)
		s.Status = http.StatusTooManyRequests
		tr := &Transport{Waiter: &Limiter{Limit: 50, Burst: 1},
			Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1}}
		start := time.Now()
		closedLoopN(t, &http.Client{Transport: tr}, 8, 1000)
		wall := time.Since(start)
		st := s.Stats()
		capacity := 1 + float64(int(wall.Seconds()*50))
		got := float64(st.Admitted) / capacity
		if st.Admitted != 1000 || st.Rejected > 2 || got < 0.97 {
			t.Errorf("%d admitted, %d refused in %v: %.3f of capacity; want 1000, ≤ 2, ≥ 0.97", st.Admitted, st.Rejected, wall, got)
		}
		t.Logf("admitted %d, refused %d, in %v: %.3f of capacity", st.Admitted, st.Rejected, wall, got)
	})
}

// TestAnchor checks the rule on one key: no anchor before a refusal, nor
// for a key deeper than a unit; after one, the next turn is an interval
// past the request's send plus its lateness (its round trip less the
// quickest), at most anchorMax of an interval; and it never moves a turn
// earlier.
func TestAnchor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ms = time.Millisecond
		// turnAfter sends a unit on k, answers it rtt later as a
		// success, and returns how long after the send the next unit
		// goes.
		turnAfter := func(k Waiter, rtt time.Duration) time.Duration {
			if err := k.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			time.Sleep(rtt)
			k.(Adapter).Adapt(ctx, Feedback{Cost: 1, Age: rtt})
			if err := k.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			return time.Since(sent)
		}
		l := &Limiter{Limit: 50, Burst: 1}
		k := l.For("k")
		if got := turnAfter(k, 2*ms); got != 20*ms {
			t.Errorf("before any refusal: next unit %v after; want 20ms", got)
		}
		// near: the schedule's pace is a float (a ns of rounding).
		near := func(a, b time.Duration) bool { return (a - b).Abs() <= time.Nanosecond }
		// A refusal: shows the server strict (and trims the pace 1%).
		time.Sleep(time.Second)
		k.(Adapter).Adapt(ctx, Feedback{Cost: 1, Throttled: true, Refused: true, Age: 2 * ms})
		time.Sleep(time.Second)
		trimmed := float64(20*ms) / (1 - trimStep)
		interval := time.Duration(trimmed)
		if got := turnAfter(k, 2*ms); !near(got, interval) {
			t.Errorf("quickest round trip: next unit %v after; want %v (the interval)", got, interval)
		}
		time.Sleep(time.Second)
		if got := turnAfter(k, 2*ms+700*time.Microsecond); !near(got, interval+700*time.Microsecond) {
			t.Errorf("0.7 ms late: next unit %v after; want %v", got, interval+700*time.Microsecond)
		}
		time.Sleep(time.Second)
		if got, want := turnAfter(k, 20*ms), interval+time.Duration(anchorMax*float64(interval)); !near(got, want) {
			t.Errorf("18 ms late: next unit %v after; want %v (anchorMax of an interval)", got, want)
		}
		// A key two units deep is not anchored.
		l2 := &Limiter{Limit: 50, Burst: 2}
		k2 := l2.For("k")
		k2.(Adapter).Adapt(ctx, Feedback{Cost: 1, Throttled: true, Refused: true, Age: 2 * ms})
		time.Sleep(time.Second)
		_ = k2.WaitN(ctx, 1)
		sent := time.Now()
		time.Sleep(2 * ms)
		k2.(Adapter).Adapt(ctx, Feedback{Cost: 1, Age: 2 * ms})
		time.Sleep(5 * ms)
		k2.(Adapter).Adapt(ctx, Feedback{Cost: 1, Age: 7 * ms})
		_ = k2.WaitN(ctx, 1)
		if got := time.Since(sent); got != 7*ms {
			t.Errorf("a key two units deep: second unit %v after the first; want 7ms (at once)", got)
		}
	})
}
