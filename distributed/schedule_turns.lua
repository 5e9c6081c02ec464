-- schedule_turns.lua: the general path's window, cut and pace, and the turn of a unit (schedule.go's turnAt, dueUnits).
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

-- window (schedule_window.go's window).
local w = s.win
local function spreading()
	return w.spreadLeft > 0
end
local function spreadInterval()
	if not w.valid or not spreading() or w.left <= 0 then
		return 0
	end
	return (w.reset - w.spreadAt) / w.spreadLeft
end
local function low()
	if w.size > 0 then
		return w.left < math.max(1, w.size * LOW_SHARE)
	end
	return w.left < LOW_UNITS
end
local function windowTurn(p, probe)
	if not w.valid then
		return -INF
	end
	if p <= w.left then
		local si = spreadInterval()
		if si > 0 then
			return w.spreadAt + (w.spreadLeft - w.left + p - 1) * si
		end
		return -INF
	end
	return w.probeAt + math.floor(math.max(w.probed + p - w.left - 1, 0) / probe) * PROBE_WAIT * SEC
end
-- spend: k units went at now, past of them at or after the window's reset
-- (nil: all, if now is). It reports whether the window started to
-- spread its units (the turns of the units queued within it move later).
-- A learned budget's window is not spread: its q units go at once (see
-- schedule_budget.go), each window as the one before, and a spread would
-- start only when a call happened to advance the state (sleeping waits
-- go at the turns they were told; Redis releases their units at the
-- next call), so that one window's last units were spread and the next
-- window's were not, over the budget.
local function spend(k, past)
	if not w.valid then
		return false
	end
	if now >= w.reset then
		w.past = w.past + (past or k)
	end
	if k <= w.left then
		w.left = w.left - k
	else
		w.probed = w.probed + k - w.left
		w.left = 0
	end
	if not w.rolls and not spreading() and low() and now < w.reset and w.left > 0 then
		w.spreadAt, w.spreadLeft = now, w.left
		return true
	end
	return false
end
local function update(left, reset, size, length, inFlight)
	local at = now + reset
	local same = SAME_WINDOW * SEC
	if length > 0 then
		same = math.min(same, length / 2)
	end
	local told = left
	left = math.floor(math.max(left - inFlight, 0)) -- whole units
	if w.valid and w.probed == 0 and math.abs(at - w.reset) < same then
		w.told = math.min(w.told, math.floor(told))
		local up = math.floor(math.max(w.told - inFlight, 0))
		if up > w.left then
			w.left, w.spreadAt, w.spreadLeft = up, 0, 0 -- the spread starts again from it
		end
		w.left = math.min(w.left, math.floor(told))
		if w.probeAt == w.reset then
			w.probeAt = math.min(w.reset, at)
		end
		w.reset = math.min(w.reset, at)
	elseif not w.valid or w.probed > 0 or at > w.reset then
		B.emptyWindow()
		w.valid, w.left, w.reset, w.probed, w.spreadAt, w.spreadLeft, w.probeAt, w.told = true, left, at, 0, 0, 0, at, math.floor(told)
	end
	w.size = size
	if not spreading() and low() and w.left > 0 then
		w.spreadAt, w.spreadLeft = now, w.left
	end
end

-- cut (schedule_window.go's cut).
local c = s.cut
local function cutRate(t)
	if c.r0 == 0 or t < c.at then
		return 0
	end
	local d = math.floor((t - c.at) / (CUT_STEP * SEC)) * CUT_STEP
	if d < CUT_RECOVER then
		return math.max(c.r0 + (c.wMax - c.r0) * d / CUT_RECOVER, c.floor)
	end
	if not c.open then
		return 0
	end
	local r = c.wMax -- times CUT_GROW a step, as schedule_window.go's rate
	local j = (d - CUT_RECOVER) / CUT_STEP
	while j > 0 and r < 10 * c.wMax do
		r = r * CUT_GROW
		j = j - 1
	end
	if r >= 10 * c.wMax then
		return 0
	end
	return r
end
local function nextStep(at)
	if cutRate(at) == 0 then
		return INF
	end
	return c.at + (math.floor((at - c.at) / (CUT_STEP * SEC)) + 1) * CUT_STEP * SEC
end

-- schedule (schedule.go's schedule).
local function base()
	if cfgI > 0 and s.trim > 0 then
		return cfgI / (1 - s.trim), cfgB -- trimmed (see trimStep in schedule.go)
	end
	return cfgI, cfgB
end
local function pace(at)
	local interval, burst = base()
	local tau = burst * interval
	local r = cutRate(at)
	if r > 0 and SEC / r > interval then
		local ci = SEC / r
		tau = math.max(tau, math.max(s.maxCost, 1) * ci) -- at least a request at once (see pace in schedule.go)
		interval = ci
	end
	return interval, tau
end
local function queued()
	return live(s.q[0]) + live(s.q[1]) + live(s.q[2]) + live(s.q[3])
end
local function paced(t, p)
	for _ = 1, MAX_STEPS do
		local at = math.max(t, now)
		local nxt = nextStep(at)
		if nxt == INF then
			break
		end
		local iv = pace(at)
		if iv == 0 or t + p * iv <= nxt then
			return t + p * iv
		end
		p = p - (nxt - t) / iv
		t = nxt
	end
	local iv = pace(math.max(t, now))
	return t + p * iv
end
local function probe()
	return math.max(s.maxCost, 1)
end
local function count(k)
	local cur = math.floor(now / SEC)
	if cur == s.sentSec + 1 then
		s.sentSec, s.sentPrev, s.sentCur = cur, s.sentCur, 0
	elseif cur ~= s.sentSec then
		s.sentSec, s.sentPrev, s.sentCur = cur, 0, 0
	end
	s.sentCur = s.sentCur + k
	B.counted(k)
end
local function sent()
	count(0)
	local frac = now / SEC - s.sentSec
	return s.sentCur + s.sentPrev * (1 - frac)
end
-- ticketAt: the positions past the head of the first and the last unit
-- of the ticket that holds the p-th unit (a class's behind the retries
-- and the other classes' units ahead of it in the merge).
local function ticketAt(p)
	local retries = live(s.q[0])
	for qi = 0, 3 do
		local q = s.q[qi]
		for _, b in ipairs(q.big) do
			local hi = ahead(q, b[1])
			if qi ~= 0 then
				hi = hi + retries + others(qi, hi - b[2])
			end
			local lo = hi - b[2] + 1
			if lo <= p and p <= hi then
				return lo, hi
			end
		end
	end
	return p, p
end
-- arrival: when a unit that arrived at e arrived as the pace in force
-- counts it (see rescale in schedule_turns.go).
local function arrival(e)
	if e >= s.spAt then
		return e
	end
	return math.max(e, s.spK - (s.spAt - e) * s.spRho)
end
-- floorTat: GCRA's max(tat, arrival) at now (see floorTat in schedule_turns.go).
local function floorTat()
	local interval, tau = pace(now)
	local floor = now
	if interval > 0 and queued() > 0 then
		local lo, hi = ticketAt(1)
		floor = now - math.max(0, (hi - lo + 1) * interval - tau)
	end
	s.tat = math.max(s.tat, floor)
end
-- rescale: the units the bucket holds are kept when the pace changed
-- since the last advance, never more (see rescale in schedule_turns.go).
local function rescale()
	local interval, tau = pace(now)
	if interval > 0 and s.credInt > 0 and (s.credInt ~= interval or s.credTau ~= tau) then
		s.spAt, s.spRho = now, interval / s.credInt
		s.spK = now + tau - s.credTau * s.spRho
		s.tat = s.spK - (now - math.max(s.tat, math.min(s.hold, now))) * s.spRho
		floorTat()
		mmoved()
	end
	s.credInt, s.credTau = interval, tau
end
-- head: the chain from the head, tat once p units have gone from
-- max(tat, hold), or (turn) the p-th unit's turn on it; without a cut
-- one sum, the turn's small terms first (see head in schedule_turns.go).
local function head(p, interval, tau, turn)
	local a = math.max(s.tat, s.hold)
	if c.r0 ~= 0 then
		if turn then
			return paced(a - tau, p)
		end
		return paced(a - tau, p) + tau
	end
	if turn then
		return a + (p * interval - tau)
	end
	return a + p * interval
end
-- chains: the largest of tatAfter's chains but the head's; -INF without
-- a window.
local function chains(p, interval)
	local t = -INF
	if not w.valid or interval == 0 then
		return t
	end
	local pr = probe()
	local e = windowTurn(p, pr)
	if e > -INF then
		t = math.max(t, arrival(e) + interval)
	end
	local function chain(first)
		local lo, hi = ticketAt(math.max(first, 1))
		local ef = windowTurn(hi, pr)
		if ef > -INF then
			t = math.max(t, arrival(ef) + (p - lo + 1) * interval)
		end
	end
	if spreadInterval() > 0 then
		chain(1) -- binds the probes past the spread too
	end
	if p <= w.left then
		return t
	end
	local b = math.floor(math.max(w.probed + p - w.left - 1, 0) / pr)
	chain(w.left + b * pr - w.probed + 1)
	chain(w.left - w.probed + 1)
	return t
end
-- tatAfter: the bucket's tat once p more units past the head have gone,
-- each no earlier than the limits other than the bucket let it go.
local function tatAfter(p)
	local interval, tau = pace(now)
	return math.max(head(p, interval, tau, false), chains(p, interval))
end
-- turnAt: the turn of the p-th unit past the head.
local function turnAt(p)
	local interval, tau = pace(now)
	local t = math.max(s.hold, windowTurn(p, probe()))
	if interval > 0 then
		t = math.max(t, head(p, interval, tau, true), chains(p, interval) - tau)
	end
	return t
end
-- dueUnits: the most units past the head, at most hi, whose turns have
-- come at now (see dueUnits in schedule_turns.go; a nanosecond of rounding
-- here: times are µs of the epoch, whose floats are coarser).
local function dueUnits(hi)
	local due = now + 1e-9 * SEC
	if turnAt(hi) <= due then
		return hi
	end
	local lo = 0
	while lo < hi do
		local mid = math.floor((lo + hi + 1) / 2)
		if turnAt(mid) <= due then
			lo = mid
		else
			hi = mid - 1
		end
	end
	return lo
end
