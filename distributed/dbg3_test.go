package distributed
import ("context";"testing";"fmt";"github.com/redis/go-redis/v9")
func TestDbgCost3(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	body := `
local function us() local t = redis.call('TIME') return tonumber(t[1])*1000000 + tonumber(t[2]) end
local f = function(v) return string.format('%.17g', v) end
local t0 = us()
for i = 1, 1000 do local x = f(1796102153539590 + i) end
local t1 = us()
for i = 1, 1000 do local x = math.max(i, 5) local y = math.floor(i / 3) end
local t2 = us()
for i = 1, 1000 do local s = {} for j = 1, 12 do table.insert(s, j) end end
local t3 = us()
for i = 1, 1000 do local v = tonumber("1796102153539590") end
local t4 = us()
for i = 1, 1000 do local g = function() return i end end
local t5 = us()
return {t1-t0, t2-t1, t3-t2, t4-t3, t5-t4}
`
	r, err := redis.NewScript(body).Run(ctx, c, nil).Result()
	fmt.Println("µs per 1000: format, math, 12 inserts, tonumber, closure:", r, err)
}
