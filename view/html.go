package view

import (
	"fmt"
	"html/template"
	"time"
)

// page renders a Page as HTML: a table per limiter, no script.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"num": func(x *float64) string {
		if x == nil {
			return "∞"
		}
		return fmt.Sprintf("%.6g", *x)
	},
	"dur": func(ns int64) string {
		if ns == 0 {
			return "0"
		}
		return time.Duration(ns).Round(time.Millisecond).String()
	},
	"when": func(t *time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"utc":  func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
}).Parse(`<!DOCTYPE html>
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
<p>At {{utc .At}}. <a href="?format=json">JSON</a></p>
{{range .Limiters}}
<h2>{{.Name}}</h2>
{{with .Store}}<p{{if or .FallingBack .BreakerOpen}} class="warn"{{end}}>Store: fail mode {{.FailMode}};
{{if .FallingBack}}falling back since Redis last answered;{{else}}not falling back;{{end}}
breaker {{if .BreakerOpen}}open{{else}}closed{{end}}; {{.Failures}} consecutive failures{{with .Error}}; last cause: {{.}}{{end}}.</p>{{end}}
<p>{{len .Keys}} keys shown{{if .LeftOut}}, <span class="warn">{{.LeftOut}} left out</span>{{end}}.</p>
<table>
<tr><th>key</th><th>rate /s</th><th>burst</th><th>tokens</th><th>remaining</th><th>next</th><th>paused</th><th>until</th><th>queued</th><th>window left</th><th>window reset</th><th>declared</th><th>slowed down</th><th>further limits</th></tr>
{{range .Keys}}<tr><td class="key">{{.Key}}</td>
{{if .Error}}<td colspan="13" class="warn">{{.Error}}</td>{{else}}<td>{{num .Rate}}</td><td>{{printf "%.6g" .Burst}}</td><td>{{num .Tokens}}</td><td>{{num .Remaining}}</td><td>{{dur .NextNS}}</td><td>{{dur .PausedNS}}</td><td>{{with .PausedUntil}}{{when .}}{{end}}</td><td>{{.Queued}}</td>
<td>{{with .Window}}{{printf "%.6g" .Remaining}}{{end}}</td><td>{{with .Window}}{{dur .ResetNS}}{{end}}</td><td>{{if .Declared}}yes{{end}}</td><td>{{if .SlowedDown}}yes{{end}}</td>
<td>{{range $i, $l := .Limits}}{{if $i}}, {{end}}{{if $l.Unit}}{{$l.Unit}}{{else}}units{{end}}{{if $l.Window}} (window){{end}}: {{num $l.Remaining}}{{end}}</td>{{end}}</tr>
{{end}}</table>
{{else}}<p>No limiters.</p>
{{end}}
</body></html>
`))
