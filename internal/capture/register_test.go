package capture

import (
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/sse"
)

// lineDialect is a dialect registered by these tests, as a package outside
// tokentap would add one: each event's data is a JSON string of answer
// text, and the stream ends with a "done" event.
type lineDialect struct{ name string }

func (d lineDialect) Name() string                         { return d.name }
func (lineDialect) Operation(string) string                { return "chat" }
func (lineDialect) Request(*meter.Request, string, []byte) {}
func (lineDialect) Body(*meter.Observer, []byte)           {}

func (lineDialect) Event(o *meter.Observer, ev *sse.Event) {
	if string(ev.Type) == "done" {
		o.Done()
		return
	}
	o.Output(1, true)
	o.Text(0, 0, meter.TextAnswer, string(ev.Data))
}

// lineInput reads lineDialect's requests: a preamble, the system
// instructions, and lines, the user's messages.
func lineInput(root gjson.Result) ([]Part, []Message) {
	sys := []Part{{Type: "text", Content: []byte(root.Get("preamble").Str)}}
	var msgs []Message
	for _, l := range root.Get("lines").Array() {
		msgs = append(msgs, Message{Role: "user", Parts: []Part{{Type: "text", Content: []byte(l.Str)}}})
	}
	return sys, msgs
}

func init() {
	for _, name := range []string{"test_lines", "test_lines_no_input"} {
		meter.RegisterDialect(meter.DialectInfo{Name: name, New: func() meter.Dialect { return lineDialect{name} }})
	}
	RegisterInput("test_lines", lineInput)
}

// TestRegisteredDialect captures a dialect registered from outside, as
// the proxy does: the input by the reader registered for it, the output
// from the text its events hand to the meter's sink. A dialect registered
// without a reader has its output captured and its input left out; a
// name nobody registered gives nothing.
func TestRegisteredDialect(t *testing.T) {
	const body = `{"preamble":"Be brief.","lines":["Hi","Bye"]}`
	tests := []struct {
		name, dialect         string
		system, input, output string
	}{
		{
			name: "registered with a reader", dialect: "test_lines",
			system: `[{"type":"text","content":"Be brief."}]`,
			input:  `[{"role":"user","parts":[{"type":"text","content":"Hi"}]},{"role":"user","parts":[{"type":"text","content":"Bye"}]}]`,
			output: `[{"role":"assistant","parts":[{"type":"text","content":"Hello there."}],"finish_reason":"stop"}]`,
		},
		{
			name: "registered without a reader: the output only", dialect: "test_lines_no_input",
			output: `[{"role":"assistant","parts":[{"type":"text","content":"Hello there."}],"finish_reason":"stop"}]`,
		},
		{
			name: "unknown name", dialect: "test_unknown",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system, input := Input(tt.dialect, []byte(body), 0)
			if system.JSON != tt.system || input.JSON != tt.input || system.Truncated || input.Truncated {
				t.Errorf("Input = %+v, %+v; want %s, %s", system, input, tt.system, tt.input)
			}
			info, ok := meter.LookupDialect(tt.dialect)
			if !ok {
				if tt.output != "" {
					t.Fatalf("%s is not registered", tt.dialect)
				}
				return
			}
			start := time.Now()
			var mt meter.Meter
			mt.Init(info.New(), meter.Options{}, start)
			out := NewOutput(0)
			mt.SetTextSink(out)
			mt.Response(200, "text/event-stream", "")
			mt.Write([]byte("data: \"Hello\"\n\ndata: \" there.\"\n\nevent: done\ndata: {}\n\n"), start.Add(time.Millisecond))
			m := mt.Finish(start.Add(2*time.Millisecond), meter.OutcomeUnknown, "")
			if got := out.Result(m.FinishReasons, m.Outcome == meter.OutcomeCompleted, 0); got.JSON != tt.output {
				t.Errorf("output = %s, want %s", got.JSON, tt.output)
			}
		})
	}
}

// TestRegisterInputPanics: a name taken, by a built-in reader or a
// registered one, panics as meter.RegisterDialect does, and so does a
// registration without a name or a reader.
func TestRegisterInputPanics(t *testing.T) {
	tests := []struct {
		name, dialect string
		read          InputReader
	}{
		{"a built-in name", "anthropic_messages", lineInput},
		{"a name registered by another package", "test_lines", lineInput},
		{"no name", "", lineInput},
		{"no reader", "test_unregistered", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			RegisterInput(tt.dialect, tt.read)
		})
	}
	if _, ok := inputReaders["test_unregistered"]; ok {
		t.Error("a reader was registered under test_unregistered")
	}
}
