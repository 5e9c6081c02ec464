package throttle

import (
	"context"
	"log/slog"
)

// LogEvents returns a function for [Transport.OnEvent] (or
// [Limiter.OnEvent], or [WithEvents]) that writes each
// event to l as a record with the message "throttle: " and the kind
// ("throttle: retry"), and the event's fields as attributes (see
// [Event.LogValue]). The record's context is the request's, so a handler
// can add its trace; a decision that came from no request (EventRecovered)
// is logged with [context.Background]. Levels:
//   - Debug: EventWait, EventInFlight, EventShift, EventWindow,
//     EventFallback, the everyday cost of pacing and its causes;
//   - Info: EventPause, EventRetry, EventSlowDown, EventRecovered,
//     EventDeclared, EventBreakerClose, and the dry run's EventWouldWait
//     and EventWouldRetry, what an operator watches a limit by;
//   - Warn: EventGiveUp, a request that failed; EventStoreError and
//     EventBreakerOpen, a shared store that failed; EventConfig, a
//     shared quota whose configuration another process replaced;
//   - Info for kinds this version does not know.
//
// A nil l means [slog.Default] at each event.
func LogEvents(l *slog.Logger) func(Event) {
	return func(e Event) {
		logger := l
		if logger == nil {
			logger = slog.Default()
		}
		ctx := context.Background()
		if e.Request != nil {
			ctx = e.Request.Context()
		}
		level := e.Kind.level()
		if !logger.Enabled(ctx, level) {
			return
		}
		logger.LogAttrs(ctx, level, e.Kind.message(), e.LogValue().Group()...)
	}
}

func (k EventKind) level() slog.Level {
	switch k {
	case EventWait, EventInFlight, EventShift, EventWindow, EventFallback:
		return slog.LevelDebug
	case EventGiveUp, EventStoreError, EventBreakerOpen, EventConfig:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

func (k EventKind) message() string {
	switch k {
	case EventWait:
		return "throttle: wait"
	case EventPause:
		return "throttle: pause"
	case EventRetry:
		return "throttle: retry"
	case EventGiveUp:
		return "throttle: give-up"
	case EventWouldWait:
		return "throttle: would-wait"
	case EventWouldRetry:
		return "throttle: would-retry"
	}
	return "throttle: " + k.String()
}
