-- schedule_advance.lua: units going at their turns (advance, and the walk of several limits), enqueue, rejections, refusals and settles.
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

-- mwalk: the turns of M's tickets in queue order (schedule_limits.go's
-- walk): the retries first, then the classes in the merge's order
-- (tags, ties by RANK); the latest among the limits, FIFO, each limit's
-- tat moved as GCRA moves it when the ticket goes at its turn, no
-- earlier than M.floor. f(qi, i, t) returns false to stop; returns the
-- first limit's chain and the tats after the tickets f accepted.
local function mwalk(f)
	local iv, tau = pace(now)
	local lims = {}
	for L, l in ipairs(M.lim) do
		lims[L] = {l[1], l[2], l[3], l[4], l[5], l[6]}
	end
	local chain, prev, p = -INF, M.floor, 0
	local at, r0 = {[0] = 1, [1] = 1, [2] = 1, [3] = 1}, {[0] = 0, [1] = 0, [2] = 0, [3] = 0}
	while true do
		local qi = -1
		if at[0] <= #M.q[0] then
			qi = 0
		else
			local best = 0
			for o = 1, 3 do
				if at[o] <= #M.q[o] then
					local tag = tagOf(o, r0[o])
					if qi < 0 or tag < best or (tag == best and RANK[o] < RANK[qi]) then
						qi, best = o, tag
					end
				end
			end
		end
		if qi < 0 then
			break
		end
		local i = at[qi]
		at[qi] = i + 1
		local tk = M.q[qi][i]
		r0[qi] = r0[qi] + tk[2]
		do
			local n = tk[2]
			p = p + n
			local t = math.max(prev, turnAt(p))
			if iv > 0 then
				t = math.max(t, chain + n * iv - tau)
			end
			-- The least fixed point of every limit's earliest time.
			for _ = 1, 2 * M.k + 2 do
				local movedT = false
				for L, l in ipairs(lims) do
					local c = tk[2 + L]
					if c > 0 then
						local e = xearliest(l, t, c)
						if e > t then
							t, movedT = e, true
						end
					end
				end
				if not movedT then
					break
				end
			end
			if not f(qi, i, t) then
				return chain, lims
			end
			if iv > 0 then
				chain = math.max(chain, t) + n * iv
			end
			for L, l in ipairs(lims) do
				local c = tk[2 + L]
				if c > 0 then
					xtake(l, t, c)
				end
			end
			prev = t
		end
	end
	return chain, lims
end
-- mdue: the first-limit units of the tickets whose turns have come,
-- whole tickets from the head; what they leave is kept for mcommit.
local mDue = nil
local function mdue()
	local at, units, cnt = now + 1e-9 * SEC, 0, {[0] = 0, [1] = 0, [2] = 0, [3] = 0}
	local chain, lims = mwalk(function(qi, i, t)
		if t > at then
			return false
		end
		units = units + M.q[qi][i][2]
		cnt[qi] = cnt[qi] + 1
		return true
	end)
	mDue = {chain = chain, lims = lims, cnt = cnt}
	return units
end
local function mcommit()
	M.lim = mDue.lims
	for qi = 0, 3 do
		for _ = 1, mDue.cnt[qi] do
			table.remove(M.q[qi], 1)
		end
	end
	s.tat = math.max(s.tat, mDue.chain)
end
local function mturn(qi, e)
	local turn = -INF
	mwalk(function(qj, i, t)
		if qj == qi and M.q[qi][i][1] == e then
			turn = t
			return false
		end
		return true
	end)
	return turn
end
local function advance()
	if w.valid and now >= w.reset + WINDOW_KEEP * SEC and queued() == 0 then
		B.emptyWindow()
	end
	if now - s.lastGo > PENDING_IDLE * SEC then
		s.pending = 0
	end
	if s.trim > 0 and now - c.last > TRIM_KEEP * SEC then
		s.trim, s.trimGone = 0, 0
	end
	rescale()
	local lv = queued()
	if lv == 0 or now < s.hold then
		return
	end
	local k
	if M ~= nil then
		k = mdue() -- whole tickets, on every limit
	else
		k = dueUnits(lv)
	end
	local interval, tau = pace(now)
	if k > 0 then
		-- Release on copies first: tatAfter reads the tickets as they were
		-- (release replaces the lists, it does not write to them).
		local qs = {}
		for qi = 0, 3 do
			local q = s.q[qi]
			qs[qi] = {rel = q.rel, ['end'] = q['end'], holes = q.holes, big = q.big}
		end
		local gone = release(qs[0], k)
		local mv = {[1] = 0, [2] = 0, [3] = 0}
		if live(qs[0]) == 0 then -- retries first
			local g
			g, mv = releaseClasses(qs, k - gone)
			gone = gone + g
		end
		if gone > 0 then
			local tat = s.tat
			if interval > 0 then
				tat = tatAfter(gone)
			end
			-- A learned budget's window at or past its reset: the units
			-- that count in the next window are those whose turns were at
			-- or after the reset, not all that a call releases then
			-- (sleeping waits go at their turns; Redis releases their
			-- units at the next call, possibly past the reset).
			local past = nil
			if w.valid and w.rolls and now >= w.reset then
				local lo, hi = 0, gone -- the most units whose turns were before it
				while lo < hi do
					local mid = math.floor((lo + hi + 1) / 2)
					if turnAt(mid) < w.reset then
						lo = mid
					else
						hi = mid - 1
					end
				end
				past = gone - lo
			end
			for qi = 0, 3 do
				s.q[qi] = qs[qi]
			end
			for qi = 1, 3 do
				s.vb[qi] = s.vb[qi] + mv[qi]
			end
			tidyClasses()
			s.tat = tat
			if interval > 0 then
				if c.r0 ~= 0 then
					-- Under a cut: see advance in schedule_turns.go.
					s.tat = math.max(s.tat, now + gone * interval)
				end
			end
			if M ~= nil then
				mcommit()
			end
			if spend(gone, past) and queued() > 0 then
				-- The window spreads its last units: the turns of those
				-- queued move later, which their sleepers must learn
				-- (they go at the turns they know).
				moved = true
			end
			if s.trim > 0 then
				-- Units that went give the margin back, in steps, with a
				-- wake-up (see advance in schedule_turns.go).
				s.trimGone = s.trimGone + gone
				local per = (1 - TRIM_TARGET) / TRIM_TARGET
				if s.trimGone >= per then
					local steps = math.floor(s.trimGone / per)
					s.trimGone = s.trimGone - steps * per
					s.trim = math.max(0, s.trim - steps * TRIM_STEP)
					rescale()
					if queued() > 0 then
						moved = true
					end
				end
			end
			s.pending = s.pending + gone
			if now - s.lastGo > SEC then
				s.busySince = now
			end
			s.lastGo = now
			count(gone)
		end
	end
	floorTat()
end
-- position: the units ahead of the ticket (qi, e), its own included (a
-- class's: the retries and the other classes' units ahead of it in the
-- merge too); 0 if it has gone.
local function position(qi, e)
	local q = s.q[qi]
	local p = ahead(q, e)
	if p <= 0 or qi == 0 then
		return p
	end
	p = p + live(s.q[0])
	if classes() > 1 then
		p = p + others(qi, ahead(q, e) - sizeAt(q, e))
	end
	return p
end
local function turn(qi, e)
	local p = position(qi, e)
	if p <= 0 then
		return -INF
	end
	if M ~= nil then
		return mturn(qi, e)
	end
	return turnAt(p)
end
local function enqueue(qi, n)
	if queued() == 0 then
		s.tat = math.max(s.tat, now)
		if w.valid and w.left == 0 and now >= w.probeAt + math.ceil(w.probed / probe()) * PROBE_WAIT * SEC then
			w.probeAt, w.probed = now, 0
		end
	end
	if n > s.maxCost then
		-- A larger probe moves the turns of the waits past a window, and
		-- a cut's bucket is a request deep (see enqueue in schedule_ops.go).
		if (w.valid or c.r0 ~= 0) and queued() > 0 then
			moved = true
		end
		s.maxCost = n
		rescale()
	end
	enterClass(qi)
	local e = take(s.q[qi], n)
	if M ~= nil then
		local tk = {e, n}
		for L = 1, M.k do
			tk[2 + L] = (mcost and mcost[L]) or 0
		end
		table.insert(M.q[qi], tk)
		mmoved()
	end
	return e
end
local function reject(sentAt, cost)
	if c.moved and sentAt < c.last then
		return false
	end
	local interval = base()
	local cur = cutRate(now)
	if interval > 0 and cur == 0 and (not c.moved or now - c.last > STRIKE_WINDOW * SEC or s.trim + TRIM_STEP <= TRIM_MAX + 1e-9) then
		-- A lone rejection, or one the margin still has room for: shift
		-- and trim (see trimStep in schedule.go).
		s.tat = math.max(s.tat, now) + SHIFT_SLOTS * interval
		c.last, c.moved = now, true
		s.trim, s.trimGone = math.min(s.trim + TRIM_STEP, TRIM_MAX), 0
		rescale()
		return true
	end
	-- See reject in schedule_ops.go.
	local least = CUT_MIN_REQ * math.max(cost, 1)
	local from, wMax, floor
	if interval > 0 then
		local limit = SEC / (interval * (1 - s.trim)) -- the limit, untrimmed
		wMax, from, floor = limit, limit, math.min(math.max(least, CUT_FLOOR * limit), limit)
		if cur > 0 then
			from = cur
		end
	else
		from = sent()
		local span = now - s.busySince
		if span < SEC then
			from = from * SEC / math.max(span, 0.01 * SEC)
		end
		if cur > 0 then
			from = math.min(from, cur)
		end
		from = math.max(from, least)
		wMax, floor = from, least
	end
	c.r0, c.wMax, c.floor, c.at, c.open, c.last, c.moved = math.max(CUT_BETA * from, floor), wMax, floor, now, interval == 0, now, true
	s.trim, s.trimGone = 0, 0 -- the cut, which regrows, replaces it
	rescale() -- the bucket's units at the old pace, from now on at the new
	return true
end
-- refused (schedule.go's): a refusal that said when to come back, under
-- a known limit with no cut in force, trims the pace a step.
local function refused()
	if base() == 0 or cutRate(now) > 0 or s.trim + TRIM_STEP > TRIM_MAX + 1e-9 then
		return false
	end
	c.last, c.moved = now, true
	s.trim, s.trimGone = math.min(s.trim + TRIM_STEP, TRIM_MAX), 0
	rescale()
	return true
end
-- settle: a wait that spent `spent` units really cost `actual`: the
-- bucket's tat moves by the difference at the pace in force (a debt, or
-- units back under GCRA's floor), a charge spends from the window, and
-- queued turns move (see settle in schedule_settle.go).
local function settle(spent, actual)
	local d = actual - spent
	if d == 0 then
		return false
	end
	if d > 0 then
		spend(d)
	end
	local interval = pace(now)
	if interval > 0 then
		floorTat() -- GCRA's max(tat, now) first (see settle in schedule_settle.go)
		s.tat = s.tat + d * interval
		floorTat()
	end
	return queued() > 0
end
-- bound: a settle's charge d (actual − spent) on a limit that holds
-- most units at once (a bucket's burst, a window's count) is at most
-- most, the rest dropped: a request cannot have cost more than the
-- limit holds beyond what it was admitted for (the Go engine's settle
-- bounds a charge alike). Returns the charge kept and the units
-- dropped.
local function bound(d, most)
	if d > most then
		return most, d - most
	end
	return d, 0
end
-- boundFirst: bound on the first limit, its burst; with no pace
-- configured there is nothing to bound (the engine's Clamp).
local function boundFirst(d)
	if cfgI > 0 then
		return bound(d, cfgB)
	end
	return d, 0
end
-- recheck and waitOf reply µs from now, at most FAR.
local function recheck()
	local t = nextStep(now)
	if t == INF then
		return -1
	end
	return math.min(math.ceil(t - now), FAR)
end
local function waitOf(t)
	if t <= now then
		return 0
	end
	return math.min(math.ceil(t - now), FAR)
end
