// Package otelthrottle records what a [throttle.Transport] and its waiter
// decide — waits for quota, pauses, retries, give-ups, slow-downs, shifts,
// windows and declared limits, and any event kind added later — as
// OpenTelemetry metrics, and as span events on each request's span.
//
// It is a module of its own, so that programs using throttle without
// OpenTelemetry do not depend on it.
//
// # Use
//
// A [Recorder] plugs into the Transport's OnEvent hook; [Recorder.Wrap],
// around the Transport, adds what events cannot tell: how requests that
// were not given up ended, and the quota remaining in the final response.
//
//	rec := &otelthrottle.Recorder{} // the global MeterProvider
//	t := &throttle.Transport{
//		Waiter:  &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 10}}},
//		OnEvent: rec.OnEvent,
//	}
//	client := &http.Client{Transport: rec.Wrap(t)}
//
// The decisions the Transport's waiter takes by itself (slow-downs and
// their end, shifts of queued turns, windows learned, declared limits
// adopted) reach the Transport's OnEvent too. A queue worker that uses a
// [throttle.Limiter] without a Transport sets the Limiter's OnEvent:
//
//	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 10}}, OnEvent: rec.OnEvent}
//
// To keep an OnEvent of your own (a logger), call both:
//
//	t.OnEvent = func(e throttle.Event) {
//		rec.OnEvent(e)
//		logEvent(e)
//	}
//
// # Metrics
//
// Names follow OpenTelemetry's semantic conventions: dotted lowercase
// names under the throttle namespace, durations as histograms in seconds
// (unit "s"), counts as counters with a {annotation} unit and no _total.
//
//	throttle.wait.duration    histogram  s          EventWait: time a request waited for quota
//	throttle.pauses           counter    {pause}    EventPause: a response said the quota is spent
//	throttle.pause.duration   histogram  s          EventPause: how long the key was paused; the sum is the time paused
//	throttle.retries          counter    {retry}    EventRetry: an attempt failed and is sent again
//	throttle.retry.delay      histogram  s          EventRetry: the delay before the retry
//	throttle.requests         counter    {request}  requests by throttle.outcome: "gave_up" (EventGiveUp),
//	                                                 "ok" and "error" (only through Wrap)
//	throttle.quota.remaining  gauge      {unit}     units left as a final response says, the least of
//	                                                 its policies of each unit (only through Wrap)
//	throttle.slowdowns        counter    {slowdown} EventSlowDown: a bare rejection cut a key's pace
//	throttle.pace             gauge      {unit}/s   the pace a key's waiter adopted by itself: the cut's
//	                                                 (EventSlowDown), the server's declared one
//	                                                 (EventDeclared), the one it is back to
//	                                                 (EventRecovered; 0: no pace of its own)
//	throttle.events           counter    {event}    every event, by throttle.event (its Kind.String())
//	throttle.event.delay      histogram  s          the Delay of event kinds without an instrument
//	                                                 of their own, by throttle.event
//
// Event kinds added to throttle after this package was written are counted
// in throttle.events (and their delays in throttle.event.delay) under their
// Kind.String(), with no change here.
//
// # Attributes
//
//	throttle.key               the quota's key; opt-in, see Recorder.Keys
//	throttle.outcome           "ok", "gave_up" or "error" (throttle.requests)
//	throttle.reason            the event's Reason when it has one (why the Transport gave up; on a retry, that a refusal was taken for a strict server's timing)
//	throttle.event             the event's Kind.String() (throttle.events, throttle.event.delay)
//	throttle.quota.unit        what the quota counts: "requests", "tokens", … (throttle.quota.remaining)
//	http.response.status_code the attempt's or the final response's status
//	error.type                 the error's class: "timeout", "canceled", "would_exceed_deadline",
//	                           "connection_refused", … else its Go type
//
// Every attribute has a bounded set of values, so series cannot grow
// without bound: keys may come from user input (tenants, API keys), so
// throttle.key is left off unless [Recorder.Keys] allows that many; reasons
// and units past a fixed number of distinct values are recorded as
// "_OTHER".
//
// # Span events
//
// Each event is added to the span of its request's context
// ([trace.SpanFromContext]) when that span is recording, named
// "throttle." + Kind.String() ("throttle.wait", "throttle.pause",
// "throttle.retry", "throttle.give-up", …), with throttle.delay (seconds,
// a double), throttle.attempt, and throttle.key, throttle.reason,
// http.response.status_code and error.type when they apply; a waiter's
// decisions add throttle.rate (units a second: a slow-down's or a declared
// pace's), throttle.burst (a declared pace's) and throttle.remaining (a
// window's units left). An EventRecovered, which no request caused, is on
// no span.
package otelthrottle
