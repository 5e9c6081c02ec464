package sdktest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The documented error bodies of GitHub's rate limits. go-github tells a
// secondary limit by the documentation URL's suffix.
const (
	githubPrimaryBody   = `{"message":"API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit","status":"%d"}`
	githubSecondaryBody = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`
)

// GitHubLimits configures a [GitHub] fake. The zero value enforces no
// limit but still sends the rate-limit headers (a limit of 5000).
type GitHubLimits struct {
	// Primary is the number of requests per Window. Zero means 5000 and
	// no rejection.
	Primary int
	// Window is the primary limit's window, whole seconds; it starts at
	// the first request after the previous one ended and resets at a whole
	// second, as x-ratelimit-reset (epoch seconds) can only say. Zero
	// means one hour.
	Window time.Duration
	// PrimaryStatus is the status of a spent primary limit: 403 or 429,
	// both documented. Zero means 403.
	PrimaryStatus int

	// Secondary is the number of requests per second above which GitHub's
	// secondary limit answers 403 with retry-after: SecondaryRetryAfter
	// whole seconds (zero means 1), and holds every request off until
	// then. Zero means none.
	Secondary           int
	SecondaryRetryAfter int
}

// GitHub is a fake of the GitHub REST API's rate limits. It answers
// GET /repos/{owner}/{repo} with a repository, on any host, and counts
// what it saw. It is an [http.Handler], and an [http.RoundTripper] that
// serves each request in-process (see [Fake]). It is safe for concurrent
// use.
type GitHub struct {
	calls

	lim GitHubLimits

	mu        sync.Mutex // protects the fields below
	used      int
	reset     time.Time // end of the primary window; zero before the first request
	second    int64     // the epoch second second counts requests of
	inSecond  int
	blocked   time.Time // secondary limit in force until then
	ok        int
	primary   int
	secondary int
}

// NewGitHub returns a GitHub fake enforcing lim.
func NewGitHub(lim GitHubLimits) *GitHub {
	if lim.Primary <= 0 {
		lim.Primary = 5000
	}
	if lim.Window <= 0 {
		lim.Window = time.Hour
	}
	if lim.Secondary > 0 && lim.SecondaryRetryAfter <= 0 {
		lim.SecondaryRetryAfter = 1
	}
	if lim.PrimaryStatus == 0 {
		lim.PrimaryStatus = http.StatusForbidden
	}
	return &GitHub{lim: lim}
}

// RoundTrip serves req in-process.
func (g *GitHub) RoundTrip(req *http.Request) (*http.Response, error) {
	return serveInProcess(g, req)
}

// Counts returns how many requests succeeded, and how many the primary
// and the secondary limit rejected.
func (g *GitHub) Counts() (ok, primary, secondary int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok, g.primary, g.secondary
}

// ServeHTTP answers r as GitHub would, on the clock of time.Now.
func (g *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.calls.add(r)
	now := time.Now()
	g.mu.Lock()
	if g.reset.IsZero() || !now.Before(g.reset) {
		g.used = 0
		// Rounded up to a whole second: the reset GitHub sends is an
		// epoch second, and a fake that reopened before it would let a
		// client that honours it look slow.
		g.reset = time.Unix(now.Add(g.lim.Window).Unix()+1, 0)
	}
	var status int
	retryAfter := 0
	switch sec := now.Unix(); {
	case now.Before(g.blocked):
		status, retryAfter = http.StatusForbidden, ceilSeconds(g.blocked.Sub(now))
		g.secondary++
	case g.lim.Secondary > 0 && sec == g.second && g.inSecond >= g.lim.Secondary:
		g.blocked = now.Add(time.Duration(g.lim.SecondaryRetryAfter) * time.Second)
		status, retryAfter = http.StatusForbidden, g.lim.SecondaryRetryAfter
		g.secondary++
	case g.used >= g.lim.Primary:
		status = g.lim.PrimaryStatus
		g.primary++
	default:
		if sec != g.second {
			g.second, g.inSecond = sec, 0
		}
		g.inSecond++
		g.used++
		status = http.StatusOK
		g.ok++
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Ratelimit-Limit", strconv.Itoa(g.lim.Primary))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(g.lim.Primary-g.used))
	h.Set("X-Ratelimit-Used", strconv.Itoa(g.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(g.reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	h.Set("X-Github-Media-Type", "github.v3; format=json")
	g.mu.Unlock()

	switch {
	case status == http.StatusOK:
		w.WriteHeader(status)
		full := strings.TrimPrefix(r.URL.Path, "/repos/")
		_, name, _ := strings.Cut(full, "/")
		fmt.Fprintf(w, `{"id":1,"name":%q,"full_name":%q}`, name, full)
	case retryAfter > 0:
		h.Set("Retry-After", strconv.Itoa(retryAfter))
		w.WriteHeader(status)
		fmt.Fprint(w, githubSecondaryBody)
	default:
		w.WriteHeader(status)
		fmt.Fprintf(w, githubPrimaryBody, status)
	}
}

// ceilSeconds is d in whole seconds, rounded up: the delta-seconds of a
// Retry-After that must not end early.
func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
