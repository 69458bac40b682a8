package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// Content capture: prompts and completions on the span, only when asked
// for (README, docs/telemetry.md "Content capture").

// captureEnv is the switch other GenAI instrumentations read (the
// OpenTelemetry Python GenAI utilities' names and values), honoured when
// the configuration says nothing.
const captureEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// captureHeader turns capture off for one request ("off"). It is
// tokentap's own: it is removed before the request goes upstream,
// whatever its value.
const captureHeader = "Tokentap-Capture-Content"

// provisionCapture decides whether the handler captures content: the
// configuration if it says, else the environment; and checks the size.
func (h *Handler) provisionCapture() error {
	if h.MaxContentSize < 0 {
		return fmt.Errorf("max_content_size must be at least 0: %d", h.MaxContentSize)
	}
	if h.MaxContentSize != 0 && h.MaxContentSize < capture.MinMaxSize {
		return fmt.Errorf("max_content_size must be at least %d bytes: %d", capture.MinMaxSize, h.MaxContentSize)
	}
	if h.MaxContentSize == 0 {
		h.MaxContentSize = capture.DefaultMaxSize
	}
	source := "configuration"
	if h.CaptureContent != nil {
		h.capture = *h.CaptureContent
	} else {
		source = captureEnv
		var warning string
		h.capture, warning = captureFromEnv(os.Getenv(captureEnv))
		if warning != "" {
			h.logger.Warn(warning, zap.String(captureEnv, os.Getenv(captureEnv)))
		}
	}
	if h.capture {
		h.logger.Info("content capture is on: prompts and completions are recorded on spans",
			zap.String("by", source), zap.Int64("max_content_size", h.MaxContentSize))
	}
	return nil
}

// captureFromEnv reads OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT:
// SPAN_ONLY, SPAN_AND_EVENT and true (its older boolean form) turn capture
// on; NO_CONTENT, false and nothing leave it off. tokentap records no
// events, so EVENT_ONLY leaves it off too, with a warning, as does a
// value it does not know.
func captureFromEnv(v string) (on bool, warning string) {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "SPAN_ONLY", "SPAN_AND_EVENT", "TRUE":
		return true, ""
	case "", "NO_CONTENT", "FALSE":
		return false, ""
	case "EVENT_ONLY":
		return false, "tokentap records content on spans, not in events: content capture stays off"
	}
	return false, "unknown value, content capture stays off (use SPAN_ONLY, SPAN_AND_EVENT, true, NO_CONTENT or false)"
}

// unmarshalCaptureContent reads `capture_content [<max_size>|on|off]`.
func (h *Handler) unmarshalCaptureContent(d *caddyfile.Dispenser) error {
	on := true
	if d.NextArg() {
		switch arg := d.Val(); arg {
		case "on":
		case "off":
			on = false
		default:
			size, err := humanize.ParseBytes(arg)
			if err != nil {
				return d.Errf("parsing capture_content size: %v", err)
			}
			h.MaxContentSize = int64(size)
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	h.CaptureContent = &on
	return nil
}

// prepareCapture decides whether this exchange's content is captured and
// removes tokentap's header from the request before it goes upstream.
func (x *exchange) prepareCapture(r *http.Request) {
	values := r.Header.Values(captureHeader)
	if len(values) > 0 {
		r.Header.Del(captureHeader)
	}
	if !x.h.capture {
		return
	}
	for _, v := range values {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "off", "false", "no", "none", "0":
			return
		}
	}
	x.output = capture.NewOutput(int(x.h.MaxContentSize))
}

// captureResponse hands the generated text to the capture from now on;
// it is called once the meter is set up for the response, which may have
// started it over in another dialect.
func (x *exchange) captureResponse() {
	if x.output != nil {
		x.tap.SetTextSink(x.output)
	}
}

// content captures a finished exchange's content, when it is captured and
// its span is recorded: the request body as the system instructions and
// input messages, the text the meter handed out as the output messages.
func (x *exchange) content(m *meter.Measurement) sink.Content {
	if x.output == nil || !x.span.IsRecording() {
		return sink.Content{}
	}
	max := int(x.h.MaxContentSize)
	var body []byte
	switch {
	case x.fullBody != nil:
		body = x.fullBody
	case x.tee != nil:
		body, _, _ = x.tee.Snapshot()
	}
	var c sink.Content
	c.System, c.Input = capture.Input(m.Dialect, body, max)
	if m.Request.Truncated {
		c.System.Truncated = c.System.Truncated || c.System.JSON != ""
		c.Input.Truncated = c.Input.Truncated || c.Input.JSON != ""
	}
	if m.StatusCode < 400 {
		c.Output = x.output.Result(m.FinishReasons, m.Outcome == meter.OutcomeCompleted, max)
	}
	return c
}
