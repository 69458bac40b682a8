package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

func TestProvisionLabels(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		want    []string
		wantErr string
	}{
		{name: "none", labels: nil, want: []string{}},
		{name: "sorted by name", labels: map[string]string{"team": "a", "app": "b", "env": "c"}, want: []string{"app", "env", "team"}},
		{name: "upper case", labels: map[string]string{"Team": "a"}, wantErr: `label name "Team"`},
		{name: "dot", labels: map[string]string{"a.b": "a"}, wantErr: `label name "a.b"`},
		{name: "leading digit", labels: map[string]string{"1a": "a"}, wantErr: `label name "1a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Handler{Labels: tt.labels}
			err := h.provisionLabels()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, d := range h.cfg.Labels {
				got = append(got, d.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("labels %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLabelsOnSpan(t *testing.T) {
	hs := newHarness(t, &Handler{
		Labels: map[string]string{
			"team":     "{http.request.header.X-Team}",
			"upstream": "{http.reverse_proxy.upstream.host}",
			"fixed":    "prod",
		},
	}, streamUpstream(fixture(t, "chat_usage.sse"), nil))
	req, _ := http.NewRequest(http.MethodPost, hs.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
	req.Header.Set("X-Team", "search")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := attrs(hs.span(t))
	for key, want := range map[attribute.Key]string{
		"tokentap.label.team":     "search",
		"tokentap.label.upstream": "api.openai.com",
		"tokentap.label.fixed":    "prod",
	} {
		if got := a[key].AsString(); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

// TestInvalidUTF8NeverReachesTheSpan: strings from the wire (the model, the
// id, the finish reason, a label from a header) with invalid UTF-8 are
// repaired, since OTLP would drop the whole batch over one of them.
func TestInvalidUTF8NeverReachesTheSpan(t *testing.T) {
	body := []byte("data: {\"id\":\"id-\xff\",\"model\":\"m\xfe\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"st\xffop\"}]}\n\ndata: [DONE]\n\n")
	hs := newHarness(t, &Handler{Labels: map[string]string{"team": "{http.request.header.X-Team}"}}, streamUpstream(body, nil))
	req, _ := http.NewRequest(http.MethodPost, hs.srv.URL+"/v1/chat/completions", strings.NewReader("{\"model\":\"req-\xff\",\"stream\":true}"))
	req.Header.Set("X-Team", "a\xffb")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != string(body) {
		t.Fatal("the client did not get the bytes as sent")
	}
	s := hs.span(t)
	if !utf8.ValidString(s.Name()) {
		t.Errorf("span name %q is not UTF-8", s.Name())
	}
	for _, kv := range s.Attributes() {
		for _, v := range append([]string{kv.Value.Emit()}, kv.Value.AsStringSlice()...) {
			if !utf8.ValidString(v) {
				t.Errorf("attribute %s = %q is not UTF-8", kv.Key, v)
			}
		}
	}
	if a := attrs(s); a["gen_ai.response.model"].AsString() != "m\uFFFD" {
		t.Errorf("response model %q, want the invalid byte replaced", a["gen_ai.response.model"].AsString())
	}
}
