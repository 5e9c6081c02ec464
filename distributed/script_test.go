package distributed

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// TestScriptConstants checks that every constant the schedule script uses
// (an upper-case name it does not define itself) comes from
// throttle.ScheduleConstants: a rule's number exists once, in the Go
// source. A name missing there is a runtime error in Redis that a
// best-effort call (Adapt) would only drop.
func TestScriptConstants(t *testing.T) {
	c := throttle.ScheduleConstants()
	src := regexp.MustCompile(`--[^\n]*`).ReplaceAllString(scheduleSrc, "") // code only
	src = regexp.MustCompile(`'[^'\n]*'`).ReplaceAllString(src, "''")       // no string's text
	defined := map[string]bool{"SEC": true, "INF": true}
	for _, m := range regexp.MustCompile(`local ([A-Z][A-Z_]+)\b`).FindAllStringSubmatch(src, -1) {
		defined[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\b[A-Z][A-Z_]{2,}\b`).FindAllString(src, -1) {
		if !defined[m] && m != "ARGV" && m != "KEYS" && m != "TIME" && m != "HGETALL" && m != "HSET" && m != "HDEL" && m != "PEXPIRE" && m != "PUBLISH" && m != "SET" && m != "HMGET" {
			if _, ok := c[m]; !ok {
				t.Errorf("schedule.lua uses %s, which ScheduleConstants does not define", m)
			}
		}
	}
}

// earlierCore writes a key's core as versions before the packed doubles
// wrote it (MessagePack): id, tat and hold in µs of Redis's clock, nothing
// queued.
var earlierCore = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'c', cmsgpack.pack({now - 1000000, tat, -1e300, 0, 0, 0, 0, 0, -1e300, 0, 0, 0, 1, now + 60000000, 0}))
redis.call('PEXPIRE', KEYS[1], 60000)
return 1
`)

// TestCoreEarlierFormat: a state an earlier version wrote (its core in
// MessagePack) is read, not taken for a fresh one: a key whose bucket is
// spent for 5 s still refuses a wait that may last 1 s, and the next
// write is in the packed form (tagged 1), with the same tat.
func TestCoreEarlierFormat(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	w := New(c, "earlier", 1, 1).For("k").(*keyWaiter)
	if err := earlierCore.Run(ctx, c, []string{w.rkey}, 5_000_000).Err(); err != nil {
		t.Fatal(err)
	}
	tat0, _, _ := hashState(t, c, w.rkey)
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := w.WaitN(dctx, 1)
	if !errors.Is(err, throttle.ErrWouldExceedDeadline) {
		t.Fatalf("WaitN on a spent bucket written by an earlier version = %v; want ErrWouldExceedDeadline", err)
	}
	// A pause writes the core again, in the packed form.
	if err := w.Pause(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	raw, err := c.HGet(ctx, w.rkey, "c").Result()
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != 1 || len(raw) != 1+15*8 {
		t.Fatalf("core after a write: tag %d, %d bytes; want tag 1, %d bytes", raw[0], len(raw), 1+15*8)
	}
	if tat, _, _ := hashState(t, c, w.rkey); tat != tat0 {
		t.Errorf("tat after the rewrite = %.0f; want %.0f as the earlier version wrote it", tat, tat0)
	}
}
