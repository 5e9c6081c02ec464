package schedule

import "math"

// The engine's constants, in seconds or as plain numbers: every number a
// rule uses, in one place. The script takes them as a prelude
// (Constants), so each exists once.
const (
	// probeWait: after a window's reset, with no response yet telling the
	// next window, one probe (of up to the key's largest cost) goes per
	// probeWait.
	probeWait = 1.0
	// windowKeep: a window no response refreshed is forgotten this long
	// after its reset (then the key runs at its other limits).
	windowKeep = 10.0
	// sameWindow: two resets closer than this are the same window (at most
	// half the window's length): resets come in whole seconds in most
	// dialects, and so does the Date they are measured against.
	sameWindow = 2.5
	// CutBeta: a cut multiplies the pace by this (AWS SDKs' and CUBIC's β).
	CutBeta = 0.7
	// cutFloor: no cut goes below this fraction of its reference rate.
	cutFloor = 0.25
	// cutMinRequests: nor below this many requests a second (in units: times
	// the rejected request's cost), so that a floor is in requests.
	cutMinRequests = 1.0
	// CutRecover: a cut regrows to its reference rate over this long, in
	// steps of cutStep, and is over then.
	CutRecover = 2.0
	CutStep    = 0.25
	// strikeWindow: a lone rejection under a known limit only shifts the
	// schedule (timer jitter against a strict server); a second one within
	// strikeWindow cuts.
	strikeWindow = 10.0
	// shiftSlots: intervals a lone rejection shifts the schedule by.
	shiftSlots = 1.0
	// A rejection under a known limit with no cut in force trims the
	// pace by TrimStep of it, up to trimMax, instead of cutting it: a
	// strict server (no burst, a limit told exactly) rejects what timer
	// jitter brings early, and the margin it needs is learned. Units that
	// go give it back, a step per 1/trimTarget − 1 units (so that it
	// rests where about trimTarget of the requests are rejected); a key
	// that has had no rejection for trimKeep forgets it. A rejection past trimMax (an outage, a budget below the
	// limit) cuts, and the cut, which regrows, replaces the trim.
	TrimStep   = 0.01
	TrimMax    = 0.1
	TrimTarget = 0.01
	TrimKeep   = 60.0
	// maxSteps bounds the cut's steps a turn walks.
	maxSteps = 64
	// pendingIdle: a key idle this long forgets the units it counted as in
	// flight (responses that never came back through Adapt).
	pendingIdle = 10.0
	// lowShare: a window runs low (and is spread until its reset) under
	// this share of its size, or under lowUnits when its size is unknown.
	lowShare = 0.1
	lowUnits = 10.0

	// A hidden budget (budget.go): two refusal cycles agree when their
	// units and windows are within hiddenAgree of each other; a learned
	// budget is forgotten hiddenKeep after the last refusal; its window is
	// probed down in steps of hiddenStep of its upper bound while the
	// bounds are wider than hiddenTight of it, and a miss grows it a step
	// of hiddenTight.
	hiddenAgree = 0.1
	hiddenKeep  = 60.0 // seconds
	hiddenTight = 1.0 / 100
	hiddenStep  = 1.0 / 32

	// maxHoles bounds the cancelled tickets a queue remembers (line.go);
	// beyond it, the oldest hole is kept as queued units (its units are
	// lost, never over-spent), so memory stays bounded whatever the
	// cancel pattern.
	maxHoles = 256

	// The classes' strides (classes.go), the inverse of their weights
	// 16 (critical), 4 (default) and 1 (background): waiting together,
	// the classes' units go in those proportions, so background gets at
	// least 1/21 of the key's pace, 1/17 beside critical alone, 1/5
	// beside default alone. Powers of two, so that tags are exact.
	StrideCritical   = 1.0
	StrideDefault    = 4.0
	StrideBackground = 16.0

	// cutProbe: a key without a limit, its cut regrown, probes beyond the
	// rate it was cut from, growing by this share each second,
	// compounded.
	cutProbe = 1.0
)

// Constants returns the constants by the names the script uses, times in
// seconds.
func Constants() map[string]float64 {
	return map[string]float64{
		"PROBE_WAIT":        probeWait,
		"WINDOW_KEEP":       windowKeep,
		"SAME_WINDOW":       sameWindow,
		"CUT_BETA":          CutBeta,
		"CUT_FLOOR":         cutFloor,
		"CUT_MIN_REQ":       cutMinRequests,
		"CUT_RECOVER":       CutRecover,
		"CUT_STEP":          CutStep,
		"CUT_PROBE":         cutProbe,
		"CUT_GROW":          cutGrow,
		"STRIKE_WINDOW":     strikeWindow,
		"SHIFT_SLOTS":       shiftSlots,
		"TRIM_STEP":         TrimStep,
		"TRIM_MAX":          TrimMax,
		"TRIM_TARGET":       TrimTarget,
		"TRIM_KEEP":         TrimKeep,
		"PENDING_IDLE":      pendingIdle,
		"MAX_STEPS":         maxSteps,
		"LOW_SHARE":         lowShare,
		"LOW_UNITS":         lowUnits,
		"MAX_HOLES":         maxHoles,
		"HIDDEN_AGREE":      hiddenAgree,
		"HIDDEN_KEEP":       hiddenKeep,
		"HIDDEN_TIGHT":      hiddenTight,
		"HIDDEN_STEP":       hiddenStep,
		"STRIDE_CRITICAL":   StrideCritical,
		"STRIDE_DEFAULT":    StrideDefault,
		"STRIDE_BACKGROUND": StrideBackground,
	}
}

// cutGrow is the probe's growth a step, (1 + cutProbe)^CutStep. A step's
// pace is the rate it was cut from times cutGrow once per step, each
// product rounded: the script multiplies the same way, by this number
// (CUT_GROW), so that both sides' paces agree to the bit (a power with a
// fractional exponent rounds differently in Go and in C).
var cutGrow = math.Pow(1+cutProbe, CutStep)
