package distributed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// near reports whether got is within tol after want, or a little
// before it (the Redis clock ran between the calls that set want).
func near(got, want, tol time.Duration) bool {
	return got >= want-tol && got <= want+tol
}

// TestReserve: reservations are tickets: they get the turns waits would,
// a cancelled one's units go to the next in line (whose Wait learns it
// from the pushed move), and a second Cancel does nothing.
func TestReserve(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "reserve", throttle.Limit{Rate: 10, Burst: 1})
	defer q.Close()
	ctx := context.Background()
	var rs []throttle.Reservation
	for range 3 {
		r, err := q.For("k").ReserveN(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	start := time.Now()
	// 25ms: the round trips between the reservations and timer slack
	// under -race on a loaded machine; a unit is 100ms.
	const tol = 25 * time.Millisecond
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if d := rs[i].Delay(); !near(d, want, tol) {
			t.Errorf("reservation %d: Delay() = %v; want %v", i, d, want)
		}
	}
	rs[1].Cancel()
	rs[1].Cancel()
	if err := rs[2].Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); !near(got, 100*time.Millisecond, tol) {
		t.Errorf("the reservation behind a cancelled one went after %v; want 100ms", got)
	}
	if err := rs[1].Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled reservation: %v; want context.Canceled", err)
	}
	st, err := q.For("k").State(ctx)
	if err != nil || st.Queued != 0 || !near(st.Next, 100*time.Millisecond, tol) {
		t.Errorf("after: %+v, %v; want nothing queued, next turn in 100ms", st, err)
	}
}

// TestReserveDeadline: a turn past ctx's deadline reserves nothing; a
// Wait whose ctx ends gives the units back; Cancel ends a sleeping Wait.
func TestReserveDeadline(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "reservedl", throttle.Limit{Rate: 10, Burst: 1})
	defer q.Close()
	ctx := context.Background()
	if _, err := q.For("").ReserveN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := q.For("").ReserveN(short, 1); !errors.Is(err, throttle.ErrWouldExceedDeadline) {
		t.Errorf("ReserveN past the deadline: %v; want ErrWouldExceedDeadline", err)
	}
	st, _ := q.For("").State(ctx)
	if st.Queued != 0 {
		t.Errorf("a refused reservation kept %d units", st.Queued)
	}
	r, err := q.For("").ReserveN(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, ccancel)
	if err := r.Wait(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with ctx cancelled: %v; want context.Canceled", err)
	}
	r2, _ := q.For("").ReserveN(ctx, 1)
	done := make(chan error, 1)
	go func() { done <- r2.Wait(ctx) }()
	time.Sleep(10 * time.Millisecond)
	r2.Cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait ended by Cancel: %v; want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Cancel did not end a sleeping Wait")
	}
	_ = q.Close() // the refunds in the background are done
	if st, _ := q.For("").State(ctx); st.Queued != 0 {
		t.Errorf("after the cancels: %d units queued; want 0", st.Queued)
	}
}
