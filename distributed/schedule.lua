-- schedule.lua: one key's schedule in Redis, the rules of throttle's
-- schedule*.go in Lua, rule for rule and name for name, so that both
-- implementations are one model (the property suite drives both). It is
-- the first of the script's files, joined in order into one chunk by
-- script.go: this one (the arguments, the core, the fast paths), then
-- schedule_state.lua, schedule_limits.lua, schedule_turns.lua,
-- schedule_advance.lua and schedule_ops.lua. The
-- constants (PROBE_WAIT, CUT_BETA, …, in seconds) are prepended by the Go
-- source from schedule.Constants; SEC is 1e6: times are µs of
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
-- The state is one hash: c, the core, read by every call (below), and x,
-- the rest (holes, tickets of several units, the window, the cut,
-- further limits, the critical and background queues and the classes'
-- virtual starts: a MessagePack array, cmsgpack being in every Redis
-- since 2.6 and in Valkey), present only while one of them is, and
-- carried by the core instead while it holds nothing but further
-- limits mwait's fast path can spend (CORE_XC, below). The
-- state's id is its creation time: a new one whenever Redis lost the
-- state, so that a ticket of a lost state is never read against a new
-- one.
--
-- A wait of one unit on a key with nothing but its bucket (no x, no
-- retry queued, the configuration the state's; a key that ever queued a
-- critical or background wait keeps x, so that only the default class
-- takes it) takes the fast path below:
-- the same rules with the window, the cut, the holes and the retry queue
-- absent, one HGET and one HSET, no table, no function that closes over
-- a local, no number parsed but the clock's, so that the common wait
-- costs a few µs of Redis's time; a lease on such a key has one too,
-- and so has a wait that goes at once on a key whose further limits
-- the core carries (mwait, below). Every other call (a new state's
-- first among them) runs the whole model. The property
-- suite drives both (leases: lease_test.go).
local key = KEYS[1]
local op = ARGV[A.OP]
local channel = ARGV[A.CHANNEL]
local SEC = 1000000
local INF = math.huge
local NONE = TIME.NONE -- a time that is not set
-- FAR: the most µs a reply carries (2^62: past the largest
-- time.Duration, which the caller saturates to). Redis replies a Lua
-- number as an integer by C's cast, undefined past 2^63 (INT64_MIN in
-- practice: a turn 292 years away would read as one long past).
local FAR = REPLY.FAR

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * SEC + tonumber(clock[2])

-- The core: a tag byte, then doubles packed little-endian (struct, in
-- every Redis since 2.6, and in Valkey: a third of what cmsgpack costs
-- to read and write a call): id, tat, hold, r0, e0, r1, e1, pending,
-- lastGo, sentSec, sentCur, sentPrev, maxCost, xe (when the TTL last set
-- runs out), busySince; then the configuration's interval and τ, which
-- a call whose configuration is the state's reads instead of parsing
-- its own; then, as text ending in a zero byte, "id|configuration" (the
-- id in decimal, as a call names the state it knows): the fast path
-- compares it with the call's in one step, no number parsed, and packs
-- it back in the same call. The tag says whether x is there
-- (CORE_X) or not (CORE_BARE), so that the fast path reads one field. A
-- core of any other form is no state this version reads: the key starts
-- anew (see the general path).
--
-- The configuration: "interval/burst", with ":version" after the burst
-- when the Quota has a Version (ARGV[3] is then "burst:version"). The
-- state keeps the configuration that wrote it; a call with another one
-- is refused (THROTTLE_CONFIG and the state's), unless its version is
-- higher: then it replaces it (see Quota.Version).
local CORE_FMT = '<Bddddddddddddddddds'
-- A core of tag CORE_XC carries x after its tail, in x's short form:
-- doubles (k, the number of further limits; their floor; the k limits'
-- six slots each), then their configuration "version|spec" as text (see
-- mwait in schedule_limits.lua). It is the form of a key whose x holds
-- nothing but further limits that mwait's fast path can spend (no
-- tickets queued in them, no holes, no ticket of several units, no
-- window, cut, spread or trim, the pace last in force the configured
-- one, no sliding log): the fast path reads and writes them with the
-- core, in one field. xcFmt(k) is its struct format for k limits.
local function xcFmt(k)
	return '<dd' .. string.rep('d', 6 * k) .. 's'
end
local coreRaw = redis.call('HGET', key, 'c')
local tag = coreRaw and string.byte(coreRaw, 1)
-- fastTail: whether a core's tail ("id|configuration") is the call's
-- (known: the id the call names, or "" for none).
local function fastTail(tail, known)
	if known ~= '' then
		return tail == known .. '|' .. ARGV[A.INTERVAL] .. '/' .. ARGV[A.BURST]
	end
	local bar = string.find(tail, '|', 1, true)
	return bar ~= nil and string.sub(tail, bar + 1) == ARGV[A.INTERVAL] .. '/' .. ARGV[A.BURST]
end

-- fastGo is advance on a key with nothing but its bucket (no window,
-- cut, holes or retries), for the fast paths of a wait, of mwait and of
-- a lease:
-- the core's fields in, the ones it moves out; the units sent lately
-- (pending) start again from 0 after idle µs without a send. It and fastStore are
-- cheap to make because they close over nothing (an upvalue costs a call
-- as much as a C function's call): every value comes as an argument,
-- and SEC (1e6) and NONE (-1e300) are written out. Arithmetic rather
-- than math.*, for the same reason: x − x % 1 is math.floor(x).
local function fastGo(now, idle, tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	if now - lg > idle then
		pd = 0
	end
	local k = fin - rel
	local queued = k > 0
	if k > 0 and now >= hold then
		local from = tat
		if hold > from then
			from = hold
		end
		if I > 0 then
			-- The most units whose turns (from + (f·I − τ), as turnAt's
			-- head) have come, as dueUnits counts them: the quotient's
			-- floor, then exact.
			local f = (now - from + tau) / I
			f = f - f % 1
			while f > 0 and from + (f * I - tau) > now + 1e-3 do
				f = f - 1
			end
			while f < k and from + ((f + 1) * I - tau) <= now + 1e-3 do
				f = f + 1
			end
			if f < k then
				k = f
			end
		end
		if k > 0 then
			rel = rel + k
			if I > 0 then
				tat = from + k * I
			end
			if now - lg > 1e6 then
				bs = now
			end
			pd, lg = pd + k, now
			local cur = now / 1e6
			cur = cur - cur % 1
			if cur == ss + 1 then
				ss, sp, sc = cur, sc, 0
			elseif cur ~= ss then
				ss, sp, sc = cur, 0, 0
			end
			sc = sc + k
		end
	end
	-- The bucket fills to its burst and no further (every ticket is of
	-- one unit here, and τ ≥ I: see advance), once units were queued and
	-- the hold is over, as advance's floorTat; enqueue floors the bucket
	-- of an empty queue.
	if queued and now >= hold and now > tat then
		tat = now
	end
	return tat, rel, pd, lg, ss, sc, sp, bs
end

-- ttlMs: a TTL of d µs as PEXPIRE takes it, in whole ms, at least 1 and
-- at most 2^53 (Redis sends a Lua number to a command as "%.17g", which
-- past 1e17 is an exponent PEXPIRE refuses; 2^53 ms is as good as
-- never).
local function ttlMs(d)
	local ms = math.ceil(d / 1000)
	if ms < 1 then
		return 1
	end
	if ms > 2 ^ 53 then
		return 2 ^ 53
	end
	return ms
end

-- fastStore writes a fast path's core back (the configuration
-- unchanged; the values after the core's, x's short form of CORE_XC, in
-- fmt after it) and extends the TTL when the state outlives it (or ex,
-- when its further limits matter until then).
local function fastStore(key, tail, fmt, tag, now, ex, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau, ...)
	local expire = tat + (fin - rel) * I
	if hold > expire then
		expire = hold
	end
	if ex > expire then
		expire = ex
	end
	if now > expire then
		expire = now
	end
	if lg > -1e300 and lg + 2e6 > expire then
		expire = lg + 2e6
	end
	if fin > rel and now + 60e6 > expire then
		expire = now + 60e6
	end
	local newXe = xe
	if expire >= xe then
		newXe = expire + 1e6 -- a second more, so that most calls keep the TTL
	end
	redis.call('HSET', key, 'c', struct.pack(fmt, tag, id, tat, hold, r0, e0, rel, fin, pd, lg,
		ss, sc, sp, mc, newXe, bs, I, tau, tail, ...))
	if newXe ~= xe then
		redis.call('PEXPIRE', key, ttlMs(newXe - now))
	end
end

-- fastChanged: whether a fast path's tat, rel, pd, lg, ss, sc, sp, bs and
-- mc differ from the nine it read (after them); no table, no upvalue.
local function fastChanged(tat, rel, pd, lg, ss, sc, sp, bs, mc, tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0)
	return tat ~= tat0 or rel ~= rel0 or pd ~= pd0 or lg ~= lg0 or ss ~= ss0 or sc ~= sc0 or sp ~= sp0 or bs ~= bs0 or mc ~= mc0
end

-- The fast path: see above. A try of one unit is a wait whose max wait
-- is 0 (ARGV[7] is "0"): gone at once, or refused with nothing kept.
if tag == CORE.BARE and (op == 'wait' or op == 'try') and ARGV[A.WAIT_N] == '1' and ARGV[A.WAIT_QUEUE] == QUEUE_ARG.FIRST then
	local _, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau, tail = struct.unpack(CORE_FMT, coreRaw)
	if r0 == e0 and fastTail(tail, ARGV[A.WAIT_KNOWN_ID]) then
		local tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0 = tat, rel, pd, lg, ss, sc, sp, bs, mc
		tat, rel, pd, lg, ss, sc, sp, bs = fastGo(now, PENDING_IDLE * SEC, tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
		local tat1, mc1 = tat, mc -- after advance: what a try puts back
		if mc < 1 then
			mc = 1
		end
		if rel == fin and now > tat then
			tat = now -- enqueue's floor
		end
		fin = fin + 1
		local t = hold
		if I > 0 then
			-- (fin − rel)·I − τ first: see goNow in schedule_turns.go.
			local from = tat
			if hold > from then
				from = hold
			end
			from = from + ((fin - rel) * I - tau)
			if from > t then
				t = from
			end
		end
		local wt = 0
		if t > now then
			local d = t - now
			wt = d - d % 1
			if wt < d then
				wt = wt + 1
			end
		end
		local maxwait = tonumber(ARGV[A.WAIT_MAXWAIT])
		if maxwait ~= nil and wt >= maxwait and wt > 0 then
			-- Nothing kept: the ticket is not given. The state is written
			-- only if the advance changed it, as the general path's is (a
			-- try's own changes taken back: the largest cost, and the
			-- bucket's floor when nothing was queued).
			fin = fin - 1
			if op == 'try' then
				tat, mc = tat1, mc1
			end
			if fastChanged(tat, rel, pd, lg, ss, sc, sp, bs, mc, tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0) then
				fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
			end
			return struct.pack('<dddddd', STATUS.NONE, wt, id, 0, REPLY.NONE, now) -- in the order of the RWAIT reply layout
		end
		local maxq = tonumber(ARGV[A.WAIT_MAXQUEUED])
		if maxq ~= nil and maxq > 0 and t > now and fin - rel > maxq then
			-- It would queue past the key's bound (the first queue's
			-- units: the retries' is empty): nothing kept, as above.
			fin = fin - 1
			if fastChanged(tat, rel, pd, lg, ss, sc, sp, bs, mc, tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0) then
				fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
			end
			return struct.pack('<dddddd', STATUS.FULL, wt, id, 0, REPLY.NONE, now) -- in the order of the RWAIT reply layout
		end
		if t <= now then
			tat, rel, pd, lg, ss, sc, sp, bs = fastGo(now, PENDING_IDLE * SEC, tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
		end
		fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
		return struct.pack('<dddddd', STATUS.OK, wt, id, fin, REPLY.NONE, now) -- in the order of the RWAIT reply layout
	end
end

-- fastX is mwait's shortcut (schedule_limits.lua) on one further limit
-- of a kind x's short form carries, closing over nothing (see fastGo):
-- whether c units go at now (xearliest), and the limit's slots 4 to 6
-- once they went (xtake); false where only the whole rule can tell, and
-- the general path then decides. kind 0: a bucket (p its interval, q τ,
-- i0 its tat); 1 and 2: a fixed and a sliding window (p its length, q
-- its count, i0 the window whose units are u, w those of the one
-- before); 4: a fixed window from first use (i0 its start / p, u its
-- units, w its start).
local function fastX(now, c, kind, p, q, i0, u, w)
	if kind == KIND.BUCKET then
		if p > 0 then
			if i0 + c * p - q > now + 1e-3 then
				return false
			end
			if now > i0 then
				i0 = now
			end
			i0 = i0 + c * p
		end
		return true, i0, u, w
	end
	if kind == KIND.FIRST then
		if w > now then
			return false
		end
		if now >= w + p then -- the first use since the window ended
			return true, now / p, c, now
		end
		if u + c > q then
			return false
		end
		return true, i0, u + c, w
	end
	local i = now / p
	i = i - i % 1
	if i < i0 then
		return false
	end
	local prev, cur = 0, 0
	if i == i0 then
		prev, cur = w, u
	elseif i == i0 + 1 then
		prev = u
	end
	if cur + c > q then
		return false
	end
	if kind == KIND.SLIDING and prev > 0 and prev * (1 - (now / p - i)) + cur + c > q + 1e-9 then
		return false
	end
	return true, i, cur + c, prev
end

-- The fast path of mwait: a wait of the first queue on a key of CORE_XC
-- (its further limits in the core) with nothing queued, whose bucket and
-- every limit let its cost go now, goes as mwait's shortcut lets it go
-- (schedule_limits.lua), the state read and written as one field; any
-- other takes the general path, nothing written. ARGV[A.WAIT_XSPEC] is the
-- limits' "version|spec", ARGV[A.WAIT_XCOST…] the cost in each.
if tag == CORE.XC and op == 'mwait' and ARGV[A.WAIT_QUEUE] == QUEUE_ARG.FIRST then
	local _, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau, tail, pos = struct.unpack(CORE_FMT, coreRaw)
	local k, text = #ARGV - A.WAIT_XCOST + 1, ARGV[A.WAIT_XSPEC]
	if r0 == e0 and rel == fin and now >= hold and #coreRaw - pos == 8 * (2 + 6 * k) + #text and fastTail(tail, ARGV[A.WAIT_KNOWN_ID]) then
		-- x's short form of k limits, and the core with it (constants,
		-- for up to 3, cost nothing: built, a format costs a call 2k).
		local xf, sf
		if k == 1 then
			xf, sf = '<dddddddds', '<Bdddddddddddddddddsdddddddds'
		elseif k == 2 then
			xf, sf = '<dddddddddddddds', '<Bdddddddddddddddddsdddddddddddddds'
		elseif k == 3 then
			xf, sf = '<dddddddddddddddddddds', '<Bdddddddddddddddddsdddddddddddddddddddds'
		else
			xf = xcFmt(k)
			sf = CORE_FMT .. string.sub(xf, 2)
		end
		local v = {struct.unpack(xf, coreRaw, pos)}
		local n = 1
		if ARGV[A.WAIT_N] ~= '1' then
			n = tonumber(ARGV[A.WAIT_N]) -- (a tonumber costs as much as 2 ARGV)
		end
		if now > tat then
			tat = now
		end
		local ok = v[1] == k and v[3 + 6 * k] == text and (I == 0 or tat + (n * I - tau) <= now + 1e-3)
		local ex = NONE -- until when the limits count (mexpire, in schedule_limits.lua)
		for L = 1, k do
			local j = 6 * L - 3 -- the limit's first slot
			local c = tonumber(ARGV[A.WAIT_XCOST - 1 + L]) or 0
			if c > 0 and ok then
				local i0, u, w
				ok, i0, u, w = fastX(now, c, v[j], v[j + 1], v[j + 2], v[j + 3], v[j + 4], v[j + 5])
				v[j + 3], v[j + 4], v[j + 5] = i0, u, w -- written only when every limit is ok
			end
			if not ok then
				break
			end
			local ends = v[j + 3] -- a bucket's tat
			if v[j] ~= 0 then
				ends = (ends + 2) * v[j + 1] -- a window's counts matter until then
			end
			if ends > ex then
				ex = ends
			end
		end
		-- The n units go as fastGo lets a queue of them go (its rounding
		-- is stricter than the check above: in between, the general path
		-- decides).
		if ok then
			tat, rel, pd, lg, ss, sc, sp, bs = fastGo(now, PENDING_IDLE * SEC, tat, hold, rel, fin + n, pd, lg, ss, sc, sp, bs, I, tau)
			ok = rel == fin + n
		end
		if ok then
			fin = rel
			if n > mc then
				mc = n
			end
			if now > v[2] then
				v[2] = now
			end
			fastStore(key, tail, sf, CORE.XC, now, ex, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau,
				unpack(v, 1, 3 + 6 * k))
			return struct.pack('<dddddd', STATUS.OK, 0, id, fin, REPLY.NONE, now) -- in the order of the RWAIT reply layout
		end
	end
end

-- The fast path of a lease (op lease, below; see lease.go): on a key with
-- nothing but its bucket, as for a wait, k tickets of one unit are the
-- fast path's wait k times in a row: the same turns in closed form, one
-- write. Tickets given back whose turns have all come (spent: the op's
-- rule below) are taken here too; one not yet due needs a hole, which
-- the general path makes.
if tag == CORE.BARE and op == 'lease' then
	local _, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau, tail = struct.unpack(CORE_FMT, coreRaw)
	local fast = r0 == e0 and fastTail(tail, ARGV[A.LEASE_KNOWN_ID])
	local tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0 = tat, rel, pd, lg, ss, sc, sp, bs, mc
	if fast then
		tat, rel, pd, lg, ss, sc, sp, bs = fastGo(now, PENDING_IDLE * SEC, tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
	end
	local spent = 0
	if fast and ARGV[A.LEASE_BACK_ID] ~= '' and tonumber(ARGV[A.LEASE_BACK_ID]) == id then
		for i = A.LEASE_BACK, #ARGV do
			local e = tonumber(ARGV[i])
			if e > rel then
				fast = false -- not yet due: a hole (the general path)
				break
			end
			spent = spent + 1
		end
	end
	if fast then
		local k, need, maxwait = tonumber(ARGV[A.LEASE_K]), tonumber(ARGV[A.LEASE_NEED]), tonumber(ARGV[A.LEASE_MAXWAIT])
		local lrate, late = tonumber(ARGV[A.LEASE_RATE]), tonumber(ARGV[A.LEASE_LATE])
		if mc < 1 and k > 0 then
			mc = 1
		end
		if spent > 0 and fin == rel and now >= hold and I > 0 then
			-- The op's rule for spent turns given back: settled to no cost
			-- (the bucket's units back, to its burst and no further),
			-- while no ticket is queued, so that no turn moves.
			if now > tat then
				tat = now
			end
			tat = tat - spent * I
			if now > tat then
				tat = now
			end
		end
		local waits, due = {}, false
		if k > 0 and fin == rel and now > tat then
			tat = now -- enqueue's floor
		end
		local from = tat
		if hold > from then
			from = hold
		end
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
					-- The state as the general path writes it when no
					-- ticket is given: written if it changed.
					if fastChanged(tat, rel, pd, lg, ss, sc, sp, bs, mc, tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0) then
						fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
					end
					return struct.pack('<dddddd', 0, id, 0, REPLY.NONE, now, wt) -- in the order of the RLEASE reply layout: nothing kept
				end
				break
			end
			fin = fin + 1
			waits[#waits + 1] = wt
			if wt == 0 then
				due = true
			end
		end
		if #waits == 0 then
			if fastChanged(tat, rel, pd, lg, ss, sc, sp, bs, mc, tat0, rel0, pd0, lg0, ss0, sc0, sp0, bs0, mc0) then
				fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
			end
			return struct.pack('<dddddd', 0, id, 0, REPLY.NONE, now, 0) -- in the order of the RLEASE reply layout
		end
		if due then
			tat, rel, pd, lg, ss, sc, sp, bs = fastGo(now, PENDING_IDLE * SEC, tat, hold, rel, fin, pd, lg, ss, sc, sp, bs, I, tau)
		end
		fastStore(key, tail, CORE_FMT, CORE.BARE, now, NONE, id, tat, hold, r0, e0, rel, fin, pd, lg, ss, sc, sp, mc, xe, bs, I, tau)
		return struct.pack('<' .. string.rep('d', R.LEASE_WAITS - 1 + #waits), #waits, id, fin, REPLY.NONE, now, unpack(waits)) -- in the order of the RLEASE reply layout
	end
end

-- The general path. The fields the fast path did not read: x, and the
-- state's configuration. A state in another format (one a version before
-- 0.1.0 wrote) is read as no state: the key starts anew.
local cfg = ARGV[A.INTERVAL] .. '/' .. ARGV[A.BURST]
if coreRaw and tag ~= CORE.BARE and tag ~= CORE.X and tag ~= CORE.XC then
	redis.call('DEL', key)
	coreRaw, tag = false, nil
end
local got = {coreRaw, false, false}
local xc = nil -- x's short form, carried by a core of CORE.XC
local n0
if not coreRaw then
	n0 = {now, NONE, 0, 0, 0, 0, 0, 0, NONE, 0, 0, 0, 0, 0, 0}
elseif tag == CORE.BARE or tag == CORE.X or tag == CORE.XC then
	n0 = {struct.unpack(CORE_FMT, coreRaw)}
	table.remove(n0, 1) -- the tag
	local t = n0[18]
	got[3] = string.sub(t, (string.find(t, '|', 1, true) or 0) + 1)
	got[4] = t -- written back as it is while the id and configuration are
	if tag == CORE.X then
		got[2] = redis.call('HGET', key, 'x')
	elseif tag == CORE.XC then
		xc = string.sub(coreRaw, n0[19])
	end
end
local fresh = not coreRaw
-- setCfg: the state's configuration is replaced (a new state, one from
-- before configurations were kept, or one a newer version replaces).
local setCfg = got[3] ~= cfg
if coreRaw and got[3] and setCfg then
	local stored = tonumber(string.match(got[3], ':(%d+)$')) or 0
	local mine = tonumber(string.match(ARGV[A.BURST], ':(%d+)$')) or 0
	if mine <= stored then
		return redis.error_reply('THROTTLE_CONFIG ' .. got[3])
	end
end
local cfgI = tonumber(ARGV[A.INTERVAL])
local cfgB = tonumber(ARGV[A.BURST]) or tonumber(string.match(ARGV[A.BURST], '^([^:]+):%d+$'))
local id = n0[1]

