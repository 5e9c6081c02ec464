package throttle

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
	"github.com/throttle-go/throttle/throttletest"
)

// tokens is OpenAI's tokens policy: a bucket of 6,000 refilling in a
// minute (100 a second), holding remaining.
func tokens(remaining int64) ratelimit.Reading {
	return ratelimit.Reading{Policies: []ratelimit.Policy{
		{Unit: "requests", Limit: 60, Remaining: 59, Window: time.Minute, Reset: time.Second,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true, Refills: true},
		{Unit: "tokens", Limit: 6000, Remaining: remaining, Window: time.Minute, Reset: time.Duration(6000-remaining) * 10 * time.Millisecond,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true, Refills: true},
	}}
}

// TestOtherUnitsLearnsCost checks the estimate of what a request costs in
// another unit: from the fall of the tokens remaining between two
// responses, plus the bucket's refill in between; then the tokens policy
// read in requests. Each step is one response, a second after the one
// before (100 tokens refilled), to a request of one unit.
func TestOtherUnitsLearnsCost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		remaining []int64 // tokens remaining in each response
		rejected  []bool  // which responses were refusals (nil: none)
		want      float64 // the cost learned; 0: none
	}{
		{"one response says nothing of a cost", []int64{5798}, nil, 0},
		{"a fall of 102 after a refill of 100", []int64{5798, 5696}, nil, 202},
		{"the median of the last five", []int64{5000, 4900, 4700, 4600, 4500, 4400, 4300}, nil, 200},
		// Two requests' costs in one fall (responses handled out of
		// order) and none in the next: the median keeps to the rest.
		{"an outlier does not move the median", []int64{5000, 4900, 4800, 4500, 4600, 4500}, nil, 200},
		{"a refusal spent nothing and gives no sample", []int64{5000, 4900, 5000}, []bool{false, false, true}, 200},
		// A bucket that may have been full in between: what it refilled
		// is unknown, so the fall says nothing.
		{"a full bucket gives no sample", []int64{5950, 5900}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o learned
			var q ratelimit.Reading
			for i, r := range tt.remaining {
				rejected := tt.rejected != nil && tt.rejected[i]
				q = o.read("api", tokens(r), "requests", 1, rejected, t0.Add(time.Duration(i)*time.Second))
			}
			if tt.want == 0 {
				if len(q.Policies) != 2 {
					t.Fatalf("policies = %+v; want the two told, nothing learned", q.Policies)
				}
				return
			}
			if len(q.Policies) != 3 {
				t.Fatalf("policies = %+v; want the tokens policy read in requests added", q.Policies)
			}
			p := q.Policies[2]
			last := tt.remaining[len(tt.remaining)-1]
			want := ratelimit.Policy{Unit: "requests", Limit: int64(6000 / tt.want), Remaining: int64(float64(last) / tt.want),
				Window: time.Minute, Reset: time.Duration(6000-last) * 10 * time.Millisecond,
				HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true, Refills: true}
			if p != want {
				t.Errorf("tokens in requests = %+v; want %+v (a cost of %v)", p, want, tt.want)
			}
		})
	}
}

// TestOtherUnitsSpent checks a refilling bucket that cannot pay for one
// more request: it is spent until its refill covers the difference.
func TestOtherUnitsSpent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o learned
	o.read("api", tokens(400), "requests", 1, false, t0)
	o.read("api", tokens(250), "requests", 1, false, t0.Add(time.Second))        // 250: 150 + 100 refilled
	q := o.read("api", tokens(150), "requests", 1, false, t0.Add(2*time.Second)) // 200: the median of two is the larger
	p := q.Policies[2]
	// 150 of the 250 a request costs: 100 more, a second of refill.
	if p.Remaining != 0 || p.Reset != time.Second {
		t.Errorf("remaining %d, reset %v; want 0, 1s (100 tokens at 100 a second)", p.Remaining, p.Reset)
	}
	if d, ok := q.Wait(); !ok || d != time.Second {
		t.Errorf("Wait() = %v, %v; want 1s, true", d, ok)
	}
}

// TestOtherUnitsWindow checks a window in another unit: the fall of its
// remaining within one window (the same end, whole-second resets) is the
// cost; a new window gives no sample.
func TestOtherUnitsWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	win := func(remaining int64, reset time.Duration) ratelimit.Reading {
		return ratelimit.Reading{Policies: []ratelimit.Policy{
			{Unit: "points", Limit: 1000, Remaining: remaining, Window: time.Minute, Reset: reset,
				HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true},
		}}
	}
	var o learned
	o.read("api", win(900, 30*time.Second), "requests", 2, false, t0)
	o.read("api", win(1000, 60*time.Second), "requests", 2, false, t0.Add(time.Second)) // a new window
	q := o.read("api", win(950, 59*time.Second), "requests", 2, false, t0.Add(2*time.Second))
	if len(q.Policies) != 2 {
		t.Fatalf("policies = %+v; want the points policy read in requests", q.Policies)
	}
	// 50 points for a request of 2 units: 25 points a unit.
	if p := q.Policies[1]; p.Limit != 40 || p.Remaining != 38 || p.Unit != "requests" {
		t.Errorf("points in requests = %+v; want 40 of which 38 remain", p)
	}
}

// TestOtherUnitsBounded checks that memory is bounded however many keys
// come.
func TestOtherUnitsBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o learned
	for i := range learnedKeys + 100 {
		o.read(fmt.Sprint("key", i), tokens(5000), "requests", 1, false, t0)
		if len(o.keys) > learnedKeys {
			t.Fatalf("%d keys remembered after %d; want ≤ %d", len(o.keys), i+1, learnedKeys)
		}
	}
	// A reading in the counted unit alone costs nothing.
	q := ratelimit.Reading{Policies: tokens(5000).Policies[:1]}
	var p learned
	p.read("api", q, "requests", 1, false, t0)
	if p.keys != nil {
		t.Errorf("a reading with no other unit was remembered")
	}
}

// TestLimiterAvailable checks the cap of a key's bucket by what a
// server's refilling bucket holds: Limiter{10/s, burst 10}, one unit
// gone and answered by a response saying 3 remain: 3 go at once, then one
// every 100 ms; a server fuller than the key's bucket gives nothing.
func TestLimiterAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 10}
		w := l.For("k")
		ctx := context.Background()
		if err := w.WaitN(ctx, 1); err != nil { // in flight: its response not yet come
			t.Fatal(err)
		}
		a := w.(Adapter)
		a.Adapt(ctx, Feedback{Cost: 0, Available: 3, HasAvailable: true})
		start := time.Now()
		var got []time.Duration
		for range 5 {
			if err := w.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start))
		}
		// The response of Cost 0 counts 1 (Cost's zero), so the unit in
		// flight is answered: 3 remain, as the server counts them.
		want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("turns after Available 3 = %v; want %v", got, want)
		}
		a.Adapt(ctx, Feedback{Available: 10, HasAvailable: true})
		start = time.Now()
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("after Available 10 the next went in %v; want 100ms: a fuller server gives no units", d)
		}

		// Units in flight the server has not counted are taken off: two
		// gone, one answered (the response saying 3 remain), one in
		// flight: 2 at once.
		w = l.For("k2")
		if err := w.WaitN(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w.(Adapter).Adapt(ctx, Feedback{Cost: 1, Available: 3, HasAvailable: true})
		start = time.Now()
		got = got[:0]
		for range 3 {
			if err := w.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start))
		}
		if want := []time.Duration{0, 0, 100 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("turns after Available 3 with one in flight = %v; want %v", got, want)
		}
	})
}

// TestTransportOtherUnits is the user who tells nothing: a fake of
// OpenAI's API allowing 60 requests and 6,000 tokens a minute, requests
// of 202 tokens (the tokens bind: 29.7 a minute), 8 workers for three
// minutes through a zero-config Transport. Before the cost was learned,
// each pause's end let the queued requests into a spent tokens bucket:
// 135 pauses, about one 429 per success and 8% of the requests given up.
func TestTransportOtherUnits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewOpenAI(60, 6000)
		s.PromptTokens = 2
		var (
			mu      sync.Mutex
			giveUps int
		)
		tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: 100 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1},
			OnEvent: func(e Event) {
				if e.Kind == EventGiveUp {
					mu.Lock()
					giveUps++
					mu.Unlock()
				}
			}}
		start := time.Now()
		closedLoop(t, &http.Client{Transport: tr}, 8, 3*time.Minute, `{"max_tokens":200}`)
		wall := time.Since(start)
		capacity := (6000 + 6000*wall.Minutes()) / 202 // full, then 100 tokens a second
		st := s.Stats()
		if got := float64(st.Admitted) / capacity; got < 0.95 {
			t.Errorf("%d admitted in %v: %.2f of the tokens' capacity; want ≥ 0.95", st.Admitted, wall, got)
		}
		if float64(st.Rejected) > 0.01*float64(st.Admitted) {
			t.Errorf("%d refused for %d admitted; want ≤ 1%%", st.Rejected, st.Admitted)
		}
		if giveUps > 0 {
			t.Errorf("%d given up; want none", giveUps)
		}
		t.Logf("admitted %d (%.3f of capacity), refused %d, in %v", st.Admitted, float64(st.Admitted)/capacity, st.Rejected, wall)
	})
}
