package otelthrottle

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/throttle-go/throttle"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The attribute keys; http.response.status_code and error.type are the
// semantic conventions' own.
const (
	keyKey     = attribute.Key("throttle.key")
	outcomeKey = attribute.Key("throttle.outcome")
	reasonKey  = attribute.Key("throttle.reason")
	eventKey   = attribute.Key("throttle.event")
	unitKey    = attribute.Key("throttle.quota.unit")
	statusKey  = semconv.HTTPResponseStatusCodeKey
)

// Span event attributes only: they would be unbounded on a metric.
const (
	delayKey     = attribute.Key("throttle.delay") // seconds
	attemptKey   = attribute.Key("throttle.attempt")
	rateKey      = attribute.Key("throttle.rate") // units a second: a slow-down's, a recovery's, a declared pace's
	burstKey     = attribute.Key("throttle.burst")
	remainingKey = attribute.Key("throttle.remaining") // a window's units left
)

// other is the value of an attribute past its bound, as the semantic
// conventions spell error.type's fallback.
const other = "_OTHER"

var (
	outcomeOK     = outcomeKey.String("ok")
	outcomeGaveUp = outcomeKey.String("gave_up")
	outcomeError  = outcomeKey.String("error")
)

// bounded is a set of at most max attribute values: the first max values
// seen are kept as they are, later ones become "_OTHER". Memory is bounded
// by max whatever the input.
type bounded struct {
	max  int
	seen sync.Map   // string -> struct{}; read without the lock
	mu   sync.Mutex // serialises additions, so n never passes max
	n    int        // entries in seen; protected by mu
}

func (b *bounded) value(s string) string {
	if _, ok := b.seen.Load(s); ok {
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen.Load(s); ok {
		return s
	}
	if b.n >= b.max {
		return other
	}
	b.seen.Store(s, struct{}{})
	b.n++
	return s
}

// errorType classifies err for the error.type attribute: the causes that
// matter to rate limiting by a short name, any other by its Go type (a
// bounded set), as [semconv.ErrorType] does.
func errorType(err error) attribute.KeyValue {
	var ne net.Error
	name := ""
	switch {
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		name = "would_exceed_deadline"
	case errors.Is(err, throttle.ErrCostExceedsBurst):
		name = "cost_exceeds_burst"
	case errors.Is(err, throttle.ErrInvalidLimit):
		name = "invalid_limit"
	case errors.Is(err, context.Canceled):
		name = "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		name = "deadline_exceeded"
	case errors.As(err, &ne) && ne.Timeout():
		name = "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		name = "connection_refused"
	case errors.Is(err, syscall.ECONNRESET):
		name = "connection_reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		name = "unexpected_eof"
	default:
		return semconv.ErrorType(innermost(err))
	}
	return semconv.ErrorTypeKey.String(name)
}

// innermost follows a chain of single wrappers (*url.Error, *net.OpError,
// fmt.Errorf's %w) to the error that caused it.
func innermost(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
