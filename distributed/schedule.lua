-- schedule.lua: one key's schedule in Redis, the rules of throttle's
-- schedule.go in Lua, rule for rule and name for name, so that both
-- implementations are one model (the property suite drives both). The
-- constants (PROBE_WAIT, CUT_BETA, …, in seconds) are prepended by the Go
-- source from throttle.ScheduleConstants; SEC is 1e6: times are µs of
-- Redis's clock (TIME), never a worker's.
--
-- KEYS[1]  the key's hash
-- ARGV[1]  op: wait, turns, cancel, pause, adapt, settle, try, lease, state
--          (and mwait, mtry, msettle: several limits, below)
-- ARGV[2]  interval: configured µs per unit (0: no limit)
-- ARGV[3]  burst
-- ARGV[4]  the quota's channel: a change that moves queued turns is
--          published there as "id key", so that sleeping waits of every
--          process ask for their turns again (op turns)
-- ARGV[5…] the op's own, below.
--
-- The state is one hash of two MessagePack arrays (cmsgpack is in every
-- Redis since 2.6, and in Valkey; numbers stay numbers, which is far
-- cheaper in Redis's Lua than a field per number): c, the core, read by
-- every call (see below), and x, the rest (holes, tickets of several
-- units, the window, the cut), present only while one of them is. The
-- state's id is its creation time: a new one whenever Redis lost the
-- state, so that a ticket of a lost state is never read against a new
-- one.
--
-- A wait of one unit on a key with nothing but its bucket (no x, no
-- retry queued, nothing to carry over) takes the fast path below: the
-- same rules with the window, the cut, the holes and the retry queue
-- absent, so that the common wait costs a few µs of Redis's time; a
-- lease on such a key has one too. Every other call runs the whole model.
-- The property suite drives both (leases: lease_test.go).
local key = KEYS[1]
local op = ARGV[1]
local cfgI = tonumber(ARGV[2])
local cfgB = tonumber(ARGV[3])
local channel = ARGV[4]
-- The configuration: "interval/burst", with ":version" after the burst
-- when the Quota has a Version (ARGV[3] is then "burst:version"). The
-- state keeps the configuration that wrote it (field v); a call with
-- another one is refused (THROTTLE_CONFIG and the state's), unless its
-- version is higher: then it replaces it (see Quota.Version).
local cfg = ARGV[2] .. '/' .. ARGV[3]
local cfgV = 0
if not cfgB then
	local b, v = string.match(ARGV[3], '^([^:]+):(%d+)$')
	cfgB, cfgV = tonumber(b), tonumber(v)
end
local SEC = 1000000
local INF = math.huge


local clock = redis.call('TIME')
local now = tonumber(clock[1]) * SEC + tonumber(clock[2])

local NONE = -1e300 -- a time that is not set
-- The core is written as its 15 numbers, doubles packed little-endian
-- behind a tag byte (struct, in every Redis since 2.6, and in Valkey):
-- a third of what cmsgpack costs to read and write a call. A core
-- without the tag is one an earlier version wrote in MessagePack, read
-- as such.
local CORE_TAG = 1
local CORE_FMT = '<Bddddddddddddddd'
local function packCore(...)
	return struct.pack(CORE_FMT, CORE_TAG, ...)
end
local function unpackCore(p)
	local _, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o = struct.unpack(CORE_FMT, p)
	return {a, b, c, d, e, f, g, h, i, j, k, l, m, n, o}
end
-- The fast paths reply with their numbers as doubles packed
-- little-endian, a bulk string (packReply, or struct.pack with the
-- format written out where the count is fixed): Redis converts a table
-- of numbers to an array reply at several times the cost. The Go side
-- reads either form (scriptInts in waiter.go).
local function packReply(...)
	local n = select('#', ...)
	return struct.pack('<' .. string.rep('d', n), ...)
end
-- The core: id, tat, hold, r0, e0, r1, e1, pending, lastGo, sentSec,
-- sentCur, sentPrev, maxCost, xe (when the TTL last set runs out),
-- busySince.
local got = redis.call('HMGET', key, 'c', 'x', 'v')
local fresh = not got[1]
-- setCfg: the state's configuration is written with it (a new state, one
-- from before configurations were kept, or one a newer version replaces).
local setCfg = got[3] ~= cfg
if got[1] and got[3] and setCfg then
	local stored = tonumber(string.match(got[3], ':(%d+)$')) or 0
	if cfgV <= stored then
		return redis.error_reply('THROTTLE_CONFIG ' .. got[3])
	end
end
local n0
if fresh then
	n0 = {now, NONE, 0, 0, 0, 0, 0, 0, NONE, 0, 0, 0, 0, 0, 0}
elseif string.byte(got[1], 1) == CORE_TAG then
	n0 = unpackCore(got[1])
else
	n0 = cmsgpack.unpack(got[1]) -- a core an earlier version wrote
end
local id = n0[1]

-- fastGo is advance on a key with nothing but its bucket (no window,
-- cut, holes or retries), for the fast paths of a wait and of a lease:
-- the core's fields in, the ones it moves out.
local function fastGo(tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	local k = fin - rel
	if k > 0 and now >= hold then
		local from = math.max(tat, hold)
		if I > 0 then
			k = math.min(k, math.floor((now - from + tau) / I + 1e-9))
		end
		if k > 0 then
			rel = rel + k
			if I > 0 then
				tat = from + k * I
			end
			if now - lg > SEC then
				bs = now
			end
			pd, lg = pd + k, now
			local cur = math.floor(now / SEC)
			if cur == ss + 1 then
				ss, sp, sc = cur, sc, 0
			elseif cur ~= ss then
				ss, sp, sc = cur, 0, 0
			end
			sc = sc + k
		end
	end
	-- The bucket fills to its burst and no further (every ticket is of
	-- one unit here, and τ ≥ I: see advance).
	return math.max(tat, now), rel, pd, lg, ss, sc, sp, bs
end

-- The fast path: see above. A try of one unit is a wait whose max wait
-- is 0 (ARGV[7] is "0"): gone at once, or refused with nothing written.
if not got[2] and (op == 'wait' or op == 'try') and ARGV[5] == '1' and ARGV[6] == '1' and n0[4] == n0[5]
	and (fresh or not got[3] or not setCfg)
	and (ARGV[8] == '' or tonumber(ARGV[8]) == id) then
	local _, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs = unpack(n0)
	local I, tau = cfgI, cfgB * cfgI
	local maxwait = tonumber(ARGV[7])
	if now - lg > PENDING_IDLE * SEC then
		pd = 0
	end
	tat, rel, pd, lg, ss, sc, sp, bs = fastGo(tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	if fin == rel then
		tat = math.max(tat, now)
	end
	mc = math.max(mc, 1)
	fin = fin + 1
	local t = hold
	if I > 0 then
		-- (fin − rel)·I − τ first: see goNow in schedule_turns.go.
		t = math.max(hold, math.max(tat, hold) + ((fin - rel) * I - tau))
	end
	local wt = 0
	if t > now then
		wt = math.ceil(t - now)
	end
	if maxwait ~= nil and wt >= maxwait and wt > 0 then
		-- Nothing kept: the ticket is not given, the state not written.
		return struct.pack('<dddddd', 0, wt, id, 0, -1, now)
	end
	if t <= now then
		tat, rel, pd, lg, ss, sc, sp, bs = fastGo(tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	end
	local expire = math.max(tat + (fin - rel) * I, hold, now)
	if lg > NONE then
		expire = math.max(expire, lg + 2 * SEC)
	end
	if fin > rel then
		expire = math.max(expire, now + 60 * SEC)
	end
	local newXe = xe
	if expire > xe then
		newXe = expire + SEC -- a second more, so that most calls keep the TTL
	end
	local packed = packCore(id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, newXe, bs)
	if setCfg then
		redis.call('HSET', key, 'c', packed, 'v', cfg)
	else
		redis.call('HSET', key, 'c', packed)
	end
	if newXe ~= xe then
		redis.call('PEXPIRE', key, math.max(1, math.ceil((newXe - now) / 1000)))
	end
	return struct.pack('<dddddd', 1, wt, id, fin, -1, now)
end

-- The fast path of a lease (op lease, below; see lease.go): on a key with
-- nothing but its bucket, as for a wait (and no tickets given back), k
-- tickets of one unit are the fast path's wait k times in a row: the
-- same turns in closed form, one write.
if not got[2] and op == 'lease' and ARGV[13] == '' and n0[4] == n0[5]
	and (fresh or not got[3] or not setCfg)
	and (ARGV[10] == '' or tonumber(ARGV[10]) == id) then
	local _, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs = unpack(n0)
	local I, tau = cfgI, cfgB * cfgI
	local k, need, maxwait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
	local lrate, late = tonumber(ARGV[8]), tonumber(ARGV[9])
	if now - lg > PENDING_IDLE * SEC then
		pd = 0
	end
	tat, rel, pd, lg, ss, sc, sp, bs = fastGo(tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	if fin == rel then
		tat = math.max(tat, now)
	end
	mc = math.max(mc, 1)
	local waits, due = {}, false
	local from = math.max(tat, hold)
	for j = 1, k do
		local t = hold
		if I > 0 then
			t = math.max(hold, from + ((fin - rel + 1) * I - tau)) -- see goNow in schedule_turns.go
		end
		local wt = 0
		if t > now then
			wt = math.ceil(t - now)
		end
		local keep
		if j <= need then
			keep = maxwait == nil or wt < maxwait or wt == 0
		else
			keep = lrate > 0 and (j - need) * SEC / lrate <= wt + late
		end
		if not keep then
			if j == 1 then
				return struct.pack('<dddddd', 0, id, 0, -1, now, wt) -- nothing kept, nothing written
			end
			break
		end
		fin = fin + 1
		table.insert(waits, wt)
		if wt == 0 then
			due = true
		end
	end
	if #waits == 0 then
		return struct.pack('<dddddd', 0, id, 0, -1, now, 0)
	end
	if due then
		tat, rel, pd, lg, ss, sc, sp, bs = fastGo(tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	end
	local expire = math.max(tat + (fin - rel) * I, hold, now)
	if lg > NONE then
		expire = math.max(expire, lg + 2 * SEC)
	end
	if fin > rel then
		expire = math.max(expire, now + 60 * SEC)
	end
	local newXe = xe
	if expire > xe then
		newXe = expire + SEC
	end
	local packed = packCore(id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, newXe, bs)
	if setCfg then
		redis.call('HSET', key, 'c', packed, 'v', cfg)
	else
		redis.call('HSET', key, 'c', packed)
	end
	if newXe ~= xe then
		redis.call('PEXPIRE', key, math.max(1, math.ceil((newXe - now) / 1000)))
	end
	return packReply(#waits, id, fin, -1, now, unpack(waits))
end

local a = {}
if got[2] then
	a = cmsgpack.unpack(got[2])
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
		probed = a[9] or 0, spreadAt = a[10] or 0, spreadLeft = a[11] or 0, probeAt = a[19] or a[7] or 0},
	cut = {r0 = a[12] or 0, wMax = a[13] or 0, floor = a[14] or 0, at = a[15] or 0,
		open = a[16] == 1, last = a[17] or 0, moved = a[18] == 1},
	pending = n0[8], lastGo = n0[9],
	sentSec = n0[10], sentCur = n0[11], sentPrev = n0[12],
	maxCost = n0[13], busySince = n0[15],
	credInt = a[20] or 0, credTau = a[21] or 0,
	spAt = a[22] or 0, spK = a[23] or 0, spRho = a[24] or 0,
	trim = a[25] or 0, trimGone = a[26] or 0,
}
local xe = n0[14] -- when the TTL last set runs out
local moved = false -- turns may have moved: publish

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

-- Several limits (schedule_limits.go's extras): M is nil for a key with
-- its one bucket. M.lim[L] is a further limit (schedule_xlimit.go):
-- {0, interval µs, τ, tat} a bucket, {1, length µs, count, window,
-- units in it, units in the one before} a fixed window, {2, …} a sliding
-- one; M.q[qi] its queued tickets in order, {end, n, cost in each limit};
-- M.floor, no queued ticket goes before it (see mmoved); M.ver and
-- M.spec, the configuration that wrote them (see mwait). Kept in x
-- (a[27]), flat: k, floor, ver, spec, the limits' 6k numbers, then per
-- queue its count and tickets of 2 + k numbers. The configuration
-- comes with each wait (op mwait, ARGV[11]); a key of this state never
-- takes the fast paths (x is present, and its waits are mwait).
local M = nil
local mcost = nil -- the cost in M's limits of the wait enqueue takes
if type(a[27]) == 'table' then
	local f = a[27]
	local k = f[1]
	M = {k = k, floor = f[2], ver = f[3], spec = f[4], lim = {}, q = {[0] = {}, [1] = {}}}
	local i = 5
	for L = 1, k do
		M.lim[L] = {f[i], f[i + 1], f[i + 2], f[i + 3], f[i + 4], f[i + 5]}
		i = i + 6
	end
	for qi = 0, 1 do
		local m = f[i]
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
	for qi = 0, 1 do
		table.insert(f, #M.q[qi])
		for _, tk in ipairs(M.q[qi]) do
			for j = 1, 2 + M.k do
				table.insert(f, tk[j])
			end
		end
	end
	return f
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
	local before = live(q)
	cancelLine(q, e, n)
	local qi = 1
	if q == s.q[0] then
		qi = 0
	end
	for i, tk in ipairs(M.q[qi]) do
		if tk[1] == e then
			mmoved()
			if live(q) == before then
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
local function xearliest(l, t, c)
	if l[1] == 0 then
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
	if l[1] == 2 and prev > 0 then
		local f = t / wl - i
		if prev * (1 - f) + cur + c > q + 1e-9 then
			t = math.max(t, i * wl + (1 - (q - cur - c) / prev) * wl)
		end
	end
	return t
end
local function xtake(l, t, c)
	if l[1] == 0 then
		if l[2] > 0 then
			l[4] = math.max(l[4], t) + c * l[2]
		end
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
-- never below zero.
local function xsettle(l, d)
	if l[1] == 0 then
		if l[2] > 0 then
			l[4] = math.max(math.max(l[4], now) + d * l[2], now)
		end
		return
	end
	if d > 0 then
		xtake(l, now, d)
	elseif math.floor(now / l[2]) == l[4] then
		l[5] = math.max(l[5] + d, 0)
	end
end
-- mwait: a wait on a key with further limits. ARGV[11] their
-- configuration, "version|spec": spec is a limit each, comma-separated,
-- "b:interval µs/burst" a bucket, "f:length µs/count" a fixed window,
-- "s:…" a sliding one; ARGV[12…] the wait's cost in each. A state
-- written with another spec is refused (THROTTLE_LIMITS and the state's
-- "version|spec"), unless the version is higher: then it replaces it,
-- each limit keeping its state if of the same kind (a change in their
-- number starts them afresh).
if op == 'mwait' or op == 'mtry' or op == 'msettle' then
	local ver, spec = string.match(ARGV[11], '^(%d+)|(.*)$')
	ver = tonumber(ver)
	if M ~= nil and M.spec ~= spec and (M.ver or 0) >= ver then
		return redis.error_reply('THROTTLE_LIMITS ' .. (M.ver or 0) .. '|' .. tostring(M.spec))
	end
	local lim = {}
	for kind, p1, p2 in string.gmatch(spec, '([bfs]):([^/,]+)/([^/,]+)') do
		p1, p2 = tonumber(p1), tonumber(p2)
		if kind == 'b' then
			table.insert(lim, {0, p1, p1 * p2, NONE, 0, 0})
		elseif kind == 'f' then
			table.insert(lim, {1, p1, p2, NONE, 0, 0})
		else
			table.insert(lim, {2, p1, p2, NONE, 0, 0})
		end
	end
	if M ~= nil and M.k == #lim then
		for L, l in ipairs(lim) do
			local o = M.lim[L]
			if o[1] == l[1] then -- the same kind: its state carries over
				l[4], l[5], l[6] = o[4], o[5], o[6]
			end
		end
		M.lim, M.ver, M.spec = lim, ver, spec
	else
		M = {k = #lim, floor = NONE, ver = ver, spec = spec, lim = lim, q = {[0] = {}, [1] = {}}}
		-- Tickets queued before (by plain waits): of no cost in these.
		for qi = 0, 1 do
			local q = s.q[qi]
			if live(q) > 0 then
				return redis.error_reply('THROTTLE_MULTI a key queued without its further limits')
			end
		end
	end
	mcost = {}
	for L = 1, M.k do
		mcost[L] = tonumber(ARGV[11 + L]) or 0
	end
end

-- mwait's shortcut: a wait of the first queue on a key with nothing
-- queued, no server window, cut or trim, whose every limit lets its
-- cost go now, goes at once, as the general path below lets it go
-- (enqueue, its turn now, advance), without defining the general path's
-- functions; state written as its write-back writes it.
if op == 'mwait' and ARGV[6] == '1' and (ARGV[8] == '' or tonumber(ARGV[8]) == s.id) then
	local n, q0, q1 = tonumber(ARGV[5]), s.q[0], s.q[1]
	local I, tau = cfgI, cfgB * cfgI
	local ok = q0.rel == q0['end'] and q1.rel == q1['end'] and #q0.holes + #q0.big + #q1.holes + #q1.big == 0
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
		local expire = math.max(s.tat, s.hold, now, s.lastGo + 2 * SEC)
		local busy = false
		for _, l in ipairs(M.lim) do
			if l[1] == 0 then
				expire = math.max(expire, l[4])
				busy = busy or l[4] > now
			else
				local ends = (l[4] + 2) * l[2]
				expire = math.max(expire, ends)
				busy = busy or (ends > now and l[5] + l[6] > 0)
			end
		end
		if not busy then
			M = nil
		end
		local w, c = s.win, s.cut
		local set = {}
		if M ~= nil then
			local ext = cmsgpack.pack({0, 0, 0, 0,
				0, w.left, w.reset, w.size, w.probed, w.spreadAt, w.spreadLeft,
				c.r0, c.wMax, c.floor, c.at, c.open and 1 or 0, c.last, 0, w.probeAt,
				s.credInt, s.credTau, s.spAt, s.spK, s.spRho, s.trim, s.trimGone, mflat()})
			if ext ~= got[2] then
				set = {'x', ext}
			end
		end
		local newXe = xe
		if expire > xe then
			newXe = expire + SEC
		end
		table.insert(set, 'c')
		table.insert(set, packCore(s.id, s.tat, s.hold, q0.rel, q0['end'], q1.rel, q1['end'],
			s.pending, s.lastGo, s.sentSec, s.sentCur, s.sentPrev, s.maxCost, newXe, s.busySince))
		if setCfg then
			table.insert(set, 'v')
			table.insert(set, cfg)
		end
		redis.call('HSET', key, unpack(set))
		if M == nil and got[2] then
			redis.call('HDEL', key, 'x')
		end
		if newXe ~= xe then
			redis.call('PEXPIRE', key, math.max(1, math.ceil((newXe - now) / 1000)))
		end
		return {1, 0, s.id, q1['end'], -1, now}
	end
end


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
local function spend(k)
	if not w.valid then
		return
	end
	if k <= w.left then
		w.left = w.left - k
	else
		w.probed = w.probed + k - w.left
		w.left = 0
	end
	if not spreading() and low() and now < w.reset and w.left > 0 then
		w.spreadAt, w.spreadLeft = now, w.left
	end
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
		w.left = math.min(w.left, math.floor(told))
		if w.probeAt == w.reset then
			w.probeAt = math.min(w.reset, at)
		end
		w.reset = math.min(w.reset, at)
	elseif not w.valid or w.probed > 0 or at > w.reset then
		w.valid, w.left, w.reset, w.probed, w.spreadAt, w.spreadLeft, w.probeAt = true, left, at, 0, 0, 0, at
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
	local r = c.wMax * (1 + CUT_PROBE) ^ (d - CUT_RECOVER)
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
	return live(s.q[0]) + live(s.q[1])
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
end
local function sent()
	count(0)
	local frac = now / SEC - s.sentSec
	return s.sentCur + s.sentPrev * (1 - frac)
end
-- ticketAt: the positions past the head of the first and the last unit
-- of the ticket that holds the p-th unit.
local function ticketAt(p)
	local base = 0
	for qi = 0, 1 do
		local q = s.q[qi]
		for _, b in ipairs(q.big) do
			local hi = ahead(q, b[1]) + base
			local lo = hi - b[2] + 1
			if lo <= p and p <= hi then
				return lo, hi
			end
		end
		base = base + live(q)
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
-- tatAfter: the bucket's tat once p more units past the head have gone,
-- each no earlier than the limits other than the bucket let it go.
local function tatAfter(p)
	local interval, tau = pace(now)
	local a = math.max(s.tat, s.hold)
	local t = paced(a - tau, p) + tau
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
-- turnAt: the turn of the p-th unit past the head.
local function turnAt(p)
	local interval, tau = pace(now)
	local t = math.max(s.hold, windowTurn(p, probe()))
	if interval > 0 then
		t = math.max(t, tatAfter(p) - tau)
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
-- mwalk: the turns of M's tickets in queue order (schedule_limits.go's
-- walk): the latest among the limits, FIFO, each limit's tat moved as
-- GCRA moves it when the ticket goes at its turn, no earlier than
-- M.floor. f(qi, i, t) returns false to stop; returns the
-- first limit's chain and the tats after the tickets f accepted.
local function mwalk(f)
	local iv, tau = pace(now)
	local lims = {}
	for L, l in ipairs(M.lim) do
		lims[L] = {l[1], l[2], l[3], l[4], l[5], l[6]}
	end
	local chain, prev, p = -INF, M.floor, 0
	for qi = 0, 1 do
		for i, tk in ipairs(M.q[qi]) do
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
	local at, units, cnt = now + 1e-9 * SEC, 0, {[0] = 0, [1] = 0}
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
	for qi = 0, 1 do
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
		w.valid, w.left, w.reset, w.size, w.probed, w.spreadAt, w.spreadLeft, w.probeAt = false, 0, 0, 0, 0, 0, 0, 0
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
		local q0 = {rel = s.q[0].rel, ['end'] = s.q[0]['end'], holes = s.q[0].holes, big = s.q[0].big}
		local q1 = {rel = s.q[1].rel, ['end'] = s.q[1]['end'], holes = s.q[1].holes, big = s.q[1].big}
		local gone = release(q0, k)
		if live(q0) == 0 then
			gone = gone + release(q1, k - gone)
		end
		if gone > 0 then
			local tat = s.tat
			if interval > 0 then
				tat = tatAfter(gone)
			end
			s.q[0], s.q[1] = q0, q1
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
			spend(gone)
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
local function position(qi, e)
	local p = ahead(s.q[qi], e)
	if p > 0 and qi == 1 then
		p = p + live(s.q[0])
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
local function recheck()
	local t = nextStep(now)
	if t == INF then
		return -1
	end
	return math.ceil(t - now)
end
local function waitOf(t)
	if t <= now then
		return 0
	end
	return math.ceil(t - now)
end
-- view: the key's state at now as callers see it (schedule_ops.go's view),
-- after advance; it changes nothing. Returns the bucket's units less those
-- queued (INF: no pace), the units waits of one unit each could take at
-- once (INF: no limit), the turn of a wait of one unit, the units queued,
-- the pace in force and the bucket's depth in units at it, and whether a
-- cut is in force.
local function view()
	local interval, tau = pace(now)
	local q = queued()
	local tokens, burst, remaining = INF, 0, 0
	if interval > 0 then
		burst = tau / interval
		tokens = math.min(math.max((now - math.max(s.tat, s.hold) + tau) / interval, 0), burst) - q
	end
	local nxt = turnAt(q + 1)
	local limit = INF
	if interval > 0 then
		limit = math.floor(burst + 1e-9)
	end
	if w.valid then
		limit = math.min(limit, w.left + probe())
	end
	if q == 0 and now >= s.hold then
		if limit == INF then
			remaining = INF
		else
			remaining = dueUnits(limit)
		end
	end
	return tokens, remaining, nxt, q, interval, burst, interval > 0 and (cutRate(now) > 0 or s.trim > 0)
end

-- Seeding: a process whose tickets came from another state (Redis lost
-- this one: a restart, an eviction, a failover) carries what it knows
-- across: its last turn (Redis's, or its local fallback's), and a pause.
local function seed(knownId, floorRel, holdRel)
	if knownId == '' or tonumber(knownId) == s.id then
		return
	end
	local f = tonumber(floorRel)
	if f ~= nil and f > 0 then
		local interval, burst = base()
		s.tat = math.max(s.tat, now + f + burst * interval)
	end
	local h = tonumber(holdRel)
	if h ~= nil and h > 0 then
		s.hold = math.max(s.hold, now + h)
	end
end

local reply
if op == 'wait' or op == 'mwait' then
	-- ARGV[5] n, ARGV[6] queue, ARGV[7] max wait µs or "", ARGV[8] the
	-- id this process knew, ARGV[9] its last turn, µs from now, or "",
	-- ARGV[10] its known pause, µs from now, or "". Returns {status, wait
	-- µs, id, end, recheck µs (-1: none), now}: status 1, a ticket (queue,
	-- end) whose turn is wait from now (look again at recheck: a cut's
	-- pace steps then); 0, its turn is past the max wait: nothing kept.
	local n, qi, maxwait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
	seed(ARGV[8], ARGV[9], ARGV[10])
	advance()
	local e = enqueue(qi, n)
	local t = turn(qi, e)
	local wt = waitOf(t)
	if maxwait ~= nil and wt >= maxwait and wt > 0 then
		cancelTicket(s.q[qi], e, n)
		reply = {0, wt, s.id, 0, -1, now}
	else
		if t <= now then
			advance()
		end
		if qi == 0 and live(s.q[1]) > 0 then
			-- A retry goes ahead of first attempts already waiting: their
			-- turns move later, and their sleepers must learn it.
			moved = true
		end
		reply = {1, wt, s.id, e, recheck(), now}
	end
elseif op == 'turns' then
	-- ARGV[5] the tickets' id, ARGV[6…] pairs of queue and end. Returns,
	-- per ticket, its wait in µs (-1: it has gone, -2: the state it came
	-- from is lost), then the recheck (µs from now; -1: none) and now.
	advance()
	reply = {}
	for i = 6, #ARGV - 1, 2 do
		if tonumber(ARGV[5]) ~= s.id then
			table.insert(reply, -2)
		else
			local qi, e = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
			if e <= s.q[qi].rel then
				table.insert(reply, -1)
			else
				table.insert(reply, waitOf(turn(qi, e)))
			end
		end
	end
	table.insert(reply, recheck())
	table.insert(reply, now)
elseif op == 'cancel' then
	-- ARGV[5] id, ARGV[6] queue, ARGV[7] end, ARGV[8] n. Returns 1 if the
	-- units came back.
	advance()
	reply = 0
	if tonumber(ARGV[5]) == s.id then
		local qi, e, n = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
		if e > s.q[qi].rel then
			cancelTicket(s.q[qi], e, n)
			moved, reply = true, 1
		end
	end
elseif op == 'pause' then
	-- ARGV[5] d µs. Returns the pause's end, µs from now.
	advance()
	local until_ = now + tonumber(ARGV[5])
	if until_ > s.hold then
		s.hold, moved = until_, true
	end
	reply = math.ceil(s.hold - now)
elseif op == 'adapt' then
	-- ARGV[5] cost, ARGV[6] pause µs (0: none), ARGV[7] remaining or ""
	-- (no window), ARGV[8] reset µs, ARGV[9] size, ARGV[10] length µs,
	-- ARGV[11] the rejected request's age µs, or "" (no bare rejection),
	-- ARGV[12] "1" if the response was a refusal (see refused).
	advance()
	local cost = tonumber(ARGV[5])
	s.pending = math.max(s.pending - math.max(cost, 1), 0)
	local p = tonumber(ARGV[6])
	if p > 0 and now + p > s.hold then
		s.hold, moved = now + p, true
	end
	if p > 0 and ARGV[12] == '1' and refused() then
		moved = true
	end
	local remaining = tonumber(ARGV[7])
	if remaining ~= nil then
		mmoved()
		update(math.max(remaining, 0), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), math.min(s.pending, sent()))
		moved = true
	end
	local age = tonumber(ARGV[11])
	if age ~= nil and reject(now - age, cost) then
		moved = true
	end
	reply = 1
elseif op == 'settle' then
	-- ARGV[5] spent, ARGV[6] actual (both ≥ 0, spent within the burst:
	-- checked by the caller). Returns 1. A give-back to a key without
	-- state (a full bucket) writes nothing.
	local spent, actual = tonumber(ARGV[5]), tonumber(ARGV[6])
	if fresh and actual <= spent then
		return 1
	end
	advance()
	if spent ~= actual then
		mmoved()
	end
	if settle(spent, actual) then
		moved = true
	end
	reply = 1
elseif op == 'msettle' then
	-- settle's ARGV[5] spent and ARGV[6] actual on the first limit, then
	-- mwait's ARGV[11] (the further limits' configuration) and ARGV[12…]
	-- actual − spent in each of them (CostSettler's rule: xsettle).
	-- Returns 1.
	local spent, actual = tonumber(ARGV[5]), tonumber(ARGV[6])
	advance()
	local any = spent ~= actual
	for L = 1, M.k do
		if mcost[L] ~= 0 then
			xsettle(M.lim[L], mcost[L])
			any = true
		end
	end
	if any then
		mmoved()
	end
	if settle(spent, actual) or (any and #M.q[0] + #M.q[1] > 0) then
		moved = true
	end
	reply = 1
elseif op == 'try' or op == 'mtry' then
	-- wait's ARGV, its max wait "0" (so that the fast path serves a try
	-- of one unit as a wait refused past its max wait). The rules of a
	-- wait (schedule_ops.go's try): the ticket goes if its turn has come;
	-- otherwise it is taken back and nothing changes. Returns wait's
	-- {status, wait µs, id, end, -1, now}: status 1 if the units went, 0
	-- (wait: its turn) if not.
	local n, qi = tonumber(ARGV[5]), tonumber(ARGV[6])
	seed(ARGV[8], ARGV[9], ARGV[10])
	advance()
	-- What enqueue may change besides the ticket, to put back.
	local maxCost, tat, wasMoved, win = s.maxCost, s.tat, moved, {}
	for k, v in pairs(w) do
		win[k] = v
	end
	local e = enqueue(qi, n)
	local t = turn(qi, e)
	if t <= now then
		advance() -- lets the ticket go
	end
	if e <= s.q[qi].rel then
		reply = {1, 0, s.id, e, -1, now}
	else
		-- The tail's ticket is taken back outright: the queue is as it was.
		cancelTicket(s.q[qi], e, n)
		s.maxCost, s.tat, moved = maxCost, tat, wasMoved
		for k, v in pairs(win) do
			w[k] = v
		end
		reply = {0, waitOf(t), s.id, 0, -1, now}
		if fresh then
			return reply -- no state to write for a key that had none
		end
	end
elseif op == 'lease' then
	-- Leased turns (see lease.go): first the tickets a process gives back
	-- (each as the cancel op does: the tail's taken back outright, any
	-- other a hole), then up to k tickets of one unit in the queue of
	-- first attempts, taken as k waits in a row would take them (enqueue,
	-- turn; the ones whose turn has come go, as a wait's do). ARGV[5] k,
	-- ARGV[6] need: the first need tickets are for waits queued in the
	-- process, taken while their turn is within ARGV[7], the max wait µs
	-- ("" none; the first past it is refused, as a wait's turn is); the
	-- rest are for waits expected at ARGV[8] units a second, the j-th of
	-- them taken only if its turn is no earlier than that wait's expected
	-- arrival (j/rate from now) less ARGV[9] µs, so that a leased turn is
	-- not left to pass unused, and only while nothing but the bucket and
	-- the hold applies (need ≤ 0: none queued, -need tickets held, which
	-- the next waits take first). ARGV[10…12] what the process knew (as
	-- wait's ARGV[8…10]), ARGV[13] the id of the tickets given back ("":
	-- none), ARGV[14…] their ends. Returns {count, id, last end, recheck
	-- µs (-1: none), now, wait µs of each ticket}: the tickets are the
	-- ends last−count+1 … last; count 0 with the refused turn's wait.
	local k, need, maxwait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
	local lrate, late = tonumber(ARGV[8]), tonumber(ARGV[9])
	seed(ARGV[10], ARGV[11], ARGV[12])
	advance()
	if ARGV[13] ~= '' and tonumber(ARGV[13]) == s.id then
		for i = #ARGV, 14, -1 do -- descending: the tail's first
			local e = tonumber(ARGV[i])
			if e > s.q[1].rel and e <= s.q[1]['end'] then
				if e ~= s.q[1]['end'] then
					moved = true -- the tickets behind move up
				end
				cancelTicket(s.q[1], e, 1)
			end
		end
	end
	local waits, last, due = {}, 0, false
	-- With nothing but the bucket and the hold (no window, no cut), the
	-- turns past the first are turnAt's closed form at consecutive
	-- positions (enqueue changes no more than the queue's end then).
	local simple = not w.valid and c.r0 == 0
	local iv, tau = pace(now)
	local p1, from = 0, 0
	for j = 1, k do
		local e, wt
		if j == 1 or not simple then
			e = enqueue(1, 1)
			wt = waitOf(turn(1, e))
			p1, from = position(1, e), math.max(s.tat, s.hold)
		else
			e = take(s.q[1], 1)
			local t = s.hold
			if iv > 0 then
				t = math.max(s.hold, from + (p1 + j - 1) * iv - tau)
			end
			wt = waitOf(t)
		end
		local keep
		if j <= need then
			keep = maxwait == nil or wt < maxwait or wt == 0
		else
			-- With a window or a cut in force, only the waits queued: the
			-- turns a window lets go at once after its reset would come
			-- before the process's waits, asleep until then, are back.
			keep = simple and lrate > 0 and (j - need) * SEC / lrate <= wt + late
		end
		if not keep then
			cancelTicket(s.q[1], e, 1) -- the tail's: taken back outright
			if j == 1 then
				waits = {wt}
			end
			break
		end
		table.insert(waits, wt)
		last = e
		if wt == 0 then
			due = true
		end
	end
	if due then
		advance()
	end
	if last == 0 then
		reply = {0, s.id, 0, -1, now, waits[1] or 0}
	else
		reply = {#waits, s.id, last, recheck(), now}
		for _, wt in ipairs(waits) do
			table.insert(reply, wt)
		end
	end
elseif op == 'state' then
	-- Read only: nothing is written, no expiry moves. Returns {tokens·1e6
	-- (floor; 2^53: no pace), remaining (2^53: no limit), next turn µs,
	-- pause left µs, queued, pace in force in units a second·1e6 (0:
	-- none), burst·1e6, cut (0/1), window (0/1), window left·1e6, window
	-- reset µs, now}.
	advance()
	local tokens, remaining, nxt, q, interval, burst, cutting = view()
	local BIG = 2 ^ 53 -- +Inf
	local function fixed(x, scale)
		if x == INF then
			return BIG
		end
		return math.floor(x * scale)
	end
	local function flag(b)
		if b then
			return 1
		end
		return 0
	end
	local rate = 0
	if interval > 0 then
		rate = math.floor(SEC / interval * 1e6 + 0.5)
	end
	local winLeft, winReset = 0, 0
	if w.valid then
		winLeft, winReset = fixed(w.left, 1e6), waitOf(w.reset)
	end
	return {fixed(tokens, 1e6), fixed(remaining, 1), waitOf(nxt), waitOf(s.hold), q, rate,
		fixed(burst, 1e6), flag(cutting), flag(w.valid), winLeft, winReset, now}
end

-- Write the state back; publish a move.
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
local function bit(b)
	if b then
		return 1
	end
	return 0
end
-- How long the state matters: queued turns, a bucket not yet full, a
-- pause, a window, a cut and its strike window, the per-second count.
local interval = pace(now)
local expire = math.max(s.tat + queued() * interval, s.hold, now)
if w.valid then
	expire = math.max(expire, w.reset + WINDOW_KEEP * SEC)
end
if c.moved then
	expire = math.max(expire, c.last + STRIKE_WINDOW * SEC, c.at + (CUT_RECOVER + 4) * SEC)
end
if s.trim > 0 then
	expire = math.max(expire, c.last + TRIM_KEEP * SEC)
end
if s.lastGo > NONE then
	expire = math.max(expire, s.lastGo + 2 * SEC)
end
if queued() > 0 then
	-- Tickets out: keep the state well past their turns.
	expire = math.max(expire, now + 60 * SEC)
end
-- A cut fully over (regrown, and its strike window past) is the state of
-- a key never cut: dropped, so that the key takes the fast path again.
if c.moved and cutRate(now) == 0 and now - c.last > STRIKE_WINDOW * SEC and s.trim == 0 then
	c.r0, c.wMax, c.floor, c.at, c.open, c.last, c.moved = 0, 0, 0, 0, false, 0, false
end
if M ~= nil then
	local busy = #M.q[0] + #M.q[1] > 0
	for _, l in ipairs(M.lim) do
		if l[1] == 0 then
			expire = math.max(expire, l[4])
			busy = busy or l[4] > now
		else
			local ends = (l[4] + 2) * l[2] -- the counts matter until then
			expire = math.max(expire, ends)
			busy = busy or (ends > now and l[5] + l[6] > 0)
		end
	end
	if not busy then
		M = nil -- every limit full, nothing queued: the state of a new key
	end
end
local ext = nil
if #s.q[0].holes + #s.q[0].big + #s.q[1].holes + #s.q[1].big > 0 or w.valid or c.moved or s.trim > 0 or M ~= nil then
	ext = cmsgpack.pack({
		flat(s.q[0].holes), flat(s.q[0].big), flat(s.q[1].holes), flat(s.q[1].big),
		bit(w.valid), w.left, w.reset, w.size, w.probed, w.spreadAt, w.spreadLeft,
		c.r0, c.wMax, c.floor, c.at, bit(c.open), c.last, bit(c.moved), w.probeAt,
		s.credInt, s.credTau, s.spAt, s.spK, s.spRho, s.trim, s.trimGone, mflat(),
	})
end
local newXe = xe
if expire > xe then
	newXe = expire + SEC -- a second more, so that most calls keep the TTL
end
local set = {'c', packCore(s.id, s.tat, s.hold, s.q[0].rel, s.q[0]['end'], s.q[1].rel, s.q[1]['end'],
	s.pending, s.lastGo, s.sentSec, s.sentCur, s.sentPrev, s.maxCost, newXe, s.busySince)}
if ext ~= nil and ext ~= got[2] then
	table.insert(set, 'x')
	table.insert(set, ext)
end
if setCfg then
	table.insert(set, 'v')
	table.insert(set, cfg)
end
redis.call('HSET', key, unpack(set))
if ext == nil and got[2] then
	redis.call('HDEL', key, 'x')
end
if newXe ~= xe then
	redis.call('PEXPIRE', key, math.max(1, math.ceil((newXe - now) / 1000)))
end
if moved then
	redis.call('PUBLISH', channel, s.id .. ' ' .. key)
end
return reply
