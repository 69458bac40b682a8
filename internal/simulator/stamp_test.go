package simulator

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator/stamp"
	"github.com/tokentap/tokentap/sse"
)

// decodedEvents is what an SSE parser makes of a stream: the type and data
// of every event, and the number of comment lines it skipped.
func decodedEvents(body []byte) (evs []string, comments int64) {
	var d sse.Decoder
	d.OnEvent = func(ev *sse.Event) { evs = append(evs, string(ev.Type)+"|"+string(ev.Data)) }
	_, _ = d.Write(body) // the decoder never fails a write
	d.Close()
	return evs, d.Stats().Comments
}

// splitStamps reads body with the sse package's Decoder, takes the stamps
// from the comment lines it hands out, and returns them and body without
// the stamp lines. It fails the test for a comment that starts like a stamp
// but does not parse, for a stamp that does not start an event block (it
// must directly follow the blank line that ends an event, or open the
// stream), and for a stamp line not ended by LF or CRLF, the line ends
// stamp.Append writes.
func splitStamps(t *testing.T, body []byte) (rest []byte, stamps []time.Time) {
	t.Helper()
	var lines [][]byte
	var d sse.Decoder
	d.OnComment = func(line []byte) {
		if bytes.HasPrefix(line, []byte(stamp.Prefix)) {
			lines = append(lines, bytes.Clone(line)) // valid only during the call
		}
	}
	_, _ = d.Write(body) // the decoder never fails a write
	d.Close()
	// The decoder says which lines are stamps; their bytes, found in turn
	// in what is left of body, say where each one was.
	for _, line := range lines {
		sent, ok := stamp.Parse(line)
		if !ok {
			t.Fatalf("stamp line %q does not parse", line)
		}
		stamps = append(stamps, sent)
		i := bytes.Index(body, line)
		if i < 0 {
			t.Fatalf("the decoder handed out stamp line %q, which is not in the stream", line)
		}
		rest = append(rest, body[:i]...)
		if len(rest) > 0 && !bytes.HasSuffix(rest, []byte("\n\n")) && !bytes.HasSuffix(rest, []byte("\r\n\r\n")) {
			t.Fatalf("stamp %q in the middle of an event, after %q", line, rest[max(0, len(rest)-40):])
		}
		body = body[i+len(line):]
		switch {
		case bytes.HasPrefix(body, []byte("\r\n")):
			body = body[2:]
		case bytes.HasPrefix(body, []byte("\n")):
			body = body[1:]
		case len(body) > 0:
			t.Fatalf("stamp line %q is followed by %q, not by LF or CRLF", line, body[:min(len(body), 40)])
		}
	}
	return append(rest, body...), stamps
}

// TestStampedStreams checks that a stamped SSE stream is the plain stream
// plus comment lines: the same events for any SSE parser, one stamp ahead
// of every write, each a time between the request and the response's end,
// in order.
func TestStampedStreams(t *testing.T) {
	for _, f := range wireFormats {
		if !strings.HasPrefix(f.streamType, "text/event-stream") {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			h := formatHandler(t, Handler{})
			_, plain, _ := serveTarget(t, h, f.target, f.stream, nil)
			before := time.Now()
			res, stamped, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderStamp: "true"})
			after := time.Now()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.StatusCode, stamped)
			}

			rest, stamps := splitStamps(t, stamped)
			if !bytes.Equal(rest, plain) {
				t.Errorf("without its stamp lines the stream differs from the plain one:\n%q\nwant\n%q", rest, plain)
			}
			plainEvents, _ := decodedEvents(plain)
			gotEvents, comments := decodedEvents(stamped)
			if strings.Join(gotEvents, "\n") != strings.Join(plainEvents, "\n") {
				t.Errorf("an SSE parser reads other events from the stamped stream:\n%q\nwant\n%q", gotEvents, plainEvents)
			}
			if comments != int64(len(stamps)) {
				t.Errorf("the SSE parser skipped %d comment lines, want the %d stamps", comments, len(stamps))
			}
			// Every format writes each token's event on its own, so there
			// is at least one stamp per token (more where the format has
			// start and end events), and never more than one per event.
			if len(stamps) < fullTokens || len(stamps) > len(plainEvents) {
				t.Errorf("%d stamps for %d events and %d tokens", len(stamps), len(plainEvents), fullTokens)
			}
			for i, s := range stamps {
				if s.Before(before.Truncate(time.Microsecond)) || s.After(after) {
					t.Errorf("stamp %d is %v, outside the request's %v .. %v", i, s, before, after)
				}
				if i > 0 && s.Before(stamps[i-1]) {
					t.Errorf("stamp %d (%v) precedes stamp %d (%v)", i, s, i-1, stamps[i-1])
				}
			}
		})
	}
}

func TestStampRefused(t *testing.T) {
	byName := map[string]wireFormat{}
	for _, f := range wireFormats {
		byName[f.name] = f
	}
	for _, tc := range []struct {
		name   string
		format string
		body   func(wireFormat) string
		target func(wireFormat) string
		value  string
		want   string // in the error message
	}{
		{name: "ndjson stream", format: "ollama chat", value: "true", want: "application/x-ndjson"},
		{name: "json array stream", format: "gemini array", value: "1", want: "application/json"},
		{name: "one body", format: "openai chat", value: "true", want: "one body",
			body: func(f wireFormat) string { return f.plain }, target: func(f wireFormat) string { return f.bodyTarget }},
		{name: "not a boolean", format: "openai chat", value: "sometimes", want: HeaderStamp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := byName[tc.format]
			body, target := f.stream, f.target
			if tc.body != nil {
				body, target = tc.body(f), tc.target(f)
			}
			h := formatHandler(t, Handler{})
			hdr := map[string]string{HeaderStamp: tc.value}
			res, raw, _ := serveTarget(t, h, target, body, hdr)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) {
				t.Errorf("status %d, body %s; want 400 naming %q", res.StatusCode, raw, tc.want)
			}
			header := http.Header{}
			header.Set(HeaderStamp, tc.value)
			if _, err := h.PlanTarget(target, []byte(body), header); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PlanTarget error %v; want one naming %q, as ServeHTTP answers", err, tc.want)
			}
		})
	}
}

func TestStampFalseIsPlain(t *testing.T) {
	f := wireFormats[0]
	h := formatHandler(t, Handler{})
	_, plain, _ := serveTarget(t, h, f.target, f.stream, nil)
	_, off, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderStamp: "false"})
	if !bytes.Equal(off, plain) {
		t.Errorf("%s: false changed the stream:\n%q\nwant\n%q", HeaderStamp, off, plain)
	}
}
