package distributed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// ErrConfigMismatch is returned (wrapped, for the first limit in a
// [*ConfigError]) by an operation of a Limiter whose limits differ from
// the configuration another process wrote into the key's state with the
// same [Limiter.Version] (or a higher one this process cannot follow: see
// Version). Nothing was spent or written.
var ErrConfigMismatch = errors.New("throttle/distributed: limits configured differently by another process")

// ConfigError describes a mismatch of the first limit (the first token
// bucket of the unit waits count): what this process has and what the
// key's state in Redis holds.
type ConfigError struct {
	Name, Key string // the Limiter's name, the key's
	// Rate, Burst, Version: this process's.
	Rate    rate.Limit
	Burst   int
	Version int
	// Stored*: the configuration the key's state was written with.
	StoredRate    rate.Limit
	StoredBurst   int
	StoredVersion int
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("throttle/distributed: limiter %q, key %q: this process has %v/s burst %d (Version %d); "+
		"the key's state in Redis was written by a process with %v/s burst %d (Version %d). "+
		"Give every process sharing the limiter the same limits, or raise Version to replace the configuration: %v",
		e.Name, e.Key, e.Rate, e.Burst, e.Version, e.StoredRate, e.StoredBurst, e.StoredVersion, ErrConfigMismatch)
}

func (e *ConfigError) Unwrap() error { return ErrConfigMismatch }

// qconf is the first limit's configuration as the script receives it:
// its arguments, converted and boxed once, so that a call allocates
// nothing for them.
type qconf struct {
	limit    rate.Limit // rate.Inf: no first limit
	burst    int
	version  int
	interval any // string: µs per unit, "0" for no limit
	burstArg any // int burst, or the string "burst:version"
	// err: the configuration is invalid (matching
	// [throttle.ErrInvalidLimit]); every call is refused before it is
	// made, so that the script never sees it.
	err error
}

// neverUs is the interval, in µs per unit, of a bucket that does not
// refill (Rate 0): the in-process Limiter's (internal/local's
// NeverInterval, 1e250 ns), finite so that the schedule's arithmetic
// stays finite.
const neverUs = 1e247

func newQconf(limit rate.Limit, burst, version int) *qconf {
	c := &qconf{limit: limit, burst: burst, version: version, burstArg: burst}
	if limit == rate.Inf {
		c.interval = "0"
	} else {
		c.interval = strconv.FormatFloat(min(1e6/float64(limit), neverUs), 'g', -1, 64)
	}
	if version != 0 {
		c.burstArg = strconv.Itoa(burst) + ":" + strconv.Itoa(version)
	}
	return c
}

// config returns the configuration in force: this process's, or a
// newer one it adopted (see Version).
func (q *Limiter) config() *qconf {
	if c := q.conf.Load(); c != nil {
		return c
	}
	ls := q.limitSet()
	c := newQconf(ls.rate, ls.burst, q.Version)
	c.err = ls.err
	if c.err == nil && (q.Version < 0 || q.Version > maxVersion) {
		c.err = fmt.Errorf("%w: Version %d of limiter %q must be from 0 to 2^53", throttle.ErrInvalidLimit, q.Version, q.name)
	}
	q.conf.CompareAndSwap(nil, c)
	return q.conf.Load()
}

// maxVersion is the largest Version: the script compares versions as
// Lua numbers (doubles), exact up to 2^53.
const maxVersion = 1 << 53

// check validates the configuration and a cost of n units of the first
// limit before any Redis call.
func (q *Limiter) check(n int) error {
	c := q.config()
	switch {
	case c.err != nil:
		return c.err
	case n < 0:
		return fmt.Errorf("%w: a cost of %d units for limiter %q: costs are never negative", throttle.ErrInvalidLimit, n, q.name)
	case c.limit != rate.Inf && n > c.burst:
		return fmt.Errorf("%w: a cost of %d units, burst %d for limiter %q", throttle.ErrCostExceedsBurst, n, c.burst, q.name)
	}
	return nil
}

// parseStored parses the script's THROTTLE_CONFIG error: the state's
// configuration, "interval/burst" or "interval/burst:version".
func parseStored(err error) (c *qconf, ok bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return nil, false
	}
	msg, found := strings.CutPrefix(re.Error(), "THROTTLE_CONFIG ")
	if !found {
		return nil, false
	}
	iv, rest, ok1 := strings.Cut(msg, "/")
	bs, vs, hasV := strings.Cut(rest, ":")
	interval, err1 := strconv.ParseFloat(iv, 64)
	burst, err2 := strconv.Atoi(bs)
	version := 0
	var err3 error
	if hasV {
		version, err3 = strconv.Atoi(vs)
	}
	if !ok1 || err1 != nil || err2 != nil || err3 != nil || interval < 0 {
		return nil, false
	}
	limit := rate.Inf
	switch {
	case interval >= neverUs:
		limit = 0
	case interval > 0:
		limit = rate.Limit(1e6 / interval)
	}
	c = newQconf(limit, burst, version)
	// The interval as stored, not derived back from limit: 1e6/(1e6/x)
	// is not x for about one interval in eight (those 1e6/limit makes
	// round-trip, not every interval another writer may store), and one
	// adopted that way would be refused as another configuration.
	c.interval = iv
	return c, true
}

// configCheck handles the script's refusal of this process's
// configuration (err): a newer one (a higher Version) is adopted, reported
// as an EventConfig, and the call is to be made again (retry); the same
// or a lower version returns a *ConfigError. ok is false if err is no
// such refusal.
func (w *keyWaiter) configCheck(ctx context.Context, used *qconf, err error) (retry bool, cerr error, ok bool) {
	stored, ok := parseStored(err)
	if !ok {
		return false, nil, false
	}
	q := w.q
	if stored.version > used.version && q.conf.CompareAndSwap(used, stored) {
		q.emit(ctx, throttle.Event{
			Kind: throttle.EventConfig, Key: w.key, Rate: float64(stored.limit), Burst: stored.burst,
			Reason: fmt.Sprintf("limiter %q: following Version %d (%v/s burst %d) written by another process, instead of this process's Version %d (%v/s burst %d)",
				q.name, stored.version, stored.limit, stored.burst, used.version, used.limit, used.burst),
		})
		return true, nil, true
	}
	if cur := q.config(); cur != used {
		return true, nil, true // another call adopted it meanwhile
	}
	return false, &ConfigError{
		Name: q.name, Key: w.key, Rate: used.limit, Burst: used.burst, Version: used.version,
		StoredRate: stored.limit, StoredBurst: stored.burst, StoredVersion: stored.version,
	}, true
}

// isConfig reports whether err is the store's answer refusing a
// configuration: the store answered, so it is no store failure.
func isConfig(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && (strings.HasPrefix(re.Error(), "THROTTLE_CONFIG ") ||
		strings.HasPrefix(re.Error(), "THROTTLE_LIMITS ") || strings.HasPrefix(re.Error(), "THROTTLE_MULTI "))
}
