package throttle

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTransportServer runs the Transport against real httptest servers.
func TestTransportServer(t *testing.T) {
	fast := RetryPolicy{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	tests := []struct {
		name     string
		status   []int // the server's answers in turn; the last repeats
		method   string
		header   map[string]string
		body     string
		noRewind bool // a body without GetBody
		want     int  // final status
		attempts int
	}{
		{name: "503 on GET retried", status: []int{503, 200}, method: "GET", want: 200, attempts: 2},
		{name: "503 on POST not retried", status: []int{503, 200}, method: "POST", body: "x", want: 503, attempts: 1},
		{name: "502 on PUT retried", status: []int{502, 504, 200}, method: "PUT", body: "put body", want: 200, attempts: 3},
		{name: "POST with Idempotency-Key retried", status: []int{503, 200}, method: "POST",
			header: map[string]string{"Idempotency-Key": "k-1"}, body: `{"amount":100}`, want: 200, attempts: 2},
		{name: "429 on POST retried", status: []int{429, 200}, method: "POST", body: "payload", want: 200, attempts: 2},
		{name: "429 with a body without GetBody not retried", status: []int{429, 200}, method: "POST", body: "payload", noRewind: true, want: 429, attempts: 1},
		{name: "404 not retried", status: []int{404, 200}, method: "GET", want: 404, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				i := min(len(bodies), len(tt.status)-1)
				bodies = append(bodies, string(b))
				mu.Unlock()
				w.WriteHeader(tt.status[i])
				io.WriteString(w, "answer")
			}))
			defer srv.Close()
			counting := &countingTransport{base: srv.Client().Transport}
			client := &http.Client{Transport: &Transport{Base: counting, Retry: fast}}

			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
				if tt.noRewind {
					body = io.NopCloser(body) // http.NewRequest sets no GetBody
				}
			}
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+"/v1/x?q=1", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("User-Agent", "throttle-test")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			before := snapshot(req)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || string(got) != "answer" {
				t.Errorf("final response %d %q; want %d %q", resp.StatusCode, got, tt.want, "answer")
			}
			if len(bodies) != tt.attempts {
				t.Errorf("%d attempts; want %d", len(bodies), tt.attempts)
			}
			for i, b := range bodies {
				if b != tt.body {
					t.Errorf("attempt %d sent body %q; want %q, byte-identical", i+1, b, tt.body)
				}
			}
			if after := snapshot(req); after != before {
				t.Errorf("request changed by RoundTrip:\n%s\nwant\n%s", after, before)
			}
			if o, c := counting.opened.Load(), counting.closed.Load(); o != int32(tt.attempts) || c != o {
				t.Errorf("%d response bodies opened, %d closed; want %d, all closed", o, c, tt.attempts)
			}
		})
	}
}

// snapshot renders what RoundTrip must not change in a request.
func snapshot(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Method + " " + r.URL.String() + "\n")
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		b.WriteString(k + ": " + strings.Join(r.Header[k], ",") + "\n")
	}
	return b.String()
}

// countingTransport counts response bodies opened and closed.
type countingTransport struct {
	base           http.RoundTripper
	opened, closed atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		c.opened.Add(1)
		resp.Body = &countingBody{ReadCloser: resp.Body, closed: &c.closed}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	closed *atomic.Int32
	once   sync.Once
}

func (b *countingBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return b.ReadCloser.Close()
}

// TestTransportTransientErrors checks that a connection dropped before the
// answer is retried for GET and not for POST.
func TestTransportTransientErrors(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			var arrivals atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if arrivals.Add(1) == 1 {
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close() // no response at all: the client sees EOF
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			// No keep-alive: net/http's own retry of a reused
			// connection must not mask ours.
			base := &http.Transport{DisableKeepAlives: true}
			defer base.CloseIdleConnections()
			tr := &Transport{Base: base, Retry: RetryPolicy{InitialInterval: time.Millisecond}}
			req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL, strings.NewReader("b"))
			resp, err := tr.RoundTrip(req)
			if method == "GET" {
				if err != nil || resp.StatusCode != 200 || arrivals.Load() != 2 {
					t.Fatalf("GET = %v, %v after %d arrivals; want 200 after 2", resp, err, arrivals.Load())
				}
				resp.Body.Close()
				return
			}
			if err == nil || resp != nil || arrivals.Load() != 1 {
				t.Errorf("POST = %v, %v after %d arrivals; want the error after 1", resp, err, arrivals.Load())
			}
		})
	}
}

// TestTransportServerRetryAfter runs 429s with Retry-After in seconds and
// as a date from a server whose clock (and Date) is an hour off, against a
// real server. Bounds: the retry comes no sooner than the server asked (1 s;
// 2 s after the server's Date, both in whole seconds) and at most 300 ms
// later (scheduling and loopback on a busy machine; reading the date
// against the local clock would show as an hour).
func TestTransportServerRetryAfter(t *testing.T) {
	tests := []struct {
		name     string
		header   func(now time.Time) (date, retryAfter string)
		min, max time.Duration
	}{
		{"seconds", func(time.Time) (string, string) { return "", "1" }, time.Second, 1300 * time.Millisecond},
		{"date, server clock an hour ahead", func(now time.Time) (string, string) {
			srv := now.Add(time.Hour)
			return srv.UTC().Format(http.TimeFormat), srv.Add(2 * time.Second).UTC().Format(http.TimeFormat)
		}, 2 * time.Second, 2300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var arrivals []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				now := time.Now()
				mu.Lock()
				first := len(arrivals) == 0
				arrivals = append(arrivals, now)
				mu.Unlock()
				if first {
					date, ra := tt.header(now)
					if date != "" {
						w.Header().Set("Date", date)
					}
					w.Header().Set("Retry-After", ra)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			client := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != 200 || len(arrivals) != 2 {
				t.Fatalf("final status %d after %d attempts; want 200 after 2", resp.StatusCode, len(arrivals))
			}
			if gap := arrivals[1].Sub(arrivals[0]); gap < tt.min || gap > tt.max {
				t.Errorf("retry arrived %v after the 429; want within [%v, %v]", gap, tt.min, tt.max)
			}
		})
	}
}

// TestTransportServerStalledBody checks against a real server that a 429
// whose body stalls after its first bytes holds RoundTrip for drainTime
// at most: closing a net/http body ends the read. Bounds: the retry
// comes after drainTime (the body is read that long) and within 300 ms
// more (scheduling and loopback on a busy machine).
func TestTransportServerStalledBody(t *testing.T) {
	release := make(chan struct{})
	var arrivals atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrivals.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":`)
			w.(http.Flusher).Flush()
			select { // the rest never comes
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(release)
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != 200 || arrivals.Load() != 2 {
		t.Errorf("final status %d after %d attempts; want 200 after 2", resp.StatusCode, arrivals.Load())
	}
	if took < drainTime || took > drainTime+300*time.Millisecond {
		t.Errorf("RoundTrip took %v; want within [%v, %v]", took, drainTime, drainTime+300*time.Millisecond)
	}
}
