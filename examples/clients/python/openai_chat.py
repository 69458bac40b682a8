"""Stream a chat completion with the openai Python package through tokentap.

The only change from calling OpenAI directly is the base URL. The SDK reads
it from OPENAI_BASE_URL, so this script sets nothing in code:

    OPENAI_BASE_URL=http://localhost:8080/openai/v1 python openai_chat.py

or, in code: OpenAI(base_url="http://localhost:8080/openai/v1"). It asks for
usage in the stream (include_usage), so that tokentap's token counts are the
provider's own.
"""

from openai import OpenAI

client = OpenAI()  # OPENAI_API_KEY and OPENAI_BASE_URL from the environment
stream = client.chat.completions.create(
    model="gpt-4o-mini",
    messages=[{"role": "user", "content": "Say hello in five words."}],
    stream=True,
    stream_options={"include_usage": True},
)
usage = None
for chunk in stream:
    if chunk.choices:
        print(chunk.choices[0].delta.content or "", end="", flush=True)
    if chunk.usage:
        usage = chunk.usage
print(f"\nusage: input_tokens={usage.prompt_tokens} output_tokens={usage.completion_tokens}")
