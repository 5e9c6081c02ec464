-- inflight.lua: one key's in-flight cap in Redis, shared by every process
-- of a quota: leases that expire, and a first-come-first-served queue of
-- the acquisitions waiting for units. The constants (GRANTED, WAITING,
-- RELEASED, MISMATCH) are prepended by the Go source (inflight.go). Times
-- are µs of Redis's clock (TIME), never a worker's.
--
-- KEYS[1]  leases: a sorted set, member a token, score its expiry
-- KEYS[2]  queue: a sorted set, member a token, score its ticket
-- KEYS[3]  queue expiries: a sorted set, member a token, score its expiry
-- KEYS[4]  released: tokens given back, by expiry (an acquire or a
--          renewal that arrives after its release must not take units)
-- KEYS[5]  a hash: seq (the last ticket), cap and ver (the cap in force
--          and the Version that set it)
-- ARGV[1]  op: acquire, release, renew
-- ARGV[2]  the caller's cap
-- ARGV[3]  the caller's Version
-- ARGV[4]  ttl, µs: a lease or a queued acquisition not renewed for ttl
--          is forgotten (its process died, or lost Redis)
-- ARGV[5]  the quota's channel: units granted to a waiting acquisition
--          are published there as "0 KEYS[1]|token", one message per
--          acquisition granted, so that its process (and only it) asks
--          again
-- ARGV[6…] tokens: "n:id", n the units (acquire and release: one; renew:
--          any number)
--
-- Every key is in one Cluster slot (one hash tag: see key.go). All of
-- them are set to expire 2·ttl after the last call, so an idle cap costs
-- nothing; a lease lives at most ttl after its last renewal.
local L, Q, QE, D, H = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op = ARGV[1]
local cap = tonumber(ARGV[2])
local ver = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local channel = ARGV[5]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- The cap in force: the one of the highest Version; the same Version
-- with another cap is refused (Quota.Version's rule).
local stored = redis.call('HMGET', H, 'cap', 'ver')
local sCap, sVer = tonumber(stored[1]), tonumber(stored[2])
if sCap and sVer >= ver then
	if sVer == ver and sCap ~= cap then
		return {MISMATCH, sCap, sVer, 0}
	end
	cap = sCap
else
	redis.call('HSET', H, 'cap', cap, 'ver', ver)
end

local function units(tok)
	return tonumber(string.match(tok, '^(%d+):'))
end

-- Forget what expired: leases not renewed, queued acquisitions whose
-- process stopped asking, tombstones.
redis.call('ZREMRANGEBYSCORE', L, '-inf', now)
for _, tok in ipairs(redis.call('ZRANGEBYSCORE', QE, '-inf', now)) do
	redis.call('ZREM', Q, tok)
	redis.call('ZREM', QE, tok)
end
redis.call('ZREMRANGEBYSCORE', D, '-inf', now)

local held = 0
for _, tok in ipairs(redis.call('ZRANGE', L, 0, -1)) do
	held = held + units(tok)
end

-- grant turns the queue's head into leases while its units fit: first
-- come, first served; a head that does not fit waits, and those behind
-- it too. At most cap acquisitions can fit.
local granted = {}
local function grant()
	for _, tok in ipairs(redis.call('ZRANGE', Q, 0, cap - 1)) do
		local n = units(tok)
		if held + n > cap then
			break
		end
		held = held + n
		redis.call('ZREM', Q, tok)
		redis.call('ZREM', QE, tok)
		redis.call('ZADD', L, now + ttl, tok)
		granted[#granted + 1] = tok
	end
end

local status = WAITING
local tok = ARGV[6]
if op == 'acquire' then
	if redis.call('ZSCORE', L, tok) then
		status = GRANTED -- granted meanwhile, on its behalf
	elseif redis.call('ZSCORE', D, tok) then
		status = RELEASED
	else
		if not redis.call('ZSCORE', Q, tok) then
			redis.call('ZADD', Q, redis.call('HINCRBY', H, 'seq', 1), tok)
		end
		redis.call('ZADD', QE, now + ttl, tok)
		grant()
		if redis.call('ZSCORE', L, tok) then
			status = GRANTED
		end
	end
elseif op == 'release' then
	if redis.call('ZREM', L, tok) == 1 then
		held = held - units(tok)
	elseif redis.call('ZREM', Q, tok) == 1 then
		redis.call('ZREM', QE, tok)
	end
	-- The tombstone keeps a late acquire, and a renewal sent before the
	-- release, from taking the units again.
	redis.call('ZADD', D, now + ttl, tok)
	grant()
	status = RELEASED
elseif op == 'renew' then
	-- A lease Redis lost (a restart, a failover, an eviction) is written
	-- again, so that the units still in flight count against the cap
	-- again: held may then pass the cap, and nothing is granted until it
	-- is under.
	local renewed = 0
	for i = 6, #ARGV do
		local t = ARGV[i]
		if not redis.call('ZSCORE', D, t) then
			if not redis.call('ZSCORE', L, t) then
				held = held + units(t)
			end
			redis.call('ZADD', L, now + ttl, t)
			renewed = renewed + 1
		end
	end
	grant()
	status = renewed
end

for _, g in ipairs(granted) do
	if not (op == 'acquire' and g == tok) then -- the caller learns it in the reply
		redis.call('PUBLISH', channel, '0 ' .. L .. '|' .. g)
	end
end
local ms = math.ceil(2 * ttl / 1000)
for _, k in ipairs(KEYS) do
	redis.call('PEXPIRE', k, ms)
end

-- The earliest lease's expiry, from now: a waiting acquisition asks again
-- then at the latest (a lease that expires frees units without a
-- release to publish it). -1: no lease.
local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
local wake = -1
if first[2] then
	wake = math.max(0, tonumber(first[2]) - now)
end
return {status, wake, held, cap}
