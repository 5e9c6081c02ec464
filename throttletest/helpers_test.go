package throttletest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
	"github.com/throttle-go/throttle/throttletest"
)

// parseQuota is the root package's header parser, in one place: a rename of
// it is a one-line change here.
func parseQuota(h http.Header, received time.Time) ratelimit.Reading {
	return ratelimit.Parse(h, received)
}

// answer is one response as a test looks at it.
type answer struct {
	status int
	header http.Header
	body   string
	at     time.Time // when it was received
}

// send sends one request to h in-process (no socket, so it runs on a
// synctest bubble's fake time) and returns the answer.
func send(t *testing.T, h http.Handler, body string, header ...string) answer {
	t.Helper()
	a, err := trySend(h, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// trySend is send for goroutines other than the test's: it returns the
// error instead of failing the test.
func trySend(h http.Handler, body string, header ...string) (answer, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/v1/x", r)
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&throttletest.Direct{Handler: h}).RoundTrip(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), at: time.Now()}, nil
}

// sleepUntil sleeps until d after start.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
}

// onlyPolicy returns q's single policy, failing the test when there is not
// exactly one.
func onlyPolicy(t *testing.T, q ratelimit.Reading) ratelimit.Policy {
	t.Helper()
	if len(q.Policies) != 1 {
		t.Fatalf("ParseQuota found %d policies (%+v); want 1", len(q.Policies), q.Policies)
	}
	return q.Policies[0]
}

// present is a date after 2001-09-09, when epoch seconds reach 1e9.
var present = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// toPresent moves a synctest bubble's clock, which starts at 2000-01-01,
// to 2026: an epoch-second reset of 2000 is below 1e9, and parsers that
// tell epochs from delays by size (throttle's does) read it as a delay.
// Sleeping is instant in a bubble whose goroutines all wait.
func toPresent() {
	time.Sleep(time.Until(present))
}
