// Package schedule is the engine: one key's state and the operations on
// it, pure (no locks, no clock, no goroutines: every operation takes the
// time as an argument). The in-process Limiter runs it in memory
// (internal/local); the distributed package's Redis script runs the same
// operations on the same state (Apply's ops are the script's ops), and a
// differential suite in that package proves them equal op by op, state
// and reply, bit for bit. Every constant both sides use is in one table
// (constants.go), which the script takes as a prelude.
//
// The files: schedule.go the state, its constants and its pace;
// line.go the queues; turns.go the turns and advance; window.go the
// server's window and the cut; ops.go the state's operations; budget.go
// a hidden budget learned from refusals; settle.go, xsettle.go and
// clamp.go settled costs; limits.go and xlimit.go further limits;
// decide.go what an op decided; apply.go the ops as one entry (Apply);
// fields.go the state as named numbers, where the script keeps each.
//
// # State
//
// A key's state is a token bucket kept as GCRA (tat: the time the bucket is
// full again, counting the units that have gone), a hold (nothing goes
// before it: pauses), queues of tickets (retries ahead of first
// attempts, which wait in three priority classes: classes.go), the
// server's window, a declared pace and an adaptive cut.
//
// A wait takes a ticket: a range of n unit numbers at the end of its queue.
// Its turn is never stored: it is a function of the ticket's position (the
// units queued ahead of it, plus its own n) and of the state as it is when
// the turn is asked for:
//
//	turn(p) = max(hold, max(tat, hold) + p·interval − τ, window(p))
//
// where interval is the pace in force (the slower of the configured or
// declared pace and the adaptive cut), τ is the bucket's depth in time
// (burst·interval of the configured or declared pace, so that a cut never
// lets more through at once than the bucket holds, and at least one
// interval, so that a cut's units are spaced by its interval), and
// window(p) is when
// the server's window admits the ticket's last unit: at once while units
// are left, one by one spread to the reset while few are, and one probe
// per probeWait after the reset until a response tells the next window.
//
// Units go in queue order as their turns pass (advance): tat moves by
// interval per unit, the window spends them, and the queue's head moves
// past them. Because turns are derived, never stored:
//
//   - a pause, a cut, a shift or a window moves every queued turn at once,
//     however many come, in any order (nothing to patch afterwards);
//   - a cut that regrows gives the time back to the queue, step by step;
//   - a cancelled ticket becomes a hole: every ticket behind it moves up by
//     its units, so the units are reused by the next ticket in line, and
//     never by two (positions are unique);
//   - a store that loses the state loses no rule: a fresh state is a full
//     bucket at the configured pace, never a slower one.
//
// # Settled costs
//
// A wait spends an estimate; its real cost may be known only from the
// response (an LLM call's tokens). Settling amends the cost of units that
// have gone (settle.go, the script's op settle): actual − spent
// more units, at the pace in force, moving tat, and with it every queued
// turn. A charge (actual > spent) is a debt: tat moves later, past now if
// need be, and the next waits pay it. A give-back (actual < spent, at
// most spent units since actual ≥ 0) moves tat earlier, then GCRA's floor
// applies (floorTat; a charge is bounded first: clamp.go): the bucket never holds more than its burst at once,
// so units given back to a bucket that has refilled meanwhile are lost,
// never over-spent. Either way the queued turns move, and their sleepers
// are told (a Limiter's are woken; the script publishes the move). A
// charge also spends from the server's window (the server counted those
// units); a give-back does not refill it (the units may have gone in a
// window that is over: the server's next response says what is left).
// The units in flight, those counted as sent, the cut and the trim are
// about requests and their responses, which a settle follows: they stay.
// Never over then holds for the settled costs: the admissions and the
// settles, replayed through GCRA in time order (a charge as units going
// at its settle, a give-back as units coming back under the floor),
// conform to the bucket. A give-back counts when it is settled, not when
// its wait went (the schedule does not keep when that was): units given
// back to a bucket that refilled over them are lost if it is full then,
// but go to the next waits if waits emptied it meanwhile, so the units
// that go in an interval t may pass burst + rate·t by the units given
// back in it; those that go less those given back never do.
//
// # Invariants
//
// The property suite (the root package's limiter_prop_test.go, and the
// distributed package's against Redis) drives random sequences of waits, cancels, deadlines,
// pauses, windows, declared limits and bare rejections, and checks: never
// more than τ/interval + t/interval units in any interval t of a constant
// pace; nothing inside a pause; FIFO per queue for waits not cancelled;
// cancelled units reusable by exactly one later ticket; every queued wait
// done within its position at the configured pace plus a bounded recovery
// once the server stops rejecting; and bounded memory.
//
// # Several limits
//
// A key may carry further limits in units of their own (token buckets,
// fixed and sliding windows: Limiter.Limits); limits.go
// composes them with this state: a ticket's turn is the latest among
// the limits, FIFO, every limit charged at that turn, so that units one
// limit held back claim no credit on the others.
//
// All times are float64 in one unit (nanoseconds in the Limiter, microseconds
// in the script); sec is the number of those units in a second.
package schedule
