package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func TestParseHTTPDate(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"Sun, 06 Nov 1994 08:49:37 GMT", time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC), true},
		{"Sunday, 06-Nov-94 08:49:37 GMT", time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC), true}, // RFC 850
		{"Sun Nov  6 08:49:37 1994", time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC), true},       // asctime
		{"Mon, 31 Dec 2029 23:59:59 GMT", time.Date(2029, 12, 31, 23, 59, 59, 0, time.UTC), true},
		{"Mon, 30 Feb 2026 10:00:00 GMT", time.Time{}, false},
		{"Mon, 06 Nov 1994 24:00:00 GMT", time.Time{}, false},
		{"Xyz, 06 Nov 1994 08:49:37 GMT", time.Time{}, false},
		{"Sun, 06 Foo 1994 08:49:37 GMT", time.Time{}, false},
		{"Sun, 06 Nov 1994 08:49:37 UTC", time.Time{}, false},
		{"Sun, 0x Nov 1994 08:49:37 GMT", time.Time{}, false},
		{"", time.Time{}, false},
	}
	for _, tt := range tests {
		got, ok := parseHTTPDate(tt.in)
		if ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("parseHTTPDate(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseHTTPDate checks that the IMF-fixdate fast path agrees with
// http.ParseTime on every input.
func FuzzParseHTTPDate(f *testing.F) {
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT")
	f.Add("Mon, 30 Feb 2026 10:00:00 GMT")
	f.Add("Sat, 29 Feb 2020 23:59:59 GMT")
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT")
	for _, v := range []string{"Mon, 06 Nov 1994 08:49:60 GMT", "Mon, 00 Nov 1994 08:49:00 GMT", "Mon, 06 Nov 0000 08:49:00 GMT",
		"Mon, 06 Nov 1994 08:49:00 gmt", "Tue, 06 Nov 1994 08:49:00 GMT", "Mon, 29 Feb 2021 00:00:00 GMT", "Mon, 06 nov 1994 08:49:00 GMT"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseHTTPDate(v)
		want, err := http.ParseTime(v)
		if ok != (err == nil) || (ok && !got.Equal(want)) {
			t.Fatalf("parseHTTPDate(%q) = %v, %v; http.ParseTime = %v, %v", v, got, ok, want, err)
		}
	})
}
