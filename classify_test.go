package throttle

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// TestRetryClassify checks that a Classify hook steers the decision, and
// that the Transport's bounds hold whatever it says.
func TestRetryClassify(t *testing.T) {
	conflict := func(o Outcome) Decision {
		if o.Response != nil && o.Response.StatusCode == http.StatusConflict {
			return Decision{Retry: true, Delay: 3 * time.Second} // HasDelay only for a zero Delay
		}
		return DefaultClassify(o)
	}
	tests := []struct {
		name     string
		classify func(Outcome) Decision
		status   int
		noRewind bool
		arrivals []time.Duration
		reason   string
	}{
		{name: "hook retries a 409 after its delay", classify: conflict, status: 409,
			arrivals: []time.Duration{0, 3 * time.Second}},
		{name: "hook defers to the default", classify: conflict, status: 404, arrivals: []time.Duration{0}},
		{name: "hook cannot replay a streamed body", classify: conflict, status: 409, noRewind: true,
			arrivals: []time.Duration{0}, reason: "request body cannot be replayed"},
		{name: "hook's delay beyond MaxRetryAfter", status: 200, arrivals: []time.Duration{0},
			classify: func(Outcome) Decision { return Decision{Retry: true, Delay: time.Hour} },
			reason:   "server asked to wait longer than MaxRetryAfter"},
		{name: "hook gives up a 200", status: 200, arrivals: []time.Duration{0},
			classify: func(Outcome) Decision { return Decision{Reason: "body says failed"} },
			reason:   "body says failed"},
		{name: "hook with a zero delay retries after the floor", status: 418, arrivals: []time.Duration{0, 50 * time.Millisecond},
			classify: func(o Outcome) Decision { return Decision{Retry: o.Response.StatusCode == 418, HasDelay: true} }},
		{name: "hook without delay gets the backoff", status: 418,
			classify: func(o Outcome) Decision { return Decision{Retry: o.Response.StatusCode == 418} },
			arrivals: nil}, // checked against the retry event below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(status(tt.status), status(200))
				var ev events
				tr := &Transport{Base: s, Retry: RetryPolicy{Classify: tt.classify}, OnEvent: ev.add}
				var body io.Reader = strings.NewReader("payload")
				if tt.noRewind {
					body = io.NopCloser(body)
				}
				req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://api.example/x", body)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := tt.arrivals
				if want == nil {
					r := ev.of(EventRetry)
					if len(r) != 1 || r[0].Delay < 250*time.Millisecond || r[0].Delay > 750*time.Millisecond {
						t.Fatalf("retry events %+v; want one after a backoff of 500ms±50%%", r)
					}
					want = []time.Duration{0, r[0].Delay}
				}
				if !slices.Equal(s.arrivals, want) {
					t.Errorf("attempts at %v; want %v", s.arrivals, want)
				}
				g := ev.of(EventGiveUp)
				switch {
				case tt.reason == "" && len(g) != 0:
					t.Errorf("give-up events %+v; want none", g)
				case tt.reason != "" && (len(g) != 1 || g[0].Reason != tt.reason):
					t.Errorf("give-up events %+v; want one with reason %q", g, tt.reason)
				}
			})
		})
	}
}

// TestRetryClassifyPause checks that a hook's pause holds off every caller
// of the key, at most MaxRetryAfter.
func TestRetryClassifyPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(400), status(200))
		var seen []Outcome
		tr := &Transport{Base: s, Retry: RetryPolicy{MaxRetryAfter: 5 * time.Second,
			Classify: func(o Outcome) Decision {
				seen = append(seen, o)
				if o.Response.StatusCode == 400 {
					return Decision{Pause: time.Hour, Reason: "quota of the day spent"}
				}
				return Decision{}
			}}}
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("RoundTrip = %v, %v; want the 400", resp, err)
		}
		resp.Body.Close()
		resp, err = get(t, tr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := []time.Duration{0, 5 * time.Second}; !slices.Equal(s.arrivals, want) {
			t.Errorf("attempts at %v; want %v, the pause capped at MaxRetryAfter", s.arrivals, want)
		}
		if len(seen) != 2 || seen[0].Attempt != 1 || seen[0].Request == nil || seen[0].Err != nil {
			t.Errorf("Classify saw %+v; want two first attempts", seen)
		}
	})
}

// TestDefaultClassify checks the default decision on outcomes alone.
func TestDefaultClassify(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		status  int
		kv      []string
		reading ratelimit.Reading
		wait    time.Duration // HasWait when not 0
		want    Decision
	}{
		{name: "200", method: "GET", status: 200, want: Decision{}},
		{name: "429 backoff", method: "POST", status: 429, want: Decision{Retry: true}},
		{name: "429 server wait", method: "POST", status: 429, wait: 2 * time.Second,
			want: Decision{Retry: true, Delay: 2 * time.Second, HasDelay: true}},
		{name: "403 retry-after", method: "POST", status: 403, reading: ratelimit.Reading{RetryAfter: 60 * time.Second, HasRetryAfter: true},
			want: Decision{Retry: true, Delay: time.Minute, HasDelay: true, Pause: time.Minute}},
		{name: "403 spent quota", method: "GET", status: 403, wait: 30 * time.Second,
			want: Decision{Retry: true, Delay: 30 * time.Second, HasDelay: true, Pause: 30 * time.Second}},
		{name: "403 forbidden", method: "GET", status: 403, want: Decision{}},
		{name: "500 GET", method: "GET", status: 500, want: Decision{Retry: true}},
		{name: "504 DELETE", method: "DELETE", status: 504, want: Decision{Retry: true}},
		{name: "502 POST", method: "POST", status: 502, want: Decision{Reason: "method is not idempotent"}},
		{name: "503 POST with Idempotency-Key", method: "POST", status: 503, kv: []string{"Idempotency-Key", "k"}, want: Decision{Retry: true}},
		{name: "505 GET", method: "GET", status: 505, want: Decision{Reason: "status is not retried"}},
		{name: "x-should-retry false on 429", method: "GET", status: 429, kv: []string{"X-Should-Retry", "false"},
			want: Decision{Reason: "server said x-should-retry: false"}},
		{name: "x-should-retry false on 403 limit keeps the pause", method: "GET", status: 403, kv: []string{"X-Should-Retry", "false"},
			reading: ratelimit.Reading{RetryAfter: time.Second, HasRetryAfter: true}, want: Decision{Pause: time.Second, Reason: "server said x-should-retry: false"}},
		{name: "x-should-retry true on 400", method: "POST", status: 400, kv: []string{"x-should-retry", "True"}, want: Decision{Retry: true}},
		{name: "x-should-retry true on 200 is ignored", method: "GET", status: 200, kv: []string{"X-Should-Retry", "true"}, want: Decision{}},
		{name: "x-should-retry garbage", method: "POST", status: 500, kv: []string{"X-Should-Retry", "maybe"},
			want: Decision{Reason: "method is not idempotent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://api.example/x", strings.NewReader("b"))
			resp := respond(req, tt.status, tt.kv...)
			if len(tt.kv) == 2 && tt.kv[0] == "Idempotency-Key" { // a request header
				req.Header.Set(tt.kv[0], tt.kv[1])
			}
			// x-should-retry is read as the Transport reads it, into the
			// outcome's Reading.
			r := ratelimit.Parse(resp.Header, time.Now())
			tt.reading.ShouldRetry, tt.reading.HasShouldRetry = r.ShouldRetry, r.HasShouldRetry
			o := Outcome{Request: req, Response: resp, Attempt: 1, Reading: tt.reading, Wait: tt.wait, HasWait: tt.wait != 0}
			if got := DefaultClassify(o); got != tt.want {
				t.Errorf("DefaultClassify = %+v; want %+v", got, tt.want)
			}
		})
	}
}
