-- pause.lua: nothing from this quota before now + d (Redis clock).
--
-- KEYS[1]  the quota's hash (see reserve.lua)
-- ARGV[1]  d: the pause in µs
--
-- A pause never shortens a longer one already written. Every later
-- reserve.lua call returns a wait that ends no earlier than the pause.
-- Returns the pause's end as µs left from now.
local key = KEYS[1]
local d = tonumber(ARGV[1])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local state = redis.call('HMGET', key, 't', 'p', 'x')
local tat = tonumber(state[1]) or now
local paused = tonumber(state[2]) or 0
local keep = tonumber(state[3]) or 0 -- see reserve.lua
if now + d > paused then
	paused = now + d
	redis.call('HSET', key, 'p', string.format('%.17g', paused))
end
-- Never shorter than the key's TTL already is (reserve.lua keeps its
-- counter for 2 s).
local expire = math.max(tat or now, paused, keep) - now
redis.call('PEXPIRE', key, math.max(1, math.ceil(expire / 1000), redis.call('PTTL', key)))
return paused - now
