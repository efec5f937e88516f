// Workflow definitions: `workflow(options, fn)` validates a definition once, at module load, and
// returns a frozen value the engine registers by (name, version). A run stays pinned to the
// version it started with, so change `version` whenever the sequence of `ctx` calls changes.

import type { z } from 'zod';
import type { WorkflowFn, WorkflowRef } from './context.js';
import { parseDuration, type Duration } from './duration.js';
import { ValidationError } from './errors.js';
import { resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './retry.js';
import { isZodSchema, parseWithSchema } from './schema.js';

/** What `workflow()` takes. `In` is the input callers pass, `I` the parsed input the function gets. */
export interface WorkflowOptions<I, O, In = I> {
  /** Stable identifier, e.g. `triage-ticket`: letters, digits and `. _ : - /`, at most 200 characters. */
  name: string;
  /** Version of the code path, e.g. `'2'`; at most 100 characters. */
  version: string;
  /** Validates the input when a run starts. */
  input: z.ZodType<I, In>;
  /** Validates the output when the run completes. Default: not validated. */
  output?: z.ZodType<O>;
  /** Default retry policy of the workflow's steps and effects. Default: `DEFAULT_RETRY`. */
  retry?: Partial<RetryPolicy>;
  /** Longest a run may take from start to finish. Default: no limit. */
  timeout?: Duration;
  /**
   * Schemas of the signals the workflow waits for, by name: `client.signal` validates a payload
   * against them before storing it (a `ValidationError` to the sender), and `ctx.waitFor` uses
   * them when it is given no schema of its own.
   */
  signals?: Record<string, z.ZodType>;
}

/** A validated, frozen workflow definition. */
export interface Workflow<I = unknown, O = unknown, In = I> extends WorkflowRef<I, O, In> {
  readonly kind: 'ratchet.workflow';
  readonly name: string;
  readonly version: string;
  readonly input: z.ZodType<I, In>;
  readonly output?: z.ZodType<O>;
  /** Present only when the definition set `retry`; missing fields are filled from `DEFAULT_RETRY`. */
  readonly retry?: ResolvedRetryPolicy;
  /** In milliseconds; present only when the definition set `timeout`. */
  readonly timeout?: number;
  /** Present only when the definition declared `signals`. */
  readonly signals?: Readonly<Record<string, z.ZodType>>;
}

/** The parsed input a workflow's function receives. */
export type WorkflowInput<W> = W extends Workflow<infer I, infer _O, infer _In> ? I : never;
/** The input a caller passes to start a workflow (before zod defaults and transforms). */
export type WorkflowRawInput<W> = W extends Workflow<infer _I, infer _O, infer In> ? In : never;
/** What a workflow's run resolves to. */
export type WorkflowOutput<W> = W extends Workflow<infer _I, infer O, infer _In> ? O : never;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:\-/]*$/;
const MAX_NAME_LENGTH = 200;
const MAX_VERSION_LENGTH = 100;
const OPTION_KEYS = ['name', 'version', 'input', 'output', 'retry', 'timeout', 'signals'];

/** Defines a workflow: validates the options (a ValidationError names the bad field) and returns a frozen `Workflow`. */
export function workflow<I, O, In = I>(options: WorkflowOptions<I, O, In>, fn: WorkflowFn<I, O>): Workflow<I, O, In> {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('workflow() takes an options object { name, version, input } and a function', { path: ['options'] });
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) {
      throw new ValidationError(`unknown workflow option; expected one of ${OPTION_KEYS.join(', ')}`, { path: [key] });
    }
  }
  const { name, version, input, output, retry, timeout, signals } = options;
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH || !NAME.test(name)) {
    throw new ValidationError(
      `must be 1 to ${MAX_NAME_LENGTH} characters: a letter or digit, then letters, digits or . _ : - /; got ${describe(name)}`,
      { path: ['name'] },
    );
  }
  if (typeof version !== 'string' || version.length === 0 || version.length > MAX_VERSION_LENGTH) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_VERSION_LENGTH} characters, e.g. '1'; got ${describe(version)}`, {
      path: ['version'],
    });
  }
  if (!isZodSchema(input)) throw new ValidationError('must be a zod schema, e.g. z.object({ … })', { path: ['input'] });
  if (output !== undefined && !isZodSchema(output)) throw new ValidationError('must be a zod schema when given', { path: ['output'] });
  if (signals !== undefined) {
    if (typeof signals !== 'object' || signals === null || Array.isArray(signals)) {
      throw new ValidationError('must be an object of zod schemas by signal name', { path: ['signals'] });
    }
    for (const [signal, schema] of Object.entries(signals)) {
      if (!isZodSchema(schema)) throw new ValidationError('must be a zod schema', { path: ['signals', signal] });
    }
  }
  if (typeof fn !== 'function') {
    throw new ValidationError('workflow() needs the workflow function as its second argument: async (ctx, input) => output', { path: ['fn'] });
  }
  const definition: Workflow<I, O, In> = {
    kind: 'ratchet.workflow',
    name,
    version,
    input,
    ...(output === undefined ? {} : { output }),
    ...(retry === undefined ? {} : { retry: resolveRetryPolicy(retry, undefined, 'retry') }),
    ...(timeout === undefined ? {} : { timeout: positive(parseDuration(timeout, 'timeout'), 'timeout') }),
    ...(signals === undefined ? {} : { signals: Object.freeze({ ...signals }) }),
    fn,
  };
  return Object.freeze(definition);
}

/** True when `x` is a workflow made by `workflow()` (from any copy of this package). */
export function isWorkflow(x: unknown): x is Workflow {
  return (
    typeof x === 'object' &&
    x !== null &&
    (x as { kind?: unknown }).kind === 'ratchet.workflow' &&
    typeof (x as { fn?: unknown }).fn === 'function' &&
    isZodSchema((x as { input?: unknown }).input)
  );
}

/** Parses a run's input with the workflow's schema; a ValidationError's path starts with `input` (e.g. `input.user.id`). */
export function parseWorkflowInput<I, O, In>(wf: WorkflowRef<I, O, In>, input: unknown): I {
  return parseWithSchema(wf.input, input, 'input');
}

/** Parses a run's output with the workflow's `output` schema, if any (path `output…`); without one, returns it unchanged. */
export function parseWorkflowOutput<I, O, In>(wf: Workflow<I, O, In>, output: unknown): O {
  return wf.output === undefined ? (output as O) : parseWithSchema(wf.output, output, 'output');
}

function positive(ms: number, field: string): number {
  if (ms <= 0) throw new ValidationError('must be longer than 0 ms', { path: [field] });
  return ms;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  return value === null ? 'null' : typeof value;
}
