package usagecheck

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// BenchmarkMeterVerified reads a real 300-token OpenAI stream
// (gpt-4.1-nano, one token per event) with the meter alone and with a
// Checker as its text sink: the difference over 300 is the check's cost
// per output token, and its allocations per stream.
func BenchmarkMeterVerified(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "testdata", "recorded", "openai", "chat_text.sse"))
	if err != nil {
		b.Fatal(err)
	}
	v, err := New(1)
	if err != nil {
		b.Fatal(err)
	}
	d, _ := meter.LookupDialect("openai_chat")
	start := time.Unix(1e9, 0)
	for _, verify := range []bool{false, true} {
		name := "unverified"
		if verify {
			name = "verified"
		}
		b.Run(name, func(b *testing.B) {
			var mt meter.Meter
			var c Checker
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				mt.Init(d.New(), meter.Options{}, start)
				if verify {
					c.Start(v, &mt.M, nil)
					mt.SetTextSink(&c)
				}
				mt.Response(200, "text/event-stream", "")
				mt.Write(body, start.Add(time.Millisecond))
				m := mt.Finish(start.Add(2*time.Millisecond), meter.OutcomeUnknown, "")
				if verify && c.Result(m, m.ResponseModel).Status != Verified {
					b.Fatal("not verified")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300, "ns/token")
		})
	}
}
