// Streams a chat completion with the openai npm package through tokentap.
//
// The only change from calling OpenAI directly is the base URL. The SDK
// reads it from OPENAI_BASE_URL, so this script sets nothing in code:
//
//   OPENAI_BASE_URL=http://localhost:8080/openai/v1 node chat.mjs
//
// or, in code: new OpenAI({ baseURL: 'http://localhost:8080/openai/v1' }).
// It asks for usage in the stream (include_usage), so that tokentap's token
// counts are the provider's own.
import OpenAI from 'openai';

const client = new OpenAI(); // OPENAI_API_KEY and OPENAI_BASE_URL from the environment
const stream = await client.chat.completions.create({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'Say hello in five words.' }],
  stream: true,
  stream_options: { include_usage: true },
});
let usage;
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? '');
  usage = chunk.usage ?? usage;
}
console.log(`\nusage: input_tokens=${usage.prompt_tokens} output_tokens=${usage.completion_tokens}`);
