-- schedule_ops.lua: the view, the ops of the general path and the write-back.
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

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
-- Returns whether it carried anything.
local function seed(knownId, floorRel, holdRel)
	if knownId == '' or tonumber(knownId) == s.id then
		return false
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
	return (f ~= nil and f > 0) or (h ~= nil and h > 0)
end

local reply
if op == 'wait' or op == 'mwait' then
	-- ARGV[5] n, ARGV[6] queue, ARGV[7] max wait µs or "", ARGV[8] the
	-- id this process knew, ARGV[9] its last turn, µs from now, or "",
	-- ARGV[10] its known pause, µs from now, or "" (a wait leaves both
	-- out when they are ""; mwait sends them). Returns {status, wait
	-- µs, id, end, recheck µs (-1: none), now}: status 1, a ticket (queue,
	-- end) whose turn is wait from now (look again at recheck: a cut's
	-- pace steps then), and, on a key with a learned budget's window, the
	-- µs to its reset; 0, its turn is past the max wait: nothing kept;
	-- 2, it would queue past ARGV[A.WAIT_MAXQUEUED] units queued: nothing kept.
	local n, qi, maxwait = tonumber(ARGV[A.WAIT_N]), tonumber(ARGV[A.WAIT_QUEUE]), tonumber(ARGV[A.WAIT_MAXWAIT])
	seed(ARGV[A.WAIT_KNOWN_ID], ARGV[A.WAIT_KNOWN_FLOOR], ARGV[A.WAIT_KNOWN_HOLD])
	advance()
	local e = enqueue(qi, n)
	local t = turn(qi, e)
	local wt = waitOf(t)
	local maxq = tonumber(ARGV[A.WAIT_MAXQUEUED])
	if maxwait ~= nil and wt >= maxwait and wt > 0 then
		cancelTicket(s.q[qi], e, n)
		tidyClasses()
		reply = {[R.WAIT_STATUS] = STATUS.NONE, [R.WAIT_WAIT] = wt, [R.WAIT_ID] = s.id, [R.WAIT_END] = 0, [R.WAIT_RECHECK] = REPLY.NONE, [R.WAIT_NOW] = now}
	elseif maxq ~= nil and maxq > 0 and t > now and queued() > maxq then
		-- It would queue past the key's bound: nothing kept.
		cancelTicket(s.q[qi], e, n)
		tidyClasses()
		reply = {[R.WAIT_STATUS] = STATUS.FULL, [R.WAIT_WAIT] = wt, [R.WAIT_ID] = s.id, [R.WAIT_END] = 0, [R.WAIT_RECHECK] = REPLY.NONE, [R.WAIT_NOW] = now}
	else
		if t <= now then
			advance()
		end
		if behind(qi) then
			-- A retry goes ahead of first attempts already waiting, and a
			-- class's ticket may go ahead of another class's: their turns
			-- move later, and their sleepers must learn it.
			moved = true
		end
		reply = {[R.WAIT_STATUS] = STATUS.OK, [R.WAIT_WAIT] = wt, [R.WAIT_ID] = s.id, [R.WAIT_END] = e, [R.WAIT_RECHECK] = recheck(), [R.WAIT_NOW] = now}
		if w.rolls then
			-- A learned budget's window: when its reset comes, so that the
			-- process tells the acceptance of a unit sent past it.
			reply[R.WAIT_RESET] = waitOf(w.reset)
		end
	end
elseif op == 'turns' then
	-- ARGV[5] the tickets' id, ARGV[6…] pairs of queue and end. Returns,
	-- per ticket, its wait in µs (-1: it has gone, -2: the state it came
	-- from is lost), then the recheck (µs from now; -1: none) and now,
	-- and as wait's reply the µs to a learned budget's window's reset.
	advance()
	reply = {}
	for i = A.TURNS_TICKETS, #ARGV - 1, 2 do
		if tonumber(ARGV[A.TURNS_ID]) ~= s.id then
			table.insert(reply, TURN.LOST)
		else
			local qi, e = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
			if e <= s.q[qi].rel then
				table.insert(reply, TURN.GONE)
			else
				table.insert(reply, waitOf(turn(qi, e)))
			end
		end
	end
	local k = #reply -- the lead: a wait per ticket
	reply[k + R.TURNS_RECHECK], reply[k + R.TURNS_NOW] = recheck(), now
	if w.rolls then
		reply[k + R.TURNS_RESET] = waitOf(w.reset) -- as wait's reply
	end
elseif op == 'cancel' then
	-- ARGV[5] id, ARGV[6] queue, ARGV[7] end, ARGV[8] n. Returns 1 if the
	-- units came back.
	advance()
	reply = BACK.NO
	if tonumber(ARGV[A.CANCEL_ID]) == s.id then
		local qi, e, n = tonumber(ARGV[A.CANCEL_QUEUE]), tonumber(ARGV[A.CANCEL_END]), tonumber(ARGV[A.CANCEL_N])
		if e > s.q[qi].rel then
			cancelTicket(s.q[qi], e, n)
			tidyClasses()
			reply = BACK.YES
			if M ~= nil then
				moved = true -- every limit's walk
			elseif qi >= 2 and behind(qi) then
				-- A critical or background ticket given back beside another
				-- class's: the merge may move tickets of a class a refund's
				-- message (queue, end) does not order (see pushMsg).
				moved = true
			elseif e < s.q[qi]['end'] or behind(qi) then
				refunded(qi, e) -- the tickets behind move up; the tail's moves none
			end
		end
	end
elseif op == 'pause' then
	-- ARGV[5] d µs. Returns the pause's end, µs from now.
	advance()
	local until_ = now + tonumber(ARGV[A.PAUSE_D])
	if until_ > s.hold then
		s.hold, moved = until_, true
	end
	reply = waitOf(s.hold)
elseif op == 'adapt' then
	-- ARGV[5] cost, ARGV[6] pause µs (0: none), ARGV[7] remaining or ""
	-- (no window), ARGV[8] reset µs, ARGV[9] size, ARGV[10] length µs,
	-- ARGV[11] the rejected request's age µs, or "" (no bare rejection),
	-- ARGV[12] "1" if the response was a refusal (see refused), ARGV[13]
	-- the request's age µs ("" or missing: unknown, taken as 0), ARGV[14]
	-- "1" if the server took it, "2" if it also stated a limit of its own
	-- (schedule_budget.lua). Returns the pause it set for ARGV[6], in µs
	-- rounded up: ARGV[6], or less for a learned budget's refused probe
	-- (0 for no pause).
	advance()
	local cost = tonumber(ARGV[A.ADAPT_COST])
	s.pending = math.max(s.pending - math.max(cost, 1), 0)
	local p = tonumber(ARGV[A.ADAPT_PAUSE])
	local remaining = tonumber(ARGV[A.ADAPT_REMAINING])
	local sentAt = now - (tonumber(ARGV[A.ADAPT_AGE] or '') or 0)
	local set = 0
	if p > 0 then
		local until_ = now + p
		if ARGV[A.ADAPT_REFUSED] == FLAG_ARG.ON and remaining == nil and ARGV[A.ADAPT_ACCEPTED] ~= ACCEPTED_ARG.STATED then
			local m
			until_, m = B.refused(sentAt, math.max(cost, 1), p)
			moved = moved or m
		end
		set = math.max(math.ceil(until_ - now), 0)
		if until_ > s.hold then
			s.hold, moved = until_, true
		end
	end
	if p > 0 and ARGV[A.ADAPT_REFUSED] == FLAG_ARG.ON and refused() then
		moved = true
	end
	if ARGV[A.ADAPT_ACCEPTED] == ACCEPTED_ARG.UNIT and B.accepted(sentAt) then
		moved = true
	end
	if remaining ~= nil then
		B.clear() -- a window the server states: no hidden budget
		B.forget()
		mmoved()
		update(math.max(remaining, 0), tonumber(ARGV[A.ADAPT_RESET]), tonumber(ARGV[A.ADAPT_SIZE]), tonumber(ARGV[A.ADAPT_LENGTH]), math.min(s.pending, sent()))
		moved = true
	end
	local age = tonumber(ARGV[A.ADAPT_REJECTED_AGE])
	if age ~= nil and reject(now - age, cost) then
		moved = true
	end
	reply = set
elseif op == 'settle' then
	-- ARGV[5] spent, ARGV[6] actual (both ≥ 0, spent within the burst:
	-- checked by the caller). The charge is bounded by the burst, if
	-- the key has a pace (see boundFirst). Returns the units of the charge dropped (at most FAR). A
	-- give-back to a key without state (a full bucket) writes nothing.
	local spent, actual = tonumber(ARGV[A.SETTLE_SPENT]), tonumber(ARGV[A.SETTLE_ACTUAL])
	if fresh and actual <= spent then
		return 0
	end
	local d, dropped = boundFirst(actual - spent)
	actual = spent + d
	advance()
	if spent ~= actual then
		mmoved()
	end
	if settle(spent, actual) then
		moved = true
	end
	reply = math.min(dropped, FAR)
elseif op == 'msettle' then
	-- settle's ARGV[5] spent and ARGV[6] actual on the first limit, then
	-- mwait's ARGV[A.WAIT_XSPEC] (the further limits' configuration) and ARGV[A.WAIT_XCOST…]
	-- actual − spent in each of them (CostSettler's rule: xsettle), each
	-- charge bounded by its limit's burst or count (see bound). Returns
	-- the units of each charge dropped (at most FAR): the first limit's,
	-- then the further limits' in their order.
	local spent, actual = tonumber(ARGV[A.SETTLE_SPENT]), tonumber(ARGV[A.SETTLE_ACTUAL])
	local d, dropped = boundFirst(actual - spent)
	actual = spent + d
	reply = {[R.SETTLE_DROPPED] = math.min(dropped, FAR)}
	advance()
	local any = spent ~= actual
	for L = 1, M.k do
		mcost[L], dropped = bound(mcost[L], xmost(M.lim[L]))
		reply[R.SETTLE_XDROPPED + L - 1] = math.min(dropped, FAR)
		if mcost[L] ~= 0 then
			xsettle(M.lim[L], mcost[L])
			any = true
		end
	end
	if any then
		mmoved()
	end
	if settle(spent, actual) or (any and #M.q[0] + #M.q[1] + #M.q[2] + #M.q[3] > 0) then
		moved = true
	end
elseif op == 'try' or op == 'mtry' then
	-- wait's ARGV, its max wait "0" (so that the fast path serves a try
	-- of one unit as a wait refused past its max wait). The rules of a
	-- wait (schedule_ops.go's try): the ticket goes if its turn has come;
	-- otherwise it is taken back and nothing changes. Returns wait's
	-- {status, wait µs, id, end, -1, now}: status 1 if the units went, 0
	-- (wait: its turn) if not.
	local n, qi = tonumber(ARGV[A.WAIT_N]), tonumber(ARGV[A.WAIT_QUEUE])
	local seeded = seed(ARGV[A.WAIT_KNOWN_ID], ARGV[A.WAIT_KNOWN_FLOOR], ARGV[A.WAIT_KNOWN_HOLD])
	advance()
	-- What enqueue may change besides the ticket, to put back.
	local maxCost, tat, wasMoved, win = s.maxCost, s.tat, moved, {}
	local vb = {[1] = s.vb[1], [2] = s.vb[2], [3] = s.vb[3]}
	local floor = M and M.floor
	local cred = {s.credInt, s.credTau, s.spAt, s.spK, s.spRho}
	for k, v in pairs(w) do
		win[k] = v
	end
	local e = enqueue(qi, n)
	local t = turn(qi, e)
	if t <= now then
		advance() -- lets the ticket go
	end
	if e <= s.q[qi].rel then
		reply = {[R.WAIT_STATUS] = STATUS.OK, [R.WAIT_WAIT] = 0, [R.WAIT_ID] = s.id, [R.WAIT_END] = e, [R.WAIT_RECHECK] = REPLY.NONE, [R.WAIT_NOW] = now}
	else
		-- The tail's ticket is taken back outright: the queue is as it was.
		cancelTicket(s.q[qi], e, n)
		s.maxCost, s.tat, moved = maxCost, tat, wasMoved
		s.vb = vb
		if M ~= nil then
			M.floor = floor
		end
		s.credInt, s.credTau, s.spAt, s.spK, s.spRho = cred[1], cred[2], cred[3], cred[4], cred[5]
		for k, v in pairs(win) do
			w[k] = v
		end
		reply = {[R.WAIT_STATUS] = STATUS.NONE, [R.WAIT_WAIT] = waitOf(t), [R.WAIT_ID] = s.id, [R.WAIT_END] = 0, [R.WAIT_RECHECK] = REPLY.NONE, [R.WAIT_NOW] = now}
		if fresh and not seeded then
			return reply -- no state to write for a key that had none
		end
	end
elseif op == 'lease' then
	-- Leased turns (see lease.go): first the tickets a process gives back
	-- (each not yet due as the cancel op does: the tail's taken back
	-- outright, any other a hole; the spent ones settled to no cost while
	-- nothing is queued), then up to k tickets of one unit in the queue of
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
	local k, need, maxwait = tonumber(ARGV[A.LEASE_K]), tonumber(ARGV[A.LEASE_NEED]), tonumber(ARGV[A.LEASE_MAXWAIT])
	local lrate, late = tonumber(ARGV[A.LEASE_RATE]), tonumber(ARGV[A.LEASE_LATE])
	seed(ARGV[A.LEASE_KNOWN_ID], ARGV[A.LEASE_KNOWN_FLOOR], ARGV[A.LEASE_KNOWN_HOLD])
	advance()
	if ARGV[A.LEASE_BACK_ID] ~= '' and tonumber(ARGV[A.LEASE_BACK_ID]) == s.id then
		local spent = 0
		for i = #ARGV, A.LEASE_BACK, -1 do -- descending: the tail's first
			local e = tonumber(ARGV[i])
			if e > s.q[1].rel and e <= s.q[1]['end'] then
				if e ~= s.q[1]['end'] or behind(1) then
					-- The tickets behind move up: the queue's, and the other
					-- classes' that the merge put behind it (a refund's
					-- message of queue 1 concerns theirs: see pushMsg).
					refunded(1, e)
				end
				cancelTicket(s.q[1], e, 1)
				tidyClasses()
			elseif e <= s.q[1].rel then
				spent = spent + 1
			end
		end
		-- Spent turns (they went at their times, unused): settled to no
		-- cost, settle's rule (the bucket's units back, to its burst and
		-- no further), while nothing is queued and no pause holds, so that
		-- no turn moves; otherwise they stay spent.
		if spent > 0 and queued() == 0 and now >= s.hold then
			settle(spent, 0)
		end
		if spent > 0 and s.hb.on then
			-- Never sent: not units of a hidden budget's cycle.
			s.hb.n = math.max(s.hb.n - spent, 0)
		end
	end
	local waits, last, due = {}, 0, false
	-- With nothing but the bucket and the hold (no window, no cut), the
	-- turns past the first are turnAt's closed form at consecutive
	-- positions (enqueue changes no more than the queue's end then).
	-- A key counting a hidden budget's cycles leases only for the waits
	-- queued, as under a window: a turn leased ahead and left unused
	-- would count as sent. Nor with a critical or background wait
	-- queued: the merge places each ticket (position, turn).
	local simple = not w.valid and c.r0 == 0 and not s.hb.on and live(s.q[2]) == 0 and live(s.q[3]) == 0
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
				t = math.max(s.hold, from + ((p1 + j - 1) * iv - tau)) -- head's turn
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
			tidyClasses()
			if j == 1 then
				waits = {wt}
			end
			break
		end
		table.insert(waits, wt)
		last = e
		if behind(1) then
			-- The merge may put the ticket ahead of another class's
			-- tickets: their turns move later, as a wait's moves them.
			moved = true
		end
		if wt == 0 then
			due = true
		end
	end
	if due then
		advance()
	end
	if last == 0 then
		reply = {[R.LEASE_COUNT] = 0, [R.LEASE_ID] = s.id, [R.LEASE_LAST] = 0, [R.LEASE_RECHECK] = REPLY.NONE, [R.LEASE_NOW] = now, [R.LEASE_WAITS] = waits[1] or 0}
	else
		reply = {[R.LEASE_COUNT] = #waits, [R.LEASE_ID] = s.id, [R.LEASE_LAST] = last, [R.LEASE_RECHECK] = recheck(), [R.LEASE_NOW] = now}
		for j, wt in ipairs(waits) do
			reply[R.LEASE_WAITS + j - 1] = wt
		end
	end
	if w.rolls then
		table.insert(reply, waitOf(w.reset)) -- as wait's reply
	end
elseif op == 'mstate' then
	-- Read only: nothing is written, no expiry moves. ARGV[A.STATE_XSPEC] the
	-- further limits' configuration (as mwait's). Returns each further
	-- limit's units left once the queued waits have spent theirs, ·1e6
	-- (floor; 2^53: no limit), in the configuration's order
	-- (limits_state.go's xview), then now.
	advance()
	local _, lims = mwalk(function()
		return true
	end)
	local out = {}
	for L, l in ipairs(lims) do
		local r = INF
		if l[1] == KIND.BUCKET then
			if l[2] > 0 then
				r = math.min(l[3] / l[2], (now - l[4] + l[3]) / l[2])
			end
		elseif l[1] == KIND.FIXED then
			local _, cur = xcounts(l, math.floor(now / l[2]))
			r = l[3] - cur
		elseif l[1] == KIND.SLIDING then
			local i = math.floor(now / l[2])
			local prev, cur = xcounts(l, i)
			r = math.floor(l[3] - prev * (1 - (now / l[2] - i)) - cur)
		elseif l[1] == KIND.LOG then
			local g, sum = l[3], 0
			for i = 2, #g, 2 do
				if g[i] + l[2] > now then
					sum = sum + g[i + 1]
				end
			end
			r = g[1] - sum
		elseif l[1] == KIND.FIRST then
			r = l[3]
			if now < l[6] + l[2] then
				r = l[3] - l[5]
			end
		end
		if r == INF then
			out[L] = 2 ^ 53
		else
			out[L] = math.floor(r * 1e6)
		end
	end
	out[#out + 1] = now
	return struct.pack('<' .. string.rep('d', #out), unpack(out))
elseif op == 'state' then
	-- Read only: nothing is written, no expiry moves. Returns {tokens·1e6
	-- (floor; 2^53: no pace), remaining (2^53: no limit), next turn µs,
	-- pause left µs, queued, pace in force in units a second·1e6 (0:
	-- none), burst·1e6, cut (0/1), window (0/1), window left·1e6, window
	-- reset µs, the critical and background classes' queued units, now},
	-- each within ±FAR.
	advance()
	local tokens, remaining, nxt, q, interval, burst, cutting = view()
	local BIG = 2 ^ 53 -- +Inf
	local function fixed(x, scale)
		if x == INF then
			return BIG
		end
		return math.max(math.min(math.floor(x * scale), FAR), -FAR)
	end
	local function flag(b)
		if b then
			return 1
		end
		return 0
	end
	local rate = 0
	if interval > 0 then
		rate = math.min(math.floor(SEC / interval * 1e6 + 0.5), FAR)
	end
	local winLeft, winReset = 0, 0
	if w.valid then
		winLeft, winReset = fixed(w.left, 1e6), waitOf(w.reset)
	end
	return {fixed(tokens, 1e6), fixed(remaining, 1), waitOf(nxt), waitOf(s.hold), q, rate,
		fixed(burst, 1e6), flag(cutting), flag(w.valid), winLeft, winReset,
		live(s.q[QUEUE.CRITICAL]), live(s.q[QUEUE.BACKGROUND]), now}
end

-- Write the state back; publish a move.
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
if s.hb.on then
	expire = math.max(expire, s.hb.at + HIDDEN_KEEP * SEC)
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
expire = mexpire(expire)
local ext, inCore = extOf()
store(ext, inCore, expire)
if moved then
	redis.call('PUBLISH', channel, s.id .. ' ' .. key)
elseif refundedAt ~= nil then
	redis.call('PUBLISH', channel, string.format('%d:%d:%d ', s.id, refundedAt[1], refundedAt[2]) .. key)
end
return reply
