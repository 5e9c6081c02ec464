-- reserve.lua: reserve n units of one quota's token bucket, or refuse.
--
-- KEYS[1]  the quota's hash (fields below; times in µs of Redis's clock)
-- ARGV[1]  interval: µs per unit (1e6 / rate; 0 for an unlimited rate)
-- ARGV[2]  burst: units the bucket holds
-- ARGV[3]  n: units to reserve (1 <= n <= burst; the caller checked)
-- ARGV[4]  max wait in µs the caller accepts, or "" for no limit
--
-- The hash's fields:
--   t   theoretical arrival time: the moment the bucket is full again
--   p   paused until
--   wr  the server's window: units remaining (absent: no window known)
--   wz  the window's reset
--   wl  the window's size when known, else 0
--   ws  next turn while the window runs low (spreading)
--   wp  1 while the window is a probe's (wr, wz made up by this script
--       after a reset), so that the next response's window replaces it
--   rt  a request's round trip (µs): the last probe's, or the least age
--       of a response since
--   am  adaptive cut: the rate (units/s) before the last cut; absent: none
--   ac  when the last cut happened
--   al  when the last cut or shift happened
--   cs, cc, cp  units reserved in second cs, and in the second before
--   x   the window's and the cut's state is needed until then: a window
--       is remembered until 10 s (or its length) past its reset, so that
--       the first wait after the reset goes as a probe; a cut until its
--       curve is back at the configured rate, and at least 10 s
--   xe  when the TTL this script last set runs out (it sets it a second
--       long, so that most waits need no PEXPIRE)
-- adapt.lua writes the window, the cut and the pause; see there.
--
-- Returns {status, wait, turn}:
--   1  reserved: sleep wait µs, then it is the caller's turn.
--   0  the turn (wait µs away) is past the caller's limit; nothing written.
--   2  the server's window is spent: nothing reserved; sleep wait µs (its
--      reset, when a probe's answer is due, or a probe's timeout) and
--      call again.
-- turn is now + wait, µs of Redis's clock (for tests and tracing).
--
-- This is GCRA, the token bucket of golang.org/x/time/rate in another
-- form: the bucket holds burst units, refills one unit per interval, and
-- may go into debt, which is how a caller reserves a later turn. Turns are
-- handed out in the order calls reach Redis. What servers said (adapt.lua)
-- narrows it: a spent window blocks until its reset, a window running low
-- spreads its remaining units until the reset, and an adaptive cut slows
-- the pace below the configured one. Time comes from TIME only: the
-- workers' clocks never enter the decision. The logic mirrors the
-- in-process Limiter (limiter.go, pacing.go, adaptive.go).
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local maxwait = tonumber(ARGV[4]) -- nil: no limit

local PROBE_WAIT = 1000000 -- µs a probe after a reset may go unanswered
local WINDOW_KEEP = 10000000 -- µs a window is remembered past its reset, for the probe
local COUNT_KEEP = 2000000 -- µs the reservation counter is kept after a reservation
local CUBIC_K, CUBIC_P, CUBIC_C, MIN_RATE = 1000000, 3000000, 0.3, 0.1

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- The fields every wait needs; the window's and the cut's only when a
-- server said something (adapt.lua, or this script for a window, writes x
-- with them), so that the common wait reads and writes little.
local s = redis.call('HMGET', key, 't', 'p', 'cs', 'cc', 'cp', 'x', 'xe')
local tat = tonumber(s[1]) or now
local paused = tonumber(s[2]) or 0
local cs, cc, cp = tonumber(s[3]) or 0, tonumber(s[4]) or 0, tonumber(s[5]) or 0
local keep = tonumber(s[6]) or 0
local expiresAt = tonumber(s[7]) or 0 -- the TTL this script last set, µs
local wr, wz, wl, ws, am, ac, wp, rt = nil, nil, 0, 0, nil, nil, nil, nil
if s[6] then
	local e = redis.call('HMGET', key, 'wr', 'wz', 'wl', 'ws', 'am', 'ac', 'wp', 'rt')
	wr, wz = tonumber(e[1]), tonumber(e[2])
	wl, ws = tonumber(e[3]) or 0, tonumber(e[4]) or 0
	am, ac = tonumber(e[5]), tonumber(e[6])
	wp, rt = e[7], tonumber(e[8])
end
local start = math.max(now, paused)
local f = function(v) return string.format('%.17g', v) end -- every bit of a double

-- The server's window: spent until its reset. After the reset its new
-- size is unknown until a response says (adapt.lua): one probe goes.
local win = wr ~= nil and wz ~= nil
local probe = false
if win and now >= wz then
	wr, wz, probe = n, now + PROBE_WAIT, true
	keep = math.max(keep, wz + WINDOW_KEEP)
end
if win and wr < n then
	local wake = wz
	if not probe and wp == '1' and rt ~= nil then
		-- A probe is out: its answer is due about a round trip (rt) after
		-- it left. Look again then, once,
		-- rather than at its timeout: waits of other processes are not
		-- woken by its answer.
		local due = wz - PROBE_WAIT + 2 * rt + 2000
		if due > now and due < wz then
			wake = due
		end
	end
	local wait = math.ceil(math.max(wake, start) - now)
	if maxwait ~= nil and wait > maxwait then
		return {0, wait, now + wait}
	end
	return {2, wait, now + wait}
end

-- An adaptive cut in force paces below the configured rate, along the
-- cubic curve of adaptive.go, until it has grown past the configured rate
-- (or far past the rate it was cut from).
if am ~= nil and am > 0 and ac ~= nil then
	local x = (now - ac - CUBIC_K) / CUBIC_K
	if x > 0 then
		x = x * CUBIC_K / CUBIC_P
	end
	local r = math.max(am + am * CUBIC_C * x * x * x, MIN_RATE)
	local ai = 1000000 / r
	if ai > interval and r < 10 * am then
		interval = ai
	end
end

local from = math.max(tat, start)
local newtat = from + n * interval
-- The units are ours once the bucket, refilled until then, holds them.
local at = math.max(start, newtat - burst * interval)
-- A window runs low under a tenth of its size, or under 10 units when
-- its size is unknown.
local low = function(left)
	if wl > 0 then
		return left < math.max(1, wl / 10)
	end
	return left < 10
end
if win and low(wr) then
	at = math.max(at, ws)
end
local wait = math.ceil(at - now)
if wait < 0 then
	wait = 0
end
if maxwait ~= nil and wait > maxwait then
	return {0, wait, now + wait}
end

-- Units reserved per second, for the measured rate adapt.lua cuts from.
local sec = math.floor(now / 1000000)
local set = {'t', f(newtat)}
if sec ~= cs then
	if sec == cs + 1 then
		cp, cc = cc, 0
	else
		cp, cc = 0, 0
	end
	table.insert(set, 'cs'); table.insert(set, sec)
	table.insert(set, 'cp'); table.insert(set, cp)
end
cc = cc + n
table.insert(set, 'cc'); table.insert(set, cc)

-- The counter must outlive a full bucket by its reach (2 s): the rate an
-- adaptive cut starts from, and the units a first window must count, are
-- there.
local expire = math.max(newtat, paused, keep, now + COUNT_KEEP)
if win then
	-- Spend from the window at the reservation, so that requests in
	-- flight count before their responses arrive; while it runs low, the
	-- next turn comes at most remaining/(reset-turn) per second.
	wr = wr - n
	if low(wr) then
		ws = at + (wz - at) / math.max(wr + 1, 1)
	end
	for _, v in ipairs({'wr', f(wr), 'wz', f(wz), 'ws', f(ws), 'x', f(keep), 'wp', probe and 1 or 0}) do
		table.insert(set, v)
	end
end
-- Idle state expires once the bucket is full again, any pause is over,
-- the window and the cut (x) need no memory, and no unit was reserved for
-- 2 s: a missing hash means exactly that. The TTL is set a second beyond
-- what is needed, so that the waits of the next second need no PEXPIRE.
if expire > expiresAt then
	expiresAt = expire + 1000000
	table.insert(set, 'xe'); table.insert(set, f(expiresAt))
	redis.call('HSET', key, unpack(set))
	redis.call('PEXPIRE', key, math.max(1, math.ceil((expiresAt - now) / 1000)))
else
	redis.call('HSET', key, unpack(set))
end
return {1, wait, now + wait}
