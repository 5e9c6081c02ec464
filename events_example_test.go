package throttle_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/throttle-go/throttle"
)

// A queue worker that uses a Limiter without a Transport hears the
// decisions the Limiter takes by itself through its OnEvent: here logged
// with LogEvents. A job's call came back rejected with nothing said of
// when to come back: under a known limit, a lone rejection shifts the
// key's schedule by two intervals. The next response described the
// quota's window: the Limiter learned it.
func ExampleLimiter_onEvent() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug, // shifts and windows are logged at Debug
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	lim := &throttle.Limiter{Limit: 10, Burst: 1, OnEvent: throttle.LogEvents(logger)}
	ctx := context.Background()

	key := lim.For("api.example.com")
	if err := key.WaitN(ctx, 1); err != nil {
		return
	}
	// The job's API said 429, and nothing more.
	key.(throttle.Adapter).Adapt(ctx, throttle.Feedback{Throttled: true})
	// The next said: 50 requests left in the 30 s until the window resets.
	key.(throttle.Adapter).Adapt(ctx, throttle.Feedback{HasWindow: true, Remaining: 50, Reset: 30 * time.Second})
	// Output:
	// level=DEBUG msg="throttle: shift" kind=shift key=api.example.com delay=200ms
	// level=DEBUG msg="throttle: window" kind=window key=api.example.com delay=30s remaining=50
}
