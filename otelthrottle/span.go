package otelthrottle

import (
	"context"

	"github.com/throttle-go/throttle"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// addSpanEvent adds e to the span of ctx, if it is recording.
func (r *Recorder) addSpanEvent(ctx context.Context, e throttle.Event, kind string, key attribute.KeyValue, hasKey bool) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, delayKey.Float64(e.Delay.Seconds()), attemptKey.Int(e.Attempt))
	if hasKey {
		attrs = append(attrs, key)
	}
	switch e.Kind {
	case throttle.EventSlowDown, throttle.EventRecovered:
		attrs = append(attrs, rateKey.Float64(e.Rate))
	case throttle.EventDeclared:
		attrs = append(attrs, rateKey.Float64(e.Rate), burstKey.Int(e.Burst))
	case throttle.EventWindow:
		attrs = append(attrs, remainingKey.Float64(e.Remaining))
	}
	attrs = r.resultAttrs(attrs, e)
	span.AddEvent("throttle."+kind, trace.WithAttributes(attrs...))
}
