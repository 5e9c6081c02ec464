package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// ErrSettled is returned (wrapped) by [SettleResponse] for a response
// whose cost was settled already (by it, or by [Transport]'s Settle).
var ErrSettled = errors.New("throttle: response settled already")

// ErrNoSettler is returned (wrapped) by [SettleResponse] for a response
// that has nothing to settle: it did not come from a [Transport], or its
// key's waiter is not a [Settler] (a *rate.Limiter), or it came from a
// dry run.
var ErrNoSettler = errors.New("throttle: response has no settler")

// SettleResponse settles the cost of the request that resp answers as
// actual units, for costs known only once the body is read (an LLM
// call's usage in its JSON): the attempt spent Cost(req) units of its
// key's quota, and the difference is given back or charged (see
// [Settler]). resp must be the response a [Transport] returned (through
// an [http.Client] too) whose key's waiter is a Settler; each response
// can be settled once: a second settle, or one after Transport's Settle
// settled it, fails with [ErrSettled] and changes nothing. A negative
// actual fails with [ErrInvalidLimit] and leaves the response to settle.
// If the waiter fails (a shared store away), the error is returned and
// the response may be settled again.
//
// It may be called before or after the body is closed, from any
// goroutine. The Transport finds the response through resp.Request's
// context (a copy of the request sent, which it sets; the caller's
// request is never modified), so that an [http.Client]'s own wrapping of
// the body does not hide it.
func SettleResponse(resp *http.Response, actual int) error {
	if resp == nil || resp.Request == nil {
		return fmt.Errorf("throttle: settle a response without its request: %w", ErrNoSettler)
	}
	rec, _ := resp.Request.Context().Value(settleKey{}).(*settlement)
	if rec == nil || rec.resp != resp {
		return fmt.Errorf("throttle: settle a response of %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), ErrNoSettler)
	}
	return rec.settle(resp.Request.Context(), actual, nil)
}

// SettleResponseUnits is [SettleResponse] for the attempt's costs in the
// key's further limits ([Transport].Units): it settles them as actual,
// per unit (see [CostSettler]: 1,000 tokens estimated, 620 used, gives
// 380 back on the tokens limits), leaving Cost's units as spent. An LLM
// client reads usage from the body and settles it:
//
//	var out struct{ Usage struct{ TotalTokens int `json:"total_tokens"` } }
//	err := json.NewDecoder(resp.Body).Decode(&out)
//	resp.Body.Close()
//	if err == nil {
//		throttle.SettleResponseUnits(resp, []throttle.UnitCost{{Unit: "tokens", N: out.Usage.TotalTokens}})
//	}
//
// It fails as SettleResponse does, and with [ErrNoSettler] if the key's
// waiter is not a [CostSettler]; a response is settled once, by either.
func SettleResponseUnits(resp *http.Response, actual []UnitCost) error {
	if resp == nil || resp.Request == nil {
		return fmt.Errorf("throttle: settle a response without its request: %w", ErrNoSettler)
	}
	rec, _ := resp.Request.Context().Value(settleKey{}).(*settlement)
	if rec == nil || rec.resp != resp {
		return fmt.Errorf("throttle: settle a response of %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), ErrNoSettler)
	}
	if _, ok := rec.w.(CostSettler); !ok {
		return fmt.Errorf("throttle: settle the units of a response of %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), ErrNoSettler)
	}
	return rec.settle(resp.Request.Context(), rec.spent, func() []UnitCost { return actual })
}

// settleKey is the context key of a response's settlement.
type settleKey struct{}

// settlement is what settling one attempt's response needs. Attached
// (see attach), it is also the context of the response's request: the
// request's own, with itself as the value of settleKey (one allocation
// for both). Its Context is nil until then.
type settlement struct {
	context.Context

	w     Settler
	spent int
	units []UnitCost     // the attempt's cost in further limits (Transport.Units)
	resp  *http.Response // the response it settles

	mu      sync.Mutex // protects settled
	settled bool
}

// Value implements [context.Context]: see settlement.
func (s *settlement) Value(key any) any {
	if key == (settleKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// settle settles the attempt's cost as actual, and its units as units()
// if units is not nil (a CostSettler's settle), once.
func (s *settlement) settle(ctx context.Context, actual int, units func() []UnitCost) error {
	if actual < 0 {
		return fmt.Errorf("throttle: settle a response as %d units: costs are never negative: %w", actual, ErrInvalidLimit)
	}
	s.mu.Lock()
	if s.settled {
		s.mu.Unlock()
		return ErrSettled
	}
	s.settled = true
	s.mu.Unlock()
	var err error
	if cs, ok := s.w.(CostSettler); ok && (units != nil || len(s.units) > 0) {
		c := Cost{N: s.spent, Units: s.units} // units nil: as spent
		a := Cost{N: actual, Units: s.units}
		if units != nil {
			a.Units = units()
		}
		err = cs.SettleCost(ctx, c, a)
	} else {
		err = s.w.Settle(ctx, s.spent, actual)
	}
	if err != nil {
		s.mu.Lock()
		s.settled = false // not settled: may be tried again
		s.mu.Unlock()
		return err
	}
	return nil
}

// settleAttempt makes the settlement of an attempt's response, which
// spent n units of w's quota, and settles it by Transport's Settle if
// that tells the cost. It returns nil if there is nothing to settle: w
// is not a Settler, or in a dry run (whose probes spend nothing but the
// turns that came at once). A settle the waiter fails is dropped: the
// waiter's own events report a store's failures.
func (t *Transport) settleAttempt(ctx context.Context, w Waiter, resp *http.Response, n int, units []UnitCost) *settlement {
	sw, ok := w.(Settler)
	if !ok || t.DryRun || resp == nil {
		return nil
	}
	rec := &settlement{w: sw, spent: n, resp: resp, units: units}
	actual, settle := n, false
	if t.Settle != nil {
		if a, ok := t.Settle(resp); ok && a >= 0 {
			actual, settle = a, true
		}
	}
	var au func() []UnitCost
	if _, cs := w.(CostSettler); cs && t.SettleUnits != nil {
		if a, ok := t.SettleUnits(resp); ok {
			au, settle = func() []UnitCost { return a }, true
		}
	}
	if settle {
		_ = rec.settle(ctx, actual, au)
	}
	return rec
}

// attach lets [SettleResponse] find rec from resp, which RoundTrip is
// about to return: resp.Request becomes a copy (of the request that was
// sent, or of req if the Base set none) whose context holds rec.
func attach(resp *http.Response, req *http.Request, rec *settlement) *http.Response {
	if rec == nil || resp == nil {
		return resp
	}
	r := resp.Request
	if r == nil {
		r = req
	}
	rec.Context = r.Context()
	resp.Request = r.WithContext(rec)
	return resp
}
