package otelthrottle

import (
	"context"
	"net/http"
	"sync"

	"github.com/throttle-go/throttle"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the Recorder's meter.
const ScopeName = "github.com/throttle-go/throttle/otelthrottle"

// Recorder turns a [throttle.Transport]'s events into OpenTelemetry
// metrics and span events (see the package documentation for the names).
// Set its fields before the first use and do not change them after.
//
// The zero Recorder records into the global MeterProvider with no key
// attribute. A Recorder is safe for concurrent use; its methods never
// block, as [throttle.Transport.OnEvent] requires. It must not be copied
// after first use.
type Recorder struct {
	// MeterProvider makes the Recorder's instruments. Nil means the
	// global one, [otel.GetMeterProvider], at first use.
	MeterProvider metric.MeterProvider

	// Keys is how many distinct quota keys are named in the throttle.key
	// attribute: the first Keys seen, for the Recorder's life; later keys
	// are recorded as "_OTHER". Zero (or negative) means no throttle.key
	// attribute at all, on metrics and span events: keys may come from
	// user input or hold an API key, and each named key is one more
	// series of every metric. Set it when keys are a few hosts or routes.
	Keys int

	// Key names the quota of a request that Wrap records (its outcome and
	// the quota remaining) when none of the request's events said it. Nil
	// means the Key of the [throttle.Transport] that Wrap wraps, when it
	// has one, else the request's host (req.URL.Host). Set it when Wrap
	// wraps something else around a Transport with a Key.
	Key func(*http.Request) string

	once sync.Once
	inst instruments
	keys bounded // throttle.key values; at most Keys
	reas bounded // throttle.reason values
	unit bounded // throttle.quota.unit values
}

// Bounds of the attribute values that are not opt-in.
const (
	maxReasons = 32
	maxUnits   = 8
)

// Duration buckets, in seconds: from the shortest reported wait (1 ms) to
// the longest Retry-After the Transport honours by default (1 minute), and
// a little past.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

type instruments struct {
	waitDuration   metric.Float64Histogram
	pauses         metric.Int64Counter
	pauseDuration  metric.Float64Histogram
	retries        metric.Int64Counter
	retryDelay     metric.Float64Histogram
	requests       metric.Int64Counter
	quotaRemaining metric.Int64Gauge
	events         metric.Int64Counter
	eventDelay     metric.Float64Histogram
	slowdowns      metric.Int64Counter
	pace           metric.Float64Gauge
}

func (r *Recorder) init() {
	r.once.Do(func() {
		mp := r.MeterProvider
		if mp == nil {
			mp = otel.GetMeterProvider()
		}
		m := mp.Meter(ScopeName)
		r.keys.max = max(r.Keys, 0)
		r.reas.max = maxReasons
		r.unit.max = maxUnits
		// The API returns a usable instrument with any error; the errors
		// say a name or unit is invalid, which these constants are not.
		var errs [11]error
		in := &r.inst
		in.waitDuration, errs[0] = m.Float64Histogram("throttle.wait.duration",
			metric.WithUnit("s"),
			metric.WithDescription("Time a request waited for its quota before an attempt."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		in.pauses, errs[1] = m.Int64Counter("throttle.pauses",
			metric.WithUnit("{pause}"),
			metric.WithDescription("Responses that said a quota is spent, pausing its key."))
		in.pauseDuration, errs[2] = m.Float64Histogram("throttle.pause.duration",
			metric.WithUnit("s"),
			metric.WithDescription("How long a key was paused by a response; the sum is the time paused."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		in.retries, errs[3] = m.Int64Counter("throttle.retries",
			metric.WithUnit("{retry}"),
			metric.WithDescription("Failed attempts sent again."))
		in.retryDelay, errs[4] = m.Float64Histogram("throttle.retry.delay",
			metric.WithUnit("s"),
			metric.WithDescription("The delay before a retry: the server's Retry-After or the backoff."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		in.requests, errs[5] = m.Int64Counter("throttle.requests",
			metric.WithUnit("{request}"),
			metric.WithDescription("Requests by how they ended: ok, gave_up or error."))
		in.quotaRemaining, errs[6] = m.Int64Gauge("throttle.quota.remaining",
			metric.WithUnit("{unit}"),
			metric.WithDescription("Units of the binding quota left, as the last final response said."))
		in.events, errs[7] = m.Int64Counter("throttle.events",
			metric.WithUnit("{event}"),
			metric.WithDescription("Every event of the Transport, by kind."))
		in.eventDelay, errs[8] = m.Float64Histogram("throttle.event.delay",
			metric.WithUnit("s"),
			metric.WithDescription("The delay of event kinds without an instrument of their own."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		in.slowdowns, errs[9] = m.Int64Counter("throttle.slowdowns",
			metric.WithUnit("{slowdown}"),
			metric.WithDescription("Bare rejections that made a key's waiter cut its pace."))
		in.pace, errs[10] = m.Float64Gauge("throttle.pace",
			metric.WithUnit("{unit}/s"),
			metric.WithDescription("The pace a key's waiter adopted by itself: cut, declared by the server, or back after a cut; 0 is no pace of its own."))
		for _, err := range errs {
			if err != nil {
				otel.Handle(err)
			}
		}
	})
}

// OnEvent records e; it is meant for [throttle.Transport.OnEvent], which
// also hears the decisions of the Transport's waiter, or for
// [throttle.Limiter.OnEvent] where a Limiter is used without a Transport
// (set one of the two, or each waiter decision is counted twice). Known
// kinds go to their own instruments, every kind to throttle.events, and
// each event to the span of e.Request's context when that span records.
func (r *Recorder) OnEvent(e throttle.Event) {
	r.init()
	ctx := context.Background()
	if e.Request != nil {
		ctx = e.Request.Context()
	}
	st := stateOf(ctx) // set when the request came through Wrap
	if st != nil {
		st.setKey(e.Key)
	}
	kind := e.Kind.String()
	key, hasKey := r.keyAttr(e.Key)

	// The appends below may share buf: metric.WithAttributes copies them
	// into a set at once.
	var buf [5]attribute.KeyValue
	attrs := buf[:0]
	if hasKey {
		attrs = append(attrs, key)
	}
	in := &r.inst
	secs := e.Delay.Seconds()
	switch e.Kind {
	case throttle.EventWait:
		in.waitDuration.Record(ctx, secs, metric.WithAttributes(attrs...))
	case throttle.EventPause:
		opt := metric.WithAttributes(r.resultAttrs(attrs, e)...)
		in.pauses.Add(ctx, 1, opt)
		in.pauseDuration.Record(ctx, secs, opt)
	case throttle.EventRetry:
		opt := metric.WithAttributes(r.resultAttrs(attrs, e)...)
		in.retries.Add(ctx, 1, opt)
		in.retryDelay.Record(ctx, secs, opt)
	case throttle.EventGiveUp:
		if st != nil {
			st.gaveUp.Store(true) // Wrap counts no other outcome for it
		}
		in.requests.Add(ctx, 1, metric.WithAttributes(r.resultAttrs(append(attrs, outcomeGaveUp), e)...))
	case throttle.EventSlowDown:
		in.slowdowns.Add(ctx, 1, metric.WithAttributes(attrs...))
		in.pace.Record(ctx, e.Rate, metric.WithAttributes(attrs...))
	case throttle.EventDeclared, throttle.EventRecovered:
		in.pace.Record(ctx, e.Rate, metric.WithAttributes(attrs...))
	default:
		if e.Delay > 0 {
			in.eventDelay.Record(ctx, secs, metric.WithAttributes(append(attrs, eventKey.String(kind))...))
		}
	}
	in.events.Add(ctx, 1, metric.WithAttributes(append(attrs, eventKey.String(kind))...))
	r.addSpanEvent(ctx, e, kind, key, hasKey)
}

// keyAttr returns the throttle.key attribute for key, if keys are named.
func (r *Recorder) keyAttr(key string) (attribute.KeyValue, bool) {
	if r.keys.max == 0 {
		return attribute.KeyValue{}, false
	}
	return keyKey.String(r.keys.value(key)), true
}

// resultAttrs appends what the attempt ended with: its status or its
// error, and the event's reason.
func (r *Recorder) resultAttrs(attrs []attribute.KeyValue, e throttle.Event) []attribute.KeyValue {
	if e.StatusCode != 0 {
		attrs = append(attrs, statusKey.Int(e.StatusCode))
	}
	if e.Err != nil {
		attrs = append(attrs, errorType(e.Err))
	}
	if e.Reason != "" {
		attrs = append(attrs, reasonKey.String(r.reas.value(e.Reason)))
	}
	return attrs
}
