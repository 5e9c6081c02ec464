package throttle

import (
	"context"
	"net/http"
)

// eventsKey is the context key of an *eventSink.
type eventsKey struct{}

// eventSink is where a waiter reports the decisions it takes during one
// call: the function a caller put in the call's context, and the request
// and attempt the call is made for (set by [Transport]; nil and 0 from
// [WithEvents]).
type eventSink struct {
	fn      func(Event)
	req     *http.Request
	attempt int
}

// emit reports e to the sink's function, with the sink's request and
// attempt unless e has its own.
func (s *eventSink) emit(e Event) {
	s.fn(s.fill(e))
}

// fill sets e's request and attempt to the sink's unless e has its own.
func (s *eventSink) fill(e Event) Event {
	if e.Request == nil && e.Attempt == 0 {
		e.Request, e.Attempt = s.req, s.attempt
	}
	return e
}

// WithEvents returns a copy of ctx that carries fn: a waiter called with
// the returned context (WaitN, Pause, Adapt) reports the decisions it
// takes by itself during that call to fn, as well as to its own OnEvent
// ([Limiter.OnEvent]). [Transport] does this with its OnEvent for every
// waiter call it makes, so that a Transport's OnEvent sees the slow-downs,
// shifts, windows and declared limits its responses caused; a program
// calling a waiter itself (a queue worker) can use WithEvents to send one
// job's events to that job's logger. A nil fn returns ctx.
//
// fn is called after the waiter's locks are released, from the calling
// goroutine; and for the end of a slow-down (EventRecovered) of a key
// whose waiter such a call last adapted, from a timer's goroutine. It
// must not block.
func WithEvents(ctx context.Context, fn func(Event)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, eventsKey{}, &eventSink{fn: fn})
}

// EventsFrom returns the function that reports events to the caller that
// made ctx ([WithEvents], or a [Transport] with an OnEvent), nil if none.
// It is for implementations of [Waiter]: a waiter calls it with the
// context of the call in which it takes a decision. The function fills in
// the event's Request and Attempt, when the event has none, with those of
// the Transport's attempt that made the call.
func EventsFrom(ctx context.Context) func(Event) {
	if s := sinkFrom(ctx); s != nil {
		return s.emit
	}
	return nil
}

// sinkFrom returns ctx's event sink, nil if none.
func sinkFrom(ctx context.Context) *eventSink {
	s, _ := ctx.Value(eventsKey{}).(*eventSink)
	return s
}
