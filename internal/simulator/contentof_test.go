package simulator

import "testing"

// TestContentOf: the answer does not depend on stream_options, however the
// client wrote it, and does depend on everything else.
func TestContentOf(t *testing.T) {
	base := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	same := []string{
		`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`,
		`{"model":"m","stream_options": {"include_usage": false} ,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	}
	want := string(contentOf([]byte(base)))
	if want != base {
		t.Fatalf("a body without stream_options changed: %s", want)
	}
	for _, b := range same {
		if got := string(contentOf([]byte(b))); got != base {
			t.Errorf("contentOf(%s) = %s, want %s", b, got, base)
		}
	}
	if string(contentOf([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"ho"}]}`))) == base {
		t.Error("a different conversation has the same content")
	}
}
