package learn

import (
	"fmt"
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

func tokens(remaining int64) ratelimit.Reading {
	return ratelimit.Reading{Policies: []ratelimit.Policy{
		{Unit: "requests", Limit: 60, Remaining: 59, Window: time.Minute, Reset: time.Second,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true, Refills: true},
		{Unit: "tokens", Limit: 6000, Remaining: remaining, Window: time.Minute, Reset: time.Duration(6000-remaining) * 10 * time.Millisecond,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true, Refills: true},
	}}
}

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
			var o Keys
			var q ratelimit.Reading
			for i, r := range tt.remaining {
				rejected := tt.rejected != nil && tt.rejected[i]
				q = o.Read("api", tokens(r), "requests", 1, rejected, t0.Add(time.Duration(i)*time.Second))
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

func TestOtherUnitsSpent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o Keys
	o.Read("api", tokens(400), "requests", 1, false, t0)
	o.Read("api", tokens(250), "requests", 1, false, t0.Add(time.Second))        // 250: 150 + 100 refilled
	q := o.Read("api", tokens(150), "requests", 1, false, t0.Add(2*time.Second)) // 200: the median of two is the larger
	p := q.Policies[2]
	// 150 of the 250 a request costs: 100 more, a second of refill.
	if p.Remaining != 0 || p.Reset != time.Second {
		t.Errorf("remaining %d, reset %v; want 0, 1s (100 tokens at 100 a second)", p.Remaining, p.Reset)
	}
	if d, ok := q.Wait(); !ok || d != time.Second {
		t.Errorf("Wait() = %v, %v; want 1s, true", d, ok)
	}
}

func TestOtherUnitsWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	win := func(remaining int64, reset time.Duration) ratelimit.Reading {
		return ratelimit.Reading{Policies: []ratelimit.Policy{
			{Unit: "points", Limit: 1000, Remaining: remaining, Window: time.Minute, Reset: reset,
				HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true},
		}}
	}
	var o Keys
	o.Read("api", win(900, 30*time.Second), "requests", 2, false, t0)
	o.Read("api", win(1000, 60*time.Second), "requests", 2, false, t0.Add(time.Second)) // a new window
	q := o.Read("api", win(950, 59*time.Second), "requests", 2, false, t0.Add(2*time.Second))
	if len(q.Policies) != 2 {
		t.Fatalf("policies = %+v; want the points policy read in requests", q.Policies)
	}
	// 50 points for a request of 2 units: 25 points a unit.
	if p := q.Policies[1]; p.Limit != 40 || p.Remaining != 38 || p.Unit != "requests" {
		t.Errorf("points in requests = %+v; want 40 of which 38 remain", p)
	}
}

func TestOtherUnitsBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o Keys
	for i := range learnedKeys + 100 {
		o.Read(fmt.Sprint("key", i), tokens(5000), "requests", 1, false, t0)
		if len(o.keys) > learnedKeys {
			t.Fatalf("%d keys remembered after %d; want ≤ %d", len(o.keys), i+1, learnedKeys)
		}
	}
	// A reading in the counted unit alone costs nothing.
	q := ratelimit.Reading{Policies: tokens(5000).Policies[:1]}
	var p Keys
	p.Read("api", q, "requests", 1, false, t0)
	if p.keys != nil {
		t.Errorf("a reading with no other unit was remembered")
	}
}
