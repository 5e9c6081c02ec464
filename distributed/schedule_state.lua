-- schedule_state.lua: the state read from the hash (core and x), the queues' lines and cancelled tickets.
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

-- x: MessagePack in the field x, or its short form in the core (CORE_XC,
-- see schedule.lua), read here into the same slots: a[27] the further
-- limits, flat (see schedule_limits.lua), their queues empty; the pace
-- last in force (a[20], a[21]) the configured one the core keeps, every
-- other slot 0 (see extOf).
local a = {}
if got[2] then
	a = cmsgpack.unpack(got[2])
elseif xc then
	local k = struct.unpack('<d', xc)
	local v = {struct.unpack(xcFmt(k), xc)}
	for j = 5, 26 do
		a[j] = 0
	end
	a[20], a[21] = n0[16], n0[17]
	local ver, spec = string.match(v[3 + 6 * k], '^(%d+)|(.*)$')
	local f = {k, v[2], tonumber(ver), spec}
	for j = 3, 2 + 6 * k do
		f[#f + 1] = v[j]
	end
	for _ = 0, 3 do
		f[#f + 1] = 0 -- each queue's count of tickets
	end
	a[27] = f
end
local function pairsOf(flat)
	local out = {}
	if type(flat) == 'table' then
		for i = 1, #flat, 2 do
			table.insert(out, {flat[i], flat[i + 1]})
		end
	end
	return out
end

-- The state, as schedule.go's struct; x's layout is in the write back.
local s = {
	id = id,
	tat = n0[2], hold = n0[3],
	q = {
		[0] = {rel = n0[4], ['end'] = n0[5], holes = pairsOf(a[1]), big = pairsOf(a[2])},
		[1] = {rel = n0[6], ['end'] = n0[7], holes = pairsOf(a[3]), big = pairsOf(a[4])},
	},
	win = {valid = a[5] == 1, left = a[6] or 0, reset = a[7] or 0, size = a[8] or 0,
		probed = a[9] or 0, spreadAt = a[10] or 0, spreadLeft = a[11] or 0, probeAt = a[19] or a[7] or 0,
		told = a[28] or a[6] or 0},
	cut = {r0 = a[12] or 0, wMax = a[13] or 0, floor = a[14] or 0, at = a[15] or 0,
		open = a[16] == 1, last = a[17] or 0, moved = a[18] == 1},
	pending = n0[8], lastGo = n0[9],
	sentSec = n0[10], sentCur = n0[11], sentPrev = n0[12],
	maxCost = n0[13], busySince = n0[15],
	credInt = a[20] or 0, credTau = a[21] or 0,
	spAt = a[22] or 0, spK = a[23] or 0, spRho = a[24] or 0,
	trim = a[25] or 0, trimGone = a[26] or 0,
}
-- The class queues (the engine's classes.go): critical (2) and background
-- (3) beside the default's (1, the core's), and each class's virtual
-- start (vb), kept in x: a[31] {q2.rel, q2.end, q3.rel, q3.end, vb1,
-- vb2, vb3} (0 while no class but the default was ever queued), their
-- holes and tickets of several units in a[32…35], as the first two
-- queues' in a[1…4].
do
	local cl = a[31]
	if type(cl) ~= 'table' then
		cl = {}
	end
	s.q[2] = {rel = cl[1] or 0, ['end'] = cl[2] or 0, holes = pairsOf(a[32]), big = pairsOf(a[33])}
	s.q[3] = {rel = cl[3] or 0, ['end'] = cl[4] or 0, holes = pairsOf(a[34]), big = pairsOf(a[35])}
	s.vb = {[1] = cl[5] or 0, [2] = cl[6] or 0, [3] = cl[7] or 0}
end
-- hb: what the key's refusals told of a hidden budget (schedule_budget.go's
-- budget), kept in x (a[30]) while on; the learned window's own slots are
-- in a[29] (see extOf).
local hbf = a[30]
if type(hbf) ~= 'table' then
	hbf = {}
end
s.hb = {on = hbf[1] == 1, at = hbf[2] or 0, n = hbf[3] or 0, first = hbf[4] or 0, ['end'] = hbf[5] or 0,
	c = {{q = hbf[6] or 0, w = hbf[7] or 0, lo = hbf[8] or 0}, {q = hbf[9] or 0, w = hbf[10] or 0, lo = hbf[11] or 0}},
	ended = hbf[12] or 0}
do
	local lw = a[29]
	if type(lw) ~= 'table' then
		lw = {}
	end
	local win = s.win
	win.rolls, win.started = lw[1] == 1, lw[2] == 1
	win.length, win.lo, win.hi = lw[3] or 0, lw[4] or 0, lw[5] or 0
	win.past, win.sent0, win.first = lw[6] or 0, lw[7] or 0, lw[8] or 0
	win.tight, win.miss = lw[9] == 1, lw[10] or 0
end

local xe = n0[14] -- when the TTL last set runs out
local moved = false -- turns may have moved: publish
-- refundedAt: {qi, e} when the only turns that moved are those of the
-- tickets behind the ticket (qi, e), and earlier (a refund ahead of
-- them): published as such, so that a process's waits ahead of it need
-- not ask (see pushMsg in pushed.go); nil when none did.
local refundedAt = nil
local function refunded(qi, e)
	local r = refundedAt
	if r == nil or qi < r[1] or (qi == r[1] and e < r[2]) then
		refundedAt = {qi, e}
	end
end

-- line: one queue (schedule_line.go's line).
local function live(q)
	local n = q['end'] - q.rel
	for _, h in ipairs(q.holes) do
		n = n - h[2]
	end
	return n
end
local function ahead(q, e)
	if e <= q.rel then
		return 0
	end
	local n = e - q.rel
	for _, h in ipairs(q.holes) do
		if h[1] > e then
			break
		end
		n = n - h[2]
	end
	return n
end
local function release(q, k)
	local gone, i, j = 0, 1, 1
	while true do
		local h = q.holes[i]
		if h ~= nil and h[1] - h[2] == q.rel then
			q.rel = h[1]
			i = i + 1
		else
			if k <= 0 then
				break
			end
			local nxt = q['end']
			if h ~= nil then
				nxt = h[1] - h[2]
			end
			local to = math.min(q.rel + k, nxt)
			-- The ticket of several units that to would split, if any, is
			-- the first not wholly before to: it does not go in part.
			while q.big[j] ~= nil and q.big[j][1] <= to do
				j = j + 1
			end
			local b = q.big[j]
			if b ~= nil and b[1] - b[2] < to then
				to = b[1] - b[2]
			end
			if to <= q.rel then
				break
			end
			gone = gone + to - q.rel
			k = k - (to - q.rel)
			q.rel = to
		end
	end
	while q.big[j] ~= nil and q.big[j][1] <= q.rel do
		j = j + 1
	end
	local holes, big = {}, {}
	for x = i, #q.holes do
		table.insert(holes, q.holes[x])
	end
	for x = j, #q.big do
		table.insert(big, q.big[x])
	end
	q.holes, q.big = holes, big
	return gone
end
-- sizeAt: the units of the queued ticket ending at e.
local function sizeAt(q, e)
	for _, b in ipairs(q.big) do
		if b[1] == e then
			return b[2]
		end
		if b[1] > e then
			break
		end
	end
	return 1
end
-- lastRank: the rank (1-based, among the live units from the head) of
-- the last unit of the ticket that holds the x-th live unit; the live
-- units if x is past them.
local function lastRank(q, x)
	local lv = live(q)
	if x >= lv then
		return lv
	end
	for _, b in ipairs(q.big) do
		local hi = ahead(q, b[1])
		if hi - b[2] >= x then
			break
		end
		if hi >= x then
			return hi
		end
	end
	return x
end
-- unitAt: the unit number of the live unit of rank r (1-based from the
-- head).
local function unitAt(q, r)
	local u = q.rel + r
	for _, h in ipairs(q.holes) do
		if h[1] - h[2] >= u then
			break
		end
		u = u + h[2]
	end
	return u
end
local function take(q, n)
	q['end'] = q['end'] + n
	if n > 1 then
		table.insert(q.big, {q['end'], n})
	end
	return q['end']
end
local function cancelTicket(q, e, n)
	if e <= q.rel or e > q['end'] then
		return
	end
	if n > 1 then
		for x = #q.big, 1, -1 do
			if q.big[x][1] == e then
				table.remove(q.big, x)
			end
		end
	end
	if e == q['end'] then
		q['end'] = q['end'] - n
		while #q.holes > 0 and q.holes[#q.holes][1] == q['end'] do
			q['end'] = q['end'] - q.holes[#q.holes][2]
			table.remove(q.holes)
		end
		return
	end
	local at = #q.holes + 1
	for x, h in ipairs(q.holes) do
		if h[1] == e then
			return -- cancelled already
		end
		if h[1] > e then
			at = x
			break
		end
	end
	if #q.holes >= MAX_HOLES then
		return -- kept as queued units: lost, never over-spent
	end
	table.insert(q.holes, at, {e, n})
end

-- Priority classes (the engine's classes.go): first attempts wait in
-- three queues, 1 the default class, 2 critical, 3 background, behind
-- the retries (0), merged by start-time fair queueing: a ticket's tag is
-- (vb[c] + r0)·stride[c], r0 the live units of its class ahead of it,
-- ties by RANK (critical, default, background). STRIDE and RANK are
-- classes.go's strides and classRank.
local STRIDE = {[1] = STRIDE_DEFAULT, [2] = STRIDE_CRITICAL, [3] = STRIDE_BACKGROUND}
local RANK = {[1] = 1, [2] = 0, [3] = 2}
-- classes: how many class queues hold live units.
local function classes()
	local n = 0
	for qi = 1, 3 do
		if live(s.q[qi]) > 0 then
			n = n + 1
		end
	end
	return n
end
-- tagOf: the tag of a ticket of class qi with r0 of its class's live
-- units ahead of it.
local function tagOf(qi, r0)
	return (s.vb[qi] + r0) * STRIDE[qi]
end
-- before: the live units of class o in tickets whose keys are less than
-- a ticket of class qi with tag: those whose tags are less, or equal for
-- a class that goes first on a tie; whole tickets.
local function before(qi, tag, o)
	local q = s.q[o]
	local r0 -- the largest r0 of a ticket of o ahead
	if RANK[o] < RANK[qi] then
		r0 = math.floor(tag / STRIDE[o]) - s.vb[o]
	else
		r0 = math.ceil(tag / STRIDE[o]) - 1 - s.vb[o]
	end
	if r0 < 0 then
		return 0
	end
	local lv = live(q)
	if r0 >= lv then
		return lv
	end
	return lastRank(q, r0 + 1)
end
-- others: the units of the other classes ahead of a ticket of class qi
-- with r0 of its class's units ahead of it.
local function others(qi, r0)
	local tag = tagOf(qi, r0)
	local p = 0
	for o = 1, 3 do
		if o ~= qi and live(s.q[o]) > 0 then
			p = p + before(qi, tag, o)
		end
	end
	return p
end
-- enterClass: class qi's virtual start before a take, if it has nothing
-- queued: the least head tag of the classes waiting, so that its first
-- ticket goes no later than their heads'.
local function enterClass(qi)
	if qi == 0 or live(s.q[qi]) > 0 then
		return
	end
	local least = INF
	for o = 1, 3 do
		if o ~= qi and live(s.q[o]) > 0 then
			least = math.min(least, s.vb[o] * STRIDE[o])
		end
	end
	s.vb[qi] = 0
	if least ~= INF then
		s.vb[qi] = math.ceil(least / STRIDE[qi])
	end
end
-- tidyClasses: the virtual starts no merge needs are forgotten (0): a
-- class with nothing queued, and the only class queued.
local function tidyClasses()
	local n = 0
	for qi = 1, 3 do
		if live(s.q[qi]) == 0 then
			s.vb[qi] = 0
		else
			n = n + 1
		end
	end
	if n <= 1 then
		s.vb[1], s.vb[2], s.vb[3] = 0, 0, 0
	end
end
-- releaseClasses: at most k live units of the class queues go, in the
-- merge's order and whole tickets only, from qs (copies of s.q, which s
-- still describes); returns how many went and, by class, the units by
-- which its virtual start moves (s.vb is left as it is: the turns are
-- still read from s). Each class lets go its tickets whose positions
-- among the classes are at most k: the merge's prefix.
local function releaseClasses(qs, k)
	local gone, m = 0, {[1] = 0, [2] = 0, [3] = 0}
	if classes() <= 1 then
		for qi = 1, 3 do
			gone = gone + release(qs[qi], k - gone) -- skips the holes at its head
		end
		return gone, m
	end
	for qi = 1, 3 do
		local q = s.q[qi]
		-- The largest rank whose ticket's position is at most k: the
		-- positions grow with the rank.
		local lo, hi = 0, live(q)
		while lo < hi do
			local mid = math.floor((lo + hi + 1) / 2)
			local last = lastRank(q, mid)
			local first = last - sizeAt(q, unitAt(q, last)) + 1
			if last + others(qi, first - 1) <= k then
				lo = mid
			else
				hi = mid - 1
			end
		end
		if lo > 0 then
			m[qi] = lastRank(q, lo)
		end
	end
	for qi = 1, 3 do
		gone = gone + release(qs[qi], m[qi]) -- skips the holes at its head
	end
	return gone, m
end
-- behind: whether a ticket of queue qi, taken or given back, moves the
-- turns of another queue's tickets: a retry's, those of the classes
-- waiting; a class's, those of the other classes waiting.
local function behind(qi)
	for o = 1, 3 do
		if o ~= qi and live(s.q[o]) > 0 then
			return true
		end
	end
	return false
end

-- store: the write-back, for the general path and mwait's shortcut: x
-- (ext, nil when nothing is beyond the core; see extOf) in the field x
-- when it changed, or in the core when in its short form (inCore), the
-- core with the TTL's new end and the configuration in force, its tag
-- saying which; a field x no longer used dropped; the TTL extended when
-- the state outlives it.
local function store(ext, inCore, expire)
	local newXe = xe
	if expire >= xe then
		newXe = expire + SEC -- a second more, so that most calls keep the TTL
	end
	local t, set = CORE.BARE, {}
	if inCore then
		t = CORE.XC
	elseif ext ~= nil then
		t = CORE.X
		if ext ~= got[2] then
			set = {'x', ext}
		end
	end
	local core = struct.pack(CORE_FMT, t, s.id, s.tat, s.hold, s.q[0].rel, s.q[0]['end'], s.q[1].rel, s.q[1]['end'],
		s.pending, s.lastGo, s.sentSec, s.sentCur, s.sentPrev, s.maxCost, newXe, s.busySince, cfgI, cfgB * cfgI,
		(s.id == id and not setCfg and got[4]) or string.format('%d|', s.id) .. cfg)
	if inCore then
		core = core .. ext
	end
	table.insert(set, 'c')
	table.insert(set, core)
	redis.call('HSET', key, unpack(set))
	if t ~= CORE.X and got[2] then
		redis.call('HDEL', key, 'x')
	end
	if newXe ~= xe then
		redis.call('PEXPIRE', key, ttlMs(newXe - now))
	end
end
