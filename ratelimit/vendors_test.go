package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

func TestParseXRateLimit(t *testing.T) {
	named := func(p Policy, scope string) Policy { p.Scope = scope; return p }
	runCases(t, []readingCase{
		// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
		{name: "GitHub", h: hdr("Date", nowDate, "x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999",
			"x-ratelimit-used", "1", "x-ratelimit-reset", epoch(time.Hour), "x-ratelimit-resource", "core"),
			want: Reading{Policies: []Policy{pol("core", "requests", 5000, 4999, no, time.Hour)}}},
		{name: "GitHub documented epoch against its Date",
			h: hdr("Date", "Mon, 01 Jul 2013 17:27:53 GMT", "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "1372700873"),
			received: near("Mon, 01 Jul 2013 17:27:53 GMT", 3*time.Minute),
			want:     Reading{Policies: []Policy{pol("", "requests", 60, 0, no, 20*time.Minute)}}},
		{name: "GitHub used without remaining", h: hdr("X-RateLimit-Limit", "60", "X-RateLimit-Used", "60"),
			want: Reading{Policies: []Policy{pol("", "requests", 60, 0, no, no)}}},
		// https://docs.x.com/x-api/fundamentals/rate-limits
		{name: "X", h: hdr("Date", nowDate, "x-rate-limit-limit", "900", "x-rate-limit-remaining", "847",
			"x-rate-limit-reset", epoch(15*time.Minute)),
			want: Reading{Policies: []Policy{pol("", "requests", 900, 847, no, 15*time.Minute)}}},
		// https://developer.okta.com/docs/reference/rl-best-practices/
		{name: "Okta", h: hdr("Date", nowDate, "X-Rate-Limit-Limit", "600", "X-Rate-Limit-Remaining", "0",
			"X-Rate-Limit-Reset", epoch(42*time.Second)),
			want: Reading{Policies: []Policy{pol("", "requests", 600, 0, no, 42*time.Second)}}},
		// https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits
		{name: "SendGrid", h: hdr("Date", "Wed, 19 Feb 2014 13:07:13 GMT", "X-RateLimit-Limit", "500",
			"X-RateLimit-Remaining", "499", "X-RateLimit-Reset", "1392815263"),
			received: near("Wed, 19 Feb 2014 13:07:13 GMT", -time.Minute),
			want:     Reading{Policies: []Policy{pol("", "requests", 500, 499, no, 30*time.Second)}}},
		// https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ratelimit/v3/rate_limit.proto
		{name: "Envoy", h: hdr("x-ratelimit-limit", "10, 10;w=60, 1000;w=3600", "x-ratelimit-remaining", "9", "x-ratelimit-reset", "45"),
			want: Reading{Policies: []Policy{
				pol("", "requests", 10, 9, time.Minute, 45*time.Second),
				pol("", "requests", 1000, no, time.Hour, no),
			}}},
		// https://discord.com/developers/docs/topics/rate-limits
		{name: "Discord", h: hdr("Date", "Tue, 02 Aug 2016 21:23:42 GMT", "X-RateLimit-Limit", "5",
			"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023", "X-RateLimit-Reset-After", "1",
			"X-RateLimit-Bucket", "abcd1234"),
			want: Reading{Policies: []Policy{pol("abcd1234", "requests", 5, 0, no, time.Second)}}},
		{name: "Discord 429", h: hdr("Retry-After", "65", "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1470173023.123", "X-RateLimit-Reset-After", "64.57",
			"X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Scope", "user"),
			want: Reading{Policies: []Policy{named(pol("abcd1234", "requests", 10, 0, no, 64570*time.Millisecond), "user")},
				RetryAfter: 65 * time.Second, HasRetryAfter: true}},
		{name: "Discord global", h: hdr("Retry-After", "1", "X-RateLimit-Global", "true", "X-RateLimit-Remaining", "0"),
			want: Reading{Policies: []Policy{named(pol("", "requests", no, 0, no, no), "global")},
				RetryAfter: time.Second, HasRetryAfter: true, Global: true}},
		{name: "Discord global scope without numbers", h: hdr("Retry-After", "65", "X-RateLimit-Scope", "global"),
			want: Reading{RetryAfter: 65 * time.Second, HasRetryAfter: true, Global: true}},
		{name: "Discord float epoch reset", h: hdr("Date", "Tue, 02 Aug 2016 21:23:42 GMT", "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1470173023.123"),
			received: near("Tue, 02 Aug 2016 21:23:42 GMT", 0),
			want:     Reading{Policies: []Policy{pol("", "requests", no, 0, no, 1123*time.Millisecond)}}},
		// https://support.reddithelp.com/hc/en-us/articles/16160319875092-Reddit-Data-API-Wiki
		{name: "Reddit", h: hdr("X-Ratelimit-Used", "2", "X-Ratelimit-Remaining", "598.0", "X-Ratelimit-Reset", "540"),
			want: Reading{Policies: []Policy{pol("", "requests", 600, 598, no, 9*time.Minute)}}},
		// https://developer.atlassian.com/cloud/jira/platform/rate-limiting/
		{name: "Atlassian", h: hdr("Date", nowDate, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "12",
			"X-RateLimit-Reset", "2025-05-26T05:01:04Z", "X-RateLimit-NearLimit", "true", "RateLimit-Reason", "jira-burst-based"),
			want: Reading{Policies: []Policy{pol("", "requests", 100, 12, no, time.Minute)}, NearLimit: true}},
		{name: "Atlassian ISO 8601 without seconds", h: hdr("Date", nowDate, "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "2025-05-26T05:30+00:00"),
			want: Reading{Policies: []Policy{pol("", "requests", no, 0, no, 29*time.Minute+56*time.Second)}}},
		// https://confluence.atlassian.com/doc/_ratelimiting_httpheaders-992678779.html
		{name: "Atlassian Data Center", h: hdr("X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "19",
			"X-RateLimit-Interval-Seconds", "1", "X-RateLimit-FillRate", "10", "Retry-After", "0"),
			want: Reading{Policies: []Policy{pol("", "requests", 20, 19, time.Second, no)}, HasRetryAfter: true}},
		{name: "NearLimit alone", h: hdr("X-RateLimit-NearLimit", "true"), want: Reading{NearLimit: true}},
		{name: "HTTP-date reset", h: hdr("Date", nowDate, "X-RateLimit-Reset", "Mon, 26 May 2025 05:00:14 GMT"),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 10*time.Second)}}},
		// https://developer.zendesk.com/documentation/api-basics/best-practices/best-practices-for-avoiding-rate-limiting
		{name: "Zendesk", h: hdr("x-rate-limit", "700", "ratelimit-limit", "700", "x-rate-limit-remaining", "699",
			"ratelimit-remaining", "699", "ratelimit-reset", "41", "zendesk-ratelimit-tickets-index", "total=100; remaining=99; resets=41"),
			want: Reading{Policies: []Policy{
				pol("", "requests", 700, 699, no, 41*time.Second),
				pol("", "requests", 700, 699, no, no),
				pol("tickets-index", "requests", 100, 99, no, 41*time.Second),
			}}},
		// https://linear.app/developers/rate-limiting
		{name: "Linear", h: hdr("Date", nowDate, "X-RateLimit-Requests-Limit", "5000", "X-RateLimit-Requests-Remaining", "4999",
			"X-RateLimit-Requests-Reset", strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10),
			"X-RateLimit-Complexity-Limit", "250000", "X-RateLimit-Complexity-Remaining", "249900",
			"X-RateLimit-Complexity-Reset", strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10), "X-Complexity", "100"),
			want: Reading{Policies: []Policy{
				pol("", "complexity", 250000, 249900, no, time.Hour),
				pol("", "requests", 5000, 4999, no, time.Hour),
			}}},
		// https://developer.konghq.com/plugins/rate-limiting/
		{name: "Kong", h: hdr("X-RateLimit-Limit-Minute", "10", "X-RateLimit-Remaining-Minute", "0",
			"X-RateLimit-Limit-Hour", "100", "X-RateLimit-Remaining-Hour", "90",
			"RateLimit-Limit", "10", "RateLimit-Remaining", "0", "RateLimit-Reset", "47", "Retry-After", "47"),
			want: Reading{Policies: []Policy{
				pol("", "requests", 10, 0, no, 47*time.Second),
				pol("hour", "requests", 100, 90, time.Hour, no),
				pol("minute", "requests", 10, 0, time.Minute, no),
			}, RetryAfter: 47 * time.Second, HasRetryAfter: true}},
	})
}

func TestParseVendors(t *testing.T) {
	runCases(t, []readingCase{
		// https://platform.openai.com/docs/guides/rate-limits
		{name: "OpenAI", h: hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			want: Reading{Policies: []Policy{
				// 1 of 60 spent, full in 1s: a minute's bucket. The docs'
				// tokens (16 of 150,000 spent, full in 6 min) add up to no
				// standard window: none is told.
				refilling(pol("", "requests", 60, 59, no, time.Second), time.Minute),
				refilling(pol("", "tokens", 150000, 149984, no, 6*time.Minute), no),
			}}},
		{name: "OpenAI ms reset", h: hdr("x-ratelimit-remaining-requests", "4999", "x-ratelimit-reset-requests", "12ms"),
			want: Reading{Policies: []Policy{refilling(pol("", "requests", no, 4999, no, 12*time.Millisecond), no)}}},
		// https://console.groq.com/docs/rate-limits
		{name: "Groq", h: hdr("retry-after", "2", "x-ratelimit-limit-requests", "14400", "x-ratelimit-limit-tokens", "18000",
			"x-ratelimit-remaining-requests", "14370", "x-ratelimit-remaining-tokens", "17997",
			"x-ratelimit-reset-requests", "2m59.56s", "x-ratelimit-reset-tokens", "7.66s"),
			want: Reading{Policies: []Policy{
				// Groq's requests are per day: 30 spent, full in 3 min.
				refilling(pol("", "requests", 14400, 14370, no, 2*time.Minute+59560*time.Millisecond), 24*time.Hour),
				refilling(pol("", "tokens", 18000, 17997, no, 7660*time.Millisecond), no),
			}, RetryAfter: 2 * time.Second, HasRetryAfter: true}},
		{name: "OpenAI-compatible reset in seconds", h: hdr("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "20"),
			want: Reading{Policies: []Policy{refilling(pol("", "tokens", no, 0, no, 20*time.Second), no)}}},
		// https://docs.anthropic.com/en/api/rate-limits
		{name: "Anthropic", h: hdr("Date", nowDate, "retry-after", "12",
			"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", "2025-05-26T05:00:05Z",
			"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "0",
			"anthropic-ratelimit-tokens-reset", "2025-05-26T05:00:16.5Z",
			"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "0",
			"anthropic-ratelimit-input-tokens-reset", "2025-05-26T05:00:16Z",
			"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "8000",
			"anthropic-ratelimit-output-tokens-reset", "2025-05-26T05:00:04Z"),
			want: Reading{Policies: []Policy{
				refilling(pol("", "input-tokens", 40000, 0, no, 12*time.Second), no),
				refilling(pol("", "output-tokens", 8000, 8000, no, 0), no),
				refilling(pol("", "requests", 50, 49, no, time.Second), time.Minute),
				refilling(pol("", "tokens", 90000, 0, no, 12500*time.Millisecond), no),
			}, RetryAfter: 12 * time.Second, HasRetryAfter: true}},
		// https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling
		{name: "Azure Resource Manager", h: hdr("x-ms-ratelimit-remaining-subscription-reads", "11999",
			"x-ms-ratelimit-remaining-tenant-writes", "1199",
			"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/HighCostGet3Min;159,Microsoft.Compute/HighCostGet30Min;799"),
			want: Reading{Policies: []Policy{
				pol("Microsoft.Compute/HighCostGet3Min", "requests", no, 159, no, no),
				pol("Microsoft.Compute/HighCostGet30Min", "requests", no, 799, no, no),
				pol("subscription-reads", "requests", no, 11999, no, no),
				pol("tenant-writes", "requests", no, 1199, no, no),
			}}},
		// https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/quota
		{name: "Azure OpenAI", h: hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "3000",
			"retry-after-ms", "8500", "retry-after", "9"),
			// retry-after is retry-after-ms rounded up: the milliseconds win.
			want: Reading{Policies: []Policy{
				refilling(pol("", "requests", no, 0, no, no), no),
				refilling(pol("", "tokens", no, 3000, no, no), no),
			}, RetryAfter: 8500 * time.Millisecond, HasRetryAfter: true}},
		// https://shopify.dev/docs/api/admin-rest/usage/rate-limits
		{name: "Shopify", h: hdr("X-Shopify-Shop-Api-Call-Limit", "32/40"),
			want: Reading{Policies: []Policy{pol("", "requests", 40, 8, no, no)}}},
		{name: "Shopify 429", h: hdr("X-Shopify-Shop-Api-Call-Limit", "40/40", "Retry-After", "2.0"),
			want: Reading{Policies: []Policy{pol("", "requests", 40, 0, no, no)}, RetryAfter: 2 * time.Second, HasRetryAfter: true}},
		{name: "Shopify garbage", h: hdr("X-Shopify-Shop-Api-Call-Limit", "32/-40")},
		// https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/headers_api_usage.htm
		{name: "Salesforce", h: hdr("Sforce-Limit-Info", "api-usage=25/15000"),
			want: Reading{Policies: []Policy{pol("api-usage", "requests", 15000, 14975, 24*time.Hour, no)}}},
		{name: "Salesforce per app", h: hdr("Sforce-Limit-Info", "api-usage=25/15000, per-app-api-usage=17/250(appName=sample-app)"),
			want: Reading{Policies: []Policy{
				pol("api-usage", "requests", 15000, 14975, 24*time.Hour, no),
				pol("per-app-api-usage", "requests", 250, 233, 24*time.Hour, no),
			}}},
		// https://developers.hubspot.com/docs/guides/apps/api-usage/usage-details
		{name: "HubSpot", h: hdr("X-HubSpot-RateLimit-Daily", "250000", "X-HubSpot-RateLimit-Daily-Remaining", "249998",
			"X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Max", "100",
			"X-HubSpot-RateLimit-Remaining", "97", "X-HubSpot-RateLimit-Secondly", "10", "X-HubSpot-RateLimit-Secondly-Remaining", "9"),
			want: Reading{Policies: []Policy{
				pol("daily", "requests", 250000, 249998, 24*time.Hour, no),
				pol("", "requests", 100, 97, 10*time.Second, no),
				pol("secondly", "requests", 10, 9, time.Second, no),
			}}},
	})
}

// TestParseDialectFixes holds one case per dialect read wrong before,
// each with the vendor's documented example where there is one.
func TestParseDialectFixes(t *testing.T) {
	runCases(t, []readingCase{
		// X API v2 sends its daily caps beside the 15-minute window:
		// POST /2/tweets allows 100 a day per user and 1667 per app;
		// resets are epoch seconds.
		// https://docs.x.com/x-api/fundamentals/rate-limits
		{name: "X daily caps: the user is blocked for 12 hours",
			h: hdr("Date", nowDate, "x-rate-limit-limit", "100", "x-rate-limit-remaining", "99",
				"x-rate-limit-reset", epoch(15*time.Minute),
				"x-user-limit-24hour-limit", "100", "x-user-limit-24hour-remaining", "0",
				"x-user-limit-24hour-reset", epoch(12*time.Hour),
				"x-app-limit-24hour-limit", "1667", "x-app-limit-24hour-remaining", "1500",
				"x-app-limit-24hour-reset", epoch(20*time.Hour)),
			want: Reading{Policies: []Policy{
				pol("", "requests", 100, 99, no, 15*time.Minute),
				pol("app-24hour", "requests", 1667, 1500, 24*time.Hour, 20*time.Hour),
				pol("user-24hour", "requests", 100, 0, 24*time.Hour, 12*time.Hour),
			}}},
		{name: "X daily reset is an epoch, never a delta",
			h: hdr("Date", nowDate, "x-user-limit-24hour-remaining", "0", "x-user-limit-24hour-reset", "3600"),
			want: Reading{Policies: []Policy{
				pol("user-24hour", "requests", no, 0, 24*time.Hour, 0),
			}}},
		// https://developer.salesforce.com/docs/atlas.en-us.200.0.api_rest.meta/api_rest/headers_api_usage.htm
		{name: "Salesforce documented example with '; '",
			h: hdr("Sforce-Limit-Info", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)"),
			want: Reading{Policies: []Policy{
				pol("api-usage", "requests", 5000, 4975, 24*time.Hour, no),
				pol("per-app-api-usage", "requests", 250, 233, 24*time.Hour, no),
			}}},
		{name: "Salesforce both separators",
			h: hdr("Sforce-Limit-Info", "api-usage=18/5000;per-app-api-usage=17/250(appName=a), other=1/2"),
			want: Reading{Policies: []Policy{
				pol("api-usage", "requests", 5000, 4982, 24*time.Hour, no),
				pol("per-app-api-usage", "requests", 250, 233, 24*time.Hour, no),
				pol("other", "requests", 2, 1, 24*time.Hour, no),
			}}},
		{name: "Used plus Remaining past int64 is no limit",
			h:    hdr("X-RateLimit-Used", "4611686018427387904", "X-RateLimit-Remaining", "4611686018427387904"),
			want: Reading{Policies: []Policy{pol("", "requests", no, 1<<62, no, no)}}},
		{name: "Used plus Remaining at int64's largest is kept",
			h:    hdr("X-RateLimit-Used", "4611686018427387904", "X-RateLimit-Remaining", "4611686018427387903"),
			want: Reading{Policies: []Policy{pol("", "requests", 1<<63-1, 1<<62-1, no, no)}}},
		{name: "Used at int64's largest with Remaining",
			h:    hdr("X-RateLimit-Used", "9223372036854775807", "X-RateLimit-Remaining", "1"),
			want: Reading{Policies: []Policy{pol("", "requests", no, 1, no, no)}}},
	})
}
