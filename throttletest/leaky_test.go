package throttletest_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestLeakyBucket checks nginx's rule: one admission per interval, on a
// clock of whole milliseconds, a refusal changing nothing, no header.
func TestLeakyBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewLeakyBucket(10) // 100 ms apart
		start := time.Now()
		steps := []struct {
			at   time.Duration
			want int
		}{
			{0, 200},
			{99 * time.Millisecond, 503},
			{100 * time.Millisecond, 200},
			{150 * time.Millisecond, 503},
			{200*time.Millisecond + 900*time.Microsecond, 200}, // ms 200: the fraction is not seen
			// 99.9 ms after the last admission, but ms 300 is 100 whole
			// ms after ms 200: admitted.
			{300*time.Millisecond + 800*time.Microsecond, 200},
			{400*time.Millisecond + 700*time.Microsecond, 200},
			{450 * time.Millisecond, 503},
		}
		for _, st := range steps {
			sleepUntil(start, st.at)
			a := send(t, s, "")
			if a.status != st.want {
				t.Errorf("request at %v: status %d; want %d", st.at, a.status, st.want)
			}
			q := parseQuota(a.header, a.at)
			if len(q.Policies) != 0 || q.HasRetryAfter {
				t.Errorf("request at %v: headers say %+v; want nothing (nginx sends no rate-limit header)", st.at, q)
			}
		}
		if got, want := s.Stats(), (throttletest.Stats{Arrivals: 8, Admitted: 5, Rejected: 3, Units: 5}); got != want {
			t.Errorf("Stats() = %+v; want %+v", got, want)
		}
	})
}

// TestLeakyBucketStream sends a request every millisecond and checks the
// admissions are exactly those nginx's integer arithmetic allows: at 3/s
// the interval is 333.3 ms, which nginx reads as 334 whole ms.
func TestLeakyBucketStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewLeakyBucket(3)
		s.Status = http.StatusTooManyRequests
		start := time.Now()
		for i := range 1500 {
			sleepUntil(start, time.Duration(i)*time.Millisecond)
			a := send(t, s, "")
			if a.status != 200 && a.status != 429 {
				t.Fatalf("status %d; want 200 or 429", a.status)
			}
		}
		var got []time.Duration
		for _, at := range s.Admissions() {
			got = append(got, at.Sub(start))
		}
		want := []time.Duration{0, 334 * time.Millisecond, 668 * time.Millisecond, 1002 * time.Millisecond, 1336 * time.Millisecond}
		if len(got) != len(want) {
			t.Fatalf("admissions at %v; want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("admissions at %v; want %v", got, want)
			}
		}
		if most, _ := s.MaxIn(time.Second); most != 3 {
			t.Errorf("MaxIn(1s) = %d; want 3", most)
		}
		if most, _ := s.MaxIn(334 * time.Millisecond); most != 1 {
			t.Errorf("MaxIn(334ms) = %d; want 1", most)
		}
		if got, want := s.PerWindow(start, time.Second), []int{3, 2}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("PerWindow(start, 1s) = %v; want %v", got, want)
		}
		if st := s.Stats(); st.Arrivals != 1500 || st.Rejected != 1495 {
			t.Errorf("Stats() = %+v; want 1500 arrivals, 1495 rejected", st)
		}
	})
}
