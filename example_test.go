package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// A client that paces itself and retries the 429 it still gets. The server
// here refuses the first attempt and accepts the second.
func ExampleTransport() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &throttle.Transport{
		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 10}}}, // 10 requests/s per host
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s after %d attempts: %s", resp.Status, attempts.Load(), body)
	// Output:
	// 200 OK after 2 attempts: hello
}

// OnEvent is the place for logs and metrics: here it prints each retry,
// pause and give-up. A server asking for more than RetryPolicy.MaxRetryAfter
// (default one minute) gets its 429 back at once, and its key is paused.
func ExampleTransport_onEvent() {
	var flaky atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests) // no Retry-After: backoff
		}
	})
	mux.HandleFunc("/spent", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := &http.Client{Transport: &throttle.Transport{
		Retry: throttle.RetryPolicy{InitialInterval: 10 * time.Millisecond},
		OnEvent: func(e throttle.Event) {
			switch e.Kind {
			case throttle.EventRetry:
				fmt.Printf("  retry: attempt %d got %d\n", e.Attempt, e.StatusCode)
			case throttle.EventPause:
				fmt.Printf("  pause: %v\n", e.Delay)
			case throttle.EventGiveUp:
				fmt.Printf("  give-up: attempt %d got %d: %s\n", e.Attempt, e.StatusCode, e.Reason)
			case throttle.EventWait:
				// A metric in a real program: e.Delay is the time spent
				// waiting for quota.
			}
		},
	}}
	for _, path := range []string{"/flaky", "/spent"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println("GET", path, resp.Status)
	}
	// Output:
	//   retry: attempt 1 got 429
	// GET /flaky 200 OK
	//   pause: 1m0s
	//   give-up: attempt 1 got 429: server asked to wait longer than MaxRetryAfter
	// GET /spent 429 Too Many Requests
}

// A queue worker throttles jobs per tenant, HTTP or not: each job waits for
// its cost in units of its tenant's quota before it runs.
func ExampleLimiter() {
	// Each tenant may spend 100 units a second, 20 at once.
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 100, Burst: 20}}}
	jobs := []struct {
		tenant string
		cost   int
	}{{"acme", 5}, {"globex", 20}, {"acme", 10}, {"acme", 50}}

	ctx := context.Background()
	for _, job := range jobs {
		err := lim.For(job.tenant).WaitN(ctx, job.cost)
		switch {
		case errors.Is(err, throttle.ErrCostExceedsBurst):
			fmt.Printf("%s: cost %d can never fit a burst of 20; split the job\n", job.tenant, job.cost)
		case err != nil:
			fmt.Printf("%s: %v\n", job.tenant, err)
		default:
			fmt.Printf("%s: job of cost %d runs\n", job.tenant, job.cost)
		}
	}
	// Output:
	// acme: job of cost 5 runs
	// globex: job of cost 20 runs
	// acme: job of cost 10 runs
	// acme: cost 50 can never fit a burst of 20; split the job
}

// One API gets a slower quota than the rest. Keys are what Transport.Key
// returns: by default the request's host.
func ExampleLimiter_overrides() {
	lim := &throttle.Limiter{
		Limits:    []throttle.Limit{{Rate: 100, Burst: 10}},
		Overrides: map[string][]throttle.Limit{"api.github.com": {{Rate: 1, Burst: 2}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for _, host := range []string{"api.github.com", "api.example.com"} {
		for i := 1; i <= 3; i++ {
			err := lim.For(host).WaitN(ctx, 1)
			switch {
			case errors.Is(err, throttle.ErrWouldExceedDeadline):
				fmt.Printf("%s #%d: not within 500ms\n", host, i)
			case err != nil:
				fmt.Printf("%s #%d: %v\n", host, i, err)
			default:
				fmt.Printf("%s #%d: go\n", host, i)
			}
		}
	}
	// Output:
	// api.github.com #1: go
	// api.github.com #2: go
	// api.github.com #3: not within 500ms
	// api.example.com #1: go
	// api.example.com #2: go
	// api.example.com #3: go
}

// A wait that cannot end before the request's deadline fails at once, sends
// nothing and reserves nothing. Through an http.Client the error is a
// *url.Error that matches both ErrWouldExceedDeadline and
// context.DeadlineExceeded, and reports a timeout.
func ExampleDeadlineError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	client := &http.Client{
		Transport: &throttle.Transport{Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 1}}}},
		Timeout:   100 * time.Millisecond, // bounds every wait too
	}
	for i := 1; i <= 2; i++ {
		resp, err := client.Get(srv.URL)
		if err != nil {
			var ue *url.Error
			var de *throttle.DeadlineError
			fmt.Printf("#%d: ErrWouldExceedDeadline %v, context.DeadlineExceeded %v\n", i,
				errors.Is(err, throttle.ErrWouldExceedDeadline), errors.Is(err, context.DeadlineExceeded))
			if errors.As(err, &ue) && errors.As(err, &de) {
				fmt.Printf("#%d: timeout %v, the wait would have been %v\n", i, ue.Timeout(), de.Delay.Round(100*time.Millisecond))
			}
			continue
		}
		resp.Body.Close()
		fmt.Printf("#%d: %s\n", i, resp.Status)
	}
	// Output:
	// #1: 200 OK
	// #2: ErrWouldExceedDeadline true, context.DeadlineExceeded true
	// #2: timeout true, the wait would have been 1s
}

// A plain *rate.Limiter is a Waiter: where one in-process bucket is all a
// program needs, it fits wherever this package takes a Waiter.
func ExampleWaiter() {
	work := func(ctx context.Context, w throttle.Waiter, cost int) error {
		if err := w.WaitN(ctx, cost); err != nil {
			return err
		}
		// ... spend the quota ...
		return nil
	}
	ctx := context.Background()
	fmt.Println(work(ctx, rate.NewLimiter(10, 5), 3))
	fmt.Println(work(ctx, &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}, 3))
	fmt.Println(work(ctx, (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("tenant-42"), 3))
	// Output:
	// <nil>
	// <nil>
	// <nil>
}

// What a response says paces the key's next waits. Here a server said 2
// requests are left in a window that resets in a minute: the first goes at
// once, and the rest is spread over the minute rather than spent at once.
// (Transport does this by itself with each response; Observe is how.)
func ExampleFeedback() {
	var lim throttle.Limiter // no limit of its own
	w := lim.For("api.example.com")
	w.Observe(context.Background(), throttle.Feedback{
		Window: &throttle.ServerWindow{Remaining: 2, Reset: time.Minute, Size: 1000, Length: time.Hour},
	})
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := w.WaitN(ctx, 1)
		cancel()
		var de *throttle.DeadlineError
		if errors.As(err, &de) {
			fmt.Println("next turn in", de.Delay.Round(time.Second))
			continue
		}
		fmt.Println("sent", err)
	}
	// Output:
	// sent <nil>
	// next turn in 30s
}

// A Classify hook steers what is retried. Here an API answers 409 while a
// resource is being created: that is worth a retry after a second, and
// everything else is left to the default decision.
func ExampleRetryPolicy_classify() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusConflict)
			return
		}
		fmt.Fprintln(w, "created")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &throttle.Transport{
		Retry: throttle.RetryPolicy{Classify: func(o throttle.Outcome) throttle.Decision {
			if o.Response != nil && o.Response.StatusCode == http.StatusConflict {
				return throttle.Decision{Retry: true, Delay: 10 * time.Millisecond}
			}
			return throttle.DefaultClassify(o)
		}},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s after %d attempts: %s", resp.Status, attempts.Load(), body)
	// Output:
	// 200 OK after 2 attempts: created
}

// fakeAPI answers requests in a function, for examples that print URLs.
type fakeAPI func(*http.Request) *http.Response

func (f fakeAPI) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

func answer(r *http.Request, status int, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprint(status, " ", http.StatusText(status)), Header: h,
		Body: http.NoBody, Request: r}
}

// LogEvents writes a Transport's events to a slog.Logger: here a retried
// 429 (Info) and a 503 on a POST, which is not retried (Warn). URLs are
// logged without their query, which may hold credentials.
func ExampleLogEvents() {
	var calls atomic.Int32
	api := fakeAPI(func(r *http.Request) *http.Response {
		switch calls.Add(1) {
		case 1:
			return answer(r, http.StatusTooManyRequests, "Retry-After", "0")
		case 2:
			return answer(r, http.StatusOK)
		}
		return answer(r, http.StatusServiceUnavailable)
	})
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	client := &http.Client{Transport: &throttle.Transport{
		Base:    api,
		OnEvent: throttle.LogEvents(logger),
		// Bare rejections slow the key down, and a slow-down is logged
		// too ("throttle: slow-down" with its rate, which depends on the
		// pace the key was sent at); for a stable output, not here.
		DisableAdaptive: true,
	}}

	resp, err := client.Get("https://api.example.com/v1/models?key=secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	resp, err = client.Post("https://api.example.com/v1/jobs", "text/plain", strings.NewReader("job"))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// level=INFO msg="throttle: retry" kind=retry key=api.example.com method=GET url=https://api.example.com/v1/models attempt=1 delay=50ms status=429
	// level=WARN msg="throttle: give-up" kind=give-up key=api.example.com method=POST url=https://api.example.com/v1/jobs attempt=1 status=503 reason="method is not idempotent"
}

// A dry run rolls out a new limit in shadow: every request goes at once,
// and the waits the limit would impose are reported.
func ExampleTransport_dryRun() {
	api := fakeAPI(func(r *http.Request) *http.Response { return answer(r, http.StatusOK) })
	client := &http.Client{Transport: &throttle.Transport{
		Base:   api,
		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 1}}}, // the limit to try: 1 request/s
		DryRun: true,
		OnEvent: func(e throttle.Event) {
			if e.Kind == throttle.EventWouldWait {
				fmt.Printf("  would wait %v\n", e.Delay.Round(100*time.Millisecond))
			}
		},
	}}
	start := time.Now()
	for i := 1; i <= 3; i++ {
		resp, err := client.Get("https://api.example.com/v1/x")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("#%d: %s\n", i, resp.Status)
	}
	// Waiting, the last two would have taken 2s: a second is far from both.
	fmt.Println("all sent without waiting:", time.Since(start) < time.Second)
	// Output:
	// #1: 200 OK
	//   would wait 1s
	// #2: 200 OK
	//   would wait 1s
	// #3: 200 OK
	// all sent without waiting: true
}

// The default key of a request is its host, lowercased, without the
// scheme's default port: one quota for every spelling of one API. Keys of
// Limiter.Overrides are written the same way.
func ExampleHostKey() {
	for _, u := range []string{
		"https://api.github.com/user",
		"https://API.GitHub.com/user",
		"https://api.github.com:443/user",
		"http://127.0.0.1:8080/",
	} {
		req, _ := http.NewRequest("GET", u, nil)
		fmt.Println(throttle.HostKey(req))
	}
	// Output:
	// api.github.com
	// api.github.com
	// api.github.com
	// 127.0.0.1:8080
}
