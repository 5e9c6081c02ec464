-- schedule_limits.lua: several limits per key (schedule_limits.go): their state, rules, and the ops mwait, mtry and msettle up to the general path.
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

-- Several limits (schedule_limits.go's extras): M is nil for a key with
-- its one bucket. M.lim[L] is a further limit (schedule_xlimit.go):
-- {0, interval µs, τ, tat} a bucket, {1, length µs, count, window,
-- units in it, units in the one before} a fixed window, {2, …} a sliding
-- one, {3, length µs, log, last time / length, units in the log, 0} a
-- sliding log (log = {count, time, units, time, units, …}, oldest
-- first: a table in the count's slot, copied with the limit by mwalk
-- and never written in place; the last two slots as a window's, so that
-- the write-back keeps the state until the last time + 2 lengths, and
-- drops it once the log is empty), {4, length µs, count, start / length,
-- units in the window, start} a fixed window aligned to first use (start
-- NONE: none yet; kept until start + 2 lengths, as a window's); M.q[qi]
-- its queued tickets in order, {end, n, cost in each limit};
-- M.floor, no queued ticket goes before it (see mmoved); M.ver and
-- M.spec, the configuration that wrote them (see mwait). Kept in x
-- (a[27]), flat: k, floor, ver, spec, the limits' 6k numbers, then per
-- queue (0 to 3: retries, then the classes) its count and tickets of 2 +
-- k numbers (a count not there, as a state written before classes
-- leaves the last two, is 0); or, with nothing queued
-- in them and nothing else in x, in the core, x's short form (see
-- CORE_XC in schedule.lua, and extOf), which mwait's fast path reads.
-- The configuration comes with each wait (op mwait, ARGV[A.WAIT_XSPEC]).
local M = nil
local mcost = nil -- the cost in M's limits of the wait enqueue takes
if type(a[27]) == 'table' then
	local f = a[27]
	local k = f[1]
	M = {k = k, floor = f[2], ver = f[3], spec = f[4], lim = {}, q = {[0] = {}, [1] = {}, [2] = {}, [3] = {}}}
	local i = 5
	for L = 1, k do
		M.lim[L] = {f[i], f[i + 1], f[i + 2], f[i + 3], f[i + 4], f[i + 5]}
		i = i + 6
	end
	for qi = 0, 3 do
		local m = f[i] or 0
		i = i + 1
		for _ = 1, m do
			local tk = {}
			for j = 1, 2 + k do
				tk[j] = f[i + j - 1]
			end
			table.insert(M.q[qi], tk)
			i = i + 2 + k
		end
	end
end
local function mflat()
	if M == nil then
		return nil -- x as a key with one bucket writes it
	end
	local f = {M.k, M.floor, M.ver, M.spec}
	for _, l in ipairs(M.lim) do
		for j = 1, 6 do
			table.insert(f, l[j])
		end
	end
	for qi = 0, 3 do
		table.insert(f, #M.q[qi])
		for _, tk in ipairs(M.q[qi]) do
			for j = 1, 2 + M.k do
				table.insert(f, tk[j])
			end
		end
	end
	return f
end
-- extOf returns x for the write-back (store, in schedule_state.lua): nil
-- when the state is its core alone; x's short form and true when it
-- holds nothing but further limits mwait's fast path can spend (see
-- CORE_XC in schedule.lua); else MessagePack and false. Its slots: the
-- queues' holes and tickets of several units (a[1…4], each flat or 0),
-- the window (a[5…11], a[19]), the cut (a[12…18]), the pace last in
-- force and its spread (a[20…24]), the trim (a[25], a[26]), the further
-- limits (a[27], mflat; 0 for none), the window's fewest told (a[28]),
-- the learned window (a[29]), the hidden budget (a[30]), and, once a
-- class queue was used, the classes (a[31]: the critical and background
-- queues' rel and end, the virtual starts; their holes and tickets of
-- several units in a[32…35]).
local function bit(b)
	if b then
		return 1
	end
	return 0
end
local function flat(list)
	if #list == 0 then
		return 0
	end
	local out = {}
	for _, x in ipairs(list) do
		table.insert(out, x[1])
		table.insert(out, x[2])
	end
	return out
end
local function extOf()
	local q0, q1, q2, q3, w, c = s.q[0], s.q[1], s.q[2], s.q[3], s.win, s.cut
	local lines = #q0.holes + #q0.big + #q1.holes + #q1.big + #q2.holes + #q2.big + #q3.holes + #q3.big
	-- The classes' line (a[31]): 0 for a key that never queued in a
	-- class but the default's.
	local cls = 0
	if q2.rel ~= 0 or q2['end'] ~= 0 or q3.rel ~= 0 or q3['end'] ~= 0 or s.vb[1] ~= 0 or s.vb[2] ~= 0 or s.vb[3] ~= 0 then
		cls = {q2.rel, q2['end'], q3.rel, q3['end'], s.vb[1], s.vb[2], s.vb[3]}
	end
	-- plain: nothing beyond the core but the classes' line (the engine's
	-- tidy: no pace last in force, no map of earlier arrivals, no trim
	-- count are kept then; x is what a state without x reads as).
	local plain = lines == 0 and not w.valid and not c.moved and s.trim == 0 and M == nil and not s.hb.on
	if plain then
		if cls == 0 then
			return nil, false
		end
		local f = {}
		for j = 1, 30 do
			f[j] = 0
		end
		f[31] = cls
		return cmsgpack.pack(f), false
	end
	local mid = {bit(w.valid), w.left, w.reset, w.size, w.probed, w.spreadAt, w.spreadLeft,
		c.r0, c.wMax, c.floor, c.at, bit(c.open), c.last, bit(c.moved), w.probeAt,
		s.credInt, s.credTau, s.spAt, s.spK, s.spRho, s.trim, s.trimGone}
	local short = M ~= nil and lines == 0 and #M.q[0] + #M.q[1] + #M.q[2] + #M.q[3] == 0 and not s.hb.on and cls == 0
	for i, v in ipairs(mid) do
		if i == 16 then -- the pace last in force
			short = short and v == cfgI
		elseif i == 17 then
			short = short and v == cfgB * cfgI
		else
			short = short and v == 0
		end
	end
	if short then
		local f = {M.k, M.floor}
		for _, l in ipairs(M.lim) do
			if l[1] == KIND.LOG then
				short = false -- a sliding log: a table in its slots
			end
			for j = 1, 6 do
				f[#f + 1] = l[j]
			end
		end
		if short then
			f[#f + 1] = string.format('%d|', M.ver or 0) .. M.spec
			return struct.pack(xcFmt(M.k), unpack(f)), true
		end
	end
	local f = {flat(q0.holes), flat(q0.big), flat(q1.holes), flat(q1.big)}
	for _, v in ipairs(mid) do
		f[#f + 1] = v
	end
	f[27] = mflat() or 0
	f[28] = w.told
	f[29], f[30] = 0, 0
	if w.rolls then
		f[29] = {1, bit(w.started), w.length, w.lo, w.hi, w.past, w.sent0, w.first, bit(w.tight), w.miss}
	end
	if s.hb.on then
		local b = s.hb
		f[30] = {1, b.at, b.n, b.first, b['end'], b.c[1].q, b.c[1].w, b.c[1].lo, b.c[2].q, b.c[2].w, b.c[2].lo, b.ended}
	end
	if cls ~= 0 then
		f[31], f[32], f[33], f[34], f[35] = cls, flat(q2.holes), flat(q2.big), flat(q3.holes), flat(q3.big)
	end
	return cmsgpack.pack(f), false
end
-- mexpire returns expire, or later while M's limits count: a bucket
-- until its tat, a window's counts until two lengths past its own. The
-- limits are kept while the state is, full again or not (a full limit
-- spends as a new one does), so that the next wait finds them, in the
-- core when they are all x holds (CORE_XC: mwait's fast path), rather
-- than made again from their configuration.
local function mexpire(expire)
	if M ~= nil then
		for _, l in ipairs(M.lim) do
			if l[1] == KIND.BUCKET then
				expire = math.max(expire, l[4])
			else
				expire = math.max(expire, (l[4] + 2) * l[2])
			end
		end
	end
	return expire
end
-- mmoved: queued turns may move earlier at now (an enqueue, a cancel, a
-- window, a faster pace, a settle): no queued ticket goes before now
-- (schedule_limits.go's extras.moved).
local function mmoved()
	if M ~= nil then
		M.floor = math.max(M.floor, now)
	end
end
-- cancelTicket, on every limit: the ticket leaves M's queue (its units
-- come back on every limit), or, kept as queued units (too many holes),
-- stays of its first-limit units only.
local cancelLine = cancelTicket
cancelTicket = function(q, e, n)
	if M == nil then
		return cancelLine(q, e, n)
	end
	local lv = live(q)
	cancelLine(q, e, n)
	local qi = 1
	for j = 0, 3 do
		if q == s.q[j] then
			qi = j
		end
	end
	for i, tk in ipairs(M.q[qi]) do
		if tk[1] == e then
			mmoved()
			if live(q) == lv then
				for j = 3, 2 + M.k do
					tk[j] = 0
				end
			else
				table.remove(M.q[qi], i)
			end
			return
		end
	end
end

-- A limit's rule (schedule_xlimit.go): xcounts, the units gone in
-- window i and the one before; xearliest, the earliest time from t at
-- which it lets c > 0 units go; xtake, c units gone at t.
local function xcounts(l, i)
	if i == l[4] then
		return l[6], l[5]
	elseif i == l[4] + 1 then
		return l[5], 0
	end
	return 0, 0
end
-- A sliding log's rule (schedule_xlimit.go's logEarliest, logTake):
-- the earliest t at which the units gone in (t − w, t] and c are at most
-- q is the time the newest entry that must leave leaves (its time + w),
-- no earlier than the newest entry (FIFO); a take drops the entries out
-- of the window and adds c at t, in a new table.
local function xlogEarliest(l, t, c)
	local g, wl = l[3], l[2]
	local n = #g
	if n == 1 then
		return t
	end
	t = math.max(t, g[n - 1])
	local sum = 0
	for i = n - 1, 2, -2 do
		if g[i] + wl <= t then -- out of (t − w, t], and every older one
			break
		end
		sum = sum + g[i + 1]
		if sum + c > g[1] then
			return g[i] + wl
		end
	end
	return t
end
local function xlogSet(l, g)
	local sum = 0
	for i = 3, #g, 2 do
		sum = sum + g[i]
	end
	l[3], l[5] = g, sum
	if #g > 1 then
		l[4] = g[#g - 1] / l[2]
	end
end
local function xlogTake(l, t, c)
	local g, wl = l[3], l[2]
	local n = #g
	if n > 1 then
		t = math.max(t, g[n - 1])
	end
	local ng = {g[1]}
	local i = 2
	while i < n and g[i] + wl <= t do
		i = i + 2
	end
	for j = i, n do
		ng[#ng + 1] = g[j]
	end
	local m = #ng
	if m > 1 and ng[m - 1] == t then
		ng[m] = ng[m] + c
	else
		ng[m + 1], ng[m + 2] = t, c
	end
	xlogSet(l, ng)
end
-- A window aligned to first use (schedule_xlimit.go's xFirst): c units
-- go at t while t is in the window from start and its units and c are
-- at most q, else at its end; taken past its end, they start the next.
local function xearliest(l, t, c)
	if l[1] == KIND.LOG then
		return xlogEarliest(l, t, c)
	end
	if l[1] == KIND.FIRST then
		t = math.max(t, l[6])
		if t < l[6] + l[2] and l[5] + c > l[3] then
			return l[6] + l[2]
		end
		return t
	end
	if l[1] == KIND.BUCKET then
		if l[2] > 0 then
			t = math.max(t, l[4] + c * l[2] - l[3])
		end
		return t
	end
	local wl, q = l[2], l[3]
	local i = math.floor(t / wl)
	if i < l[4] then
		i, t = l[4], math.max(t, l[4] * wl)
	end
	local prev, cur = xcounts(l, i)
	if cur + c > q then
		i, t = i + 1, (i + 1) * wl
		prev, cur = cur, 0
	end
	if l[1] == KIND.SLIDING and prev > 0 then
		local f = t / wl - i
		if prev * (1 - f) + cur + c > q + 1e-9 then
			t = math.max(t, i * wl + (1 - (q - cur - c) / prev) * wl)
		end
	end
	return t
end
local function xtake(l, t, c)
	if l[1] == KIND.BUCKET then
		if l[2] > 0 then
			l[4] = math.max(l[4], t) + c * l[2]
		end
		return
	end
	if l[1] == KIND.LOG then
		xlogTake(l, t, c)
		return
	end
	if l[1] == KIND.FIRST then
		t = math.max(t, l[6])
		if t >= l[6] + l[2] then -- the first use since the window ended
			l[4], l[5], l[6] = t / l[2], 0, t
		end
		l[5] = l[5] + c
		return
	end
	local i = math.floor(t / l[2])
	if i > l[4] then
		local prev, cur = xcounts(l, i)
		l[4], l[5], l[6] = i, cur, prev
	end
	l[5] = l[5] + c
end
-- xsettle: the limit amended at now by d units, actual − spent of a
-- settled cost (schedule_xsettle.go's xlimit.settle): a bucket's tat by
-- d·I from GCRA's floor, then the floor again; a window's count of now's
-- window up by a charge, down by a give-back only if units went in it,
-- never below zero; a log's charge d units at now, its give-back up to −d
-- units off the newest entries inside (now − w, now].
local function xsettle(l, d)
	if l[1] == KIND.BUCKET then
		if l[2] > 0 then
			l[4] = math.max(math.max(l[4], now) + d * l[2], now)
		end
		return
	end
	if l[1] == KIND.LOG then
		if d > 0 then
			xlogTake(l, now, d)
			return
		end
		local g = {}
		for i, v in ipairs(l[3]) do
			g[i] = v
		end
		local j = #g - 1
		while j >= 2 and d < 0 and g[j] + l[2] > now do
			local back = math.min(g[j + 1], -d)
			g[j + 1], d = g[j + 1] - back, d + back
			j = j - 2
		end
		local ng = {g[1]}
		for i = 2, #g, 2 do
			if g[i + 1] > 0 then
				ng[#ng + 1], ng[#ng + 2] = g[i], g[i + 1]
			end
		end
		xlogSet(l, ng)
		return
	end
	if l[1] == KIND.FIRST then
		if d > 0 then
			xtake(l, now, d) -- a use: past the window's end, it starts one
		elseif now < l[6] + l[2] then
			l[5] = math.max(l[5] + d, 0)
		end
		return
	end
	if d > 0 then
		xtake(l, now, d)
	elseif math.floor(now / l[2]) == l[4] then
		l[5] = math.max(l[5] + d, 0)
	end
end
-- xmost: the units the limit holds at once: a bucket's burst, a
-- window's count.
local function xmost(l)
	if l[1] == KIND.BUCKET then
		return math.floor(l[3] / l[2] + 0.5) -- τ / interval: the burst
	elseif l[1] == KIND.LOG then
		return l[3][1]
	end
	return l[3]
end
-- mwait: a wait on a key with further limits. ARGV[A.WAIT_XSPEC] their
-- configuration, "version|spec": spec is a limit each, comma-separated,
-- "b:interval µs/burst" a bucket, "f:length µs/count" a fixed window,
-- "s:…" a sliding one, "l:…" a sliding log, "u:…" a fixed window
-- aligned to first use; ARGV[A.WAIT_XCOST…] the wait's cost in each. A state
-- written with another spec is refused (THROTTLE_LIMITS and the state's
-- "version|spec"), unless the version is higher: then it replaces it,
-- each limit keeping its state if of the same kind (a change in their
-- number starts them afresh).
if op == 'mwait' or op == 'mtry' or op == 'msettle' or op == 'mstate' then
	local ver, spec = string.match(ARGV[A.WAIT_XSPEC], '^(%d+)|(.*)$')
	ver = tonumber(ver)
	if M ~= nil and M.spec ~= spec and (M.ver or 0) >= ver then
		return redis.error_reply('THROTTLE_LIMITS ' .. (M.ver or 0) .. '|' .. tostring(M.spec))
	end
	local lim = {}
	for letter, p1, p2 in string.gmatch(spec, '(' .. KIND_CLASS .. '):([^/,]+)/([^/,]+)') do
		p1, p2 = tonumber(p1), tonumber(p2)
		local kind = KIND_OF[letter]
		if kind == KIND.BUCKET then
			table.insert(lim, {kind, p1, p1 * p2, NONE, 0, 0})
		elseif kind == KIND.LOG then
			table.insert(lim, {kind, p1, {p2}, NONE, 0, 0})
		elseif kind == KIND.FIRST then
			table.insert(lim, {kind, p1, p2, NONE, 0, NONE})
		else -- a fixed or sliding window
			table.insert(lim, {kind, p1, p2, NONE, 0, 0})
		end
	end
	if M ~= nil and M.k == #lim then
		for L, l in ipairs(lim) do
			local o = M.lim[L]
			if o[1] == l[1] then -- the same kind: its state carries over
				l[4], l[5], l[6] = o[4], o[5], o[6]
				if l[1] == KIND.LOG then -- a log's times, under the new count
					local g = {l[3][1]}
					for i = 2, #o[3] do
						g[i] = o[3][i]
					end
					l[3] = g
				end
			end
		end
		M.lim, M.ver, M.spec = lim, ver, spec
	else
		M = {k = #lim, floor = NONE, ver = ver, spec = spec, lim = lim, q = {[0] = {}, [1] = {}, [2] = {}, [3] = {}}}
		-- Tickets queued before (by plain waits): of no cost in these.
		for qi = 0, 3 do
			local q = s.q[qi]
			if live(q) > 0 then
				return redis.error_reply('THROTTLE_MULTI a key queued without its further limits')
			end
		end
	end
	mcost = {}
	for L = 1, M.k do
		mcost[L] = tonumber(ARGV[A.WAIT_XCOST - 1 + L]) or 0
	end
end

-- mwait's shortcut: a wait of the first queue on a key with nothing
-- queued, no server window, cut or trim, whose every limit lets its
-- cost go now, goes at once, as the general path below lets it go
-- (enqueue, its turn now, advance), without defining the general path's
-- functions; state written as its write-back writes it.
if op == 'mwait' and ARGV[A.WAIT_QUEUE] == QUEUE_ARG.FIRST and (ARGV[A.WAIT_KNOWN_ID] == '' or tonumber(ARGV[A.WAIT_KNOWN_ID]) == s.id) then
	local n, q0, q1, q2, q3 = tonumber(ARGV[A.WAIT_N]), s.q[0], s.q[1], s.q[2], s.q[3]
	local I, tau = cfgI, cfgB * cfgI
	local ok = q0.rel == q0['end'] and q1.rel == q1['end'] and q2.rel == q2['end'] and q3.rel == q3['end']
		and #q0.holes + #q0.big + #q1.holes + #q1.big + #q2.holes + #q2.big + #q3.holes + #q3.big == 0
		and not s.win.valid and s.cut.r0 == 0 and not s.cut.moved and s.trim == 0 and now >= s.hold
		and (s.credInt == 0 or (s.credInt == I and s.credTau == tau))
	local tat = math.max(s.tat, now)
	if ok and I > 0 then
		ok = tat + (n * I - tau) <= now + 1e-9 * SEC
	end
	if ok then
		for L, l in ipairs(M.lim) do
			if mcost[L] > 0 and xearliest(l, now, mcost[L]) > now + 1e-9 * SEC then
				ok = false
			end
		end
	end
	if ok then
		if now - s.lastGo > PENDING_IDLE * SEC then
			s.pending = 0
		end
		s.credInt, s.credTau = I, tau
		s.maxCost = math.max(s.maxCost, n)
		q1['end'] = q1['end'] + n
		q1.rel = q1['end']
		if I > 0 then
			tat = tat + n * I
		end
		s.tat = tat
		M.floor = math.max(M.floor, now)
		for L, l in ipairs(M.lim) do
			if mcost[L] > 0 then
				xtake(l, now, mcost[L])
			end
		end
		s.pending = s.pending + n
		if now - s.lastGo > SEC then
			s.busySince = now
		end
		s.lastGo = now
		local cur = math.floor(now / SEC)
		if cur == s.sentSec + 1 then
			s.sentSec, s.sentPrev, s.sentCur = cur, s.sentCur, 0
		elseif cur ~= s.sentSec then
			s.sentSec, s.sentPrev, s.sentCur = cur, 0, 0
		end
		s.sentCur = s.sentCur + n
		-- The write-back's, for this state.
		local expire = mexpire(math.max(s.tat, s.hold, now, s.lastGo + 2 * SEC))
		local ext, inCore = extOf()
		store(ext, inCore, expire)
		return {[R.WAIT_STATUS] = STATUS.OK, [R.WAIT_WAIT] = 0, [R.WAIT_ID] = s.id, [R.WAIT_END] = q1['end'], [R.WAIT_RECHECK] = REPLY.NONE, [R.WAIT_NOW] = now}
	end
end
