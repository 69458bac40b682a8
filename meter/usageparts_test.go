package meter

import (
	"fmt"
	"testing"
	"time"
)

// TestAnthropicUsageIterations: with server-side compaction, a response
// samples twice and its top-level usage is the last sampling's only;
// Anthropic bills the sum over usage.iterations, so that is the count,
// when every iteration reports its input and output.
func TestAnthropicUsageIterations(t *testing.T) {
	tests := []struct {
		name string
		// start and delta are message_start's and message_delta's usage.
		start, delta string
		want         Usage
	}{
		{
			name:  "compaction then message: input, output and cache summed",
			start: `{"input_tokens":900,"output_tokens":1}`,
			delta: `{"input_tokens":40,"cache_read_input_tokens":8,"cache_creation_input_tokens":2,"output_tokens":70,` +
				`"iterations":[{"type":"compaction","input_tokens":900,"cache_read_input_tokens":100,"cache_creation_input_tokens":0,"output_tokens":30},` +
				`{"type":"message","input_tokens":40,"cache_read_input_tokens":8,"cache_creation_input_tokens":2,"output_tokens":70}]}`,
			want: Usage{900 + 100 + 40 + 8 + 2, 30 + 70, 108, 2, -1, UsageReported},
		},
		{
			name:  "an iteration without its output count: the top-level counts stand",
			start: `{"input_tokens":900,"output_tokens":1}`,
			delta: `{"input_tokens":40,"output_tokens":70,"iterations":[{"input_tokens":900},{"input_tokens":40,"output_tokens":70}]}`,
			want:  Usage{40, 70, -1, -1, -1, UsageReported},
		},
		{
			name:  "an empty list: the top-level counts",
			start: `{"input_tokens":40,"output_tokens":1}`,
			delta: `{"input_tokens":40,"output_tokens":70,"iterations":[]}`,
			want:  Usage{40, 70, -1, -1, -1, UsageReported},
		},
		{
			name:  "iterations in message_start, whose output is a placeholder, are not read",
			start: `{"input_tokens":40,"output_tokens":1,"iterations":[{"input_tokens":900,"output_tokens":30}]}`,
			delta: `{"output_tokens":70}`,
			want:  Usage{40, 70, -1, -1, -1, UsageReported},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":%s}}\n\n", tt.start) +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
				fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":%s}\n\n", tt.delta) +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
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
		})
	}
}
