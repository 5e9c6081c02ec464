package view

import (
	"math"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
)

// Page is the view's JSON: every limiter's keys at one instant. A
// number that is +Inf in [throttle.State] (no pace, no limit) is null;
// durations are in nanoseconds, as a [time.Duration] counts them.
type Page struct {
	// At is when the view was taken.
	At time.Time `json:"at"`
	// Limiters are the Handler's, in the order of their names.
	Limiters []Group `json:"limiters"`
}

// Group is one limiter's view.
type Group struct {
	Name string `json:"name"`
	// Store is what this process knows of a fleet's store; nil for an
	// in-process limiter.
	Store *Store `json:"store,omitempty"`
	// Keys are the keys shown, in the order of the text shown for them;
	// LeftOut counts the keys the view did not show (past MaxKeys).
	Keys    []Row `json:"keys"`
	LeftOut int   `json:"left_out"`
}

// Store is a fleet's store as this process knows it: see
// [distributed.Health].
type Store struct {
	FailMode string `json:"fail_mode"`
	// FallingBack: calls were answered by FailMode since Redis last
	// answered (with FailLocal, this process paces itself at its share
	// of the limits).
	FallingBack bool `json:"falling_back"`
	BreakerOpen bool `json:"breaker_open"`
	Failures    int  `json:"failures"`
	// Error is the last failure's cause, "" if none is known.
	Error string `json:"error,omitempty"`
}

// Row is one key's [throttle.State], or the error that kept the view
// from reading it (Error; the other fields are then zero).
type Row struct {
	Key   string `json:"key"`
	Error string `json:"error,omitempty"`
	// At is when the key's State was read: its durations count from it.
	At time.Time `json:"at"`
	// Rate is the pace in force, units a second (null: none), Burst the
	// bucket's depth at that pace.
	Rate  *float64 `json:"rate"`
	Burst float64  `json:"burst"`
	// Tokens and Remaining: null for +Inf.
	Tokens    *float64 `json:"tokens"`
	Remaining *float64 `json:"remaining"`
	NextNS    int64    `json:"next_ns"`
	// PausedNS is the pause's time left, PausedUntil its end (absent
	// when not paused).
	PausedNS    int64      `json:"paused_ns"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	Queued      int64      `json:"queued"`
	// Of Queued, the critical and background classes' (throttle.Priority).
	QueuedCritical   int64   `json:"queued_critical,omitempty"`
	QueuedBackground int64   `json:"queued_background,omitempty"`
	SlowedDown       bool    `json:"slowed_down"`
	Declared         bool    `json:"declared"`
	Window           *Window `json:"window,omitempty"`
	Limits           []Limit `json:"limits,omitempty"`
}

// Window is a server's window in force: [throttle.ServerWindow].
type Window struct {
	Remaining float64 `json:"remaining"`
	ResetNS   int64   `json:"reset_ns"`
	Size      float64 `json:"size,omitempty"`
	LengthNS  int64   `json:"length_ns,omitempty"`
}

// Limit is one of a key's further limits: [throttle.LimitState].
type Limit struct {
	Unit      string   `json:"unit"`
	Window    bool     `json:"window"`
	Remaining *float64 `json:"remaining"`
}

// finite returns x, or nil for an infinity.
func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

// rowOf returns key's row for st.
func rowOf(key string, st throttle.State) Row {
	r := Row{
		Key:              key,
		At:               st.At,
		Rate:             finite(float64(st.Rate)),
		Burst:            st.Burst,
		Tokens:           finite(st.Tokens),
		Remaining:        finite(st.Remaining),
		NextNS:           int64(st.Next),
		PausedNS:         int64(st.Paused),
		Queued:           st.Queued,
		QueuedCritical:   st.QueuedCritical,
		QueuedBackground: st.QueuedBackground,
		SlowedDown:       st.SlowedDown,
		Declared:         st.Declared,
	}
	if st.Paused > 0 {
		until := st.At.Add(st.Paused)
		r.PausedUntil = &until
	}
	if w := st.Window; w != nil {
		r.Window = &Window{Remaining: w.Remaining, ResetNS: int64(w.Reset), Size: w.Size, LengthNS: int64(w.Length)}
	}
	for _, l := range st.Limits {
		r.Limits = append(r.Limits, Limit{Unit: l.Unit, Window: l.Window, Remaining: finite(l.Remaining)})
	}
	return r
}

// storeOf returns h as the view shows it.
func storeOf(h distributed.Health) *Store {
	s := &Store{FailMode: h.FailMode.String(), FallingBack: h.FallingBack, BreakerOpen: h.BreakerOpen, Failures: h.Failures}
	if h.Err != nil {
		s.Error = h.Err.Error()
	}
	return s
}
