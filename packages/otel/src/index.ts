/**
 * @ratchet/otel — OpenTelemetry for Ratchet: a span per execution segment (`invoke_workflow`),
 * per fresh step, per model call (`chat {model}`, GenAI semantic conventions) and per tool call
 * (`execute_tool {name}`); seal and commit spans carrying the contract hash; span links across
 * resumptions; trace and span ids on the run's rows equal to the exported spans'; GenAI and
 * Ratchet metrics.
 *
 * @example
 * ```ts
 * // tracing.ts — imported first (or `node --import ./tracing.ts`)
 * import { NodeSDK } from '@opentelemetry/sdk-node';
 * import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
 * import { ratchetInstrumentation } from '@ratchet/otel';
 *
 * export const ratchet = ratchetInstrumentation();         // engines created after this use it
 * const sdk = new NodeSDK({
 *   serviceName: 'triage-worker',
 *   traceExporter: new OTLPTraceExporter(),                // OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318
 *   instrumentations: [ratchet],
 * });
 * sdk.start();
 * // elsewhere: const engine = await createEngine({ workflows }); ratchet.observe(engine) in one process
 * ```
 */
export { RatchetInstrumentation, ratchetInstrumentation, errorType } from './instrumentation.js';
export type { RatchetInstrumentationConfig } from './instrumentation.js';
export type { Queryable } from './metrics.js';
export { captureFromEnvironment } from './content.js';
/** Every span, attribute and metric name, with the semantic-conventions version they follow. */
import * as attributes from './attributes.js';
export { attributes };
export { SEMCONV_VERSION } from './attributes.js';
