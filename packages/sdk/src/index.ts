/**
 * @ratchet/sdk — Ratchet's authoring layer: workflows, the step context, actions, durations,
 * retry policies, canonical JSON and errors. Pure: depends on zod only, does no I/O.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { workflow } from '@ratchet/sdk';
 *
 * export const greet = workflow(
 *   { name: 'greet', version: '1', input: z.object({ name: z.string() }) },
 *   async (ctx, { name }) => {
 *     const greeting = await ctx.step('compose', () => `Hello, ${name}!`);
 *     await ctx.sleep('pause', '5s');
 *     return { greeting, at: ctx.now().toISOString() };
 *   },
 * );
 * // Run it with @ratchet/engine: `await (await createEngine({ workflows: [greet] })).run(greet, { name: 'Ada' })`.
 * ```
 */

export { defineAction, defineCheck, isAction, isCheck } from './actions.js';
export type { Action, ActionDefinition, ActionTx, ActionTxExtensions, Check, CheckDefinition } from './actions.js';

export { canonicalJson, hashCanonical, sha256Hex, toJsonValue } from './canonical-json.js';

export type {
  ChildOptions,
  EffectOptions,
  InferCallResult,
  InferOptions,
  InferUsage,
  SealOptions,
  StepOptions,
  WaitForOptions,
  WaitForAnyOptions,
  ReceivedSignal,
  WorkflowContext,
  WorkflowFn,
  WorkflowRef,
} from './context.js';

export type { CommitResult, ContractBody, ContractOperation, Dependency, SealedContract } from './contract.js';

export { seededRandom, seededUuid } from './deterministic.js';

export { MAX_DURATION_MS, parseDuration } from './duration.js';
export type { Duration } from './duration.js';

export {
  CancelledError,
  ContractConflictError,
  ContractRejectedError,
  ContractTamperedError,
  IdempotencyConflictError,
  LeaseLostError,
  NonDeterminismError,
  NonRetryableError,
  NotFoundError,
  RATCHET_ERROR,
  RATCHET_ERROR_CODES,
  RatchetError,
  SchemaMismatchError,
  NotifyPayloadTooLargeError,
  RunExpiredError,
  KeyExpiredError,
  StepFailedError,
  TenantMismatchError,
  TimeoutError,
  ValidationError,
  WorkflowNotRegisteredError,
  fieldPath,
  formatPath,
  isRatchetError,
} from './errors.js';
export { deserializeError, serializeError } from './serialized-error.js';
export type {
  PathSegment,
  RatchetErrorBaseOptions,
  RatchetErrorByCode,
  RatchetErrorCode,
  RatchetErrorOptions,
  ValidationIssue,
} from './errors.js';
export type { SerializedError } from './serialized-error.js';

export { DEFAULT_RETRY, resolveRetryPolicy, retryDelay } from './retry.js';
export type { ResolvedRetryPolicy, RetryPolicy } from './retry.js';

export { isZodSchema, parseWithSchema } from './schema.js';

// Internal: engine use only (see suspension.ts).
export { SUSPEND, Suspension, isSuspension } from './suspension.js';

export { isWorkflow, parseWorkflowInput, parseWorkflowOutput, workflow } from './workflow.js';
export type { Workflow, WorkflowInput, WorkflowOptions, WorkflowOutput, WorkflowRawInput } from './workflow.js';
