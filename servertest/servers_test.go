package servertest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttle-go/throttle"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// server is one server of the matrix, running, with the parameters its
// seed drew.
type server struct {
	url    string
	params string           // the parameters, as the table prints them
	told   []throttle.Limit // what a client told the limit is given
	// admits is what the server's rule admits at most between start
	// and end, from an idle state at start.
	admits func(start, end time.Time) float64
	// requests is the run's size: about the server's capacity over the
	// run's target length; phase is how long to wait after the server
	// started before the run starts (where the server's windows are
	// aligned to its own start).
	requests int
	phase    time.Duration
}

// kind is one server implementation; start starts one with parameters
// drawn from rng, sized for runs of about d, and stops it at t.Cleanup.
type kind struct {
	name  string
	nginx bool // needs the nginx binary
	start func(t *testing.T, rng *rand.Rand, d time.Duration) *server
}

// kinds are every server of the matrix.
var kinds = []kind{
	{name: "httprate sliding", start: startHTTPRate},
	{name: "httprate fixed", start: startHTTPRateFixed},
	{name: "ulule/limiter", start: startUlule},
	{name: "sethvargo/go-limiter", start: startSethvargo},
	{name: "throttled GCRA", start: startThrottled},
	{name: "tollbooth", start: startTollbooth},
	{name: "nginx limit_req", nginx: true, start: startNginx(false)},
	{name: "nginx limit_req burst nodelay", nginx: true, start: startNginx(true)},
}

// kindNamed returns the kind of that name.
func kindNamed(name string) kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	panic("servertest: no server kind " + name)
}

// ok is the handler behind every middleware.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Write([]byte("ok\n"))
})

// serve serves h on a loopback port until t ends.
func serve(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// skewDate sends a Date skew ahead of the server's clock (behind, if
// negative), as a server whose clock is off does: used where every
// rate-limit header the middleware sends is relative, so that only
// Date carries the clock.
func skewDate(skew time.Duration, h http.Handler) http.Handler {
	if skew == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(skew).UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	})
}

// windowLengths are the window lengths drawn for a run of about d: the
// standard and non-standard ones (7 s, 10 s) that fit at least twice.
func windowLengths(d time.Duration) []time.Duration {
	all := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second, 10 * time.Second}
	var out []time.Duration
	for _, w := range all {
		if 2*w <= d {
			out = append(out, w)
		}
	}
	return out
}

// window draws a window: count q per length w, q/w between 5 and 80 a
// second, and m windows for a run of about d (at least 2).
func window(rng *rand.Rand, d time.Duration) (q int, w time.Duration, m int) {
	ws := windowLengths(d)
	w = ws[rng.IntN(len(ws))]
	lo, hi := int(5*w.Seconds()), int(80*w.Seconds())
	q = lo + rng.IntN(hi-lo+1)
	m = max(2, int(math.Round(float64(d)/float64(w))))
	return q, w, m
}

// bucketRate draws a rate for a bucket, 5 to 80 a second, and the
// requests of a run of about d at that rate with burst b.
func bucketRate(rng *rand.Rand, d time.Duration, b int) (r float64, n int) {
	r = float64(5 + rng.IntN(76))
	return r, b + int(r*d.Seconds())
}

// startHTTPRate: httprate's own sliding window counter (its local
// counter), q per w. Its windows start at the limiter's creation, so a
// phase drawn in [0, w) sets where the run starts in a window. It sends
// X-RateLimit-Limit, -Remaining, -Reset (the window's end, epoch
// seconds) and, on a 429, Retry-After: w in whole seconds.
func startHTTPRate(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	q, w, m := window(rng, d)
	created := time.Now()
	rl := httprate.NewRateLimiter(q, w)
	url := serve(t, rl.Handler(ok))
	phase := time.Duration(rng.Int64N(int64(w)))
	return &server{
		url:    url,
		params: fmt.Sprintf("%d per %v, phase %.1fs", q, w, phase.Seconds()),
		told:   []throttle.Limit{{Count: q, Per: w, Kind: throttle.Sliding}},
		admits: func(start, end time.Time) float64 {
			// Windows start at created + k·w. The partial one the run
			// starts in admits q; after its end, q per w: a window's
			// count is bounded by q less the share of the one before
			// still inside the last w.
			first := created.Add((start.Sub(created)/w + 1) * w)
			return float64(q) * (1 + max(0, end.Sub(first).Seconds()/w.Seconds()))
		},
		requests: q * m,
		phase:    phase,
	}
}

// fixedCounter is an httprate LimitCounter that counts fixed windows:
// it never reports a previous window's count, so httprate's sliding
// estimate is the current window's count alone. Custom counters get
// httprate's windows aligned to time.Truncate (multiples of w since
// the zero time), as its Redis counter does.
type fixedCounter struct {
	mu     sync.Mutex
	window time.Time
	counts map[string]int
}

func (c *fixedCounter) Config(int, time.Duration) {}

func (c *fixedCounter) Increment(key string, window time.Time) error {
	return c.IncrementBy(key, window, 1)
}

func (c *fixedCounter) IncrementBy(key string, window time.Time, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !window.Equal(c.window) {
		c.window, c.counts = window, make(map[string]int)
	}
	c.counts[key] += n
	return nil
}

func (c *fixedCounter) Get(key string, window, _ time.Time) (int, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !window.Equal(c.window) {
		return 0, 0, nil
	}
	return c.counts[key], 0, nil
}

// startHTTPRateFixed: httprate's middleware and headers with a fixed
// window counter (WithLimitCounter), q per w, windows aligned to
// time.Truncate. The told limit is the fixed window the user would
// write, aligned to the Unix epoch: for lengths that do not divide
// the seconds between the zero time and the epoch (7 s: 4 s apart),
// its windows are not the server's.
func startHTTPRateFixed(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	q, w, m := window(rng, d)
	rl := httprate.NewRateLimiter(q, w, httprate.WithLimitCounter(&fixedCounter{}))
	url := serve(t, rl.Handler(ok))
	return &server{
		url:    url,
		params: fmt.Sprintf("%d per %v", q, w),
		told:   []throttle.Limit{{Count: q, Per: w, Kind: throttle.Fixed}},
		admits: func(start, end time.Time) float64 {
			n := end.Truncate(w).Sub(start.Truncate(w))/w + 1
			return float64(q) * float64(n)
		},
		requests: q * m,
	}
}

// startUlule: ulule/limiter's memory store and stdlib middleware, q per
// w: a window that starts at the first request after the last one
// expired. It sends X-RateLimit-Limit, -Remaining and -Reset (the
// window's end, epoch seconds), and no Retry-After.
func startUlule(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	q, w, m := window(rng, d)
	store := memory.NewStoreWithOptions(limiter.StoreOptions{Prefix: "servertest"}) // no cleaner goroutine
	lim := limiter.New(store, limiter.Rate{Period: w, Limit: int64(q)})
	mw := stdlib.NewMiddleware(lim, stdlib.WithKeyGetter(func(*http.Request) string { return "k" }))
	return &server{
		url:      serve(t, mw.Handler(ok)),
		params:   fmt.Sprintf("%d per %v", q, w),
		told:     []throttle.Limit{{Count: q, Per: w, Kind: throttle.FromFirstUse}},
		admits:   fromFirstUse(q, w),
		requests: q * m,
	}
}

// fromFirstUse is what windows of q per w that start at the run's
// first request admit: q in each window begun.
func fromFirstUse(q int, w time.Duration) func(start, end time.Time) float64 {
	return func(start, end time.Time) float64 {
		return float64(q) * float64(end.Sub(start)/w+1)
	}
}

// startSethvargo: sethvargo/go-limiter's memory store and httplimit
// middleware, q tokens per interval w. Its bucket refills to q at each
// interval's tick, counted from the key's first request: fixed windows
// from first use. It sends X-RateLimit-Limit, -Remaining, -Reset and, on
// a 429, Retry-After, both as the tick's time in RFC 1123 with "UTC"
// (not the "GMT" of an HTTP-date), to the second.
func startSethvargo(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	q, w, m := window(rng, d)
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(q), Interval: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	mw, err := httplimit.NewMiddleware(store, func(*http.Request) (string, error) { return "k", nil })
	if err != nil {
		t.Fatal(err)
	}
	return &server{
		url:      serve(t, mw.Handle(ok)),
		params:   fmt.Sprintf("%d per %v", q, w),
		told:     []throttle.Limit{{Count: q, Per: w, Kind: throttle.FromFirstUse}},
		admits:   fromFirstUse(q, w),
		requests: q * m,
	}
}

// startThrottled: throttled's GCRA rate limiter (memory store, its HTTP
// middleware), rate r, MaxBurst b: b+1 at once, then one per 1/r. It
// sends X-RateLimit-Limit (b+1), -Remaining, -Reset (seconds until the
// bucket is full, rounded up) and, on a 429, Retry-After (seconds,
// rounded up): every field relative, so the Date is skewed.
func startThrottled(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	b := rng.IntN(11)
	r, n := bucketRate(rng, d, b+1)
	skew := time.Duration(rng.IntN(61)-30) * time.Second
	store, err := memstore.NewCtx(1024)
	if err != nil {
		t.Fatal(err)
	}
	// PerDuration(count, per) with per a multiple of the count keeps the
	// period exact: r a second is r per second.
	rl, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: throttled.PerSec(int(r)), MaxBurst: b})
	if err != nil {
		t.Fatal(err)
	}
	h := &throttled.HTTPRateLimiterCtx{RateLimiter: rl}
	period := time.Second / time.Duration(int(r))
	return &server{
		url:    serve(t, skewDate(skew, h.RateLimit(ok))),
		params: fmt.Sprintf("%v/s, MaxBurst %d, Date %+ds", r, b, int(skew.Seconds())),
		told:   []throttle.Limit{{Rate: rate.Limit(r), Burst: b + 1}},
		admits: func(start, end time.Time) float64 {
			return float64(b+1) + float64(end.Sub(start)/period)
		},
		requests: n,
	}
}

// startTollbooth: tollbooth's limiter (x/time/rate per key), r a second,
// burst b. It sends X-Rate-Limit-Limit (r), X-Rate-Limit-Duration: 1,
// RateLimit-Limit (r rounded), RateLimit-Remaining (tokens left) and
// RateLimit-Reset: 1 on every response, and no Retry-After: every
// field relative, so the Date is skewed.
func startTollbooth(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	b := 1 + rng.IntN(20)
	r, n := bucketRate(rng, d, b)
	skew := time.Duration(rng.IntN(61)-30) * time.Second
	lmt := tollbooth.NewLimiter(r, nil)
	lmt.SetBurst(b)
	return &server{
		url:    serve(t, skewDate(skew, tollbooth.LimitHandler(lmt, ok))),
		params: fmt.Sprintf("%v/s, burst %d, Date %+ds", r, b, int(skew.Seconds())),
		told:   []throttle.Limit{{Rate: rate.Limit(r), Burst: b}},
		admits: func(start, end time.Time) float64 {
			return float64(b) + r*end.Sub(start).Seconds()
		},
		requests: n,
	}
}
