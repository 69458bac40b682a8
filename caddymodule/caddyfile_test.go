package caddymodule

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    Handler
		wantErr string
	}{
		{name: "bare directive", input: `tokentap`, want: Handler{}},
		{name: "every option", input: `tokentap {
			provider          azure.ai.openai
			dialect           openai_chat
			max_request_body  2MiB
			max_response_body 8MB
			max_event_size    512KiB
			stall_threshold   1500ms
			inject_usage
			tokenizer         cl100k_base
			label             team {http.request.header.X-Team}
			label             app  "chat bot"
			max_label_values  50
			capture_content   32KiB
			conversation_id   {http.request.header.X-Session-Id}
			langfuse
		}`, want: Handler{InjectUsage: true,
			ConversationID: "{http.request.header.X-Session-Id}", Langfuse: true,
			CaptureContent: new(true), MaxContentSize: 32 << 10,
			Labels:         map[string]string{"team": "{http.request.header.X-Team}", "app": "chat bot"},
			MaxLabelValues: 50,
			Tokenizer:      "cl100k_base",
			Provider:       "azure.ai.openai", Dialect: "openai_chat",
			MaxRequestBody: 2 << 20, MaxResponseBody: 8_000_000, MaxEventSize: 512 << 10,
			StallThreshold: caddy.Duration(1500 * time.Millisecond),
		}},
		{name: "argument on the directive", input: `tokentap foo`, wantErr: "wrong argument count"},
		{name: "unknown option", input: "tokentap {\n nope 1\n}", wantErr: "unrecognized tokentap option 'nope'"},
		{name: "option without value", input: "tokentap {\n provider\n}", wantErr: "wrong argument count"},
		{name: "option with two values", input: "tokentap {\n provider a b\n}", wantErr: "wrong argument count"},
		{name: "repeated option", input: "tokentap {\n provider a\n provider b\n}", wantErr: "provider already specified"},
		{name: "bad size", input: "tokentap {\n max_event_size lots\n}", wantErr: "parsing max_event_size"},
		{name: "bad duration", input: "tokentap {\n stall_threshold soon\n}", wantErr: "parsing stall_threshold"},
		{name: "inject_usage takes no value", input: "tokentap {\n inject_usage yes\n}", wantErr: "wrong argument count"},
		{name: "langfuse takes no value", input: "tokentap {\n langfuse on\n}", wantErr: "wrong argument count"},
		{name: "conversation_id without value", input: "tokentap {\n conversation_id\n}", wantErr: "wrong argument count"},
		{name: "repeated conversation_id", input: "tokentap {\n conversation_id a\n conversation_id b\n}", wantErr: "conversation_id already specified"},
		{name: "label without value", input: "tokentap {\n label team\n}", wantErr: "wrong argument count"},
		{name: "label with three values", input: "tokentap {\n label team a b\n}", wantErr: "wrong argument count"},
		{name: "repeated label", input: "tokentap {\n label team a\n label team b\n}", wantErr: "label team already specified"},
		{name: "zero label values", input: "tokentap {\n max_label_values 0\n}", wantErr: "max_label_values must be a positive integer"},
		{name: "capture_content alone", input: "tokentap {\n capture_content\n}", want: Handler{CaptureContent: new(true)}},
		{name: "capture_content on", input: "tokentap {\n capture_content on\n}", want: Handler{CaptureContent: new(true)}},
		{name: "capture_content off overrides the environment", input: "tokentap {\n capture_content off\n}", want: Handler{CaptureContent: new(false)}},
		{name: "capture_content bad size", input: "tokentap {\n capture_content lots\n}", wantErr: "parsing capture_content size"},
		{name: "capture_content two values", input: "tokentap {\n capture_content 1KiB off\n}", wantErr: "wrong argument count"},
		{name: "repeated capture_content", input: "tokentap {\n capture_content\n capture_content off\n}", wantErr: "capture_content already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("got %+v, want %+v", h, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		h       Handler
		wantErr string
	}{
		{"defaults", Handler{}, ""},
		{"negative request cap", Handler{MaxRequestBody: -1}, "max_request_body must be at least 0"},
		{"negative response cap", Handler{MaxResponseBody: -1}, "max_response_body must be at least 0"},
		{"negative event cap", Handler{MaxEventSize: -1}, "max_event_size must be at least 0"},
		{"negative stall threshold", Handler{StallThreshold: -1}, "stall_threshold must be at least 0"},
		{"negative label cap", Handler{MaxLabelValues: -1}, "max_label_values must be at least 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate()
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestProvisionRejectsUnknownDialect(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	h := &Handler{Dialect: "klingon"}
	err := h.Provision(ctx)
	defer h.Cleanup()
	if err == nil || !strings.Contains(err.Error(), `unknown dialect "klingon" (known: openai_chat`) {
		t.Errorf("Provision() = %v", err)
	}
}

// TestCaddyfileAdapt pins the JSON that Caddyfiles adapt to: field names,
// omitted defaults and the directive's place before reverse_proxy. Each
// file in testdata/caddyfile_adapt holds a Caddyfile, a line of dashes, and
// the expected JSON.
func TestCaddyfileAdapt(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "caddyfile_adapt", "*.caddyfiletest"))
	if len(files) == 0 {
		t.Fatal("no adapt tests found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.SplitN(strings.ReplaceAll(string(b), "\r\n", "\n"), "----------", 2)
			if len(parts) != 2 {
				t.Fatal("missing the ---------- separator")
			}
			if !caddytest.CompareAdapt(t, f, parts[0], "caddyfile", strings.TrimSpace(parts[1])) {
				t.Error("adapted JSON differs")
			}
		})
	}
}

// unmarshalTokentap reads input as a tokentap Caddyfile block. With
// wantErr set, it checks that reading fails with an error containing it
// and reports false; otherwise reading must succeed.
func unmarshalTokentap(t *testing.T, input, wantErr string) (Handler, bool) {
	t.Helper()
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return h, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return h, true
}
