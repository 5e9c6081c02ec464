-- reserve.lua: reserve n units of one quota's token bucket, or refuse.
--
-- KEYS[1]  the quota's hash: t = theoretical arrival time (µs, Redis clock;
--          the moment the bucket is full again), p = paused until (µs).
-- ARGV[1]  interval: µs per unit (1e6 / rate; 0 for an unlimited rate)
-- ARGV[2]  burst: units the bucket holds
-- ARGV[3]  n: units to reserve (1 <= n <= burst; the caller checked)
-- ARGV[4]  max wait in µs the caller accepts, or "" for no limit
--
-- Returns {reserved, wait, turn}: reserved is 1 when the units were taken
-- and the caller must sleep wait µs before its turn; 0 when the turn (wait
-- µs away) is past the caller's limit, in which case nothing was written.
-- turn is the turn itself, µs of Redis's clock (for tests and tracing).
--
-- This is GCRA, the token bucket of golang.org/x/time/rate in another
-- form: the bucket holds burst units, refills one unit per interval, and
-- may go into debt, which is how a caller reserves a later turn. Turns are
-- handed out in the order calls reach Redis. Time comes from TIME only:
-- the workers' clocks never enter the decision.
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local maxwait = tonumber(ARGV[4]) -- nil: no limit

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local state = redis.call('HMGET', key, 't', 'p')
local tat = tonumber(state[1]) or now
local paused = tonumber(state[2]) or 0
if tat < now then
	tat = now
end

local newtat = tat + n * interval
-- The units are ours once the bucket, refilled until then, holds them.
local at = newtat - burst * interval
if at < paused then
	at = paused
end
local wait = math.ceil(at - now)
if wait < 0 then
	wait = 0
end
if maxwait ~= nil and wait > maxwait then
	return {0, wait, now + wait}
end

-- %.17g keeps every bit of the double; tostring would keep 14 digits,
-- about 10 µs at today's epoch.
redis.call('HSET', key, 't', string.format('%.17g', newtat))
-- Idle state expires once the bucket is full again and any pause is over:
-- a missing hash means exactly that.
local expire = math.max(newtat, paused) - now
redis.call('PEXPIRE', key, math.max(1, math.ceil(expire / 1000)))
return {1, wait, now + wait}
