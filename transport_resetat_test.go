package throttle

import (
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// TestResetAtBound: the responses that state one reset instant bound it
// by the earliest of their receive time plus reset; a response stating
// another instant starts again from its own, and a reset given as a
// delay is left as it is.
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
