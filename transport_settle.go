package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// ErrSettled is returned (wrapped) by [SettleResponse] for a response
// whose cost was settled already (by it, or by [Transport]'s Usage).
var ErrSettled = errors.New("throttle: response settled already")

// ErrNoSettler is returned (wrapped) by [SettleResponse] for a response
// that has nothing to settle: it did not come from a [Transport], or its
// Transport's Waiter keeps no quota per key (a *rate.Limiter), or it came
// from a dry run.
var ErrNoSettler = errors.New("throttle: response has no settler")

// SettleResponse settles the cost of the request that resp answers as
// actual, for costs known only once the body is read (an LLM call's usage
// in its JSON): the attempt spent its cost ([Transport].CostOf) on its
// key's quota, and the difference is given back or charged (see
// [Quota].Settle; a unit actual does not name stays as spent). An LLM
// client reads usage from the body and settles it:
//
//	var out struct{ Usage struct{ TotalTokens int `json:"total_tokens"` } }
//	err := json.NewDecoder(resp.Body).Decode(&out)
//	resp.Body.Close()
//	if err == nil {
//		throttle.SettleResponse(resp, throttle.Cost{N: 1, Units: map[string]int{"tokens": out.Usage.TotalTokens}})
//	}
//
// resp must be a response a [Transport] returned (through an
// [http.Client] too). Each response can be settled once: a second settle,
// or one after the Transport's Usage settled it, fails with [ErrSettled]
// and changes nothing. A cost the key cannot take fails with its error
// and leaves the response to settle; so does a quota that fails (a
// shared store away).
//
// It may be called before or after the body is closed, from any
// goroutine. The Transport finds the response through resp.Request's
// context (a copy of the request sent, which it sets; the caller's
// request is never modified), so that an [http.Client]'s own wrapping of
// the body does not hide it.
func SettleResponse(resp *http.Response, actual Cost) error {
	if resp == nil || resp.Request == nil {
		return fmt.Errorf("throttle: settle a response without its request: %w", ErrNoSettler)
	}
	rec, _ := resp.Request.Context().Value(settleKey{}).(*settlement)
	if rec == nil || rec.resp != resp {
		return fmt.Errorf("throttle: settle a response of %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), ErrNoSettler)
	}
	return rec.settle(resp.Request.Context(), actual)
}

// settleKey is the context key of a response's *settlement.
type settleKey struct{}

// settlement is what settling one attempt's response needs: the quota it
// spent on and what it spent. The response's request carries it in its
// context (settleKey), so that SettleResponse finds it.
type settlement struct {
	q     Quota
	spent Cost
	resp  *http.Response // the response it settles

	mu      sync.Mutex // protects settled
	settled bool
}

// settle settles the attempt's cost as actual, once.
func (s *settlement) settle(ctx context.Context, actual Cost) error {
	s.mu.Lock()
	if s.settled {
		s.mu.Unlock()
		return ErrSettled
	}
	s.settled = true
	s.mu.Unlock()
	spent := s.spent
	spent.Retry = false
	if err := s.q.Settle(ctx, spent, actual); err != nil {
		s.mu.Lock()
		s.settled = false // not settled: may be tried again
		s.mu.Unlock()
		return err
	}
	return nil
}

// settleAttempt returns the settlement of an attempt that spent cost on
// q, settled already if Usage tells the actual cost from resp; nil in a
// dry run, or if q's waits go through a Waiter that cannot settle them
// (a *rate.Limiter).
func (t *Transport) settleAttempt(ctx context.Context, q Quota, resp *http.Response, cost Cost) *settlement {
	if c, ok := q.(chain); t.DryRun || resp == nil || ok && c.w != nil {
		return nil
	}
	rec := &settlement{q: q, spent: cost, resp: resp}
	if t.Usage != nil {
		if actual, ok := t.Usage(resp); ok {
			_ = rec.settle(ctx, actual)
		}
	}
	return rec
}

// attach makes resp's request carry rec, for SettleResponse: a copy of
// the request whose context holds rec.
func attach(resp *http.Response, req *http.Request, rec *settlement) *http.Response {
	if rec == nil || resp == nil {
		return resp
	}
	r := resp.Request
	if r == nil {
		r = req
	}
	resp.Request = r.WithContext(context.WithValue(r.Context(), settleKey{}, rec))
	return resp
}
