// Command openai streams a chat completion with openai-go through tokentap.
//
// The only change from calling OpenAI directly is the base URL. openai-go
// reads it from OPENAI_BASE_URL, so this program sets nothing in code:
//
//	OPENAI_BASE_URL=http://localhost:8080/openai/v1 go run ./examples/clients/go/openai
//
// or, in code, option.WithBaseURL("http://localhost:8080/openai/v1") in
// openai.NewClient. It asks for usage in the stream (include_usage), so that
// tokentap's token counts are the provider's own.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/openai/openai-go/v3"
)

func main() {
	client := openai.NewClient() // OPENAI_API_KEY and OPENAI_BASE_URL from the environment
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         openai.ChatModelGPT4oMini,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			fmt.Print(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nusage: input_tokens=%d output_tokens=%d\n", acc.Usage.PromptTokens, acc.Usage.CompletionTokens)
}
