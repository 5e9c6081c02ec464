package throttle

import (
	"net/http"
	"testing"
)

func TestHostKey(t *testing.T) {
	tests := []struct {
		name, url, host, want string
	}{
		{"plain", "https://api.example.com/v1", "", "api.example.com"},
		{"upper case", "https://API.Example.COM/v1", "", "api.example.com"},
		{"https default port", "https://api.example.com:443/v1", "", "api.example.com"},
		{"http default port", "http://api.example.com:80/v1", "", "api.example.com"},
		{"https on 80 keeps it", "https://api.example.com:80/v1", "", "api.example.com:80"},
		{"other port", "http://127.0.0.1:8080/", "", "127.0.0.1:8080"},
		{"empty port", "http://api.example.com:/", "", "api.example.com"},
		{"ipv6 default port", "https://[::1]:443/", "", "[::1]"},
		{"ipv6 no port", "https://[::1]/", "", "[::1]"},
		{"ipv6 other port", "http://[::1]:8080/", "", "[::1]:8080"},
		{"upper-case scheme", "HTTPS://API.example.com:443/", "", "api.example.com"},
		{"no URL host", "/path", "Example.com:80", "example.com:80"},
	}
	if got := HostKey(&http.Request{Host: "API.example.com"}); got != "api.example.com" {
		t.Errorf("HostKey of a request without URL = %q; want its Host, lowercased", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if got := HostKey(req); got != tt.want {
				t.Errorf("HostKey(%q) = %q; want %q", tt.url, got, tt.want)
			}
		})
	}
}

func BenchmarkHostKey(b *testing.B) {
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		HostKey(req)
	}
}
