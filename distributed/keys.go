package distributed

import (
	"context"
	"encoding/base64"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// All yields the keys this process remembers having used, each with its
// quota (For's), in no particular order: the keys whose waits,
// reservations, pauses or fallbacks it keeps a note of to carry across an
// outage, at most 4096 (past that the notes of keys with nothing ahead
// are dropped, then all). A key used only through Try, Settle, Observe,
// Acquire or State may not be among them. The Limiter's own quota (the
// key "") is not. It makes no Redis call; the loop's body may (State, to
// show a key). For the keys a whole fleet uses, see [Limiter.StoredKeys].
func (q *Limiter) All() iter.Seq2[string, throttle.Quota] {
	return func(yield func(string, throttle.Quota) bool) {
		for _, rkey := range q.memo.rkeys() {
			key, ok := keyOf(q.Prefix, q.name, rkey)
			if !ok || key == "" {
				continue
			}
			if !yield(key, newKeyWaiter(q, key)) {
				return
			}
		}
	}
}

// rkeys returns the Redis keys of the memos now.
func (ms *memos) rkeys() []string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]string, 0, len(ms.m))
	for k := range ms.m {
		out = append(out, k)
	}
	return out
}

// Health is what a process knows of its Limiter's store now.
type Health struct {
	// FailMode is the Limiter's.
	FailMode FailMode
	// FallingBack reports that a call was answered by FailMode since
	// Redis last answered: with FailLocal, this process paces itself at
	// its share of the limits (the rate ÷ Workers).
	FallingBack bool
	// BreakerOpen reports that the breaker is open: calls go straight to
	// FailMode, and one probe goes to Redis every 250ms.
	BreakerOpen bool
	// Failures is the number of consecutive failed store calls.
	Failures int
	// Err is the most recent real cause of a failure since Redis last
	// answered (a refused connection, not a timeout); nil if none is
	// known yet: a call cut at Timeout learns its cause in the background.
	Err error
}

// Health returns what this process knows of the store now, from its own
// calls: it makes none.
func (q *Limiter) Health() Health {
	h := Health{FailMode: q.FailMode}
	h.Failures, h.BreakerOpen = q.br.state()
	h.FallingBack, h.Err = q.health.now()
	return h
}

// StoredKeys returns the keys of the Limiter's name that have state in
// Redis now, whichever process wrote them, at most max (0 or less: none),
// sorted: a SCAN of the name's Redis keys (see "Redis keys" in the
// package doc), 100 at a time, on every master of a Cluster or shard of
// a Ring. It reads no state and writes nothing; a key whose state
// expires meanwhile may still be listed. Its cost grows with the size of
// the Redis keyspace, not only the name's: it is for an operator's view,
// not for a program's path.
func (q *Limiter) StoredKeys(ctx context.Context, max int) ([]string, error) {
	if max <= 0 {
		return nil, nil
	}
	prefix := q.Prefix
	if prefix == "" {
		prefix = defaultPrefix
	}
	match := globEscape(prefix+"{"+base64.RawURLEncoding.EncodeToString([]byte(q.name))+".") + "*"
	var (
		mu   sync.Mutex
		seen = make(map[string]bool)
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, match, 100).Iterator()
		for it.Next(ctx) {
			key, ok := keyOf(q.Prefix, q.name, it.Val())
			if !ok {
				continue
			}
			mu.Lock()
			seen[key] = true
			full := len(seen) >= max
			mu.Unlock()
			if full {
				return errFull
			}
		}
		return it.Err()
	}
	var err error
	switch c := q.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	default:
		err = scan(ctx, c)
	}
	if err != nil && !errors.Is(err, errFull) {
		return nil, unavailable(err)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[:min(len(keys), max)], nil
}

// errFull ends StoredKeys' scans once they found enough keys.
var errFull = errors.New("enough keys")

// globEscape escapes the characters of s that a SCAN MATCH pattern
// reads as a pattern's.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\*?[]^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keyOf returns the key of name whose Redis key (see redisKey) rkey is or
// begins (the in-flight cap's keys carry a suffix after the brace), and
// whether it is one.
func keyOf(prefix, name, rkey string) (string, bool) {
	if prefix == "" {
		prefix = defaultPrefix
	}
	enc := base64.RawURLEncoding
	head := prefix + "{" + enc.EncodeToString([]byte(name)) + "."
	rest, ok := strings.CutPrefix(rkey, head)
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '}')
	if i < 0 {
		return "", false
	}
	key, err := enc.DecodeString(rest[:i])
	if err != nil {
		return "", false
	}
	return string(key), true
}
