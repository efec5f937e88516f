/**
 * Every name @ratchet/otel emits — span names, attributes, metrics, values — in one place.
 *
 * GenAI names follow the OpenTelemetry semantic conventions as published in
 * `@opentelemetry/semantic-conventions` **1.45.0** (pinned in package.json; the `incubating`
 * entry, whose GenAI part is the conventions repository's v1.41 text plus `invoke_workflow`).
 * They are copied here rather than imported, as that package advises for incubating names:
 * a minor release may rename them, and a rename must be a decision, not an accident
 * (packages/otel/test/attributes.test.ts compares these strings with the pinned package). When bumping
 * the package, re-read the GenAI changelog — the standalone GenAI repository has since merged
 * `invoke_workflow` spans into `invoke_agent` and replaced `gen_ai.workflow.name` with
 * `gen_ai.agent.name`.
 *
 * Ratchet's own names live under `ratchet.*`.
 */

/** The semantic-conventions release these names follow. */
export const SEMCONV_VERSION = '1.45.0';
export const INSTRUMENTATION_NAME = '@ratchet/otel';
export const INSTRUMENTATION_VERSION = '0.1.0';

// ------------------------------------------------------------------ GenAI (incubating, 1.45.0)
export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
export const ATTR_GEN_AI_PROVIDER_NAME = 'gen_ai.provider.name';
export const ATTR_GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
export const ATTR_GEN_AI_RESPONSE_MODEL = 'gen_ai.response.model';
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens';
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens';
export const ATTR_GEN_AI_TOKEN_TYPE = 'gen_ai.token.type';
export const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
export const ATTR_GEN_AI_TOOL_CALL_ID = 'gen_ai.tool.call.id';
export const ATTR_GEN_AI_TOOL_TYPE = 'gen_ai.tool.type';
export const ATTR_GEN_AI_WORKFLOW_NAME = 'gen_ai.workflow.name';
/** Content attributes: set only when content capture is on. */
export const ATTR_GEN_AI_INPUT_MESSAGES = 'gen_ai.input.messages';
export const ATTR_GEN_AI_OUTPUT_MESSAGES = 'gen_ai.output.messages';
export const ATTR_GEN_AI_TOOL_CALL_ARGUMENTS = 'gen_ai.tool.call.arguments';
export const ATTR_GEN_AI_TOOL_CALL_RESULT = 'gen_ai.tool.call.result';

export const GEN_AI_OPERATION_CHAT = 'chat';
export const GEN_AI_OPERATION_EXECUTE_TOOL = 'execute_tool';
export const GEN_AI_OPERATION_INVOKE_WORKFLOW = 'invoke_workflow';
export const GEN_AI_TOKEN_TYPE_INPUT = 'input';
export const GEN_AI_TOKEN_TYPE_OUTPUT = 'output';
export const GEN_AI_TOOL_TYPE_FUNCTION = 'function';

export const METRIC_GEN_AI_CLIENT_OPERATION_DURATION = 'gen_ai.client.operation.duration';
export const METRIC_GEN_AI_CLIENT_TOKEN_USAGE = 'gen_ai.client.token.usage';
/** Bucket boundaries the GenAI conventions recommend for those two histograms. */
export const GEN_AI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
export const GEN_AI_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

/** The environment switch GenAI instrumentations share for capturing prompts and answers. */
export const ENV_CAPTURE_MESSAGE_CONTENT = 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT';

// ------------------------------------------------------------------ general (stable)
export const ATTR_ERROR_TYPE = 'error.type';
export const ERROR_TYPE_OTHER = '_OTHER';

// ------------------------------------------------------------------ ratchet.*
export const ATTR_RATCHET_RUN_ID = 'ratchet.run.id';
export const ATTR_RATCHET_TENANT_ID = 'ratchet.tenant.id';
export const ATTR_RATCHET_WORKFLOW_NAME = 'ratchet.workflow.name';
export const ATTR_RATCHET_WORKFLOW_VERSION = 'ratchet.workflow.version';
/** Claims of the run since it last made progress (a run that keeps crashing its workers counts up). */
export const ATTR_RATCHET_RUN_ATTEMPT = 'ratchet.run.attempt';
export const ATTR_RATCHET_RUN_STATE = 'ratchet.run.state';
/** sleeping / waiting: when the run is due again (ISO 8601). */
export const ATTR_RATCHET_RUN_WAKE_AT = 'ratchet.run.wake_at';
/** How the segment ended: completed, failed, cancelled, parked, sleeping, waiting, lost. */
export const ATTR_RATCHET_SEGMENT_OUTCOME = 'ratchet.segment.outcome';
/** What ended the previous segment: sleeping, waiting, released, interrupted (a crash or lost lease). */
export const ATTR_RATCHET_SEGMENT_RESUMED_AFTER = 'ratchet.segment.resumed_after';
export const ATTR_RATCHET_SEGMENT_REPLAYED_STEPS = 'ratchet.segment.replayed_steps';
export const ATTR_RATCHET_SEGMENT_FRESH_STEPS = 'ratchet.segment.fresh_steps';
/** On a segment's links: `origin` (the run's starter) or `previous_segment`. */
export const ATTR_RATCHET_LINK_TYPE = 'ratchet.link.type';
export const LINK_TYPE_ORIGIN = 'origin';
export const LINK_TYPE_PREVIOUS_SEGMENT = 'previous_segment';

export const ATTR_RATCHET_STEP_NAME = 'ratchet.step.name';
export const ATTR_RATCHET_STEP_KEY = 'ratchet.step.key';
export const ATTR_RATCHET_STEP_KIND = 'ratchet.step.kind';
export const ATTR_RATCHET_STEP_ATTEMPT = 'ratchet.step.attempt';
export const ATTR_RATCHET_IDEMPOTENCY_KEY = 'ratchet.idempotency_key';
/** infer: the sample number, and whether its answer matched the schema. */
export const ATTR_RATCHET_INFER_SAMPLE = 'ratchet.infer.sample';
export const ATTR_RATCHET_INFER_ACCEPTED = 'ratchet.infer.accepted';
export const ATTR_RATCHET_CONTRACT_ID = 'ratchet.contract.id';
/** The SHA-256 of the contract's canonical body (hex). */
export const ATTR_RATCHET_CONTRACT_HASH = 'ratchet.contract.hash';
export const ATTR_RATCHET_CONTRACT_STATUS = 'ratchet.contract.status';
export const ATTR_RATCHET_CONTRACT_REJECTION = 'ratchet.contract.rejection_reason';
export const ATTR_RATCHET_CONTRACT_AGENT = 'ratchet.contract.agent';
export const ATTR_RATCHET_SLEEP_UNTIL = 'ratchet.sleep.until';
export const ATTR_RATCHET_WAIT_SIGNALS = 'ratchet.wait.signals';
export const ATTR_RATCHET_WAIT_TIMEOUT_AT = 'ratchet.wait.timeout_at';
export const ATTR_RATCHET_WAIT_RECEIVED = 'ratchet.wait.received';
export const ATTR_RATCHET_CHILD_WORKFLOW = 'ratchet.child.workflow';
export const ATTR_RATCHET_CHILD_RUN_ID = 'ratchet.child.run_id';
export const ATTR_RATCHET_EMIT_TOPIC = 'ratchet.emit.topic';

export const METRIC_RATCHET_SEGMENT_DURATION = 'ratchet.segment.duration';
export const METRIC_RATCHET_RUNS = 'ratchet.runs';
export const METRIC_RATCHET_RUNS_SETTLED = 'ratchet.runs.settled';
export const METRIC_RATCHET_CONTRACTS_SEALED = 'ratchet.contracts.sealed';
export const METRIC_RATCHET_CONTRACTS_SEALED_OLDEST_AGE = 'ratchet.contracts.sealed.oldest_age';
export const METRIC_RATCHET_CONTRACT_SEAL_TO_COMMIT = 'ratchet.contract.seal_to_commit.duration';

// ------------------------------------------------------------------ span names
export const SPAN_INVOKE_WORKFLOW = GEN_AI_OPERATION_INVOKE_WORKFLOW;
export const SPAN_CHAT = GEN_AI_OPERATION_CHAT;
export const SPAN_EXECUTE_TOOL = GEN_AI_OPERATION_EXECUTE_TOOL;
