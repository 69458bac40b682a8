package caddymodule

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestWithIncludeUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no stream_options", `{"model":"m","stream":true,"messages":[]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]}`},
		{"empty stream_options", `{"model":"m","stream":true,"stream_options":{}}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"include_usage false", `{"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}}`,
			`{"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`},
		{"other stream option kept", `{"stream":true, "stream_options": { "include_obfuscation": false }}`,
			`{"stream":true, "stream_options": {"include_usage":true, "include_obfuscation": false }}`},
		{"stream_options null", `{"stream":true,"stream_options":null}`,
			`{"stream":true,"stream_options":{"include_usage":true}}`},
		{"leading whitespace", " \n{\"stream\":true}", " \n{\"stream_options\":{\"include_usage\":true},\"stream\":true}"},
		{"asked already: untouched", `{"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{"not streaming: untouched", `{"model":"m","stream":false}`, ""},
		{"stream absent: untouched", `{"model":"m"}`, ""},
		{"not JSON: untouched", `stream=true`, ""},
		{"truncated JSON: untouched", `{"stream":true,"messages":[`, ""},
		{"array: untouched", `[{"stream":true}]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := withIncludeUsage([]byte(tt.in))
			if tt.want == "" {
				if ok {
					t.Fatalf("changed to %s", got)
				}
				return
			}
			if !ok || string(got) != tt.want {
				t.Fatalf("got %s (%v), want %s", got, ok, tt.want)
			}
			if !gjson.ValidBytes(got) || !gjson.GetBytes(got, "stream_options.include_usage").Bool() {
				t.Fatalf("result invalid or without include_usage: %s", got)
			}
		})
	}
}

func TestAppendClientBytes(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"usage null last", "data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n",
			"data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"},
		{"usage null first", "data: {\"usage\":null,\"id\":\"a\"}\n\n", "data: {\"id\":\"a\"}\n\n"},
		{"usage null middle with spaces", "data: {\"id\":\"a\", \"usage\" : null , \"obfuscation\":\"zz\"}\r\n\r\n",
			"data: {\"id\":\"a\" , \"obfuscation\":\"zz\"}\r\n\r\n"},
		{"usage-only chunk removed", "data: {\"id\":\"a\",\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n", ""},
		{"usage on a chunk with choices is kept", "data: {\"choices\":[{\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n",
			"data: {\"choices\":[{\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n"},
		{"nested usage null untouched", "data: {\"x\":{\"usage\":null}}\n\n", "data: {\"x\":{\"usage\":null}}\n\n"},
		{"[DONE] untouched", "data: [DONE]\n\n", "data: [DONE]\n\n"},
		{"comment untouched", ": keep-alive\n\n", ": keep-alive\n\n"},
		{"multi-line data untouched", "data: {\"usage\":null,\ndata: \"a\":1}\n\n", "data: {\"usage\":null,\ndata: \"a\":1}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendClientBytes(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestInjectUsage: with inject_usage, a client that did not ask for usage
// gets exactly the bytes of a stream without it, however the upstream's
// bytes are cut, and the span has the exact counts, labelled injected.
func TestInjectUsage(t *testing.T) {
	withUsage := fixture(t, "chat_usage.sse")
	// What OpenAI sends without include_usage: no usage chunk, no usage key.
	var plain []byte
	forEvent(withUsage, func(ev []byte) { plain = appendClientBytes(plain, ev) })
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
		hs := newHarness(t, &Handler{InjectUsage: true}, func(w http.ResponseWriter, r *http.Request) error {
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
			hs := newHarness(t, &Handler{InjectUsage: true, MaxRequestBody: 1024}, func(w http.ResponseWriter, r *http.Request) error {
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
	hs := newHarness(t, &Handler{InjectUsage: true}, streamUpstream(body, nil))
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
