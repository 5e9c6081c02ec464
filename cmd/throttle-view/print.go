package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/throttle-go/throttle/view"
)

// writeJSON writes p as indented JSON.
func writeJSON(w io.Writer, p view.Page) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// writeTable writes p as a table a key a line.
func writeTable(w io.Writer, p view.Page) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, g := range p.Limiters {
		fmt.Fprintf(tw, "quota %q at %s: %d keys", g.Name, p.At.UTC().Format(time.RFC3339), len(g.Keys))
		if g.LeftOut > 0 {
			fmt.Fprint(tw, ", more not shown (raise -max)")
		}
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "KEY\tRATE/S\tBURST\tTOKENS\tREMAINING\tNEXT\tPAUSED\tQUEUED\tWINDOW\tSLOWED")
		for _, r := range g.Keys {
			if r.Error != "" {
				fmt.Fprintf(tw, "%s\terror: %s\n", r.Key, r.Error)
				continue
			}
			win := "-"
			if r.Window != nil {
				win = fmt.Sprintf("%g left, reset %s", r.Window.Remaining, dur(r.Window.ResetNS))
			}
			slowed := "-"
			if r.SlowedDown {
				slowed = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", printable(r.Key), num(r.Rate), r.Burst,
				num(r.Tokens), num(r.Remaining), dur(r.NextNS), dur(r.PausedNS), r.Queued, win, slowed)
		}
	}
	return tw.Flush()
}

// num formats a number of the view: "inf" for null.
func num(x *float64) string {
	if x == nil {
		return "inf"
	}
	return fmt.Sprintf("%.6g", *x)
}

// dur formats ns as a duration to the millisecond.
func dur(ns int64) string {
	return time.Duration(ns).Round(time.Millisecond).String()
}

// printable quotes a key that a terminal would not show as it is.
func printable(key string) string {
	if key != "" && !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\t' || r == 0xfffd }) {
		return key
	}
	return fmt.Sprintf("%q", key)
}
