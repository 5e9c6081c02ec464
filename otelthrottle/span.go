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
	attrs = r.resultAttrs(attrs, e)
	span.AddEvent("throttle."+kind, trace.WithAttributes(attrs...))
}
