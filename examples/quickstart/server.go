package main

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// api is the demo's rate-limited API. It limits the way most API gateways
// do (AWS API Gateway, Envoy's local rate limit, Stripe): one token bucket
// with a steady rate and a small burst. A request that finds a token is
// answered 200; one that finds none is refused with 429 and told when to come
// back, in the headers real APIs send:
//
//	Retry-After: 1                          (RFC 9110, integer seconds)
//	RateLimit-Policy: "default";q=50;w=1    (IETF draft: 50 per 1-second window)
//	RateLimit: "default";r=0;t=1            (remaining, seconds until full again)
//	X-RateLimit-Limit: 50                   (the de-facto trio, reset in epoch seconds)
//	X-RateLimit-Remaining: 0
//	X-RateLimit-Reset: 1767225601
//
// Like real APIs, it speaks in whole seconds: a client that hits the limit
// is told to wait 1 s even when a token is 20 ms away. A client that paces
// itself never hears that.
type api struct {
	rate  float64 // tokens added per second
	burst float64 // the bucket's size

	mu     sync.Mutex // protects tokens and last
	tokens float64    // tokens in the bucket at last
	last   time.Time

	arrivals atomic.Int64 // requests received
	served   atomic.Int64 // answered 200
	refused  atomic.Int64 // answered 429
}

// newAPI returns an API allowing rate requests per second, burst at once.
// Its bucket starts full.
func newAPI(rate float64, burst int) *api {
	return &api{rate: rate, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// take spends one token if there is one. It reports the tokens left and how
// long until the bucket is full again.
func (a *api) take(now time.Time) (ok bool, remaining float64, untilFull time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = min(a.burst, a.tokens+now.Sub(a.last).Seconds()*a.rate)
	a.last = now
	if a.tokens >= 1 {
		a.tokens--
		ok = true
	}
	untilFull = time.Duration((a.burst - a.tokens) / a.rate * float64(time.Second))
	return ok, a.tokens, untilFull
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.arrivals.Add(1)
	now := time.Now()
	ok, remaining, untilFull := a.take(now)

	limit := strconv.FormatFloat(a.rate, 'f', -1, 64)
	left := int(remaining) // whole requests left
	reset := ceilSeconds(untilFull)
	h := w.Header()
	h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=1`, limit))
	h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, left, reset))
	h.Set("X-RateLimit-Limit", limit)
	h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(now.Add(untilFull)), 10))
	h.Set("Content-Type", "application/json")

	if !ok {
		a.refused.Add(1)
		// Whole seconds, at least 1: what real APIs send.
		h.Set("Retry-After", strconv.Itoa(max(1, reset)))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintln(w, `{"error":"rate limit exceeded"}`)
		return
	}
	a.served.Add(1)
	fmt.Fprintln(w, `{"ok":true}`)
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// ceilUnix returns t in epoch seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}
