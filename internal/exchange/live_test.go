package exchange

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/live"
)

// TestLiveStreams follows one stream through the table of requests in
// flight: waiting once its headers are out, receiving once a byte came,
// stalled when no byte came for longer than the stall threshold, and gone
// when it ends. The clock of a stall is the stream's last write.
func TestLiveStreams(t *testing.T) {
	checkLeaks(t)
	var table live.Table
	step := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // as a proxy sends it on
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-step
		_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"))
		_ = http.NewResponseController(w).Flush()
		<-step
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	mw := New(Config{MaxRequestBody: 1 << 20, StallThreshold: time.Second, Live: &table})
	defer mw.Close()
	srv := httptest.NewServer(mw.Handler(upstream))
	defer srv.Close()

	counts := func(now time.Time) string {
		var b strings.Builder
		table.Counts(now, func(c live.Count) {
			fmt.Fprintf(&b, "%s/%s in_flight=%d waiting=%d receiving=%d stalled=%d",
				c.Provider, c.Model, c.InFlight, c.Waiting, c.Receiving, c.Stalled)
		})
		return b.String()
	}
	check := func(when string, now time.Time, want string) {
		t.Helper()
		if got := counts(now); got != want {
			t.Errorf("%s: %s, want %s", when, got, want)
		}
	}

	resp := post(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true}`)
	defer resp.Body.Close()
	check("headers out", time.Now(), "openai/gpt-4o-mini in_flight=1 waiting=1 receiving=0 stalled=0")

	step <- struct{}{}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	check("a byte came", wrote, "openai/gpt-4o-mini in_flight=1 waiting=0 receiving=1 stalled=0")
	// The table reads the stream's clock at the instant it is asked for:
	// asking two seconds on is a stream that has been silent that long.
	check("no byte for two seconds", wrote.Add(2*time.Second), "openai/gpt-4o-mini in_flight=1 waiting=0 receiving=0 stalled=1")

	step <- struct{}{}
	for {
		if _, err := br.ReadString('\n'); err != nil {
			break
		}
	}
	resp.Body.Close()
	srv.Close() // waits for the handler, and so for the finish
	check("ended", time.Now(), "openai/gpt-4o-mini in_flight=0 waiting=0 receiving=0 stalled=0")
}
