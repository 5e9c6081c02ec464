-- adapt.lua: apply what one response said about a quota, for the whole
-- fleet (throttle.Adapter). The logic mirrors the in-process Limiter's
-- Adapt (pacing.go, adaptive.go); the fields are described in reserve.lua.
--
-- KEYS[1]  the quota's hash
-- ARGV[1]  interval: the configured µs per unit (0 for an unlimited rate)
-- ARGV[2]  pause: nothing before now + this many µs; 0 for none
-- ARGV[3]  window: units remaining until its reset; "" for no window
-- ARGV[4]  the window's reset, µs from now
-- ARGV[5]  the window's size in units, 0 if unknown
-- ARGV[6]  the window's length in µs, 0 if unknown
-- ARGV[8]  burst: units the bucket holds
-- ARGV[9]  age: how long ago the response's request began its wait (µs)
-- ARGV[7]  throttled: the age in µs of the rejected request's wait (how
--          long ago it reserved its turn); "" if the response was no bare
--          rejection
-- ARGV[10] the quota's pause channel: a new or longer pause moves the
--          queue and is announced there, as in pause.lua
--
-- Returns 1 when the stored window now admits a unit (waits blocked on it
-- may reserve again), 0 otherwise.
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local pause = tonumber(ARGV[2])
local remaining = tonumber(ARGV[3]) -- nil: no window
local reset = tonumber(ARGV[4])
local size = tonumber(ARGV[5])
local length = tonumber(ARGV[6])
local age = tonumber(ARGV[7]) -- nil: not throttled
local burst = tonumber(ARGV[8])
local rtt = tonumber(ARGV[9])

local SAME_WINDOW = 2500000 -- µs: resets closer than this are one window
local WINDOW_KEEP = 10000000 -- µs a window is remembered past its reset (see reserve.lua)
local PROBE_WAIT = 1000000 -- µs a probe may go unanswered (see reserve.lua)
local STRIKE, SHIFT_SLOTS = 10000000, 2
local CUBIC_K, CUBIC_P, CUBIC_C, BETA, MIN_RATE = 1000000, 3000000, 0.3, 0.7, 0.1

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local s = redis.call('HMGET', key, 't', 'p', 'wr', 'wz', 'am', 'ac', 'al', 'cs', 'cc', 'cp', 'x', 'wp', 'rt')
local tat = tonumber(s[1])
local paused = tonumber(s[2]) or 0
local wr, wz = tonumber(s[3]), tonumber(s[4])
local am, ac, al = tonumber(s[5]), tonumber(s[6]), tonumber(s[7])
local cs, cc, cp = tonumber(s[8]) or 0, tonumber(s[9]) or 0, tonumber(s[10]) or 0
local keep = tonumber(s[11]) or 0
local probing = s[12] == '1'
local f = function(v) return string.format('%.17g', v) end
local set = {}

-- A pause never shortens a longer one, and moves the turns reserved
-- after its start back by its length (as pause.lua).
if pause > 0 and now + pause > paused then
	local start = math.max(now, paused)
	paused = now + pause
	table.insert(set, 'p'); table.insert(set, f(paused))
	if tat ~= nil and tat - burst * interval > start then
		tat = tat + (paused - start)
		table.insert(set, 't'); table.insert(set, f(tat))
	end
	redis.call('PUBLISH', ARGV[10], string.format('%.0f %.0f %.0f %s', now, start, paused, key))
end

local rate = function(t) -- the cut's pace at t, units/s; nil if no cut in force
	if am == nil or ac == nil or am <= 0 then
		return nil
	end
	local x = (t - ac - CUBIC_K) / CUBIC_K
	if x > 0 then
		x = x * CUBIC_K / CUBIC_P
	end
	return math.max(am + am * CUBIC_C * x * x * x, MIN_RATE)
end
-- The window: a response's reading of the same window (resets within
-- SAME_WINDOW, or half the window's length) keeps the least remaining and
-- the earlier reset; a later window replaces it, and so does any window
-- while the stored one is a probe's (see reserve.lua).
if remaining ~= nil then
	-- The server has not seen the units whose turns are still to come
	-- (reserved, queued in the bucket): they are spent from the stored
	-- window already, not from the response's. Without this, the first
	-- window a fleet learns would not count the queue reserved before it.
	local pace = interval
	local cut = rate(now)
	if cut ~= nil then
		pace = math.max(pace, 1000000 / cut)
	end
	if tat ~= nil and pace > 0 then
		remaining = math.max(0, remaining - math.max(0, math.floor((tat - now) / pace) - burst))
	end
	if (wz == nil or wr == nil) and size > 0 then
		-- The first window the fleet learns: the units it reserved before
		-- (over the last one to two seconds, the reservation counter's
		-- reach) are in it, whether or not they reached the server before
		-- this response. Erring low costs at most those units of this
		-- window, only if its start fell among them.
		local sec = math.floor(now / 1000000)
		local recent = 0
		if sec == cs then
			recent = cc + cp
		elseif sec == cs + 1 then
			recent = cc
		end
		remaining = math.min(remaining, math.max(0, size - recent))
	end
	local r = now + reset
	local same = SAME_WINDOW
	if length > 0 then
		same = math.min(same, length / 2)
	end
	if not probing and wz ~= nil and wr ~= nil and math.abs(r - wz) < same then
		wr, wz = math.min(wr, remaining), math.min(wz, r)
	elseif probing or wz == nil or wr == nil or r > wz then
		-- A new window: the spreading of the old one is over.
		wr, wz = remaining, r
		table.insert(set, 'ws'); table.insert(set, 0)
	end
	-- A round trip, for when a probe's answer is due (see reserve.lua): a
	-- probe's own (it did not wait), else the least age seen, since a
	-- request's age includes its wait for a turn.
	local rt = tonumber(s[13])
	if probing or rt == nil or rtt < rt then
		rt = rtt
	end
	table.insert(set, 'rt'); table.insert(set, f(math.min(rt, PROBE_WAIT)))
	keep = math.max(keep, wz + math.max(WINDOW_KEEP, length))
	table.insert(set, 'wr'); table.insert(set, f(wr))
	table.insert(set, 'wz'); table.insert(set, f(wz))
	table.insert(set, 'wl'); table.insert(set, f(size))
	table.insert(set, 'wp'); table.insert(set, 0)
end

-- A bare rejection (adaptive.go's reject).
if age ~= nil then
	local ceiling = math.huge
	if interval > 0 then
		ceiling = 1000000 / interval
	end
	local r = rate(now)
	if r ~= nil and (r >= ceiling or r >= 10 * am) then
		r = nil -- grown past the configured rate: no cut in force
	end
	tat = math.max(tat or now, now)
	if al ~= nil and now - age < al then
		-- Reserved before the last change: in flight under the old pace.
	elseif ceiling < math.huge and r == nil and (al == nil or now - al > STRIKE) then
		-- A lone rejection under a configured limit: timer jitter against
		-- a strict server bucket, most likely. Shift the schedule.
		al = now
		tat = tat + SHIFT_SLOTS * interval
		table.insert(set, 'al'); table.insert(set, f(al))
		table.insert(set, 't'); table.insert(set, f(tat))
	else
		-- Cut from the pace the fleet was sending at: the least of the
		-- cut's curve, the configured rate and the units reserved over the
		-- last second.
		local cur = math.min(r or math.huge, ceiling)
		local sec = math.floor(now / 1000000)
		if sec == cs + 1 then
			cp, cc = cc, 0
		elseif sec ~= cs then
			cp, cc = 0, 0
		end
		local measured = cc + cp * (1 - (now / 1000000 - sec))
		if measured > 0 then
			cur = math.min(cur, measured)
		end
		if cur == math.huge then
			cur = 1 -- no measure at all: start from one a second
		end
		local before = interval
		if r ~= nil then
			before = math.max(before, 1000000 / r)
		end
		am, ac, al = math.max(cur, MIN_RATE / BETA), now, now
		local after = math.max(interval, 1000000 / rate(now))
		if before > 0 and after > before and tat > now then
			-- Turns already handed out stay; the queue behind them is
			-- stretched to the new pace, so the fleet's count over time
			-- follows the cut.
			tat = now + (tat - now) * after / before
		end
		table.insert(set, 'am'); table.insert(set, f(am))
		table.insert(set, 'ac'); table.insert(set, f(ac))
		table.insert(set, 'al'); table.insert(set, f(al))
		table.insert(set, 't'); table.insert(set, f(tat))
	end
end
if al ~= nil then
	-- A second rejection within STRIKE must find the first.
	keep = math.max(keep, al + STRIKE)
end
if am ~= nil and ac ~= nil and am > 0 then
	-- The cut is in force until its curve reaches the configured rate (or
	-- ten times the rate it was cut from).
	local ceiling = math.huge
	if interval > 0 then
		ceiling = 1000000 / interval
	end
	local y = math.max(0, (math.min(ceiling, 10 * am) / am - 1) / CUBIC_C)
	keep = math.max(keep, ac + CUBIC_K + CUBIC_P * y ^ (1 / 3))
end

if #set > 0 then
	table.insert(set, 'x'); table.insert(set, f(keep))
	redis.call('HSET', key, unpack(set))
	-- Never shorter than the key's TTL already is (reserve.lua keeps its
	-- counter for 2 s).
	local expire = math.max(tat or now, paused, keep) - now
	redis.call('PEXPIRE', key, math.max(1, math.ceil(expire / 1000), redis.call('PTTL', key)))
end
if wr ~= nil and wz ~= nil and (wr >= 1 or now >= wz) then
	return 1
end
return 0
