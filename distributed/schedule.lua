-- schedule.lua: one key's schedule in Redis, the rules of throttle's
-- schedule*.go in Lua, rule for rule and name for name, so that both
-- implementations are one model (the property suite drives both). It is
-- the first of the script's files, joined in order into one chunk by
-- quota.go: this one (the arguments, the core, the fast paths), then
-- schedule_state.lua, schedule_limits.lua, schedule_turns.lua,
-- schedule_advance.lua and schedule_ops.lua. The
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
