package caddymodule

import (
	"fmt"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/capture"
)

// Content capture: prompts and completions on the span, only when asked
// for (docs/caddyfile.md, docs/telemetry.md "Content capture").

// captureEnv is the switch other GenAI instrumentations read (the
// OpenTelemetry Python GenAI utilities' names and values), honoured when
// the configuration says nothing.
const captureEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

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
		h.cfg.Capture = *h.CaptureContent
	} else {
		source = captureEnv
		var warning string
		h.cfg.Capture, warning = captureFromEnv(os.Getenv(captureEnv))
		if warning != "" {
			h.logger.Warn(warning, zap.String(captureEnv, os.Getenv(captureEnv)))
		}
	}
	h.cfg.MaxContentSize = h.MaxContentSize
	if h.cfg.Capture {
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
