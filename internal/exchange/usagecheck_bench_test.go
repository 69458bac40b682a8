package exchange

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentap/tokentap/internal/meter/usagecheck"
)

// BenchmarkExchangeVerifyUsage is BenchmarkExchange's per-request cost on
// a real 300-token OpenAI stream (gpt-4.1-nano, one token per event),
// with verify_usage off and with every request verified: the difference
// over the stream's output tokens is the check's cost per token.
func BenchmarkExchangeVerifyUsage(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "openai", "chat_text.sse"))
	if err != nil {
		b.Fatal(err)
	}
	events := bytes.SplitAfter(body, []byte("\n\n"))
	on, err := usagecheck.New(1)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		v    *usagecheck.Verifier
	}{{"off", nil}, {"verified", on}} {
		b.Run(c.name, func(b *testing.B) {
			base := benchMiddleware(b)
			cfg := base.cfg
			cfg.VerifyUsage, cfg.Release = c.v, nil
			mw := New(cfg)
			b.Cleanup(mw.Close)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var verified int
			for b.Loop() {
				x := streamExchange(mw, events)
				x.finish(0, "")
				if x.result.UsageCheck.Status == usagecheck.Verified {
					verified++
				}
			}
			if c.v != nil && verified == 0 {
				b.Fatal("no exchange was verified")
			}
			b.ReportMetric(300, "output-tokens/op")
		})
	}
}
