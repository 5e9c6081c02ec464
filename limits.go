package throttle

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// UnitLimit is one of a key's further limits ([Limiter.Limits]), beside
// the bucket of Limit and Burst, in a unit of its own: a token bucket
// (Rate), a window (Window), or both. APIs state several limits at once:
// OpenAI's requests per minute AND tokens per minute are Limit and Burst
// in requests and a UnitLimit in "tokens"; "100 requests a minute" as a
// server counts them is a Window:
//
//	lim := &throttle.Limiter{
//		Limit: 500.0 / 60, Burst: 500, // requests
//		Limits: []throttle.UnitLimit{
//			{Unit: "tokens", Rate: throttle.Rate{Limit: 30000.0 / 60, Burst: 30000}},
//			{Unit: "requests", Window: throttle.Window{Count: 10000, Per: 24 * time.Hour}},
//		},
//	}
//
// A unit may have several limits (entries of one Unit, or Rate and
// Window in one entry): a cost in it is spent on each.
type UnitLimit struct {
	// Unit names the unit the limit counts, as a [Cost] names it. It must
	// not be empty (the empty unit is Limit and Burst's).
	Unit string
	// Rate makes the limit a token bucket, as a key's Rate: Limit units a
	// second, at most Burst at once; rate.Inf is none, Limit 0 with a
	// Burst lets Burst units through and then nothing, Burst 0 is 1. The
	// zero Rate is no bucket.
	Rate Rate
	// Window makes the limit a window: see [Window]. The zero Window is
	// none.
	Window Window
}

// Window is a limit of Count units per Per, counted as servers count
// "100 a minute": fixed windows aligned to the Unix epoch (the units of
// each window, whatever came in the one before), or, if Sliding, the
// sliding window counter (a window's units and the one before weighted
// by the share of it still inside the last Per: prev·(1 − f) + cur). A
// bucket of burst q refilling q per w lets nearly 2q through in the
// first w; a window of q per w lets q. Per ≤ 0 is no window; Count < 1
// with a Per is an error on every wait.
//
// If Log, the window is an exact sliding log, as servers that keep each
// request's time count: at most Count units in ANY interval of length
// Per, whatever its phase (a fixed window lets 2·Count through across a
// boundary, the sliding window counter estimates). A wait's turn is the
// earliest time t, no earlier than its other limits' turns, at which the
// units gone in (t − Per, t] and its cost are at most Count. The key
// keeps the time of every unit's turn still inside the last Per (one
// entry a turn, at most Count of them, and one a settle that charged
// more in the last Per: see [CostSettler]), so Count may be at most
// [MaxLogCount]: a larger one is an error on every wait (use Sliding).
// Log and Sliding together are an error too.
//
// If FirstUse, the fixed windows are aligned to the key's first use
// instead of the epoch, as servers count "100 a minute from your first
// request": a window starts at the first units that go once the one
// before ended (the key's first, or the first after a quiet spell), and
// counts Count units until Per after its start; a wait that does not fit
// goes when it ends, starting the next. The start is kept in the key's
// state (in Redis too, for a distributed.Quota). FirstUse with Sliding
// or Log is an error.
type Window struct {
	Count    int
	Per      time.Duration
	Sliding  bool
	Log      bool
	FirstUse bool
}

// MaxLogCount is the largest Count of a [Window] with Log: a sliding log
// keeps up to Count times per key (16 bytes each, in Redis too).
const MaxLogCount = 1000

// Cost is what one wait spends: N units of the key's first limit (Limit
// and Burst, the unit WaitN counts) and, per unit, units of its further
// limits ([Limiter.Limits]). The zero Cost is one unit of the first limit
// and nothing of the others.
type Cost struct {
	// N is the units of the first limit; 0 means 1 (a request is a
	// request, whatever else it costs).
	N int
	// Units are the units of the further limits, e.g. {{"tokens", 1200}};
	// a unit not named costs nothing. A unit the key has no limit in is an
	// error ([ErrInvalidLimit]), a cost above its limit's burst too
	// ([ErrCostExceedsBurst]).
	Units []UnitCost
	// Retry queues the wait ahead of first attempts, as
	// [RetryWaiter.WaitRetryN] does: for a request sent again.
	Retry bool
}

// First returns the units c spends of the first limit: N, or 1 when N is
// 0.
func (c Cost) First() int {
	if c.N == 0 {
		return 1
	}
	return c.N
}

// turn returns c's units of the first limit and the queue its wait takes.
func (c Cost) turn() (n, qi int) {
	if c.Retry {
		return c.First(), schedule.Retry
	}
	return c.First(), schedule.First
}

// UnitCost is a cost of N units in Unit: see [Cost].
type UnitCost struct {
	Unit string
	N    int
}

// CostWaiter is a Waiter whose keys carry several limits: WaitCost waits
// until every limit the cost names can pay it, then spends it on all of
// them at once, or on none (an error, a deadline, a cancel gives back
// every unit). Waits on a key are served in arrival order whatever their
// costs; a wait's turn is the latest its limits give it. WaitN(ctx, n) is
// WaitCost(ctx, Cost{N: n}) for n > 0. The keys of [Limiter] implement it.
type CostWaiter interface {
	Waiter
	WaitCost(ctx context.Context, c Cost) error
}

// CostTrier is a Waiter whose keys carry several limits and that can
// spend a cost now or not at all, never blocking: TryCost is [Trier]'s
// TryN for a [Cost] (Retry aside: a try takes no place in a queue). It
// spends c on every limit if a wait of c would go at once, and reports
// ok; otherwise it changes nothing and reports retryIn, how long from
// now a wait of c would go if the key's state did not change. The keys
// of [Limiter] and of distributed.Quota implement it.
type CostTrier interface {
	TryCost(ctx context.Context, c Cost) (ok bool, retryIn time.Duration, err error)
}

// CostReserver is a [Reserver] for a [Cost]: ReserveCost takes a place
// in the key's queue for c on every limit, as WaitCost does, and returns
// it as a [Reservation] to keep or to cancel (a cancel gives back every
// unit on every limit). A retry's place (c.Retry) is ahead of first
// attempts, as WaitCost's. The keys of [Limiter] and of
// distributed.Quota implement it.
type CostReserver interface {
	ReserveCost(ctx context.Context, c Cost) (Reservation, error)
}

// ReserveCost takes a turn for c on the key's limits: see [CostReserver].
// ReserveCost takes a turn for c on the Limiter's own quota (the key
// ""): see [CostReserver].
// TryCost spends c on the key's limits now, or nothing: see [CostTrier].
// xlimits converts l.Limits to the schedule's further limits and their
// units; an error for a configuration no wait can use.
func (l *Limiter) xlimits(limits []UnitLimit) ([]schedule.Limit, []string, error) {
	var lim []schedule.Limit
	var units []string
	for i, u := range limits {
		r, w := u.Rate, u.Window
		switch {
		case u.Unit == "":
			return nil, nil, fmt.Errorf("throttle: Limits[%d] has no unit: %w", i, ErrInvalidLimit)
		case r.Limit < 0 || r.Burst < 0 || math.IsNaN(float64(r.Limit)):
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has limit %v, burst %d: %w", i, u.Unit, r.Limit, r.Burst, ErrInvalidLimit)
		case w.Per > 0 && w.Count < 1:
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has a window of %d per %v: %w", i, u.Unit, w.Count, w.Per, ErrInvalidLimit)
		case w.Per > 0 && w.Log && w.Sliding:
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has a window both Sliding and Log (a sliding log): choose one: %w", i, u.Unit, ErrInvalidLimit)
		case w.Per > 0 && w.FirstUse && (w.Sliding || w.Log):
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has a window aligned to first use that is Sliding or a Log: FirstUse is for fixed windows: %w", i, u.Unit, ErrInvalidLimit)
		case w.Per > 0 && w.Log && w.Count > MaxLogCount:
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has a sliding log of %d per %v, more than MaxLogCount (%d) times a key keeps: use Sliding (the sliding window counter) for counts this large: %w", i, u.Unit, w.Count, w.Per, MaxLogCount, ErrInvalidLimit)
		}
		if r.Limit != rate.Inf && (r.Limit != 0 || r.Burst != 0) {
			b := schedule.BucketLimit(min(1e9/float64(r.Limit), local.NeverInterval), float64(max(r.Burst, 1)))
			lim, units = append(lim, b), append(units, u.Unit)
		}
		if w.Per > 0 {
			kind := schedule.KindFixed
			switch {
			case w.Sliding:
				kind = schedule.KindSliding
			case w.Log:
				kind = schedule.KindLog
			case w.FirstUse:
				kind = schedule.KindFirst
			}
			// Aligned to the Unix epoch: schedule times count from l.epoch.
			off := float64(l.keys.Epoch().UnixNano() % int64(w.Per))
			lim, units = append(lim, schedule.WindowLimit(kind, float64(w.Per), float64(w.Count), off)), append(units, u.Unit)
		}
	}
	if len(lim) == 0 {
		return nil, nil, nil
	}
	return lim, units, nil
}

// costOf converts units to the further limits' costs, in b.xcost (nil
// for a key without further limits). It requires b.mu.
// WaitCost waits for c on the key's limits: see [CostWaiter].
// WaitCost waits for c on the Limiter's own quota (the key ""): see
// [CostWaiter].
// xcost0 returns the cost of a wait that names no unit: nothing of the
// further limits. It requires b.mu.
