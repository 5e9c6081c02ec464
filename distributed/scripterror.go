package distributed

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// scriptError is an error a script raised: its own error reply, a Lua
// runtime error, or a command it called that refused its arguments. Redis
// answered, so it is an error of the call, never a store failure: the
// breaker counts the call as answered, no FailMode applies, and it does
// not match [ErrStoreUnavailable]. errors.As reaches the [redis.Error].
type scriptError struct {
	err error // a redis.Error
}

func (e *scriptError) Error() string {
	return "throttle/distributed: the quota's script failed: " + e.err.Error()
}

func (e *scriptError) Unwrap() error { return e.err }

// storeConditions are the error codes of a store that cannot serve a
// command for a condition of its own, not for the command's arguments:
// out of memory, a read-only replica, loading its data, a master or
// quorum of replicas missing, a disk it cannot write, a cluster down or
// moving, a script running too long. A script's call refused so is a
// store failure like any other.
var storeConditions = []string{
	"OOM", "READONLY", "LOADING", "MASTERDOWN", "NOREPLICAS", "MISCONF",
	"CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "BUSY",
}

// scriptFault reports whether err is an error a script raised (see
// scriptError): a reply the script returned with redis.error_reply
// (every one of the schedule script's starts "THROTTLE_"), or a Lua
// error, which Redis reports naming the script's source (Redis 7 and
// Valkey: "CODE message script: sha, on @user_script:N."; Redis 5 and 6:
// "ERR Error running script (call to f_sha): @user_script:N: …", a
// command's refusal inside as "@user_script: N: CODE …"), unless the
// error is a store condition (storeConditions, or a script killed for
// running too long).
func scriptFault(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	if strings.HasPrefix(msg, "THROTTLE_") {
		return true
	}
	if !strings.Contains(msg, "user_script:") || strings.Contains(msg, "Script killed") {
		return false
	}
	for _, code := range storeConditions {
		if strings.HasPrefix(msg, code+" ") || strings.Contains(msg, ": "+code+" ") || strings.Contains(msg, ": -"+code+" ") {
			return false
		}
	}
	return true
}

// answered reports whether err says nothing of the store's health: a call
// refused before it was made (an invalid configuration or cost, matching
// [throttle.ErrInvalidLimit]), or the store's own answer (a configuration
// refused, matching [ErrConfigMismatch], or a *scriptError). Such an
// error is the call's: no FailMode applies and it does not match
// [ErrStoreUnavailable].
func answered(err error) bool {
	var se *scriptError
	return errors.Is(err, ErrConfigMismatch) || errors.Is(err, throttle.ErrInvalidLimit) || errors.As(err, &se)
}
