-- pause.lua: nothing from this quota before now + d (Redis clock).
--
-- KEYS[1]  the quota's hash (see reserve.lua)
-- ARGV[1]  d: the pause in µs
-- ARGV[2]  the quota's pause channel (see pauseChannel in pushed.go)
-- ARGV[3]  interval: µs per unit
-- ARGV[4]  burst: units the bucket holds
--
-- A pause never shortens a longer one already written. Every later
-- reserve.lua call returns a wait that ends no earlier than the pause.
-- A new or longer pause, from start (now, or the end of the pause it
-- extends) to its end, moves the turns already reserved at or after start
-- back by its length, keeping their spacing (as the in-process Limiter's
-- pauseLocked): the queue's end (t) moves here, and the waits sleeping on
-- those turns learn it from the message published on ARGV[2],
-- "now start end key", µs of Redis's clock.
-- Returns the pause's end as µs left from now.
local key = KEYS[1]
local d = tonumber(ARGV[1])
local channel = ARGV[2]
local interval = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local state = redis.call('HMGET', key, 't', 'p', 'x')
local tat = tonumber(state[1]) or now
local paused = tonumber(state[2]) or 0
local keep = tonumber(state[3]) or 0 -- see reserve.lua
if now + d > paused then
	local start = math.max(now, paused)
	paused = now + d
	local set = {'p', string.format('%.17g', paused)}
	-- The last reserved turn is tat - burst·interval: still to come?
	if tat - burst * interval > start then
		tat = tat + (paused - start)
		table.insert(set, 't'); table.insert(set, string.format('%.17g', tat))
	end
	redis.call('HSET', key, unpack(set))
	redis.call('PUBLISH', channel, string.format('%.0f %.0f %.0f %s', now, start, paused, key))
end
-- Never shorter than the key's TTL already is (reserve.lua keeps its
-- counter for 2 s).
local expire = math.max(tat or now, paused, keep) - now
redis.call('PEXPIRE', key, math.max(1, math.ceil(expire / 1000), redis.call('PTTL', key)))
return paused - now
