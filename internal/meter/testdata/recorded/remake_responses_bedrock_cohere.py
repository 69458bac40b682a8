import json, subprocess, struct, binascii, os, yaml
V = "/work/.mirror/vercel+ai/repo"
P = "/work/.mirror/pydantic+pydantic-ai/repo"
OUT = os.path.dirname(os.path.abspath(__file__))
def show(repo, path):
    return subprocess.run(["git","-C",repo,"show","HEAD:"+path],capture_output=True,check=True).stdout
def lines(path):
    return [l for l in show(V, path).decode().split("\n") if l.strip()]
def write(rel, data):
    p = os.path.join(OUT, rel)
    assert not os.path.exists(p), p
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "wb").write(data)
def responses(rel, src, first_only=False):
    out = []
    for l in lines(src):
        t = json.loads(l)["type"]
        out.append("event: %s\ndata: %s\n\n" % (t, l))
        if first_only and t == "response.completed":
            break
    write(rel, "".join(out).encode())
def cohere(rel, src):
    write(rel, "".join("event: %s\ndata: %s\n\n" % (json.loads(l)["type"], l) for l in lines(src)).encode())
def body(rel, src):
    write(rel, show(V, src))
def frame(event_type, payload):
    h = b""
    for k, v in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        kb, vb = k.encode(), v.encode()
        h += bytes([len(kb)]) + kb + b"\x07" + struct.pack(">H", len(vb)) + vb
    prelude = struct.pack(">II", 16 + len(h) + len(payload), len(h))
    m = prelude + struct.pack(">I", binascii.crc32(prelude)) + h + payload
    return m + struct.pack(">I", binascii.crc32(m))
def bedrock_vercel(rel, src):
    out = b""
    for l in lines(src):
        # The recorder stored {eventType: payload}; the wire payload is the
        # inner object, compact, its key order kept.
        w = json.loads(l)
        (t, inner), = w.items()
        out += frame(t, json.dumps(inner, separators=(",", ":"), ensure_ascii=False).encode())
    write(rel, out)
def cassette(path):
    return yaml.safe_load(show(P, path))
def bedrock_raw(rel, src, k=0):
    write(rel, cassette(src)["interactions"][k]["response"]["body"]["string"])
def bedrock_parsed_body(rel, src, k=0):
    b = cassette(src)["interactions"][k]["response"]["parsed_body"]
    write(rel, json.dumps(b, separators=(",", ":"), ensure_ascii=False).encode())

R = "packages/openai/src/responses/__fixtures__/"
A = "packages/azure/src/__fixtures__/"
X = "packages/xai/src/responses/__fixtures__/"
# OpenAI Responses
responses("openai/responses_web_search.sse", R+"openai-web-search-tool.1.chunks.txt")
responses("openai/responses_code_interpreter.sse", R+"openai-code-interpreter-tool.1.chunks.txt")
responses("openai/responses_file_search.sse", R+"openai-file-search-tool.1.chunks.txt")
responses("openai/responses_mcp_call.sse", R+"openai-mcp-tool.1.chunks.txt")
responses("openai/responses_mcp_approval_request.sse", R+"openai-mcp-tool-approval.1.chunks.txt")
responses("openai/responses_image_generation.sse", R+"openai-image-generation-tool.1.chunks.txt")
responses("openai/responses_error_insufficient_quota.sse", R+"openai-error.1.chunks.txt")
responses("openai/responses_reasoning_summary_function_call.sse", R+"openai-reasoning-encrypted-content.1.chunks.txt", first_only=True)
body("openai/responses_web_search_body.json", R+"openai-web-search-tool.1.json")
body("openai/responses_code_interpreter_body.json", R+"openai-code-interpreter-tool.1.json")
body("openai/responses_mcp_call_body.json", R+"openai-mcp-tool.1.json")
body("openai/responses_image_generation_body.json", R+"openai-image-generation-tool.1.json")
body("openai/responses_error_insufficient_quota_body.json", R+"openai-error.1.json")
body("openai/responses_error_temperature_body.json", R+"reasoning-model-temperature-error.json")
# xAI Responses
responses("xai/responses_reasoning_summary.sse", X+"xai-text-with-reasoning-streaming.1.chunks.txt")
responses("xai/responses_web_search.sse", X+"xai-web-search-tool.1.chunks.txt")
body("xai/responses_web_search_body.json", X+"xai-web-search-tool.1.json")
body("xai/responses_code_execution_body.json", X+"xai-code-execution-tool.1.json")
body("xai/responses_file_search_body.json", X+"xai-file-search-tool.1.json")
body("xai/responses_x_search_body.json", X+"xai-x-search-tool.1.json")
# Azure Responses
responses("azure/responses_text.sse", A+"azure-text.1.chunks.txt")
responses("azure/responses_reasoning_summary_function_call.sse", A+"azure-reasoning-encrypted-content.1.chunks.txt", first_only=True)
responses("azure/responses_web_search_preview.sse", A+"azure-web-search-preview-tool.1.chunks.txt")
responses("azure/responses_image_generation.sse", A+"azure-image-generation-tool.1.chunks.txt")
responses("azure/responses_code_interpreter.sse", A+"azure-code-interpreter-tool.1.chunks.txt")
body("azure/responses_text_body.json", A+"azure-text.1.json")
body("azure/responses_tool_call_body.json", A+"azure-tool-call.1.json")
body("azure/responses_reasoning_body.json", A+"azure-reasoning-encrypted-content.1.json")
body("azure/responses_web_search_preview_body.json", A+"azure-web-search-preview-tool.1.json")
body("azure/responses_image_generation_body.json", A+"azure-image-generation-tool.1.json")
body("azure/responses_code_interpreter_body.json", A+"azure-code-interpreter-tool.1.json")
# Bedrock
B = "packages/amazon-bedrock/src/__fixtures__/"
C = "tests/models/cassettes/test_bedrock/"
bedrock_vercel("bedrock/converse_stream_text.bin", B+"amazon-bedrock-text.chunks.txt")
bedrock_vercel("bedrock/converse_stream_reasoning.bin", B+"amazon-bedrock-reasoning.chunks.txt")
bedrock_raw("bedrock/converse_stream_tool_use.bin", C+"test_bedrock_model_iter_stream.yaml")
bedrock_raw("bedrock/converse_stream_server_tool_use.bin", C+"test_bedrock_model_code_execution_tool_stream.yaml")
bedrock_raw("bedrock/converse_stream_redacted_reasoning.bin", C+"test_bedrock_model_thinking_part_redacted_stream.yaml")
bedrock_raw("bedrock/converse_stream_empty_text_delta.bin", C+"test_bedrock_model_stream_empty_text_delta.yaml")
body("bedrock/converse_text_body.json", B+"amazon-bedrock-text.json")
body("bedrock/converse_reasoning_body.json", B+"amazon-bedrock-reasoning.json")
bedrock_parsed_body("bedrock/converse_cache_write_body.json", C+"test_bedrock_cache_write_and_read.yaml", 0)
bedrock_parsed_body("bedrock/converse_cache_read_body.json", C+"test_bedrock_cache_write_and_read.yaml", 1)
bedrock_parsed_body("bedrock/converse_max_tokens_body.json", C+"test_bedrock_model_max_tokens.yaml")
bedrock_parsed_body("bedrock/converse_error_400_body.json", C+"test_bedrock_streaming_error.yaml")
# Cohere
K = "packages/cohere/src/__fixtures__/"
cohere("cohere/chat_text.sse", K+"cohere-text.chunks.txt")
cohere("cohere/chat_reasoning.sse", K+"cohere-reasoning.chunks.txt")
cohere("cohere/chat_tool_calls.sse", K+"cohere-tool-call.chunks.txt")
cohere("cohere/chat_tool_call_no_args.sse", K+"cohere-empty-tool-call.chunks.txt")
body("cohere/chat_text_body.json", K+"cohere-text.json")
body("cohere/chat_max_tokens_body.json", K+"cohere-max-tokens.json")
body("cohere/chat_citations_body.json", K+"cohere-citations.json")
body("cohere/chat_reasoning_body.json", K+"cohere-reasoning.json")
body("cohere/chat_tool_calls_body.json", K+"cohere-tool-call.json")
body("cohere/chat_null_args_body.json", K+"cohere-null-args.json")
