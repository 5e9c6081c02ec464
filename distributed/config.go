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

// ErrConfigMismatch is returned (wrapped in a [*ConfigError]) by a wait,
// try, reservation or state of a Quota whose limit or burst differs from
// the configuration another process wrote into the key's state with the
// same [Quota.Version] (or a higher one this process cannot follow: see
// Version). Nothing was spent or written.
var ErrConfigMismatch = errors.New("throttle/distributed: quota configured differently by another process")

// ConfigError describes a configuration mismatch: what this process has
// and what the key's state in Redis holds.
type ConfigError struct {
	Quota, Key string
	// Limit, Burst, Version: this process's.
	Limit   rate.Limit
	Burst   int
	Version int
	// Stored*: the configuration the key's state was written with.
	StoredLimit   rate.Limit
	StoredBurst   int
	StoredVersion int
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("throttle/distributed: quota %q, key %q: this process has %v/s burst %d (Version %d); "+
		"the key's state in Redis was written by a process with %v/s burst %d (Version %d). "+
		"Give every process sharing the quota the same limit and burst, or raise Version to replace the configuration: %v",
		e.Quota, e.Key, e.Limit, e.Burst, e.Version, e.StoredLimit, e.StoredBurst, e.StoredVersion, ErrConfigMismatch)
}

func (e *ConfigError) Unwrap() error { return ErrConfigMismatch }

// qconf is a configuration as the script receives it: its arguments,
// converted and boxed once, so that a call allocates nothing for them.
type qconf struct {
	limit    rate.Limit
	burst    int
	version  int
	interval any // string: µs per unit, "0" for rate.Inf
	burstArg any // int burst, or the string "burst:version"
	// err: the configuration is invalid (matching
	// [throttle.ErrInvalidLimit]); every call is refused before it is
	// made, so that the script never sees it.
	err error
}

func newQconf(limit rate.Limit, burst, version int) *qconf {
	c := &qconf{limit: limit, burst: burst, version: version, burstArg: burst}
	if limit == rate.Inf {
		c.interval = "0"
	} else {
		c.interval = strconv.FormatFloat(1e6/float64(limit), 'g', -1, 64)
	}
	if version != 0 {
		c.burstArg = strconv.Itoa(burst) + ":" + strconv.Itoa(version)
	}
	return c
}

// config returns the configuration in force: this process's, or a
// newer one it adopted (see Version).
func (q *Quota) config() *qconf {
	if c := q.conf.Load(); c != nil {
		return c
	}
	c := newQconf(q.limit, q.burst, q.Version)
	c.err = q.invalid(c)
	q.conf.CompareAndSwap(nil, c)
	return q.conf.Load()
}

// maxVersion is the largest Version: the script compares versions as
// Lua numbers (doubles), exact up to 2^53.
const maxVersion = 1 << 53

// invalid returns why c cannot be this quota's configuration: a limit
// that is not positive, a burst below 1, a Version below 0 or above
// maxVersion (each an error matching [throttle.ErrInvalidLimit]); nil if
// it can.
func (q *Quota) invalid(c *qconf) error {
	l := float64(c.limit)
	switch {
	case !(l > 0): // catches NaN, zero and negatives
		return fmt.Errorf("%w: rate %v for quota %q must be positive", throttle.ErrInvalidLimit, l, q.name)
	case c.burst < 1:
		return fmt.Errorf("%w: burst %d for quota %q must be at least 1", throttle.ErrInvalidLimit, c.burst, q.name)
	case c.version < 0 || c.version > maxVersion:
		return fmt.Errorf("%w: Version %d for quota %q must be from 0 to 2^53", throttle.ErrInvalidLimit, c.version, q.name)
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
	if interval > 0 {
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
			Reason: fmt.Sprintf("quota %q: following Version %d (%v/s burst %d) written by another process, instead of this process's Version %d (%v/s burst %d)",
				q.name, stored.version, stored.limit, stored.burst, used.version, used.limit, used.burst),
		})
		return true, nil, true
	}
	if cur := q.config(); cur != used {
		return true, nil, true // another call adopted it meanwhile
	}
	return false, &ConfigError{
		Quota: q.name, Key: w.key, Limit: used.limit, Burst: used.burst, Version: used.version,
		StoredLimit: stored.limit, StoredBurst: stored.burst, StoredVersion: stored.version,
	}, true
}

// isConfig reports whether err is the store's answer refusing a
// configuration: the store answered, so it is no store failure.
func isConfig(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && (strings.HasPrefix(re.Error(), "THROTTLE_CONFIG ") ||
		strings.HasPrefix(re.Error(), "THROTTLE_LIMITS ") || strings.HasPrefix(re.Error(), "THROTTLE_MULTI "))
}
