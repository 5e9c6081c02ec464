package learn

import (
	"bytes"
	"time"
)

// A secondary limit is a refusal that says nothing of when to come back
// but its body: GitHub answers a client that goes too fast (too many
// requests at once, too many points a minute, content created too fast)
// with a 403 or a 429 whose message says "secondary rate limit", with or
// without a Retry-After, and while its primary limit has units left. Its
// documentation: without a Retry-After, wait at least a minute before
// retrying; if the requests keep failing for it, wait an exponentially
// growing time between retries; an integration that keeps going may be
// banned. So a secondary limit with a Retry-After pauses the key that
// long (the Transport reads it); one without is paused SecondaryWait,
// doubled for each secondary
// limit that follows another with no accepted request in between (the
// pause a Transport sets is still at most its MaxRetryAfter).

const (
	// SecondaryWait is the pause after a first secondary limit.
	SecondaryWait = time.Minute
	// secondaryMax bounds the doublings.
	secondaryMax = 6
)

// IsSecondary reports whether a refusal's body (its first bytes) says it
// is a secondary rate limit: GitHub's message, or its documentation URL.
func IsSecondary(body []byte) bool {
	return bytes.Contains(bytes.ToLower(body), []byte("secondary rate limit")) ||
		bytes.Contains(body, []byte("secondary-rate-limits"))
}

// Secondary counts a secondary limit of key at now and returns the pause
// it calls for: SecondaryWait, doubled for each that came before it since
// the key's last accepted request; until that pause ends, what is left
// of it.
func (o *Keys) Secondary(key string, now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.secondary == nil {
		o.secondary = make(map[string]secondaryRun)
	}
	r, ok := o.secondary[key]
	if !ok && len(o.secondary) >= learnedKeys {
		for k := range o.secondary {
			delete(o.secondary, k)
			break
		}
	}
	if now.Before(r.until) {
		return r.until.Sub(now) // a request in flight when it began
	}
	d := SecondaryWait << min(r.n, secondaryMax)
	o.secondary[key] = secondaryRun{n: r.n + 1, until: now.Add(d)}
	o.anyDue.Store(true)
	return d
}

// secondaryRun is a key's secondary limits in a row: how many, and when
// the pause of the last ends.
type secondaryRun struct {
	n     int
	until time.Time
}

// Accepted tells that a request of key was accepted: the secondary limits
// that came before it no longer compound.
func (o *Keys) Accepted(key string) {
	if !o.anyDue.Load() {
		return // the common case: no lock
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.secondary, key)
	o.anyDue.Store(len(o.secondary) > 0)
}
