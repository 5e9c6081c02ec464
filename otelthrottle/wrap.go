package otelthrottle

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/ratelimit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Wrap returns an [http.RoundTripper] that sends through next, a
// [throttle.Transport] whose OnEvent calls r.OnEvent, and records what
// the events cannot tell:
//
//   - throttle.requests with throttle.outcome "ok" (next returned a response
//     it did not give up on, whatever its status; http.response.status_code
//     says which) or "error" (next returned an error it did not give up on:
//     a wait past the deadline, a cancelled context, a transport error that
//     is not retried; error.type says which). Requests given up on are
//     counted by OnEvent, as "gave_up".
//   - throttle.quota.remaining: the units left that the final response
//     reports ([ratelimit.Parse]), the least among its policies of each
//     unit, by key and throttle.quota.unit. With no throttle.key attribute (Keys is
//     zero) the gauge is the last value any key reported: meaningful when
//     the Transport serves one quota.
//
// Wrap expects next's events to reach r.OnEvent; without them every request
// is counted as "ok" or "error". The request next sees is a shallow copy of
// req (as [http.Request.WithContext] makes) whose context carries what the
// events tell Wrap; Event.Request is that copy.
func (r *Recorder) Wrap(next http.RoundTripper) http.RoundTripper {
	return &roundTripper{r: r, next: next}
}

type roundTripper struct {
	r    *Recorder
	next http.RoundTripper
}

// requestState is what a request's events tell Wrap, through its context.
type requestState struct {
	gaveUp atomic.Bool
	mu     sync.Mutex
	key    string // the key of the request's events; protected by mu
	hasKey bool   // protected by mu
}

func (s *requestState) setKey(key string) {
	s.mu.Lock()
	s.key, s.hasKey = key, true
	s.mu.Unlock()
}

func (s *requestState) getKey() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.hasKey
}

type stateKey struct{}

func stateOf(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	return st
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r := rt.r
	r.init()
	st := &requestState{}
	ctx := context.WithValue(req.Context(), stateKey{}, st)
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	ctx = req.Context() // the metrics' context: the caller's, not the state

	var buf [4]attribute.KeyValue
	attrs := buf[:0]
	if r.keys.max > 0 {
		key, known := st.getKey()
		if !known {
			key = rt.keyOf(req)
		}
		keyAttr, _ := r.keyAttr(key)
		attrs = append(attrs, keyAttr)
	}

	if resp != nil {
		r.recordQuota(ctx, resp, attrs)
	}
	if st.gaveUp.Load() {
		return resp, err
	}
	if err != nil {
		attrs = append(attrs, outcomeError, errorType(err))
	} else {
		attrs = append(attrs, outcomeOK, statusKey.Int(resp.StatusCode))
	}
	r.inst.requests.Add(ctx, 1, metric.WithAttributes(attrs...))
	return resp, err
}

// keyOf names req's quota when none of its events did.
func (rt *roundTripper) keyOf(req *http.Request) string {
	if rt.r.Key != nil {
		return rt.r.Key(req)
	}
	if t, ok := rt.next.(*throttle.Transport); ok && t.Key != nil {
		return t.Key(req)
	}
	return req.URL.Host
}

// recordQuota records, for each unit resp's policies count, the least
// remaining among them: a response may describe requests and tokens
// (OpenAI, Anthropic), a minute's and a day's quota.
func (r *Recorder) recordQuota(ctx context.Context, resp *http.Response, attrs []attribute.KeyValue) {
	q := ratelimit.Parse(resp.Header, time.Now())
	least := make(map[string]int64, 2)
	for _, p := range q.Policies {
		if !p.HasRemaining {
			continue
		}
		unit := p.Unit
		if unit == "" {
			unit = "requests"
		}
		unit = r.unit.value(unit)
		if n, ok := least[unit]; !ok || p.Remaining < n {
			least[unit] = p.Remaining
		}
	}
	n := len(attrs)
	for unit, remaining := range least {
		attrs = append(attrs[:n], unitKey.String(unit))
		r.inst.quotaRemaining.Record(ctx, remaining, metric.WithAttributes(attrs...))
	}
}
