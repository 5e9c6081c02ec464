package distributed
import ("context";"testing";"fmt";"strings";"time")
func TestDbgCost(t *testing.T) {
	s, c := startRedis(t)
	q := New(c, "bench", 1e9, 1e6)
	w := q.For("api.example.com")
	ctx := context.Background()
	w.WaitN(ctx, 1)
	s.Do("CONFIG", "RESETSTAT")
	st := time.Now()
	for i := 0; i < 2000; i++ { w.WaitN(ctx, 1) }
	fmt.Println("per wait", time.Since(st)/2000)
	for _, l := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") { if strings.Contains(l, "usec_per_call") { fmt.Println(l) } }
	st = time.Now()
	for i := 0; i < 2000; i++ { trivialScript.Run(ctx, c, nil) }
	fmt.Println("per trivial", time.Since(st)/2000)
}
