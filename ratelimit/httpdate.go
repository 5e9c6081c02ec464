package ratelimit

import (
	"net/http"
	"time"
)

// parseHTTPDate reads an HTTP-date in any of the three forms RFC 9110
// §5.6.7 requires recipients to accept, as http.ParseTime does. The form
// every server sends today, IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
// is read without time.Parse: most responses carry a Date, and it is read
// whenever a reset is an absolute time. Anything else goes to
// http.ParseTime.
func parseHTTPDate(v string) (time.Time, bool) {
	if t, ok := parseIMFFixdate(v); ok {
		return t, true
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

// parseIMFFixdate reads exactly "Mon, 02 Jan 2006 15:04:05 GMT". It
// accepts what time.Parse with http.TimeFormat accepts of that shape, no
// more: a weekday name (not checked against the date), a day valid in its
// month, hours 0-23, minutes and seconds 0-59.
func parseIMFFixdate(v string) (time.Time, bool) {
	if len(v) != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' ||
		v[16] != ' ' || v[19] != ':' || v[22] != ':' || v[25:] != " GMT" {
		return time.Time{}, false
	}
	switch v[:3] {
	case "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
	default:
		return time.Time{}, false
	}
	month := 0
	for i, m := range [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"} {
		if v[8:11] == m {
			month = i + 1
			break
		}
	}
	day, ok1 := digits(v[5:7])
	year, ok2 := digits(v[12:16])
	hour, ok3 := digits(v[17:19])
	minute, ok4 := digits(v[20:22])
	sec, ok5 := digits(v[23:25])
	if month == 0 || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day { // 31 Apr, 30 Feb: time.Parse refuses them too
		return time.Time{}, false
	}
	return t, true
}

// digits reads a fixed-width run of ASCII digits.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
