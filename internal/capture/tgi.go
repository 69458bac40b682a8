package capture

import "github.com/tidwall/gjson"

func init() { RegisterInput("tgi", tgiInput) }

// tgiInput reads a TGI generate request: its inputs is the prompt, the
// one user message.
func tgiInput(root gjson.Result) ([]Part, []Message) {
	return nil, promptInput(root.Get("inputs"))
}
