package distributed
import ("context";"testing";"fmt";"strings";"github.com/redis/go-redis/v9")
func TestDbgCost2(t *testing.T) {
	s, c := startRedis(t)
	ctx := context.Background()
	src := luaConstants() + scheduleSrc
	i := strings.Index(src, "-- The fast path: see above.")
	j := strings.Index(src, "	local tat, hold, rel, fin = ")
	variants := [][2]string{
		{"trivial", "return 1"},
		{"big-return-early", src[:i] + "do return 1 end\n" + src[i:]},
		{"fastpath-enter", src[:j] + "do return 1 end\n" + src[j:]},
		{"small-prefix", src[:i] + "return 1"},
		{"full", src},
	}
	for _, nv := range variants {
		sc := redis.NewScript(nv[1]); sc.Load(ctx, c); c.Del(ctx, "{k}")
		args := []any{"wait", "0.001", 1000000, "ch", 1, 1, "", "", "", ""}
		if err := sc.Run(ctx, c, []string{"{k}"}, args...).Err(); err != nil { t.Fatal(nv[0], err) }
		s.Do("CONFIG", "RESETSTAT")
		for i := 0; i < 2000; i++ { sc.Run(ctx, c, []string{"{k}"}, args...) }
		for _, l := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") { if strings.Contains(l, "evalsha") { fmt.Println(nv[0], l) } }
	}
}
