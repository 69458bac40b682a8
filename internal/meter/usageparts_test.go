package meter

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAnthropicUsageIterations: the top-level usage of an Anthropic
// response is the sum of its "message" samplings, the response model's
// own. A compaction sampling is the same model's, billed and left out of
// the top-level counts, so it is added to them; an advisor sampling is
// another model's, billed at that model's price, so it is kept apart
// under its model (docs/telemetry.md, "Anthropic Messages"). The real
// recordings are in TestRecordedAnthropicMessages; these are the edges.
func TestAnthropicUsageIterations(t *testing.T) {
	const opus = "claude-opus-4-7"
	tests := []struct {
		name string
		// start is message_start's usage, deltas the usage of each
		// message_delta.
		start  string
		deltas []string
		want   Usage
		others []ModelUsage
		// degraded is the first fault's reason and faults how many.
		degraded string
		faults   int64
	}{
		{
			name:  "compaction then message: input, output and cache summed",
			start: `{"input_tokens":900,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":40,"cache_read_input_tokens":8,"cache_creation_input_tokens":2,"output_tokens":70,` +
				`"iterations":[{"type":"compaction","input_tokens":900,"cache_read_input_tokens":100,"cache_creation_input_tokens":0,"output_tokens":30},` +
				`{"type":"message","input_tokens":40,"cache_read_input_tokens":8,"cache_creation_input_tokens":2,"output_tokens":70}]}`},
			want: Usage{900 + 100 + 40 + 8 + 2, 30 + 70, 108, 2, -1, UsageReported},
		},
		{
			name:  "message, advisor, message: the top-level counts are the executor's, the advisor's are its model's",
			start: `{"input_tokens":10,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":50,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":25,"iterations":[` +
				`{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"type":"message"},` +
				`{"input_tokens":30,"output_tokens":400,"cache_read_input_tokens":6,"cache_creation_input_tokens":4,"type":"advisor_message","model":"claude-opus-4-7"},` +
				`{"input_tokens":40,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"type":"message"}]}`},
			want:   Usage{50, 25, 0, 0, -1, UsageReported},
			others: []ModelUsage{{opus, "advisor_message", 30 + 6 + 4, 400, 6, 4}},
		},
		{
			name:  "two advisor calls of one model add up in one entry; another model has its own",
			start: `{"input_tokens":10,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":10,"output_tokens":3,"iterations":[` +
				`{"type":"advisor_message","model":"claude-opus-4-7","input_tokens":30,"output_tokens":400},` +
				`{"type":"message","input_tokens":10,"output_tokens":3},` +
				`{"type":"advisor_message","model":"claude-opus-4-8","input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0},` +
				`{"type":"advisor_message","model":"claude-opus-4-7","input_tokens":35,"output_tokens":300,"cache_read_input_tokens":20}]}`},
			want: Usage{10, 3, -1, -1, -1, UsageReported},
			others: []ModelUsage{
				{opus, "advisor_message", 30 + 35 + 20, 700, 20, -1},
				{"claude-opus-4-8", "advisor_message", 1, 2, 0, -1},
			},
		},
		{
			name:  "a list repeated in a later message_delta replaces the earlier one, it does not add to it",
			start: `{"input_tokens":10,"output_tokens":1}`,
			deltas: []string{
				`{"input_tokens":10,"output_tokens":3,"iterations":[{"type":"advisor_message","model":"claude-opus-4-7","input_tokens":30,"output_tokens":400}]}`,
				`{"input_tokens":10,"output_tokens":3,"iterations":[{"type":"advisor_message","model":"claude-opus-4-7","input_tokens":30,"output_tokens":400}]}`,
			},
			want:   Usage{10, 3, -1, -1, -1, UsageReported},
			others: []ModelUsage{{opus, "advisor_message", 30, 400, -1, -1}},
		},
		{
			name:  "fallback_message: the top-level counts are the serving hop's, nothing is added",
			start: `{"input_tokens":408,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":412,"output_tokens":264,"iterations":[` +
				`{"type":"message","model":"claude-a","input_tokens":408,"output_tokens":0},` +
				`{"type":"fallback_message","model":"claude-b","input_tokens":412,"output_tokens":264}]}`},
			want: Usage{412, 264, -1, -1, -1, UsageReported},
		},
		{
			name:  "an advisor iteration without its model is a counted fault, not another model",
			start: `{"input_tokens":10,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":10,"output_tokens":3,"iterations":[` +
				`{"type":"advisor_message","input_tokens":30,"output_tokens":400},{"type":"message","input_tokens":10,"output_tokens":3}]}`},
			want:     Usage{10, 3, -1, -1, -1, UsageReported},
			degraded: "usage_iteration_incomplete", faults: 1,
		},
		{
			name:  "a compaction iteration without its output count is a counted fault; the top-level counts stand",
			start: `{"input_tokens":900,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":40,"output_tokens":70,"iterations":[` +
				`{"type":"compaction","input_tokens":900},{"type":"message","input_tokens":40,"output_tokens":70}]}`},
			want:     Usage{40, 70, -1, -1, -1, UsageReported},
			degraded: "usage_iteration_incomplete", faults: 1,
		},
		{
			name:  "iterations of no known type are counted faults; the top-level counts stand",
			start: `{"input_tokens":900,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":40,"output_tokens":70,"iterations":[` +
				`{"input_tokens":900,"output_tokens":3},{"type":"dream","input_tokens":40,"output_tokens":70}]}`},
			want:     Usage{40, 70, -1, -1, -1, UsageReported},
			degraded: "usage_iteration_unknown", faults: 2,
		},
		{
			name:  "more models than MaxOtherModels: the first are kept, the rest a counted fault",
			start: `{"input_tokens":10,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":10,"output_tokens":3,"iterations":[` + func() string {
				var b strings.Builder
				for i := range MaxOtherModels + 1 {
					if i > 0 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, `{"type":"advisor_message","model":"m%d","input_tokens":%d,"output_tokens":1}`, i, i+1)
				}
				return b.String()
			}() + `]}`},
			want: Usage{10, 3, -1, -1, -1, UsageReported},
			others: []ModelUsage{
				{"m0", "advisor_message", 1, 1, -1, -1}, {"m1", "advisor_message", 2, 1, -1, -1},
				{"m2", "advisor_message", 3, 1, -1, -1}, {"m3", "advisor_message", 4, 1, -1, -1},
			},
			degraded: "other_models_over_cap", faults: 1,
		},
		{
			name:   "an empty list: the top-level counts",
			start:  `{"input_tokens":40,"output_tokens":1}`,
			deltas: []string{`{"input_tokens":40,"output_tokens":70,"iterations":[]}`},
			want:   Usage{40, 70, -1, -1, -1, UsageReported},
		},
		{
			name:   "iterations in message_start, whose output is a placeholder, are not read",
			start:  `{"input_tokens":40,"output_tokens":1,"iterations":[{"type":"compaction","input_tokens":900,"output_tokens":30},{"type":"advisor_message","model":"claude-opus-4-7","input_tokens":1,"output_tokens":1}]}`,
			deltas: []string{`{"output_tokens":70}`},
			want:   Usage{40, 70, -1, -1, -1, UsageReported},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":%s}}\n\n", tt.start) +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
			for _, d := range tt.deltas {
				stream += fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":%s}\n\n", d)
			}
			stream += "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
			mt := New(newAnthropicMessages(), Options{}, t0)
			mt.Request("/v1/messages", []byte(`{"model":"claude","stream":true}`), false)
			mt.Response(200, "text/event-stream", "")
			for i, ev := range events([]byte(stream)) {
				mt.Write(ev, t0.Add(time.Duration(i+1)*step))
			}
			m := mt.Finish(t0.Add(time.Second), OutcomeUnknown, "")
			if m.Usage != tt.want {
				t.Errorf("Usage = %+v, want %+v", m.Usage, tt.want)
			}
			if got := m.OtherModelUsage(); !reflect.DeepEqual(got, tt.others) && (len(got) != 0 || len(tt.others) != 0) {
				t.Errorf("OtherModelUsage = %+v, want %+v", got, tt.others)
			}
			if m.DegradedReason != tt.degraded || m.Degraded != tt.faults {
				t.Errorf("Degraded = %d %q, want %d %q", m.Degraded, m.DegradedReason, tt.faults, tt.degraded)
			}
		})
	}
}
