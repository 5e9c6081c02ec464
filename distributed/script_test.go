package distributed

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/protogen"
	"github.com/throttle-go/throttle/internal/protolua"
)

// TestGeneratedProtocolFresh: the committed prelude and Go names are
// what internal/protogen writes from the engine's protocol tables now.
func TestGeneratedProtocolFresh(t *testing.T) {
	for _, f := range []struct {
		name string
		want []byte
	}{
		{"schedule_gen.lua", protolua.Lua()},
		{"protocol_gen.go", protogen.Go("distributed")},
	} {
		got, err := os.ReadFile(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: the protocol tables (internal/schedule/protocol.go, constants.go, fields.go) changed; run go generate ./distributed", f.name)
		}
	}
	if schedulePrelude != string(protolua.Lua()) {
		t.Error("the embedded prelude is not schedule_gen.lua as generated; run go generate ./distributed")
	}
}

// TestScriptConstants checks that every upper-case name the schedule
// script uses (a constant, or a table of the protocol's positions and
// codes) is a local of the generated prelude or of the script itself: a
// name defined nowhere is a runtime error in Redis that a best-effort
// call (Observe) would only drop.
func TestScriptConstants(t *testing.T) {
	code := func(src string) string {
		src = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(src, "")     // code only
		return regexp.MustCompile(`'[^'\n]*'`).ReplaceAllString(src, "''") // no string's text
	}
	defined := map[string]bool{"ARGV": true, "KEYS": true}
	// locals, loop variables and parameters
	script := mustExpand(schedulePrelude + scheduleSrc) // the protocol's names as their values
	for _, m := range regexp.MustCompile(`(?:local|for|function\s*\w*\s*\()([\w\s,]*)`).FindAllStringSubmatch(code(script), -1) {
		for _, n := range regexp.MustCompile(`\w+`).FindAllString(m[1], -1) {
			defined[n] = true
		}
	}
	if !defined["SEC"] || !defined["KIND_OF"] {
		t.Fatal("the prelude defines no SEC or KIND_OF")
	}
	for _, m := range regexp.MustCompile(`(?:^|[^.\w])([A-Z][A-Z_0-9]*)\b`).FindAllStringSubmatch(code(script), -1) {
		if !defined[m[1]] {
			defined[m[1]] = true // once
			t.Errorf("the schedule script uses %s, which neither the prelude nor the script defines", m[1])
		}
	}
}

// earlierCore writes a key's core as earlier versions wrote it: id, tat
// and hold in µs of Redis's clock, nothing queued; in MessagePack
// (ARGV[2] "msgpack", versions before the packed doubles) or as 15
// doubles behind tag 1 with the configuration ARGV[3] as a field of its
// own (ARGV[2] "tag1", the version before the configuration moved into
// the core).
var earlierCore = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + tonumber(ARGV[1])
local n = {now - 1000000, tat, -1e300, 0, 0, 0, 0, 0, -1e300, 0, 0, 0, 1, now + 60000000, 0}
if ARGV[2] == 'msgpack' then
	redis.call('HSET', KEYS[1], 'c', cmsgpack.pack(n))
else
	redis.call('HSET', KEYS[1], 'c', struct.pack('<Bddddddddddddddd', 1, unpack(n)), 'v', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], 60000)
return 1
`)

// TestCoreEarlierFormat: a state in a form an earlier version wrote
// (MessagePack, or 15 doubles behind tag 1 with the configuration as a
// field v) is no state this version reads: the key starts anew, a full
// bucket whatever the old state held (a bucket spent for 5 s, another
// configuration), and its next write is in this version's form (tag 2,
// the configuration in the core, no field v).
func TestCoreEarlierFormat(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	for _, tt := range []struct{ name, format, v string }{
		{"msgpack", "msgpack", ""},
		{"tag1", "tag1", "1e+06/1"},
		{"tag1 configured otherwise", "tag1", "500000/3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := New(c, "earlier-"+tt.name, throttle.Limit{Rate: 1, Burst: 1}).For("k").(*keyWaiter)
			if err := earlierCore.Run(ctx, c, []string{w.rkey}, 5_000_000, tt.format, tt.v).Err(); err != nil {
				t.Fatal(err)
			}
			if tt.v == "" {
				c.HDel(ctx, w.rkey, "v")
			}
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if err := w.WaitN(dctx, 1); err != nil {
				t.Fatalf("WaitN on a key an earlier version wrote = %v; want nil (a new key's full bucket)", err)
			}
			raw, err := c.HGet(ctx, w.rkey, "c").Result()
			if err != nil {
				t.Fatal(err)
			}
			const cfg = "1e+06/1"
			if raw[0] != 2 || len(raw) <= 1+17*8 || !regexp.MustCompile(`^[1-9][0-9]*\|`+regexp.QuoteMeta(cfg)+`\x00$`).MatchString(raw[1+17*8:]) {
				t.Fatalf("core after a write: tag %d, %d bytes, ending %q; want tag 2, 17 doubles, then \"id|%s\" and a zero byte",
					raw[0], len(raw), raw[min(len(raw), 1+17*8):], cfg)
			}
			if n := c.HExists(ctx, w.rkey, "v").Val(); n {
				t.Errorf("field v still there after a write; want it gone with the old state")
			}
		})
	}
}
