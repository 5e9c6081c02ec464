package throttletest

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

// now reads a server's clock: f, or time.Now when f is nil. Inside a
// testing/synctest bubble time.Now is the bubble's fake clock, so a server
// with a nil clock runs on fake time there.
func now(f func() time.Time) time.Time {
	if f == nil {
		return time.Now()
	}
	return f()
}

// setDate writes the Date header a server sends: its clock plus skew, in
// the IMF-fixdate form (whole seconds, as every HTTP server sends it).
// net/http would add a Date of its own; writing it makes the in-process
// [Direct] and a real server answer alike, and lets a test skew it.
func setDate(h http.Header, t time.Time, skew time.Duration) {
	h.Set("Date", t.Add(skew).UTC().Format(http.TimeFormat))
}

// ceilSeconds is d in whole seconds, rounded up: the form of a
// delay-seconds field (Retry-After, the IETF t parameter).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// admit writes the body of an admitted request.
func admit(w http.ResponseWriter) {
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "ok\n")
}

// reject writes a refusal with status, and a short body saying so.
func reject(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
	io.WriteString(w, http.StatusText(status)+"\n")
}

// drain reads what is left of a request's body, so a client whose request
// was refused before its body was read does not see a broken connection.
func drain(r *http.Request) {
	io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
}

// mustPositive panics with a message naming the constructor when v ≤ 0:
// a limit of zero or less is a test's own mistake.
func mustPositive[T int | int64 | float64 | time.Duration](fn, name string, v T) {
	if v <= 0 {
		panic("throttletest." + fn + ": " + name + " must be positive")
	}
}

// misconfigured answers 500 when a server's limit is not usable (a zero
// value, not made by its constructor, or a field set to zero after), with
// a body saying what to do, and reports whether it did. It records
// nothing: the request was not judged by any rule.
func misconfigured(w http.ResponseWriter, bad bool, msg string) bool {
	if !bad {
		return false
	}
	http.Error(w, "throttletest: "+msg, http.StatusInternalServerError)
	return true
}
