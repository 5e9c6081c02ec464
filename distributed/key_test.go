package distributed

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// hostileKeys are user-supplied key texts that must each get their own
// bucket: braces that would move a hash tag, separators, prefixes of each
// other, binary, 10 KB.
var hostileKeys = []string{
	"",
	"a",
	"a.",
	"a.b",
	"ab",
	"{",
	"}",
	"{}",
	"}{",
	"{a}",
	"a}b{c",
	"with space",
	" ",
	"tab\there",
	"héllo, 世界 🚦",
	"\x00",
	"\x00\x00",
	"nul\x00inside",
	"\xff\xfe invalid utf-8",
	"throttle:{x}",
	strings.Repeat("k", 10<<10),
	strings.Repeat("k", 10<<10) + "x",
	strings.Repeat("{}", 5<<10),
}

// hashTag returns the text Redis Cluster hashes for key: between the first
// "{" and the first "}" after it, if that is not empty; else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// TestRedisKeyInjective proves the encoding cannot collide: every key
// decodes back to its (name, key) pair, and the hash tag is the whole
// encoded pair, braces never inside it.
func TestRedisKeyInjective(t *testing.T) {
	names := []string{"q", "q.", "", "{q}", "a.b"}
	seen := make(map[string]string)
	for _, name := range names {
		for _, key := range hostileKeys {
			rk := redisKey("", name, key)
			tag := hashTag(rk)
			if want := rk[len(defaultPrefix)+1 : len(rk)-1]; tag != want {
				t.Fatalf("hash tag of redisKey(%q, %.20q) = %.40q; want the whole encoded pair %.40q", name, key, tag, want)
			}
			gotName, gotKey, ok := strings.Cut(tag, ".")
			n, err1 := base64.RawURLEncoding.DecodeString(gotName)
			k, err2 := base64.RawURLEncoding.DecodeString(gotKey)
			if !ok || err1 != nil || err2 != nil || string(n) != name || string(k) != key {
				t.Fatalf("redisKey(%q, %.20q) = %.60q does not decode back to its pair", name, key, rk)
			}
			if prev, dup := seen[rk]; dup {
				t.Fatalf("redisKey(%q, %.20q) = redisKey of %.40q", name, key, prev)
			}
			seen[rk] = name + "/" + key
		}
	}
}

// TestHostileKeysSeparate spends each hostile key's whole burst and checks
// that no other key's bucket was touched: with burst 1 and a 1-unit-per-
// minute rate, a second wait on any key would be refused.
func TestHostileKeysSeparate(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "hostile", throttle.Limit{Rate: 1.0 / 60, Burst: 1})
	ctx := context.Background()
	for i, key := range hostileKeys {
		if err := q.For(key).WaitN(ctx, 1); err != nil {
			t.Fatalf("key %d (%.20q): first WaitN = %v; want nil (own full bucket)", i, key, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for i, key := range hostileKeys {
		if err := q.For(key).WaitN(dctx, 1); err == nil {
			t.Errorf("key %d (%.20q): second WaitN = nil; want refused (bucket spent)", i, key)
		}
	}
	n, err := c.DBSize(ctx).Result()
	if err != nil || n != int64(len(hostileKeys)) {
		t.Errorf("DBSIZE = %d, %v; want %d (one hash per key)", n, err, len(hostileKeys))
	}
}

// FuzzRedisKey: for any name and key, the Redis key's hash tag is exactly
// the encoded pair, and it decodes back to that pair (so no two pairs
// share a key).
func FuzzRedisKey(f *testing.F) {
	for _, k := range hostileKeys[:len(hostileKeys)-3] { // the 10 KB ones are slow seeds
		f.Add("q", k)
	}
	f.Add("{", "}")
	f.Add("a.b", "c")
	f.Add("a", "b.c")
	f.Fuzz(func(t *testing.T, name, key string) {
		rk := redisKey("", name, key)
		tag := hashTag(rk)
		if tag != rk[len(defaultPrefix)+1:len(rk)-1] {
			t.Fatalf("redisKey(%q, %q) = %q: hash tag %q is not the encoded pair", name, key, rk, tag)
		}
		n, k, ok := strings.Cut(tag, ".")
		dn, err1 := base64.RawURLEncoding.DecodeString(n)
		dk, err2 := base64.RawURLEncoding.DecodeString(k)
		if !ok || err1 != nil || err2 != nil || string(dn) != name || string(dk) != key {
			t.Fatalf("redisKey(%q, %q) = %q does not decode back to its pair", name, key, rk)
		}
	})
}
