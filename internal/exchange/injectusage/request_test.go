package injectusage

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/gjson"
)

func TestRewrite(t *testing.T) {
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
		{"escapes and numbers kept as written", `{"stream":true,"messages":[{"content":"caf\u00e9 \"q\""}],"temperature":1.50}`,
			`{"stream_options":{"include_usage":true},"stream":true,"messages":[{"content":"caf\u00e9 \"q\""}],"temperature":1.50}`},
		{"asked already: untouched", `{"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{"not streaming: untouched", `{"model":"m","stream":false}`, ""},
		{"stream absent: untouched", `{"model":"m"}`, ""},
		{"stream_options not an object: untouched", `{"stream":true,"stream_options":"x"}`, ""},
		{"not JSON: untouched", `stream=true`, ""},
		{"truncated JSON: untouched", `{"stream":true,"messages":[`, ""},
		{"array: untouched", `[{"stream":true}]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, ok := Rewrite(in)
			if string(in) != tt.in {
				t.Fatalf("the input changed to %s", in)
			}
			if tt.want == "" {
				if ok || got != nil {
					t.Fatalf("changed to %s (%v)", got, ok)
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

func TestRequest(t *testing.T) {
	const (
		streaming = `{"model":"m","stream":true}`
		injected  = `{"stream_options":{"include_usage":true},"model":"m","stream":true}`
		asked     = `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`
	)
	errRead := errors.New("connection reset")
	long := `{"model":"m","stream":true,"pad":"` + strings.Repeat("x", 100) + `"}`
	tests := []struct {
		name    string
		req     func() *http.Request
		want    Result
		body    string // what the upstream reads
		kept    string // the body returned for the measurement
		readErr error  // what the upstream meets after body
	}{
		{"streaming request asks for usage", func() *http.Request { return post(streaming) },
			Injected, injected, streaming, nil},
		{"client asked for usage itself", func() *http.Request { return post(asked) },
			Unchanged, asked, asked, nil},
		{"not streaming", func() *http.Request { return post(`{"model":"m"}`) },
			Unchanged, `{"model":"m"}`, `{"model":"m"}`, nil},
		{"GET", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/v1/chat/completions", nil) },
			Skipped, "", "", nil},
		{"POST without a body", func() *http.Request {
			r := post("")
			r.Body = http.NoBody
			return r
		}, Skipped, "", "", nil},
		{"declared length over the limit: not read", func() *http.Request { return post(long) },
			TooLarge, long, "", nil},
		{"chunked body over the limit: read part first", func() *http.Request { return chunked(post(long)) },
			TooLarge, long, "", nil},
		{"chunked body within the limit", func() *http.Request { return chunked(post(streaming)) },
			Injected, injected, streaming, nil},
		{"read error", func() *http.Request {
			r := post("")
			r.ContentLength = -1
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(`{"stream":`), iotest.ErrReader(errRead)))
			return r
		}, ReadFailed, `{"stream":`, "", errRead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, kept, res := Request(tt.req(), 100)
			if res != tt.want {
				t.Fatalf("result %d, want %d", res, tt.want)
			}
			if string(kept) != tt.kept {
				t.Errorf("kept %q, want %q", kept, tt.kept)
			}
			if r.Body == nil || r.Body == http.NoBody {
				if tt.body != "" {
					t.Fatalf("no body, want %q", tt.body)
				}
				return
			}
			got, err := io.ReadAll(r.Body)
			if string(got) != tt.body || !errors.Is(err, tt.readErr) {
				t.Fatalf("upstream reads %q (%v), want %q (%v)", got, err, tt.body, tt.readErr)
			}
			if res != Injected {
				return
			}
			if r.ContentLength != int64(len(tt.body)) {
				t.Errorf("ContentLength %d, want %d", r.ContentLength, len(tt.body))
			}
			if h := r.Header.Get("Content-Length"); h != "" && h != strconv.Itoa(len(tt.body)) {
				t.Errorf("Content-Length header %s, want %d", h, len(tt.body))
			}
			rc, err := r.GetBody()
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := io.ReadAll(rc); string(again) != tt.body {
				t.Errorf("GetBody gives %q", again)
			}
		})
	}
}

func post(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return r
}

// chunked makes r's body one of unknown length, as a chunked upload is.
func chunked(r *http.Request) *http.Request {
	r.ContentLength = -1
	r.Header.Del("Content-Length")
	r.Body = io.NopCloser(r.Body)
	return r
}
