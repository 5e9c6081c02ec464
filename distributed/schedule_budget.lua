-- schedule_budget.lua: a hidden budget's cycles and its learned window (schedule_budget.go).
-- A part of the schedule script, not a script of its own: script.go
-- joins schedule.lua and its parts in order into one chunk, whose
-- locals every part shares (see schedule.lua).

local B = {} -- the budget's rules, as schedule_budget.go's functions

-- learned: the window of q per w the last two cycles agree on, and lo.
function B.learned()
	local b = s.hb
	if b.ended < 2 then
		return nil
	end
	local c0, c1 = b.c[1], b.c[2]
	local q, w = math.min(c0.q, c1.q), math.min(c0.w, c1.w)
	if q < 1 or w <= 0 or math.abs(c0.q - c1.q) > math.max(1, HIDDEN_AGREE * math.max(c0.q, c1.q))
		or math.abs(c0.w - c1.w) > HIDDEN_AGREE * math.max(c0.w, c1.w) then
		return nil
	end
	return q, w, math.min(math.max(c0.lo, c1.lo), w)
end
function B.target(lo, hi)
	if hi - lo <= HIDDEN_TIGHT * hi then
		return hi
	end
	return math.max(hi - HIDDEN_STEP * hi, lo + (hi - lo) / 2)
end
function B.clear()
	s.hb = {on = false, at = 0, n = 0, first = 0, ['end'] = 0, c = {{q = 0, w = 0, lo = 0}, {q = 0, w = 0, lo = 0}}, ended = 0}
end
function B.counted(k)
	local b = s.hb
	if not b.on then
		return
	end
	if now - b.at > HIDDEN_KEEP * SEC then
		B.clear()
		return
	end
	if b.n == 0 then
		b.first = now
	end
	b.n = b.n + k
end
-- emptyWindow: the window no response told (schedule_window.go's window{}).
function B.emptyWindow()
	local win = s.win
	win.valid, win.left, win.reset, win.size, win.probed, win.spreadAt, win.spreadLeft, win.probeAt, win.told = false, 0, 0, 0, 0, 0, 0, 0, 0
	win.rolls, win.started, win.length, win.lo, win.hi, win.past, win.sent0, win.first = false, false, 0, 0, 0, 0, 0, 0
	win.tight, win.miss = false, 0
end
function B.forget()
	if not s.win.rolls then
		return false
	end
	B.emptyWindow()
	return true
end
-- learnedWindow sets the window to a learned budget's.
function B.learnedWindow(left, reset, size, length, lo, hi, sent0, first, started)
	B.emptyWindow()
	local win = s.win
	win.valid, win.rolls, win.left, win.reset, win.probeAt, win.size, win.told = true, true, left, reset, reset, size, left
	win.length, win.lo, win.hi, win.sent0, win.first, win.started = length, lo, hi, sent0, first, started
end
function B.install(until_, ended)
	local win = s.win
	local q, hi, lo = B.learned()
	if q == nil then
		return B.forget()
	end
	if win.rolls and not win.started and win.hi == hi and win.lo == lo and win.size == q then
		return false
	end
	if win.rolls and win.started and not ended then
		if win.size <= q then
			return false
		end
		win.size, win.left = q, math.min(win.left, q)
		return true
	end
	B.learnedWindow(0, until_, q, hi, lo, hi, 0, 0, false)
	return true
end
-- refused: a refusal of cost units sent at sentAt, pause µs (schedule_budget.go's
-- budgetRefused); returns the pause's end and whether the window changed.
function B.refused(sentAt, cost, pause)
	local until_ = now + pause
	local b, win = s.hb, s.win
	if M ~= nil or (win.valid and not win.rolls) then
		return until_, false
	end
	if not b.on or now - b.at > HIDDEN_KEEP * SEC then
		B.clear()
		s.hb.on, s.hb.at, s.hb['end'] = true, now, now
		return until_, B.forget()
	end
	b.at = now
	if sentAt < b['end'] then
		if b.ended == 0 or b.c[2].q < cost then
			return until_, false
		end
		b.c[2].q = b.c[2].q - cost
		return until_, B.install(until_, false)
	end
	if win.rolls and win.started and win.probed > 0 and win.length < win.hi and sentAt >= win.probeAt
		and sentAt < win.first + win.hi and until_ - SEC < win.first + win.hi then
		win.lo = math.max(win.lo, sentAt - win.first)
		win.length, win.tight = win.hi, true
		win.reset, win.probeAt, win.probed, win.past = win.first + win.hi, win.first + win.hi, 0, 0
		return win.reset, true
	end
	if win.rolls and win.started and sentAt >= win.sent0 and sentAt < win.reset then
		if win.miss > 0 and sentAt < win.miss then
			return until_, false
		end
		if win.miss == 0 or now - win.miss > 2 * win.length then
			win.miss, win.hi, win.tight = now, win.hi + HIDDEN_TIGHT * win.hi, true
			local q, wmax = B.learned()
			if q ~= nil then
				win.hi = math.min(win.hi, wmax)
			end
			return math.min(until_, math.max(now, sentAt - win.length + win.hi)), false
		end
	end
	if b.n > 0 then
		b.c[1] = b.c[2]
		b.c[2] = {q = math.max(b.n - cost, 0), w = until_ - b.first, lo = math.max(sentAt + pause - SEC - b.first, 0)}
		b.ended = math.min(b.ended + 1, 2)
	end
	b.n, b['end'] = 0, now
	return until_, B.install(until_, true)
end
-- accepted: the acceptance of a unit sent at sentAt (budgetAccepted).
function B.accepted(sentAt)
	local win, b = s.win, s.hb
	if not win.valid or not win.rolls or sentAt < win.reset then
		return false
	end
	if now - b.at > HIDDEN_KEEP * SEC then
		B.clear()
		return B.forget()
	end
	if win.started and win.left == 0 then
		win.hi = math.min(win.hi, now - win.sent0)
		if win.lo >= win.hi then
			win.lo = 0
		end
	end
	local length = B.target(win.lo, win.hi)
	if win.tight then
		length = win.hi
	end
	local left = math.max(win.size - win.past, 0)
	local tight, miss = win.tight, win.miss
	b.n, b.first = win.past, sentAt
	B.learnedWindow(left, sentAt + length, win.size, length, win.lo, win.hi, sentAt, now, true)
	win.tight, win.miss = tight, miss
	return true
end
