package throttle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLogEvents checks the records LogEvents writes: message, level and
// the event's fields, with the URL's query and credentials left out.
func TestLogEvents(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://user:secret@api.example.com/v1/x?api_key=secret#frag", nil)
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{"wait", Event{Kind: EventWait, Request: req, Key: "api.example.com", Attempt: 1, Delay: 250 * time.Millisecond},
			`level=DEBUG msg="throttle: wait" kind=wait key=api.example.com method=GET url=https://api.example.com/v1/x attempt=1 delay=250ms`},
		{"pause", Event{Kind: EventPause, Request: req, Key: "k", Attempt: 1, Delay: 2 * time.Second, StatusCode: 429},
			`level=INFO msg="throttle: pause" kind=pause key=k method=GET url=https://api.example.com/v1/x attempt=1 delay=2s status=429`},
		{"retry", Event{Kind: EventRetry, Key: "k", Attempt: 2, Delay: time.Second, Err: errors.New("connection reset")},
			`level=INFO msg="throttle: retry" kind=retry key=k attempt=2 delay=1s err="connection reset"`},
		{"give-up", Event{Kind: EventGiveUp, Key: "k", Attempt: 1, StatusCode: 503, Reason: "method is not idempotent"},
			`level=WARN msg="throttle: give-up" kind=give-up key=k attempt=1 status=503 reason="method is not idempotent"`},
		{"would-wait", Event{Kind: EventWouldWait, Key: "k", Attempt: 1, Delay: 3 * time.Second},
			`level=INFO msg="throttle: would-wait" kind=would-wait key=k attempt=1 delay=3s`},
		{"would-retry", Event{Kind: EventWouldRetry, Key: "k", Attempt: 1, Delay: 0, StatusCode: 429},
			`level=INFO msg="throttle: would-retry" kind=would-retry key=k attempt=1 delay=0s status=429`},
		{"slow-down", Event{Kind: EventSlowDown, Request: req, Key: "k", Attempt: 2, Rate: 7},
			`level=INFO msg="throttle: slow-down" kind=slow-down key=k method=GET url=https://api.example.com/v1/x attempt=2 rate=7`},
		{"recovered", Event{Kind: EventRecovered, Key: "k", Rate: 10},
			`level=INFO msg="throttle: recovered" kind=recovered key=k rate=10`},
		{"recovered, no limit", Event{Kind: EventRecovered, Key: "k"},
			`level=INFO msg="throttle: recovered" kind=recovered key=k rate=0`},
		{"shift", Event{Kind: EventShift, Key: "k", Delay: 900 * time.Millisecond},
			`level=DEBUG msg="throttle: shift" kind=shift key=k delay=900ms`},
		{"window", Event{Kind: EventWindow, Key: "k", Attempt: 1, Remaining: 60, Delay: 5 * time.Second},
			`level=DEBUG msg="throttle: window" kind=window key=k attempt=1 delay=5s remaining=60`},
		{"window spent", Event{Kind: EventWindow, Key: "k", Delay: time.Minute},
			`level=DEBUG msg="throttle: window" kind=window key=k delay=1m0s remaining=0`},
		{"declared", Event{Kind: EventDeclared, Key: "k", Rate: 2.5, Burst: 100},
			`level=INFO msg="throttle: declared" kind=declared key=k rate=2.5 burst=100`},
		{"store-error", Event{Kind: EventStoreError, Key: "k", Err: errors.New("dial tcp: connection refused")},
			`level=WARN msg="throttle: store-error" kind=store-error key=k err="dial tcp: connection refused"`},
		{"breaker-open", Event{Kind: EventBreakerOpen, Key: "k", Delay: time.Second},
			`level=WARN msg="throttle: breaker-open" kind=breaker-open key=k delay=1s`},
		{"breaker-close", Event{Kind: EventBreakerClose, Key: "k"},
			`level=INFO msg="throttle: breaker-close" kind=breaker-close key=k`},
		{"fallback", Event{Kind: EventFallback, Key: "k", Reason: "paced locally"},
			`level=DEBUG msg="throttle: fallback" kind=fallback key=k reason="paced locally"`},
		{"in-flight", Event{Kind: EventInFlight, Key: "k", Attempt: 1, Delay: 40 * time.Millisecond},
			`level=DEBUG msg="throttle: in-flight" kind=in-flight key=k attempt=1 delay=40ms`},
		{"unknown kind", Event{Kind: 99, Key: "k"},
			`level=INFO msg="throttle: unknown" kind=unknown key=k`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})
			LogEvents(slog.New(h))(tt.e)
			if got := strings.TrimSuffix(buf.String(), "\n"); got != tt.want {
				t.Errorf("record\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func noTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// TestLogEventsLevel checks that a record below the logger's level is not
// built, and that the request's context reaches the handler.
func TestLogEventsLevel(t *testing.T) {
	type ctxKey struct{}
	var got []context.Context
	h := &recordHandler{level: slog.LevelInfo, ctxs: &got}
	log := LogEvents(slog.New(h))
	req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), ctxKey{}, "trace-1"), "GET", "http://a/", nil)
	log(Event{Kind: EventWait, Request: req, Delay: time.Second}) // debug: dropped
	log(Event{Kind: EventRetry, Request: req, Delay: time.Second})
	if len(got) != 1 || got[0].Value(ctxKey{}) != "trace-1" {
		t.Errorf("handled %d records, contexts %v; want 1 with the request's context", len(got), got)
	}
}

type recordHandler struct {
	level slog.Level
	ctxs  *[]context.Context
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordHandler) Handle(ctx context.Context, _ slog.Record) error {
	*h.ctxs = append(*h.ctxs, ctx)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// TestEventLogValue checks that an Event logs as a group under slog.Any.
func TestEventLogValue(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))
	l.Info("done", slog.Any("event", Event{Kind: EventGiveUp, Key: "k", Attempt: 3, StatusCode: 429, Reason: "MaxAttempts reached"}))
	want := `level=INFO msg=done event.kind=give-up event.key=k event.attempt=3 event.status=429 event.reason="MaxAttempts reached"` + "\n"
	if buf.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestEventKindNames checks that every kind has its own name, so that no
// two kinds log alike.
func TestEventKindNames(t *testing.T) {
	kinds := []EventKind{EventWait, EventPause, EventRetry, EventGiveUp,
		EventSlowDown, EventRecovered, EventShift, EventWindow, EventDeclared,
		EventStoreError, EventBreakerOpen, EventBreakerClose, EventFallback,
		EventConfig, EventInFlight, EventWouldWait, EventWouldRetry}
	seen := map[string]EventKind{}
	for _, k := range kinds {
		name := k.String()
		if name == "unknown" {
			t.Errorf("kind %d has no name", k)
		}
		if o, ok := seen[name]; ok {
			t.Errorf("kinds %d and %d are both %q", o, k, name)
		}
		seen[name] = k
	}
}
