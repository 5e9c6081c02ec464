-- refund.lua: give back n units reserved by reserve.lua whose caller gave
-- up (its context ended while it slept).
--
-- KEYS[1]  the quota's hash (see reserve.lua)
-- ARGV[1]  interval: µs per unit
-- ARGV[2]  n: units to give back
--
-- The bucket's debt shrinks by n units: the next caller to reach Redis can
-- use them. Callers already sleeping keep the turns they were given. The
-- bucket never holds more than burst units: a refund that would overfill it
-- (the reserved turn had already come) fills it and the rest is dropped.
-- The server's window, if one is known and not yet reset, gets the n units
-- back too. A missing hash (expired, or Redis lost it) is left missing.
-- Returns 1 when the bucket was changed, 0 otherwise.
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local n = tonumber(ARGV[2])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local state = redis.call('HMGET', key, 't', 'p', 'x', 'wr', 'wz')
local tat = tonumber(state[1])
if tat == nil then
	return 0
end
local paused = tonumber(state[2]) or 0
local keep = tonumber(state[3]) or 0
local wr, wz = tonumber(state[4]), tonumber(state[5])
tat = tat - n * interval
if tat < now then
	tat = now
end
redis.call('HSET', key, 't', string.format('%.17g', tat))
if wr ~= nil and wz ~= nil and wz > now then
	redis.call('HSET', key, 'wr', string.format('%.17g', wr + n))
end
-- Never shorter than the key's TTL already is (reserve.lua keeps its
-- counter for 2 s).
local expire = math.max(tat or now, paused, keep) - now
redis.call('PEXPIRE', key, math.max(1, math.ceil(expire / 1000), redis.call('PTTL', key)))
return 1
