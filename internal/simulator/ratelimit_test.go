package simulator

import (
	"net/http"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/ratelimit"
)

// TestRateLimit: with rate_limit_requests, every response carries the
// format's rate limit headers, as tokentap reads them (package
// ratelimit), counting down within the window; the request past the limit
// is answered 429 with retry-after; a model with its own limit has its own
// window; without the option no header is sent.
func TestRateLimit(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{RateLimitRequests: 2}, Models: map[string]Profile{"roomy": {RateLimitRequests: 100}}})
	tests := []struct {
		name, target, body string
		wantStatus         int
		wantRemaining      int64
		wantRetry          bool
	}{
		{"openai, first", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 200, 1, false},
		{"anthropic, same model and window", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 200, 0, false},
		{"past the limit", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 429, 0, true},
		{"another model's own window", "/v1/chat/completions", `{"model":"roomy","messages":[{"role":"user","content":"hi"}]}`, 200, 99, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _, _ := serveTarget(t, h, tt.target, tt.body, nil)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
			var got ratelimit.Headers
			ratelimit.Read(res.Header, res.StatusCode, time.Now(), &got)
			req := got.Limits[ratelimit.Requests]
			if !req.HasLimit || !req.HasRemaining || req.Remaining != tt.wantRemaining || !req.HasReset || req.Reset > time.Minute {
				t.Errorf("requests limit %+v, want %d remaining and a reset within the minute (headers %v)", req, tt.wantRemaining, res.Header)
			}
			if got.HasRetryAfter != tt.wantRetry || (tt.wantRetry && (got.RetryAfter <= 0 || got.RetryAfter > time.Minute)) {
				t.Errorf("retry-after %v (%v), want %v", got.RetryAfter, got.HasRetryAfter, tt.wantRetry)
			}
		})
	}
	t.Run("no option, no headers", func(t *testing.T) {
		res, _, _ := serveTarget(t, fast(t, Handler{}), "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		var got ratelimit.Headers
		ratelimit.Read(res.Header, res.StatusCode, time.Now(), &got)
		if got.Known() || res.StatusCode != http.StatusOK {
			t.Errorf("status %d, rate limits %+v: want 200 and none", res.StatusCode, got)
		}
	})
}
