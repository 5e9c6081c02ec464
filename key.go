package throttle

import (
	"net/http"
	"strings"
)

// HostKey is the key [Transport] gives a request when its Key is nil: the
// request's host, lowercased, without the scheme's default port (:80 for
// http, :443 for https). "api.example.com", "API.example.com" and
// "api.example.com:443" (https) are one quota, "api.example.com"; a port
// that is not the default stays, since it often names another service:
// "127.0.0.1:8080".
//
// Keys of [Limiter.Overrides] meant to match the default key must be
// written in this form: "api.github.com", not "API.github.com:443".
func HostKey(req *http.Request) string {
	var host, scheme string
	if req.URL != nil {
		host, scheme = req.URL.Host, req.URL.Scheme
	}
	if host == "" {
		host = req.Host
	}
	// The port follows the last colon, unless that colon is inside an
	// IPv6 literal ("[::1]").
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host[i:], ']') < 0 {
		switch port := host[i+1:]; {
		case port == "",
			port == "80" && strings.EqualFold(scheme, "http"),
			port == "443" && strings.EqualFold(scheme, "https"):
			host = host[:i]
		}
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}
