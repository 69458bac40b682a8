package exchange

import (
	"net/http"
	"strings"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/sink"
)

// CaptureHeader turns content capture off for one request ("off"). It is
// tokentap's own: it is removed before the request goes upstream, whatever
// its value.
const CaptureHeader = "Tokentap-Capture-Content"

// prepareCapture decides whether this exchange's content is captured and
// removes tokentap's header from the request before it goes upstream.
func (x *exchange) prepareCapture(r *http.Request) {
	values := r.Header.Values(CaptureHeader)
	if len(values) > 0 {
		r.Header.Del(CaptureHeader)
	}
	if !x.mw.cfg.Capture {
		return
	}
	for _, v := range values {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "off", "false", "no", "none", "0":
			return
		}
	}
	x.output = capture.NewOutput(int(x.mw.cfg.MaxContentSize))
}

// captureResponse hands the generated text to the capture and, when
// verify_usage samples this exchange, to the usage check first, from now
// on; it is called once the meter is set up for the response, which may
// have started it over in another dialect. An exchange that is neither
// captured nor sampled sets no sink: the meter then does no work for
// either.
func (x *exchange) captureResponse() {
	var next meter.TextSink
	if x.output != nil {
		next = x.output
	}
	if x.check != nil || x.mw.cfg.VerifyUsage.Sample() {
		if x.check == nil {
			x.check = new(usagecheck.Checker)
		}
		x.check.Start(x.mw.cfg.VerifyUsage, &x.m.M, next)
		x.m.SetTextSink(x.check)
		return
	}
	if next != nil {
		x.m.SetTextSink(next)
	}
}

// content captures a finished exchange's content, when it is captured and
// its span is recorded: the request body as the system instructions and
// input messages, the text the meter handed out as the output messages.
func (x *exchange) content(m *meter.Measurement) sink.Content {
	if x.output == nil || !x.span.IsRecording() {
		return sink.Content{}
	}
	max := int(x.mw.cfg.MaxContentSize)
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
