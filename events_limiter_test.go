package throttle

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// timeline records events with the time each came, since start.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	got   []string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

// add records e as "at kind key fields", the fields a decision's kind
// carries.
func (tl *timeline) add(e Event) {
	s := fmt.Sprintf("%v %s %s", time.Since(tl.start), e.Kind, e.Key)
	switch e.Kind {
	case EventSlowDown, EventRecovered:
		s += fmt.Sprintf(" rate=%.4g", e.Rate)
	case EventDeclared:
		s += fmt.Sprintf(" rate=%.4g burst=%d", e.Rate, e.Burst)
	case EventWindow:
		s += fmt.Sprintf(" remaining=%g delay=%v", e.Remaining, e.Delay)
	case EventShift:
		s += fmt.Sprintf(" delay=%v", e.Delay)
	}
	if e.Request != nil {
		s += fmt.Sprintf(" attempt=%d", e.Attempt)
	}
	tl.mu.Lock()
	tl.got = append(tl.got, s)
	tl.mu.Unlock()
}

// take returns the events recorded since the last take.
func (tl *timeline) take() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := strings.Join(tl.got, "\n")
	tl.got = nil
	return s
}

func (tl *timeline) expect(t *testing.T, step, want string) {
	t.Helper()
	if got := tl.take(); got != want {
		t.Errorf("%s: events\n%s\nwant\n%s", step, got, want)
	}
}

func adapt(l *Limiter, key string, f Feedback) {
	l.For(key).Observe(context.Background(), f)
}

// TestEventSlowDownRecovered checks the slow-down of a key with a limit:
// the first bare rejection of a key one unit deep anchors it and leaves
// its pace as it is (anchorStart: no event); the next shifts its schedule
// by an interval (EventShift) and trims its pace (EventSlowDown), a
// second within the strike window cuts the pace to 0.7 of the limit
// (EventSlowDown), which regrows to the limit over 2 s (EventRecovered at
// exactly 2 s, from no call at all). Each once; nothing for responses
// that said nothing, nor for rejections of requests sent before the cut.
func TestEventSlowDownRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}, OnEvent: tl.add}
		adapt(l, "k", Feedback{}) // a success: nothing decided
		tl.expect(t, "a success", "")
		adapt(l, "k", Feedback{Verdict: RefusedBare})
		tl.expect(t, "a first rejection", "")
		time.Sleep(100 * time.Millisecond)
		adapt(l, "k", Feedback{Verdict: RefusedBare})
		tl.expect(t, "a second rejection", "100ms slow-down k rate=9.9\n100ms shift k delay=101.010102ms")
		time.Sleep(900 * time.Millisecond)
		// Each rejection trims the pace by trimStep of the limit, to
		// trimMax; the one past it cuts to cutBeta of the limit.
		for range 9 {
			adapt(l, "k", Feedback{Verdict: RefusedBare})
		}
		tl.take()
		adapt(l, "k", Feedback{Verdict: RefusedBare})
		tl.expect(t, "a rejection past the margin", "1s slow-down k rate=7")
		adapt(l, "k", Feedback{Verdict: RefusedBare, Age: time.Millisecond}) // sent before the cut
		time.Sleep(5 * time.Second)
		tl.expect(t, "the cut's end", "3s recovered k rate=10")
	})
}

// TestEventSlowDownNoLimit checks a key without a limit: its first bare
// rejection cuts what it was sending (at least one request a second), and
// the cut is over when its probing reaches ten times that, 5.5 s later
// (2 s of regrowth, then doubling each second in quarter-second steps);
// a cut while another is in force reports the new one only.
func TestEventSlowDownNoLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{OnEvent: tl.add}
		adapt(l, "k", Feedback{Verdict: RefusedBare})
		tl.expect(t, "a rejection", "0s slow-down k rate=1")
		time.Sleep(time.Second)
		adapt(l, "k", Feedback{Verdict: RefusedBare}) // the floor: still cut
		tl.expect(t, "a second rejection", "1s slow-down k rate=1")
		time.Sleep(10 * time.Second)
		tl.expect(t, "the cut's end", "6.5s recovered k rate=0")
	})
}

// TestEventDeclared checks that a declared pace is reported when it is
// adopted and when it changes, not at every response that repeats it,
// and never for a key with a configured limit (which it does not pace).
func TestEventDeclared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{Overrides: map[string][]Limit{"fixed": {{Rate: 1, Burst: 1}}}, OnEvent: tl.add}
		d := Feedback{Declared: &Declared{Rate: 5, Burst: 10}}
		adapt(l, "k", d)
		tl.expect(t, "declared", "0s declared k rate=5 burst=10")
		adapt(l, "k", d)
		tl.expect(t, "declared again", "")
		d.Declared = &Declared{Rate: 2, Burst: 4}
		adapt(l, "k", d)
		tl.expect(t, "declared lower", "0s declared k rate=2 burst=4")
		adapt(l, "fixed", d)
		tl.expect(t, "a configured key", "")
	})
}

// TestEventWindow checks that a window is reported when learned (a new
// key's, or the next one after a reset), not at each response that
// counts down the same window.
func TestEventWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{OnEvent: tl.add}
		w := Feedback{Window: &ServerWindow{Remaining: 50, Reset: 30 * time.Second, Size: 100, Length: time.Minute}}
		adapt(l, "k", w)
		tl.expect(t, "a window", "0s window k remaining=50 delay=30s")
		time.Sleep(time.Second)
		w.Window = &ServerWindow{Remaining: 40, Reset: 29 * time.Second, Size: 100, Length: time.Minute}
		adapt(l, "k", w)
		tl.expect(t, "the same window", "")
		time.Sleep(30 * time.Second)
		w.Window = &ServerWindow{Remaining: 100, Reset: time.Minute, Size: 100, Length: time.Minute}
		adapt(l, "k", w)
		tl.expect(t, "the next window", "31s window k remaining=100 delay=1m0s")
	})
}

// TestEventShift checks that a pause that moves queued turns reports how
// far the last one moved, once, and that a pause with nothing queued, or
// one shorter than the pause in force, reports nothing.
func TestEventShift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}, OnEvent: tl.add}
		ctx := context.Background()
		l.For("k").Pause(ctx, 50*time.Millisecond)
		tl.expect(t, "a pause, nothing queued", "")
		time.Sleep(50 * time.Millisecond)
		var wg sync.WaitGroup
		done := make([]time.Duration, 3)
		start := time.Now()
		for i := range done {
			wg.Go(func() {
				l.For("k").WaitN(ctx, 1)
				done[i] = time.Since(start)
			})
			synctest.Wait() // in order: turns at 0, 100 and 200 ms
		}
		l.For("k").Pause(ctx, time.Second)
		tl.expect(t, "a pause", "50ms shift k delay=900ms")
		l.For("k").Pause(ctx, time.Second/2)
		tl.expect(t, "a shorter pause", "")
		wg.Wait()
		if done[2] != 1100*time.Millisecond {
			t.Errorf("last wait done after %v; want 1.1s, as the shift said", done[2])
		}
	})
}

// TestEventCallbackReenters checks that OnEvent may call the Limiter:
// events are emitted without the key's lock.
func TestEventCallbackReenters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l *Limiter
		n := 0
		l = &Limiter{
			OnEvent: func(e Event) {
				n++
				l.For(e.Key).Pause(context.Background(), time.Second)
				adapt(l, e.Key, Feedback{})
				_ = l.Len()
			},
		}
		adapt(l, "k", Feedback{Declared: &Declared{Rate: 5, Burst: 1}})
		if n != 1 {
			t.Errorf("OnEvent called %d times; want 1", n)
		}
	})
}

// TestTransportWaiterEvents checks that a Transport's OnEvent hears the
// decisions its responses made its waiter take, with the request and
// attempt, and the end of a slow-down from no request, whether the waiter
// is the user's Limiter (without an OnEvent) or the Transport's own.
func TestTransportWaiterEvents(t *testing.T) {
	for _, tt := range []struct {
		name   string
		waiter Waiter
		bare   int    // bare 429s: all but the last trim or anchor, the last cuts
		shift  string // the first attempt's shift ("": none told)
		timing int    // retries whose reason is the strict server's timing
	}{
		// Its first 429 anchors the key, one unit deep (anchorStart): no
		// slow-down, the retry at the next turn, which the second's
		// shift moves.
		{"user's Limiter", &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}, 12, "100ms shift api.example delay=102.020203ms attempt=2", 1},
		{"Transport's own", nil, 11, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tl := newTimeline()
				timing := 0
				// Bare 429s: ten trim the pace (see trimStep), the last
				// cuts it; then a window.
				answers := make([]func(*http.Request) *http.Response, 0, tt.bare+1)
				for range tt.bare {
					answers = append(answers, status(429))
				}
				answers = append(answers, status(200, "RateLimit-Policy", `"d";q=100;w=10`, "RateLimit", `"d";r=60;t=5`))
				s := newScript(answers...)
				tr := &Transport{Base: s, Waiter: tt.waiter, Retry: RetryPolicy{MaxAttempts: tt.bare + 1, Budget: -1}, OnEvent: func(e Event) {
					switch e.Kind {
					case EventRetry:
						if e.Reason == reasonTiming && e.Attempt == 1 {
							timing++
						} else if e.Reason != "" {
							t.Errorf("retry of attempt %d: reason %q", e.Attempt, e.Reason)
						}
					case EventWait:
					default:
						tl.add(e)
					}
				}}
				resp, err := get(t, tr)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				time.Sleep(10 * time.Second)
				got := tl.take()
				window := fmt.Sprintf("window api.example remaining=60 delay=5s attempt=%d", tt.bare+1)
				for _, want := range []string{"slow-down api.example rate=", window, "recovered api.example rate="} {
					if !strings.Contains(got, want) {
						t.Errorf("events\n%s\nhave no %q", got, want)
					}
				}
				if timing != tt.timing {
					t.Errorf("%d retries of the first attempt for the strict server's timing; want %d", timing, tt.timing)
				}
				if tt.shift != "" && !strings.Contains(got, tt.shift) {
					t.Errorf("events\n%s\nhave no %q", got, tt.shift)
				}
				if strings.Contains(got, "recovered") && strings.Contains(got[strings.Index(got, "recovered"):], "attempt=") {
					t.Errorf("events\n%s\nhave a recovery tied to a request", got)
				}
			})
		})
	}
}

// TestWithEvents checks that a program calling a waiter itself gets the
// decisions of that call through the context, besides the Limiter's
// OnEvent, and that the context's function is not called for others.
func TestWithEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mine, all := newTimeline(), newTimeline()
		l := &Limiter{OnEvent: all.add}
		ctx := WithEvents(context.Background(), mine.add)
		l.For("k").Observe(ctx, Feedback{Declared: &Declared{Rate: 5, Burst: 1}})
		adapt(l, "j", Feedback{Declared: &Declared{Rate: 5, Burst: 1}})
		mine.expect(t, "the call's", "0s declared k rate=5 burst=1")
		all.expect(t, "the Limiter's", "0s declared k rate=5 burst=1\n0s declared j rate=5 burst=1")
		if WithEvents(ctx, nil) != ctx || EventsFrom(context.Background()) != nil {
			t.Errorf("WithEvents(ctx, nil) or EventsFrom without one added something")
		}
		var req *http.Request
		EventsFrom(ctx)(Event{Kind: EventStoreError, Request: req})
		mine.expect(t, "through EventsFrom", "0s store-error ")
	})
}

// TestEventShiftTruthful checks that a shift's Delay is what the last
// queued wait then takes longer, for each cause that lengthens a queue:
// a spent window, a declared pace slower than the queue's, a lone
// rejection; at least that for a slow-down; and none for the first
// rejection of a key one unit deep, which moves nothing.
func TestEventShiftTruthful(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limit  float64
		before *Feedback // told a second before the waits queue
		f      Feedback
		kinds  string // the kinds reported, in order
	}{
		{"spent window", 10, nil, Feedback{Window: &ServerWindow{Remaining: 0, Reset: 5 * time.Second}}, "window shift"},
		{"declared", 0, &Feedback{Declared: &Declared{Rate: 10, Burst: 1}}, Feedback{Declared: &Declared{Rate: 2, Burst: 1}}, "declared shift"},
		// The first anchors the key, one unit deep (anchorStart): the
		// pace and the turns stay.
		{"first rejection", 10, nil, Feedback{Verdict: RefusedBare}, ""},
		{"lone rejection", 10, &Feedback{Verdict: RefusedBare}, Feedback{Verdict: RefusedBare}, "slow-down shift"},
		{"slow-down", 10, &Feedback{Verdict: RefusedBare}, Feedback{Verdict: RefusedBare}, "slow-down shift"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var got []Event
				lim := rate.Limit(tt.limit)
				if lim == 0 {
					lim = rate.Inf // no limit configured: the declared pace
				}
				l := &Limiter{
					Limits: []Limit{{Rate: lim, Burst: 1}},
					OnEvent: func(e Event) {
						mu.Lock()
						got = append(got, e)
						mu.Unlock()
					},
				}
				ctx := context.Background()
				if tt.before != nil {
					adapt(l, "k", *tt.before)
					time.Sleep(time.Second)
					got = nil
				}
				var wg sync.WaitGroup
				start := time.Now()
				var last time.Duration
				for i := range 3 { // turns at 0, 100 and 200 ms
					wg.Go(func() {
						l.For("k").WaitN(ctx, 1)
						if i == 2 {
							last = time.Since(start)
						}
					})
					synctest.Wait()
				}
				adapt(l, "k", tt.f)
				wg.Wait()
				var kinds []string
				var shift time.Duration
				for _, e := range got {
					kinds = append(kinds, e.Kind.String())
					if e.Kind == EventShift {
						shift = e.Delay
					}
				}
				if strings.Join(kinds, " ") != tt.kinds {
					t.Errorf("events %v; want %s", kinds, tt.kinds)
				}
				want := 200*time.Millisecond + shift
				switch {
				case tt.name == "slow-down":
					// Under a cut the turns are derived anew at each
					// step of its regrowth, and a unit gone under it
					// leaves the bucket at GCRA's max(tat, now) plus the
					// cut's interval (schedule.advance): the shift is
					// what the schedule foresaw, a lower bound.
					if last < want {
						t.Errorf("last wait done at %v; want at least %v, 200ms and the shift's %v", last, want, shift)
					}
				case last != want:
					t.Errorf("last wait done at %v; want %v, 200ms and the shift's %v", last, want, shift)
				}
			})
		})
	}
}

// TestEventWindowProbing checks that a key whose window is past its reset
// (probing for the next) reports no window for a pause, only for the
// next window a response tells.
func TestEventWindowProbing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl := newTimeline()
		l := &Limiter{OnEvent: tl.add}
		ctx := context.Background()
		adapt(l, "k", Feedback{Window: &ServerWindow{Remaining: 0, Reset: time.Second}})
		tl.expect(t, "a spent window", "0s window k remaining=0 delay=1s")
		time.Sleep(2 * time.Second)
		if err := l.For("k").WaitN(ctx, 1); err != nil { // a probe
			t.Fatal(err)
		}
		adapt(l, "k", Feedback{Pause: time.Second})
		tl.expect(t, "a pause while probing", "")
		adapt(l, "k", Feedback{Window: &ServerWindow{Remaining: 10, Reset: time.Minute}})
		tl.expect(t, "the next window", "2s window k remaining=10 delay=1m0s")
	})
}
