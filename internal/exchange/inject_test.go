package exchange

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestInjectUsage: with inject_usage, a client that did not ask for usage
// gets exactly the bytes of a stream without it, however the upstream's
// bytes are cut, and the span has the exact counts, labelled injected.
func TestInjectUsage(t *testing.T) {
	withUsage := fixture(t, "chat_usage.sse")
	// What OpenAI sends without include_usage: no usage chunk, no usage key.
	plain := bytes.ReplaceAll(withUsage, []byte(`,"usage":null`), nil)
	usageChunk := bytes.Index(plain, []byte(`"choices":[],"usage":{`))
	chunkStart := bytes.LastIndex(plain[:usageChunk], []byte("\n\n")) + 2
	chunkEnd := usageChunk + bytes.Index(plain[usageChunk:], []byte("\n\n")) + 2
	plain = slices.Concat(plain[:chunkStart], plain[chunkEnd:])
	if bytes.Contains(plain, []byte("usage")) || !bytes.HasSuffix(plain, []byte("data: [DONE]\n\n")) {
		t.Fatalf("reference stream wrong:\n%s", plain)
	}
	rnd := rand.New(rand.NewPCG(5, 5))
	for round := 0; round < 10; round++ {
		var cuts []int
		for c := rnd.IntN(30); c < len(withUsage); c += 1 + rnd.IntN(200) {
			cuts = append(cuts, c)
		}
		var sent []byte
		hs := newHarness(t, Config{InjectUsage: true}, func(w http.ResponseWriter, r *http.Request) error {
			sent, _ = io.ReadAll(r.Body)
			if r.ContentLength != int64(len(sent)) {
				t.Errorf("ContentLength %d for a %d-byte body", r.ContentLength, len(sent))
			}
			return streamUpstream(withUsage, cuts)(w, r)
		})
		resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, plain) {
			t.Fatalf("round %d: client got\n%s\nwant\n%s", round, got, plain)
		}
		if !gjson.GetBytes(sent, "stream_options.include_usage").Bool() {
			t.Fatalf("upstream got %s", sent)
		}
		a := attrs(hs.span(t))
		if a[attrUsageSource].AsString() != "injected" || a["gen_ai.usage.output_tokens"].AsInt64() != 9 || a["gen_ai.usage.input_tokens"].AsInt64() != 19 {
			t.Fatalf("span: source %v output %v input %v", a[attrUsageSource], a["gen_ai.usage.output_tokens"], a["gen_ai.usage.input_tokens"])
		}
	}
}

func TestInjectUsageLeavesOthersAlone(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	tests := []struct {
		name, request string
		source        string
	}{
		{"client asked for usage itself", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, "reported"},
		{"not streaming", `{"model":"m","stream":false}`, "reported"},
		{"body over the cap passes untouched", `{"model":"m","stream":true,"pad":"` + strings.Repeat("x", 2048) + `"}`, "reported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent []byte
			hs := newHarness(t, Config{InjectUsage: true, MaxRequestBody: 1024}, func(w http.ResponseWriter, r *http.Request) error {
				sent, _ = io.ReadAll(r.Body)
				return streamUpstream(body, nil)(w, r)
			})
			resp := post(t, hs.srv.URL, tt.request)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(sent) != tt.request {
				t.Errorf("upstream got a changed body")
			}
			if !bytes.Equal(got, body) {
				t.Errorf("client got changed bytes")
			}
			if a := attrs(hs.span(t)); a[attrUsageSource].AsString() != tt.source {
				t.Errorf("source %v", a[attrUsageSource])
			}
		})
	}
}

// TestInjectUsageTruncatedStream: a partial event held back when the
// upstream stops is still delivered.
func TestInjectUsageTruncatedStream(t *testing.T) {
	body := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\ndata: {\"choices\":[{\"delta\":{\"con")
	hs := newHarness(t, Config{InjectUsage: true}, streamUpstream(body, nil))
	resp := post(t, hs.srv.URL, `{"model":"m","stream":true}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"con"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if a := attrs(hs.span(t)); a[attrOutcome].AsString() != "truncated" {
		t.Errorf("outcome %v", a[attrOutcome])
	}
}
