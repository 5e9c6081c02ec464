package distributed

import (
	"regexp"
	"testing"

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
