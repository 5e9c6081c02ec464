package throttle

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// githubSecondary is GitHub's 403 for a secondary rate limit without a
// Retry-After: its primary limit far from spent.
func githubSecondary(r *http.Request) *http.Response {
	body := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
		`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4990")
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: http.StatusForbidden, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}
}

// TestTransportSecondaryLimitBody: a secondary rate limit with no Retry-After
// (GitHub's 403, told by its body) pauses the key a minute: 16 workers
// through the zero Transport send nothing in the minute after it but the
// requests already in flight (their refusals are the same limit); the
// body of a refusal returned to its caller is whole. The first retries
// after the minute meet the limit again: a second in a row pauses the key
// two minutes (MaxRetryAfter allowing); then the requests go.
func TestTransportSecondaryLimitBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var arrivals []time.Duration
		start := time.Now()
		// The server's secondary limit: every request from 1 s to 71 s.
		var firstAt time.Duration
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(10 * time.Millisecond) // on the way
			mu.Lock()
			now := time.Since(start)
			arrivals = append(arrivals, now)
			refuse := now >= time.Second && now < 71*time.Second
			if refuse && firstAt == 0 {
				firstAt = now
			}
			mu.Unlock()
			if refuse {
				return githubSecondary(r), nil
			}
			return okResponse(r, "{}"), nil
		})
		tr := &Transport{Base: base, Retry: RetryPolicy{MaxRetryAfter: 10 * time.Minute}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for time.Since(start) < 4*time.Minute {
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.github.test/repos/o/r", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Errorf("request: %v", err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusForbidden && !strings.Contains(string(b), "secondary rate limit") {
						t.Errorf("a refusal's body reached its caller cut: %q", b)
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		// In the minute after the first secondary limit: only the
		// requests that were in flight then (at most one a worker).
		in := 0
		for _, a := range arrivals {
			if a > firstAt && a < firstAt+time.Minute {
				in++
			}
		}
		if firstAt == 0 || in > 16 {
			t.Errorf("first secondary limit at %v; %d requests reached the server in the minute after it; want at most 16 (those in flight)", firstAt, in)
		}
		// The second, in a row after the pause: two minutes more.
		var after []time.Duration
		for _, a := range arrivals {
			if a >= firstAt+time.Minute {
				after = append(after, a)
			}
		}
		if len(after) == 0 || after[0] > firstAt+time.Minute+time.Second {
			t.Fatalf("no request in the second after the minute's pause (first at %v)", after)
		}
		quiet := 0
		for _, a := range after {
			if a > after[0] && a < after[0]+2*time.Minute {
				quiet++
			}
		}
		if quiet > 16 {
			t.Errorf("%d requests reached the server in the two minutes after the second secondary limit; want at most 16", quiet)
		}
	})
}
