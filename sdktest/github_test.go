package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/sdktest"
)

// githubURL is the base URL the tests give go-github; the fake, as the
// client's transport, answers on any host.
const githubURL = "https://api.github.test/"

// githubClient returns a go-github client of the API at base over hc.
func githubClient(hc *http.Client, base string) *github.Client {
	c := github.NewClient(hc)
	c.BaseURL, _ = url.Parse(base)
	return c
}

// githubKind names an error go-github returned; "local" marks the errors
// of its pre-checks, which send nothing.
func githubKind(err error) string {
	var rle *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		return "ErrWouldExceedDeadline"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.As(err, &rle):
		if strings.Contains(rle.Message, "not making remote request") {
			return "RateLimitError(local)"
		}
		return "RateLimitError"
	case errors.As(err, &abuse):
		if strings.Contains(abuse.Message, "not making remote request") {
			return "AbuseRateLimitError(local)"
		}
		return "AbuseRateLimitError"
	}
	return err.Error()
}

// githubSetup is one way of combining go-github's own rate-limit handling
// with the Transport.
type githubSetup struct {
	name string
	// sleep sets go-github's SleepUntilPrimaryRateLimitResetWhenRateLimited
	// on each call's context.
	sleep     bool
	transport bool
	disable   bool // go-github's DisableRateLimitCheck
}

var githubSetups = []githubSetup{
	{name: "bare go-github"},
	{name: "bare go-github, SleepUntilPrimaryRateLimitReset", sleep: true},
	{name: "go-github defaults + Transport", transport: true},
	{name: "go-github SleepUntilPrimaryRateLimitReset + Transport", sleep: true, transport: true},
	{name: "go-github DisableRateLimitCheck + Transport", transport: true, disable: true},
}

// call returns the setup's call i against fake, in-process: GET
// /repos/octo/r{i}, so the fake counts each call's attempts by its path.
func (s githubSetup) call(fake *sdktest.GitHub, rec *recorder) func(ctx context.Context, i int) error {
	return s.callVia(fake, githubURL, rec)
}

// callVia is call with the requests sent through rt to base.
func (s githubSetup) callVia(rt http.RoundTripper, base string, rec *recorder) func(ctx context.Context, i int) error {
	hc := &http.Client{Transport: rt}
	if s.transport {
		hc.Transport = &throttle.Transport{Base: rt, OnEvent: rec.on}
	}
	c := githubClient(hc, base)
	c.DisableRateLimitCheck = s.disable
	return func(ctx context.Context, i int) error {
		if s.sleep {
			ctx = context.WithValue(ctx, github.SleepUntilPrimaryRateLimitResetWhenRateLimited, true)
		}
		_, _, err := c.Repositories.Get(ctx, "octo", fmt.Sprintf("r%d", i))
		return err
	}
}

// TestGitHubPrimary runs 15 calls, 3 at a time, against a primary limit
// of 5 requests per 2 s window (reset at a whole epoch second), with 10 s
// per call. go-github's pre-check fails calls locally once a response said
// remaining 0, also with the Transport installed; with it turned off, the
// Transport holds the calls until the reset and every call succeeds, and
// none meets a 403.
//
// That last setup runs on the real clock, through a loopback socket (about
// 6 s): in a bubble the three calls' requests and responses meet at one
// instant, and there the Transport lets a sixth request into the window
// (in about a third of the runs) — it does not count the requests still in
// flight against a reading of x-ratelimit-remaining. The socket's latency
// orders them as a server's does.
func TestGitHubPrimary(t *testing.T) {
	for _, s := range githubSetups {
		t.Run(s.name, func(t *testing.T) {
			fake := sdktest.NewGitHub(sdktest.GitHubLimits{Primary: 5, Window: 2 * time.Second})
			call, run := s.call, bubble
			if s.transport && s.disable {
				srv := httptest.NewServer(fake)
				defer srv.Close()
				call = func(_ *sdktest.GitHub, rec *recorder) func(context.Context, int) error {
					return s.callVia(http.DefaultTransport, srv.URL+"/", rec)
				}
				run = func(t *testing.T, f func(t *testing.T)) { f(t) }
			}
			run(t, func(t *testing.T) {
				rec := &recorder{}
				res := runCalls(15, 3, 10*time.Second, call(fake, rec), githubKind)
				ok, primary, secondary := fake.Counts()
				mean, maxN := attemptStats(fake.Attempts())
				t.Logf("%s: %v; server: %d ok, %d primary 403, %d secondary 403; attempts per call sent mean %.2f max %d; events %v",
					s.name, res, ok, primary, secondary, mean, maxN, rec.counts())
				if ok != res.ok {
					t.Errorf("the server counted %d successes, the callers %d", ok, res.ok)
				}
				switch {
				case s.transport && s.disable:
					if res.ok != 15 || primary != 0 {
						t.Errorf("%d of 15 calls succeeded, %d primary 403s; want 15 and 0: the Transport holds the calls until the reset", res.ok, primary)
					}
				case !s.sleep && !s.transport:
					// What the README tells: go-github's pre-check fails
					// calls locally.
					if res.errs["RateLimitError(local)"] == 0 {
						t.Errorf("errors %v; want go-github's local RateLimitError (has go-github changed? update the README)", res.errs)
					}
				case !s.sleep:
					// With the Transport too, unless no response said
					// remaining 0 before a call began: the Transport spreads
					// a window's last units to its reset, and a response
					// that comes after the reset sets nothing go-github
					// refuses on (15 of 15 in 2 runs of about 20).
					if res.errs["RateLimitError(local)"] == 0 && (res.ok != 15 || primary != 0) {
						t.Errorf("errors %v, %d of 15 succeeded, %d primary 403s; want go-github's local RateLimitError, or every call through (has go-github changed? update the README)", res.errs, res.ok, primary)
					}
				}
			})
		})
	}
}

// TestGitHubSecondary runs 12 calls, 4 at a time, against a secondary
// limit of 3 requests a second (then 403 with retry-after: 1 and the
// documented message), with 10 s per call. The Transport pauses and
// retries the 403s; go-github alone returns *AbuseRateLimitError and then
// fails calls locally until the retry-after passes.
func TestGitHubSecondary(t *testing.T) {
	for _, s := range githubSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewGitHub(sdktest.GitHubLimits{Secondary: 3, SecondaryRetryAfter: 1})
				rec := &recorder{}
				res := runCalls(12, 4, 10*time.Second, s.call(fake, rec), githubKind)
				ok, primary, secondary := fake.Counts()
				mean, maxN := attemptStats(fake.Attempts())
				t.Logf("%s: %v; server: %d ok, %d primary 403, %d secondary 403; attempts per call sent mean %.2f max %d; events %v",
					s.name, res, ok, primary, secondary, mean, maxN, rec.counts())
				if ok != res.ok {
					t.Errorf("the server counted %d successes, the callers %d", ok, res.ok)
				}
				if s.transport && res.ok != 12 {
					t.Errorf("%d of 12 calls succeeded; want all, the Transport pausing and retrying the 403s", res.ok)
				}
			})
		})
	}
}

// TestGitHubPrimaryLongReset runs 8 calls one after another against a
// primary limit of 5 an hour, 2 s per call: what a caller gets once the
// reset is beyond what the Transport waits (MaxRetryAfter, 1 minute) and
// beyond the call's deadline. Every call must reach its caller at once
// (on the bubble's clock: no time at all; nothing waits for the reset),
// and none after the 5th may succeed.
func TestGitHubPrimaryLongReset(t *testing.T) {
	for _, s := range githubSetups {
		if s.sleep {
			continue // sleeps until the reset, an hour: the deadline ends it
		}
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewGitHub(sdktest.GitHubLimits{Primary: 5})
				rec := &recorder{}
				res := runCalls(8, 1, 2*time.Second, s.call(fake, rec), githubKind)
				ok, primary, _ := fake.Counts()
				t.Logf("%s: %v; server: %d ok, %d primary 403; events %v", s.name, res, ok, primary, rec.counts())
				want := "RateLimitError(local)"
				if s.disable {
					want = "ErrWouldExceedDeadline" // the key is paused past the deadline
				}
				if res.ok != 5 || res.errs[want] != 3 {
					t.Errorf("%d calls succeeded, errors %v; want 5 and 3 × %s", res.ok, res.errs, want)
				}
				if slowest := res.times[len(res.times)-1]; slowest != 0 {
					t.Errorf("slowest call took %v; want 0 (at once)", slowest)
				}
			})
		})
	}
}

// TestGitHubPrimary429 checks a primary limit answered 429 (GitHub
// documents 403 or 429) to a client that has not seen remaining 0:
// another client spent the window (5 per 2 s). go-github reports a 429 as
// a plain *github.ErrorResponse, not a *RateLimitError; the recommended
// setup waits for the reset and succeeds, in at most the window plus the
// second its whole-second reset rounds up (3 s).
func TestGitHubPrimary429(t *testing.T) {
	for _, s := range githubSetups {
		if s.sleep {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewGitHub(sdktest.GitHubLimits{Primary: 5, Window: 2 * time.Second, PrimaryStatus: http.StatusTooManyRequests})
				other := &http.Client{Transport: fake}
				for i := range 5 {
					resp, err := other.Get(fmt.Sprintf("%srepos/other/r%d", githubURL, i))
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
				rec := &recorder{}
				res := runCalls(1, 1, 10*time.Second, s.call(fake, rec), func(err error) string {
					var er *github.ErrorResponse
					if errors.As(err, &er) {
						return fmt.Sprintf("ErrorResponse(%d)", er.Response.StatusCode)
					}
					return githubKind(err)
				})
				t.Logf("%s: %v; events %v", s.name, res, rec.counts())
				switch {
				case s.transport:
					if res.ok != 1 || res.times[0] > 3500*time.Millisecond {
						t.Errorf("%v; want the call through after the reset, within 3.5 s", res)
					}
				case res.errs["ErrorResponse(429)"] != 1:
					t.Errorf("errors %v; want go-github's *ErrorResponse for the 429 (has go-github changed? update the README)", res.errs)
				}
			})
		})
	}
}
