"""Stream a message with the anthropic Python package through tokentap.

The only change from calling Anthropic directly is the base URL, the API
root without /v1. The SDK reads it from ANTHROPIC_BASE_URL, so this script
sets nothing in code:

    ANTHROPIC_BASE_URL=http://localhost:8080/anthropic python anthropic_messages.py

or, in code: Anthropic(base_url="http://localhost:8080/anthropic").
"""

from anthropic import Anthropic

client = Anthropic()  # ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL from the environment
with client.messages.stream(
    model="claude-sonnet-4-5",
    max_tokens=256,
    messages=[{"role": "user", "content": "Say hello in five words."}],
) as stream:
    for text in stream.text_stream:
        print(text, end="", flush=True)
    message = stream.get_final_message()
print(f"\nusage: input_tokens={message.usage.input_tokens} output_tokens={message.usage.output_tokens}")
