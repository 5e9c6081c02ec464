package view

import (
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// htmlPage is a Page as the HTML shows it: every cell formatted.
type htmlPage struct {
	At       string
	Limiters []htmlGroup
}

type htmlGroup struct {
	Name    string
	Store   *Store
	Shown   int
	LeftOut int
	// Rows are the table's rows, every text in them escaped (rowsHTML):
	// one escape per cell, not html/template's per action, a fifth of
	// the cost.
	Rows template.HTML
}

// writeHTML writes p as HTML: a table per limiter, no script.
func writeHTML(w io.Writer, p Page) error {
	hp := htmlPage{At: p.At.UTC().Format(time.RFC3339Nano)}
	for _, g := range p.Limiters {
		hp.Limiters = append(hp.Limiters, htmlGroup{Name: g.Name, Store: g.Store, Shown: len(g.Keys), LeftOut: g.LeftOut, Rows: rowsHTML(g.Keys)})
	}
	return page.Execute(w, hp)
}

// rowsHTML returns the table rows of rs, every text escaped.
func rowsHTML(rs []Row) template.HTML {
	var b strings.Builder
	var c []string
	for _, r := range rs {
		b.WriteString(`<tr><td class="key">`)
		b.WriteString(template.HTMLEscapeString(r.Key))
		b.WriteString(`</td>`)
		if r.Error != "" {
			b.WriteString(`<td colspan="13" class="warn">`)
			b.WriteString(template.HTMLEscapeString(r.Error))
			b.WriteString(`</td>`)
		}
		c = cells(c[:0], r)
		for _, x := range c {
			b.WriteString(`<td>`)
			b.WriteString(template.HTMLEscapeString(x))
			b.WriteString(`</td>`)
		}
		b.WriteString("</tr>\n")
	}
	return template.HTML(b.String())
}

// cells appends r's columns after the key to c; none for a row in error.
func cells(c []string, r Row) []string {
	if r.Error != "" {
		return c
	}
	c = append(c, num(r.Rate), fnum(r.Burst), num(r.Tokens), num(r.Remaining), dur(r.NextNS), dur(r.PausedNS), "")
	if r.PausedUntil != nil {
		c[len(c)-1] = r.PausedUntil.UTC().Format(time.RFC3339Nano)
	}
	q := strconv.FormatInt(r.Queued, 10)
	if r.QueuedCritical > 0 || r.QueuedBackground > 0 {
		q += " (" + strconv.FormatInt(r.QueuedCritical, 10) + " critical, " + strconv.FormatInt(r.QueuedBackground, 10) + " background)"
	}
	c = append(c, q)
	if w := r.Window; w != nil {
		c = append(c, fnum(w.Remaining), dur(w.ResetNS))
	} else {
		c = append(c, "", "")
	}
	c = append(c, yes(r.Declared), yes(r.SlowedDown))
	var ls strings.Builder
	for i, l := range r.Limits {
		if i > 0 {
			ls.WriteString(", ")
		}
		u := l.Unit
		if u == "" {
			u = "units"
		}
		if l.Window {
			u += " (window)"
		}
		ls.WriteString(u + ": " + num(l.Remaining))
	}
	return append(c, ls.String())
}

func num(x *float64) string {
	if x == nil {
		return "∞"
	}
	return fnum(*x)
}

func fnum(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

func dur(ns int64) string {
	if ns == 0 {
		return "0"
	}
	return time.Duration(ns).Round(time.Millisecond).String()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>throttle: quotas</title>
<style>
body { font-family: sans-serif; margin: 1em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #eee; } td.key { text-align: left; font-family: monospace; }
.warn { color: #a00; }
</style></head>
<body>
<h1>Quotas</h1>
<p>At {{.At}}. <a href="?format=json">JSON</a></p>
{{range .Limiters}}
<h2>{{.Name}}</h2>
{{with .Store}}<p{{if or .FallingBack .BreakerOpen}} class="warn"{{end}}>Store: fail mode {{.FailMode}};
{{if .FallingBack}}falling back since Redis last answered;{{else}}not falling back;{{end}}
breaker {{if .BreakerOpen}}open{{else}}closed{{end}}; {{.Failures}} consecutive failures{{with .Error}}; last cause: {{.}}{{end}}.</p>{{end}}
<p>{{.Shown}} keys shown{{if .LeftOut}}, <span class="warn">{{.LeftOut}} left out</span>{{end}}.</p>
<table>
<tr><th>key</th><th>rate /s</th><th>burst</th><th>tokens</th><th>remaining</th><th>next</th><th>paused</th><th>until</th><th>queued</th><th>window left</th><th>window reset</th><th>declared</th><th>slowed down</th><th>further limits</th></tr>
{{.Rows}}</table>
{{else}}<p>No limiters.</p>
{{end}}
</body></html>
`))
