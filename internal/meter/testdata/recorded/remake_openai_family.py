import json, subprocess, os, yaml
P = "/work/.mirror/pydantic+pydantic-ai/repo"
OUT = os.path.dirname(os.path.abspath(__file__))
def show(path):
    return subprocess.run(["git", "-C", P, "show", "HEAD:" + path], capture_output=True, check=True).stdout
def cassette(path):
    return yaml.safe_load(show(path))["interactions"]
def write(rel, data):
    p = os.path.join(OUT, rel)
    assert not os.path.exists(p), p
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "wb").write(data)
def raw(rel, src, i=0):
    # vcrpy keeps a text body as a YAML literal block: its bytes, line
    # breaks as LF.
    write(rel, cassette(src)[i]["response"]["body"]["string"].encode())
def parsed(rel, src, i=0):
    # pydantic-ai keeps a JSON body parsed, as YAML: written back compact,
    # the cassette's key order kept.
    write(rel, json.dumps(cassette(src)[i]["response"]["parsed_body"], separators=(",", ":"), ensure_ascii=False).encode())
C = "tests/models/cassettes/"
O = "tests/models/openrouter/cassettes/test_cache/"
raw("openrouter/responses_reasoning_text_done.sse", C + "test_openai_responses/test_openai_responses_raw_cot_stream_openrouter.yaml")
raw("openrouter/chat_stream_cost.sse", O + "test_openrouter_cache_streaming_e2e.yaml")
parsed("openrouter/chat_cache_write_body.json", O + "test_openrouter_cache_messages_anthropic_real_api.yaml", 0)
parsed("openrouter/chat_cache_read_write_body.json", O + "test_openrouter_cache_messages_anthropic_real_api.yaml", 1)
parsed("openrouter/responses_cache_write_body.json", C + "test_openai_prompt_cache/test_openrouter_responses_prompt_cache_e2e.yaml", 0)
parsed("openrouter/responses_cache_read_body.json", C + "test_openai_prompt_cache/test_openrouter_responses_prompt_cache_e2e.yaml", 1)
parsed("openai/chat_cache_write_body.json", C + "test_openai_prompt_cache/test_openai_chat_prompt_cache_e2e.yaml", 0)
parsed("openai/chat_cache_read_body.json", C + "test_openai_prompt_cache/test_openai_chat_prompt_cache_e2e.yaml", 1)
parsed("openai/responses_cache_write_body.json", C + "test_openai_prompt_cache/test_openai_responses_prompt_cache_e2e.yaml", 0)
parsed("openai/responses_cache_read_body.json", C + "test_openai_prompt_cache/test_openai_responses_prompt_cache_e2e.yaml", 1)
raw("bedrock-mantle/responses_tool_calls_cache_write.sse", C + "test_bedrock_mantle/test_reused_tool_call_ids[stream].yaml", 2)
parsed("vertexai/unexpected_tool_call_body.json", C + "test_multimodal_tool_returns/test_multimodal_tool_return_matrix[direct-binary-audio-google_vertex].yaml", 0)
