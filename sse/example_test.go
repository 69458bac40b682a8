package sse_test

import (
	"bytes"
	"fmt"

	"github.com/tokentap/tokentap/sse"
)

// A proxy feeds the decoder whatever chunks it forwards; events come out
// whole however the chunks fall. Here a llama.cpp-style stream arrives in
// three writes that split lines, and ends without the final blank line.
func ExampleDecoder() {
	d := &sse.Decoder{
		OnEvent: func(e *sse.Event) {
			// e is only valid here: copy what must be kept.
			if bytes.Equal(e.Data, []byte("[DONE]")) {
				fmt.Println("done, unterminated:", e.Unterminated)
				return
			}
			fmt.Printf("%s\n", e.Data)
		},
	}
	for _, chunk := range []string{
		"data: {\"content\":\"Hel",
		"lo\"}\n\ndata: {\"content\":\" world\"}\n",
		"\ndata: [DONE]\n",
	} {
		d.Write([]byte(chunk)) // always len(chunk), nil
	}
	d.Close() // end of response body: flushes the unterminated [DONE]
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// {"content":"Hello"}
	// {"content":" world"}
	// done, unterminated: true
	// {Events:3 Oversized:0 Comments:0 Bytes:68}
}
