package learn

import (
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// A reset stated as an instant (an epoch, a date: X-RateLimit-Reset as
// GitHub and go-chi/httprate send it) is measured against the response's
// Date, which counts whole seconds: a response of the window's last
// moments reads a reset a second away when it is a few milliseconds
// away, and a window spent there paused its key up to a second past its
// end (httprate's sliding window of 50 a second, told nothing: a
// response at 0.926 s said its window, ending at 1 s, was spent, and the
// key paused until 1.926 s).
//
// Every response of one window states the same instant, and each bounds
// it: the server made the response after its Date's second began and
// before the response came, so the instant is at most Reset after the
// response came. The earliest such bound of the responses that stated
// the instant is when the window has ended by, and a response's reset is
// taken to it: the key resumes past the instant by a round trip and how
// far into its Date's second the best-placed response was made (the one
// made soonest after a second began).
// The bound holds whatever the server's clock says of ours (a skewed
// Date moves every response's bound alike); a reset measured against
// the receive time (no Date) bounds nothing more than it did.

// resetBound takes p's reset, stated as the instant p.ResetAt, from a
// response at now, and returns the reset as the responses that stated
// that instant bound it: p.Reset or less.
func (s *policySeen) resetBound(p ratelimit.Policy, now time.Time) time.Duration {
	by := now.Add(p.Reset)
	if !p.ResetAt.Equal(s.resetAt) || s.resetBy.IsZero() {
		s.resetAt, s.resetBy = p.ResetAt, by
		return p.Reset
	}
	if by.Before(s.resetBy) {
		s.resetBy = by
	}
	return max(s.resetBy.Sub(now), 0)
}
