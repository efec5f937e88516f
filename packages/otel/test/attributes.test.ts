/**
 * The names in src/attributes.ts are copies of the pinned @opentelemetry/semantic-conventions
 * (incubating) constants: this fails when a bump renames one, so the rename is a decision.
 */
import { describe, expect, it } from 'vitest';
import * as semconv from '@opentelemetry/semantic-conventions/incubating';
import { attributes as A } from '@ratchet/otel';

describe('attribute names', () => {
  it('match @opentelemetry/semantic-conventions at the pinned version', () => {
    const pairs: [string, string][] = [
      [A.ATTR_GEN_AI_OPERATION_NAME, semconv.ATTR_GEN_AI_OPERATION_NAME],
      [A.ATTR_GEN_AI_PROVIDER_NAME, semconv.ATTR_GEN_AI_PROVIDER_NAME],
      [A.ATTR_GEN_AI_REQUEST_MODEL, semconv.ATTR_GEN_AI_REQUEST_MODEL],
      [A.ATTR_GEN_AI_RESPONSE_MODEL, semconv.ATTR_GEN_AI_RESPONSE_MODEL],
      [A.ATTR_GEN_AI_USAGE_INPUT_TOKENS, semconv.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
      [A.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, semconv.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
      [A.ATTR_GEN_AI_TOKEN_TYPE, semconv.ATTR_GEN_AI_TOKEN_TYPE],
      [A.ATTR_GEN_AI_TOOL_NAME, semconv.ATTR_GEN_AI_TOOL_NAME],
      [A.ATTR_GEN_AI_TOOL_CALL_ID, semconv.ATTR_GEN_AI_TOOL_CALL_ID],
      [A.ATTR_GEN_AI_TOOL_TYPE, semconv.ATTR_GEN_AI_TOOL_TYPE],
      [A.ATTR_GEN_AI_WORKFLOW_NAME, semconv.ATTR_GEN_AI_WORKFLOW_NAME],
      [A.ATTR_GEN_AI_INPUT_MESSAGES, semconv.ATTR_GEN_AI_INPUT_MESSAGES],
      [A.ATTR_GEN_AI_OUTPUT_MESSAGES, semconv.ATTR_GEN_AI_OUTPUT_MESSAGES],
      [A.ATTR_GEN_AI_TOOL_CALL_ARGUMENTS, semconv.ATTR_GEN_AI_TOOL_CALL_ARGUMENTS],
      [A.ATTR_GEN_AI_TOOL_CALL_RESULT, semconv.ATTR_GEN_AI_TOOL_CALL_RESULT],
      [A.GEN_AI_OPERATION_CHAT, semconv.GEN_AI_OPERATION_NAME_VALUE_CHAT],
      [A.GEN_AI_OPERATION_EXECUTE_TOOL, semconv.GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL],
      [A.GEN_AI_OPERATION_INVOKE_WORKFLOW, semconv.GEN_AI_OPERATION_NAME_VALUE_INVOKE_WORKFLOW],
      [A.GEN_AI_TOKEN_TYPE_INPUT, semconv.GEN_AI_TOKEN_TYPE_VALUE_INPUT],
      [A.GEN_AI_TOKEN_TYPE_OUTPUT, semconv.GEN_AI_TOKEN_TYPE_VALUE_OUTPUT],
      [A.METRIC_GEN_AI_CLIENT_OPERATION_DURATION, semconv.METRIC_GEN_AI_CLIENT_OPERATION_DURATION],
      [A.METRIC_GEN_AI_CLIENT_TOKEN_USAGE, semconv.METRIC_GEN_AI_CLIENT_TOKEN_USAGE],
      [A.ATTR_ERROR_TYPE, semconv.ATTR_ERROR_TYPE],
      [A.ERROR_TYPE_OTHER, semconv.ERROR_TYPE_VALUE_OTHER],
    ];
    for (const [ours, theirs] of pairs) expect(ours).toBe(theirs);
  });

  it('documents the pinned version, and it is the one installed', async () => {
    const { createRequire } = await import('node:module');
    const { readFileSync } = await import('node:fs');
    const entry = createRequire(import.meta.url).resolve('@opentelemetry/semantic-conventions'); // …/dist/index.cjs
    const pkg = JSON.parse(readFileSync(new URL('../package.json', `file://${entry}`), 'utf8')) as { version: string };
    expect(A.SEMCONV_VERSION).toBe(pkg.version);
  });
});
