# Remakes the InvokeModel recordings of meter/recorded_bedrock_invoke_test.go
# (SOURCES-responses-bedrock-cohere.md, section "Bedrock InvokeModel").
# Needs PyYAML and the two repository snapshots below. Streams are the
# cassettes' !!binary bodies, byte for byte; bodies are the cassettes'
# body strings as stored; .headers files are the recorded response headers
# that name Bedrock's counts and latency, one "Name: value" a line.
import os, subprocess, yaml
O = "/work/.mirror/open-telemetry+opentelemetry-python-contrib/repo"
T = "/work/.mirror/traceloop+openllmetry/repo"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bedrock")
OC = "instrumentation/opentelemetry-instrumentation-botocore/tests/cassettes/"
TC = "packages/opentelemetry-instrumentation-bedrock/tests/"
KEEP = ("x-amzn-bedrock-input-token-count", "x-amzn-bedrock-output-token-count",
        "x-amzn-bedrock-cache-read-input-token-count", "x-amzn-bedrock-cache-write-input-token-count",
        "x-amzn-bedrock-invocation-latency")
def interaction(repo, path, k):
    raw = subprocess.run(["git", "-C", repo, "show", "HEAD:" + path], capture_output=True, check=True).stdout
    return yaml.safe_load(raw)["interactions"][k]["response"]
def write(name, data):
    p = os.path.join(OUT, name)
    assert not os.path.exists(p), p
    open(p, "wb").write(data)
def take(name, repo, path, k=0, headers=True):
    r = interaction(repo, path, k)
    body = r["body"]["string"]
    write(name, body if isinstance(body, bytes) else body.encode())
    h = "".join("%s: %s\n" % (n, v[0]) for n, v in sorted(r["headers"].items()) if n.lower() in KEEP)
    if headers and h:
        write(name + ".headers", h.encode())

# OpenTelemetry Python contrib, botocore instrumentation (Apache-2.0)
take("invoke_nova_micro_stream.bin", O, OC + "test_invoke_model_with_response_stream_with_content[amazon.nova].yaml")
take("invoke_nova_micro_tool_call_stream.bin", O, OC + "test_invoke_model_with_response_stream_no_content_tool_call[amazon.nova].yaml")
take("invoke_titan_text_lite_stream.bin", O, OC + "test_invoke_model_with_response_stream_with_content[amazon.titan].yaml")
take("invoke_claude_v2_stream.bin", O, OC + "test_invoke_model_with_response_stream_with_content[anthropic.claude].yaml")
take("invoke_claude_3_5_sonnet_tool_call_stream.bin", O, OC + "test_invoke_model_with_response_stream_no_content_tool_call[anthropic.claude].yaml")
take("invoke_nova_micro_body.json", O, OC + "test_invoke_model_no_content[amazon.nova].yaml")
take("invoke_nova_micro_tool_call_body.json", O, OC + "test_invoke_model_no_content_tool_call[amazon.nova].yaml")
take("invoke_titan_text_lite_body.json", O, OC + "test_invoke_model_no_content[amazon.titan].yaml")
take("invoke_claude_v2_body.json", O, OC + "test_invoke_model_no_content[anthropic.claude].yaml")
take("invoke_claude_3_5_sonnet_tool_call_body.json", O, OC + "test_invoke_model_no_content_tool_call[anthropic.claude].yaml")
take("invoke_cohere_command_r_body.json", O, OC + "test_invoke_model_no_content[cohere.command-r].yaml")
take("invoke_cohere_command_light_body.json", O, OC + "test_invoke_model_no_content[cohere.command].yaml")
take("invoke_llama3_1_70b_body.json", O, OC + "test_invoke_model_no_content[meta.llama].yaml")
take("invoke_mistral_7b_body.json", O, OC + "test_invoke_model_no_content[mistral.mistral].yaml")
take("invoke_error_400_body.json", O, OC + "test_invoke_model_with_invalid_model.yaml")
# traceloop/openllmetry, Bedrock instrumentation (Apache-2.0)
take("invoke_claude_3_sonnet_stream.bin", T, TC + "traces/cassettes/test_anthropic/test_anthropic_3_completion_streaming.yaml")
take("invoke_titan_text_express_guardrail_stream.bin", T, TC + "traces/cassettes/test_titan/test_titan_invoke_stream.yaml")
take("invoke_titan_text_express_blocked_stream.bin", T, TC + "traces/cassettes/test_guardrails/test_guardrail_invoke_stream.yaml")
take("invoke_nova_lite_guardrail_stream.bin", T, TC + "traces/cassettes/test_nova/test_nova_invoke_stream.yaml")
take("invoke_nova_lite_guardrail_body.json", T, TC + "traces/cassettes/test_nova/test_nova_completion.yaml")
take("invoke_titan_text_express_guardrail_body.json", T, TC + "traces/cassettes/test_guardrails/test_guardrail_invoke.yaml")
take("invoke_ai21_j2_mid_body.json", T, TC + "traces/cassettes/test_ai21/test_ai21_j2_completion_string_content.yaml")
take("invoke_claude_v2_1_text_completion_body.json", T, TC + "traces/cassettes/test_anthropic/test_anthropic_2_completion.yaml")
take("invoke_claude_3_5_haiku_cache_write_body.json", T, TC + "traces/cassettes/test_prompt_caching/test_invoke_model_cache_tokens.yaml", 0)
take("invoke_claude_3_5_haiku_cache_read_body.json", T, TC + "traces/cassettes/test_prompt_caching/test_invoke_model_cache_tokens.yaml", 1)
take("invoke_cohere_command_text_body.json", T, TC + "traces/cassettes/test_cohere/test_cohere_completion.yaml")
take("invoke_imported_model_body.json", T, TC + "traces/cassettes/test_imported_model/test_imported_model_completion.yaml")
take("invoke_llama2_13b_body.json", T, TC + "traces/cassettes/test_meta/test_meta_llama2_completion_string_content.yaml")
