package throttle

import (
	"log/slog"
	"net/http"
	"time"
)

// minReportedWait is the shortest wait reported as an EventWait: a wait
// that did not block still takes a few hundred nanoseconds.
const minReportedWait = time.Millisecond

// EventKind tells what an [Event] reports.
type EventKind int

// The values of the kinds never change; new kinds get new values.
const (
	// EventWait: a request waited Delay (1ms or more) for its quota
	// before an attempt.
	EventWait EventKind = iota + 1
	// EventPause: a response said Key's quota is spent; the key is paused
	// for Delay. In a dry run the pause holds the waiter's state, which
	// the dry run reads, but delays no request of the Transport's.
	EventPause
	// EventRetry: an attempt failed (StatusCode or Err) and the request
	// will be sent again after Delay.
	EventRetry
	// EventGiveUp: a request failed and is not retried; its response or
	// error is returned. Reason says why (see [Event]).
	EventGiveUp
)

// Kinds that report a decision a waiter took by itself ([Limiter],
// distributed.Limiter): a slow-down, a window or a declared limit it
// adopted, and the shared store's failures and the fallback they caused.
// Request is nil and Attempt 0 unless the decision came from a response
// the Transport read. They reach the waiter's own OnEvent
// ([Limiter.OnEvent]) and the function of the call's context
// ([WithEvents]), which is a Transport's OnEvent for the calls a
// Transport makes. Their values leave room after EventGiveUp.
const (
	// EventSlowDown: a bare rejection (a 429 or 503 without a delay) cut
	// Key's pace to Rate units per second. The pace regrows by itself;
	// an EventRecovered says when it is back.
	EventSlowDown EventKind = iota + 32
	// EventRecovered: Key's pace is back to Rate units per second after
	// a slow-down (0: the key has no limit, and runs unpaced again). It
	// comes when the slow-down ends, from no request.
	EventRecovered
	// EventShift: Key's queued turns moved later by Delay (the last
	// queued one's): a pause, a window or a slow-down that lengthened
	// the queue; or, with nothing queued, a lone bare rejection under a
	// known limit that moved the next turn later without a slow-down.
	// Delay is the move the key's schedule foresees at the decision; under
	// a slow-down, whose pace regrows step by step, the turns may come
	// later still. Moves under a millisecond are not reported.
	EventShift
	// EventWindow: a server's window was learned for Key: Remaining units
	// until Delay from now (the units still in flight, which the server
	// has not counted yet, taken off). Reported when a window is first
	// seen, not at each response counting it down.
	EventWindow
	// EventDeclared: Key adopted the pace a server declared, Rate units
	// per second, Burst at once: when first declared and when it
	// changes. A key with a configured limit adopts none.
	EventDeclared
	// EventStoreError: a call to the shared store failed; Err is the
	// store's error (the real cause, not the deadline of the wait that
	// made it).
	EventStoreError
	// EventBreakerOpen: the store breaker opened after failures; waits go
	// to the fail mode, and a probe is let through every Delay.
	EventBreakerOpen
	// EventBreakerClose: a probe succeeded; waits go to the store again.
	EventBreakerClose
	// EventFallback: a wait was answered without the store, as Reason says
	// (the fail mode: paced locally, admitted, or refused).
	EventFallback
	// EventConfig: a shared quota's process follows a configuration
	// another process wrote with a higher Version (the distributed
	// package's Limiter.Version): Rate and Burst are the ones it follows
	// now, Reason says whose and instead of what.
	EventConfig
	// EventInFlight: an acquisition ([Quota].Acquire) blocked for Delay (1ms
	// or more) on Key's in-flight cap, until others in flight released
	// their units; Err is set if it ended without them (its context
	// ended). Before an attempt of a [Transport] this is part of the
	// attempt's wait, which an EventWait reports as a whole.
	EventInFlight
	// EventClamp: a settle ([Quota].Settle) charged more than a limit of
	// Key holds at once beyond what the wait spent: Units units of Unit
	// ("" for the first limit's) were dropped, not charged.
	EventClamp
	// EventQueueFull: a wait (or reservation) of Units units on Key was
	// refused because it would have queued past the waiter's MaxQueued;
	// Err is its error, which matches [ErrQueueFull]. Nothing was spent.
	EventQueueFull
)

// Kinds reported in a dry run ([Transport].DryRun) only. Their values
// leave room for more kinds after EventGiveUp.
const (
	// EventWouldWait: a dry run sent a request at once that would have
	// waited Delay for its quota. Delay is 0 when the waiter cannot tell
	// how long without waiting (Err says what it said).
	EventWouldWait EventKind = iota + 64
	// EventWouldRetry: a dry run returned an attempt's failure that would
	// have been retried after Delay.
	EventWouldRetry
)

// String returns the kind's name as logs show it: "wait", "pause",
// "retry", "give-up", "would-wait", "would-retry", "slow-down",
// "recovered", "shift", "window", "declared", "store-error",
// "breaker-open", "breaker-close", "fallback", "config", "in-flight",
// "clamp", "queue-full"; "unknown" for a value that is no kind.
func (k EventKind) String() string {
	switch k {
	case EventWait:
		return "wait"
	case EventPause:
		return "pause"
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give-up"
	case EventWouldWait:
		return "would-wait"
	case EventWouldRetry:
		return "would-retry"
	case EventSlowDown:
		return "slow-down"
	case EventRecovered:
		return "recovered"
	case EventShift:
		return "shift"
	case EventWindow:
		return "window"
	case EventDeclared:
		return "declared"
	case EventStoreError:
		return "store-error"
	case EventBreakerOpen:
		return "breaker-open"
	case EventBreakerClose:
		return "breaker-close"
	case EventFallback:
		return "fallback"
	case EventConfig:
		return "config"
	case EventInFlight:
		return "in-flight"
	case EventClamp:
		return "clamp"
	case EventQueueFull:
		return "queue-full"
	}
	return "unknown"
}

// Event is what [Transport.OnEvent] and [Limiter.OnEvent] are told (see
// the kinds for who reports what). It is a [slog.LogValuer]:
// slog.Any("event", e) logs its fields as a group, and [LogEvents] makes
// log records of a Transport's events.
type Event struct {
	Kind       EventKind
	Request    *http.Request // the caller's request; do not modify it
	Key        string        // the quota's key
	Attempt    int           // 1 for the first attempt
	Delay      time.Duration // the wait, pause or retry delay
	StatusCode int           // the attempt's status, 0 if it failed with Err
	Err        error         // the attempt's error, or the wait's, if any

	// Rate, Burst and Remaining describe a pace or window a waiter
	// adopted (EventSlowDown, EventRecovered, EventDeclared, EventWindow);
	// Rate is in units per second.
	Rate      float64
	Burst     int
	Remaining float64

	// Units and Unit, for EventClamp: the units dropped, and their unit;
	// Units, for EventQueueFull: the units of the wait refused.
	Units float64
	Unit  string

	// Reason, for EventGiveUp, says why the request is not retried. The
	// default policy's reasons ([DefaultClassify]): "method is not
	// idempotent", "request body cannot be replayed", "status is not
	// retried", "server said x-should-retry: false", "error is not
	// transient", "context ended" (also while waiting to retry). The
	// Transport's bounds: "MaxAttempts
	// reached", "MaxElapsed reached", "context deadline before the retry",
	// "retry budget spent", "server asked to wait longer than
	// MaxRetryAfter". Before any attempt: "wait for quota failed"; before
	// a retry: "request body rewind failed". For an EventRetry of a bare
	// refusal that a [Limiter]'s key took for a strict server's timing,
	// not its budget (its pace kept, the retry at its next turn: see
	// [RetryPolicy]): "strict server's timing: the key's pace stays".
	Reason string
}

// LogValue returns the event's fields as a group: kind, key, method, url
// (without its query, which may hold credentials), attempt, delay, rate,
// burst, remaining, status, err and reason; each only where set, or where
// the kind has it (delay for the kinds that report one, rate for
// slow-downs, recoveries and declared paces, burst for a declared pace,
// remaining for a window).
func (e Event) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("kind", e.Kind.String()), slog.String("key", e.Key))
	if r := e.Request; r != nil {
		attrs = append(attrs, slog.String("method", r.Method))
		if r.URL != nil {
			u := *r.URL
			u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
			attrs = append(attrs, slog.String("url", u.String()))
		}
	}
	if e.Attempt != 0 {
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	switch e.Kind {
	case EventWait, EventPause, EventRetry, EventWouldWait, EventWouldRetry, EventShift, EventWindow, EventBreakerOpen, EventInFlight:
		attrs = append(attrs, slog.Duration("delay", e.Delay))
	}
	switch e.Kind {
	case EventSlowDown, EventRecovered, EventDeclared:
		attrs = append(attrs, slog.Float64("rate", e.Rate))
	}
	if e.Kind == EventDeclared {
		attrs = append(attrs, slog.Int("burst", e.Burst))
	}
	if e.Kind == EventWindow {
		attrs = append(attrs, slog.Float64("remaining", e.Remaining))
	}
	if e.Kind == EventClamp {
		attrs = append(attrs, slog.Float64("units", e.Units), slog.String("unit", e.Unit))
	} else if e.Kind == EventQueueFull {
		attrs = append(attrs, slog.Float64("units", e.Units))
	}
	if e.StatusCode != 0 {
		attrs = append(attrs, slog.Int("status", e.StatusCode))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	return slog.GroupValue(attrs...)
}
