package servertest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// sends lists, per server kind, the rate-limit fields it sends on a
// success and on a 429, as the kinds' comments in servers_test.go and
// nginx_test.go describe them.
var sends = map[string]struct{ ok, refused []string }{
	"httprate sliding":              {ok: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, refused: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}},
	"httprate fixed":                {ok: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, refused: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}},
	"ulule/limiter":                 {ok: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, refused: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}},
	"sethvargo/go-limiter":          {ok: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, refused: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}},
	"throttled GCRA":                {ok: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, refused: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}},
	"tollbooth":                     {ok: []string{"X-Rate-Limit-Limit", "X-Rate-Limit-Duration", "X-Rate-Limit-Request-Remote-Addr", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset"}, refused: []string{"X-Rate-Limit-Limit", "X-Rate-Limit-Duration", "X-Rate-Limit-Request-Remote-Addr", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset"}},
	"nginx limit_req":               {},
	"nginx limit_req burst nodelay": {},
}

// rateFields are the fields of a response that are about rate limits.
func rateFields(h http.Header) []string {
	var out []string
	for k := range h {
		l := strings.ToLower(k)
		if strings.Contains(l, "rate") || l == "retry-after" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestServerHeaders sends each server requests without pause until it
// refuses one, and checks that it answers 429 and sends the rate-limit
// fields its kind's comment says, no more, no fewer, on a success and on
// the 429. It logs both responses and what ratelimit.Parse reads of them:
// the matrix's diagnosis starts here.
func TestServerHeaders(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			s := k.start(t, rng, shortRun)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			var okH, refusedH http.Header
			for i := 0; i < 10000 && refusedH == nil; i++ {
				resp, err := client.Get(s.url)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				received := time.Now()
				switch resp.StatusCode {
				case http.StatusOK:
					if okH == nil {
						okH = resp.Header
						t.Logf("200: %s\n\tread: %s", show(resp.Header), read(resp.Header, received))
					}
				case http.StatusTooManyRequests:
					refusedH = resp.Header
					t.Logf("429 after %d successes: %s\n\tread: %s", i, show(resp.Header), read(resp.Header, received))
				default:
					t.Fatalf("status %d; want 200 or 429", resp.StatusCode)
				}
			}
			if okH == nil || refusedH == nil {
				t.Fatalf("%s %s: no 200 and 429 in 10000 requests", k.name, s.params)
			}
			want := sends[k.name]
			if got, want := rateFields(okH), sorted(want.ok); !slices.Equal(got, want) {
				t.Errorf("%s: a 200 has the rate-limit fields %q; want %q", k.name, got, want)
			}
			if got, want := rateFields(refusedH), sorted(want.refused); !slices.Equal(got, want) {
				t.Errorf("%s: a 429 has the rate-limit fields %q; want %q", k.name, got, want)
			}
		})
	}
}

// sorted returns a sorted copy of s.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// show lists h's rate-limit fields and Date.
func show(h http.Header) string {
	var b strings.Builder
	for _, k := range append(rateFields(h), "Date") {
		fmt.Fprintf(&b, "%s: %s; ", k, strings.Join(h.Values(k), ", "))
	}
	return b.String()
}

// read describes what ratelimit.Parse reads of h.
func read(h http.Header, received time.Time) string {
	q := ratelimit.Parse(h, received)
	var b strings.Builder
	for _, p := range q.Policies {
		fmt.Fprintf(&b, "policy %q", p.Name)
		if p.HasLimit {
			fmt.Fprintf(&b, " limit %d", p.Limit)
		}
		if p.HasRemaining {
			fmt.Fprintf(&b, " remaining %d", p.Remaining)
		}
		if p.HasWindow {
			fmt.Fprintf(&b, " window %v", p.Window)
		}
		if p.HasReset {
			fmt.Fprintf(&b, " reset %v", p.Reset.Round(time.Millisecond))
		}
		if p.Refills {
			b.WriteString(" refills")
		}
		b.WriteString("; ")
	}
	if q.HasRetryAfter {
		fmt.Fprintf(&b, "Retry-After %v; ", q.RetryAfter)
	}
	if w, ok := q.Wait(); ok {
		fmt.Fprintf(&b, "wait %v", w.Round(time.Millisecond))
	} else {
		b.WriteString("no wait")
	}
	return b.String()
}
