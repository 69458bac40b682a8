// The openai npm package through tokentap: each chat completion is made
// twice, through tokentap and straight to its simulator, and what the SDK
// gives the application must be the same both ways. Run by
// test/e2e/clients_node_test.go, which starts tokentap and checks the spans
// against the usage this script reports; by hand:
//
//   TOKENTAP_URL=http://127.0.0.1:9345/sim/v1 SIMULATOR_URL=http://127.0.0.1:9346/v1 node --test chat.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import OpenAI from 'openai';

const proxyURL = process.env.TOKENTAP_URL;
const directURL = process.env.SIMULATOR_URL;
if (!proxyURL || !directURL) {
  throw new Error('set TOKENTAP_URL (tokentap route to the simulator, e.g. http://127.0.0.1:9345/sim/v1) and SIMULATOR_URL (the simulator itself, e.g. http://127.0.0.1:9346/v1)');
}
// Where to append one JSON line per proxied request, for the Go test to
// compare with tokentap's span; optional.
const report = process.env.TOKENTAP_NODE_REPORT;

// Retries off: one call is one request, so one span.
const client = (baseURL) => new OpenAI({ baseURL, apiKey: 'sk-tokentap-test', maxRetries: 0, timeout: 30_000 });
const proxy = client(proxyURL);
const direct = client(directURL);

const params = {
  model: 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Name three rivers.' },
  ],
};

// A W3C traceparent with a fresh trace id: tokentap continues the trace, so
// the span of the request is the one with this trace id.
function traceparent() {
  const traceId = randomBytes(16).toString('hex');
  return { traceId, header: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
}

function record(name, traceId, result) {
  if (report) {
    appendFileSync(report, JSON.stringify({ name, traceId, ...result }) + '\n');
  }
}

// complete makes one non-streamed completion and returns what an
// application reads from it.
async function complete(c, headers) {
  const res = await c.chat.completions.create(params, { headers });
  return {
    id: res.id,
    model: res.model,
    text: res.choices.map((ch) => ch.message.content).join(''),
    finishReasons: res.choices.map((ch) => ch.finish_reason),
    usage: { prompt_tokens: res.usage.prompt_tokens, completion_tokens: res.usage.completion_tokens, total_tokens: res.usage.total_tokens },
  };
}

// stream makes one streamed completion with include_usage and assembles it
// as an application would, keeping every chunk the SDK yielded.
async function stream(c, headers) {
  const s = await c.chat.completions.create(
    { ...params, stream: true, stream_options: { include_usage: true } },
    { headers },
  );
  const out = { id: '', model: '', text: '', finishReasons: [], usage: null, chunks: [] };
  for await (const chunk of s) {
    out.chunks.push(JSON.stringify(chunk));
    out.id = chunk.id;
    out.model = chunk.model;
    for (const ch of chunk.choices) {
      out.text += ch.delta?.content ?? '';
      if (ch.finish_reason) out.finishReasons.push(ch.finish_reason);
    }
    if (chunk.usage) {
      out.usage = { prompt_tokens: chunk.usage.prompt_tokens, completion_tokens: chunk.usage.completion_tokens, total_tokens: chunk.usage.total_tokens };
    }
  }
  return out;
}

test('non-streamed chat completion through tokentap is the same as direct', async () => {
  const tp = traceparent();
  const got = await complete(proxy, { traceparent: tp.header });
  record('non-streamed', tp.traceId, got);
  const want = await complete(direct, {});
  assert.deepEqual(got, want);
  assert.ok(got.text.length > 0, 'empty text');
  assert.ok(got.usage.completion_tokens > 0, 'no completion tokens');
  assert.equal(got.usage.total_tokens, got.usage.prompt_tokens + got.usage.completion_tokens);
});

test('streamed chat completion with include_usage through tokentap is the same as direct', async () => {
  const tp = traceparent();
  const got = await stream(proxy, { traceparent: tp.header });
  const { chunks, ...assembled } = got;
  record('streamed', tp.traceId, assembled);
  const want = await stream(direct, {});
  assert.deepEqual(got.chunks, want.chunks, 'the SDK yielded different chunks through tokentap');
  assert.deepEqual(got, want);
  assert.ok(got.text.length > 0, 'empty text');
  assert.ok(got.usage && got.usage.completion_tokens > 0, 'no usage chunk');
  assert.equal(got.finishReasons.length, 1, 'the one choice did not finish');
});
