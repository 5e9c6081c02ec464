package throttle

import (
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// TestResetAtBound: the responses that state one reset instant bound it
// by the earliest of their receive time plus reset; a response stating
// another instant starts again from its own, and a reset given as a
// delay is left as it is.
func TestResetAtBound(t *testing.T) {
	var o learned
	at := time.Unix(1_000_000_000, 0) // the instant, on the server's clock
	t0 := time.Unix(2_000_000_000, 0) // our clock: a skew changes nothing
	reading := func(reset time.Duration, stated time.Time) ratelimit.Reading {
		return ratelimit.Reading{Policies: []ratelimit.Policy{{Unit: "requests", Limit: 50, Remaining: 0, Window: 10 * time.Second, Reset: reset, ResetAt: stated,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true}}}
	}
	for _, step := range []struct {
		name   string
		after  time.Duration // the response came at t0+after
		reset  time.Duration // its reset, against its whole-second Date
		stated time.Time
		want   time.Duration
	}{
		{"the first", 0, time.Second, at, time.Second},
		{"the same second's Date, 600ms on", 600 * time.Millisecond, time.Second, at, 400 * time.Millisecond},
		{"the next second's Date", 1100 * time.Millisecond, 0, at, 0},
		{"a later bound adds nothing", 900 * time.Millisecond, time.Second, at, 100 * time.Millisecond},
		{"another instant", 1200 * time.Millisecond, 2 * time.Second, at.Add(2 * time.Second), 2 * time.Second},
		{"its bound", 1500 * time.Millisecond, 2 * time.Second, at.Add(2 * time.Second), 1700 * time.Millisecond},
		{"a delay", 1600 * time.Millisecond, 5 * time.Second, time.Time{}, 5 * time.Second},
	} {
		q := o.read("k", reading(step.reset, step.stated), "requests", 1, false, t0.Add(step.after))
		if got := q.Policies[0].Reset; got != step.want {
			t.Errorf("%s: reset %v; want %v", step.name, got, step.want)
		}
	}
}

// TestResetAtResumes: a server of 3 requests per whole-second window
// states its reset as a date, measured against a whole-second Date. The
// third request, at 0.99 s, spends the window ending at 1 s and reads a
// reset a second away; the first, at 0.30 s, said the same instant is by
// 1.30 s, so the fourth goes at 1.30 s, not at 1.99 s.
func TestResetAtResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // a whole second in a bubble
		var sent []time.Duration
		used := map[int64]int{}
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			now := time.Now()
			sent = append(sent, now.Sub(start))
			sec := now.Unix()
			status := http.StatusOK
			if used[sec] < 3 {
				used[sec]++
			} else {
				status = http.StatusTooManyRequests
			}
			return respond(req, status, "Date", now.UTC().Format(http.TimeFormat),
				"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", strconv.Itoa(3-used[sec]),
				"X-RateLimit-Reset", time.Unix(sec+1, 0).UTC().Format(http.TimeFormat)), nil
		})
		c := &http.Client{Transport: &Transport{Base: base, DisableDeclaredLimits: true}}
		get := func() int {
			resp, err := c.Get("http://api.test/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, at := range []time.Duration{300 * time.Millisecond, 650 * time.Millisecond, 990 * time.Millisecond} {
			time.Sleep(at - time.Since(start))
			if code := get(); code != http.StatusOK {
				t.Fatalf("request at %v: %d", at, code)
			}
		}
		if code := get(); code != http.StatusOK {
			t.Fatalf("the fourth request: %d", code)
		}
		if want := 1300 * time.Millisecond; sent[3] != want {
			t.Errorf("requests went at %v; want the fourth at %v", sent, want)
		}
	})
}
