package distributed

import "encoding/base64"

// defaultPrefix starts every Redis key when Limiter.Prefix is empty.
const defaultPrefix = "throttle:"

// redisKey returns the Redis key of the quota name's bucket for key:
//
//	prefix + "{" + base64url(name) + "." + base64url(key) + "}"
//
// Why this shape:
//
//   - Injective. The unpadded base64url alphabet (A–Z a–z 0–9 - _) has no
//     ".", so the text between the braces splits back into exactly one
//     (name, key) pair: two distinct pairs never share a bucket, whatever
//     bytes they hold (braces, spaces, NUL, invalid UTF-8, 10 KB of text, a
//     key that is a prefix of another).
//   - One slot. The braces make the whole encoded pair the Cluster hash tag
//     (Redis hashes the text between the first "{" and the first "}" after
//     it), and neither brace can occur inside the encoding, so user text
//     cannot move the tag. Every key a script of this quota touches — the
//     schedule's hash, and the in-flight cap's keys, this name with a
//     suffix after the closing brace (see inflightKeys) — is in one slot,
//     while distinct quotas spread over slots.
//     If prefix itself holds a "{…}", that becomes the tag instead: all of
//     the Limiter's keys then share that one slot, still without collisions.
//   - Greppable: the prefix keeps the keyspace recognizable in redis-cli.
//
// The cost is length (4/3 of the key text); Redis keys may be 512 MB.
func redisKey(prefix, name, key string) string {
	if prefix == "" {
		prefix = defaultPrefix
	}
	enc := base64.RawURLEncoding
	b := make([]byte, 0, len(prefix)+enc.EncodedLen(len(name))+enc.EncodedLen(len(key))+3)
	b = append(b, prefix...)
	b = append(b, '{')
	b = enc.AppendEncode(b, []byte(name))
	b = append(b, '.')
	b = enc.AppendEncode(b, []byte(key))
	b = append(b, '}')
	return string(b)
}
