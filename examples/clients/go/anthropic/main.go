// Command anthropic streams a message with anthropic-sdk-go through
// tokentap.
//
// The only change from calling Anthropic directly is the base URL, the API
// root without /v1. anthropic-sdk-go reads it from ANTHROPIC_BASE_URL, so
// this program sets nothing in code:
//
//	ANTHROPIC_BASE_URL=http://localhost:8080/anthropic go run ./examples/clients/go/anthropic
//
// or, in code, option.WithBaseURL("http://localhost:8080/anthropic") in
// anthropic.NewClient.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

func main() {
	client := anthropic.NewClient() // ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL from the environment
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in five words."))},
	})
	var message anthropic.Message
	for stream.Next() {
		event := stream.Current()
		if err := message.Accumulate(event); err != nil {
			log.Fatal(err)
		}
		if delta, ok := event.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			fmt.Print(delta.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nusage: input_tokens=%d output_tokens=%d\n", message.Usage.InputTokens, message.Usage.OutputTokens)
}
