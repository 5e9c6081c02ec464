package throttle_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
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
			if a.Key == "delay" {
				// For a stable output: delays on the real clock vary by
				// the time the calls take.
				return slog.Duration(a.Key, a.Value.Duration().Round(10*time.Millisecond))
			}
			return a
		},
	}))
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 1}}, OnEvent: throttle.LogEvents(logger)}
	ctx := context.Background()

	key := lim.For("api.example.com")
	for range 2 {
		if err := key.WaitN(ctx, 1); err != nil {
			return
		}
		// The job's API said 429, and nothing more. The first such
		// refusal of a key one unit deep is taken for the timing of a
		// strict server (the key's pace stays: no event); the second
		// slows the key down.
		key.Observe(ctx, throttle.Feedback{Verdict: throttle.RefusedBare})
	}
	// The next said: 50 requests left in the 30 s until the window resets.
	key.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 50, Reset: 30 * time.Second}})
	// Output:
	// level=INFO msg="throttle: slow-down" kind=slow-down key=api.example.com rate=9.9
	// level=DEBUG msg="throttle: shift" kind=shift key=api.example.com delay=100ms
	// level=DEBUG msg="throttle: window" kind=window key=api.example.com delay=30s remaining=50
}

// A queue worker sends one job's events to that job's own log: the
// decisions the Limiter takes during the job's calls come to the function
// in the call's context, with nothing set on the Limiter.
func ExampleWithEvents() {
	lim := &throttle.Limiter{} // no limit of its own: it adopts what servers declare
	for _, job := range []string{"job-1", "job-2"} {
		ctx := throttle.WithEvents(context.Background(), func(e throttle.Event) {
			fmt.Printf("%s: %s %s rate=%g burst=%d\n", job, e.Kind, e.Key, e.Rate, e.Burst)
		})
		key := lim.For("api.example.com")
		if err := key.WaitN(ctx, 1); err != nil {
			return
		}
		// The API's response declared 100 requests a minute; the second
		// job's response declares the same, adopted already: nothing new.
		key.Observe(ctx, throttle.Feedback{Declared: &throttle.Declared{Rate: rate.Every(time.Minute / 100), Burst: 100}})
	}
	// Output:
	// job-1: declared api.example.com rate=1.6666666666666667 burst=100
}
