// Every public Ratchet error and their stable codes. How a failure is stored and rebuilt is in
// serialized-error.ts.
//
// A failure is stored as plain JSON (`SerializedError`: name, code, message, typed fields, cause)
// and rebuilt into the same class on replay, so `catch (e) { if (e instanceof ContractRejectedError) }`
// behaves identically on the first execution and on every replay. Stacks are never stored: they
// cost space, differ between executions and can carry paths or values that should stay local.
//
// Instances carry a `Symbol.for('ratchet.error')` brand, so `isRatchetError` recognises errors
// created by another copy of this package (two versions in one node_modules), where `instanceof`
// would fail.
//
// The engine's internal control-flow throwable is not an error and lives in `suspension.ts`.

import type { Dependency } from './contract.js';

/** The brand every `RatchetError` carries; shared across package copies via the global symbol registry. */
export const RATCHET_ERROR: unique symbol = Symbol.for('ratchet.error');

/** One segment of a value path: an object key or an array index. */
export type PathSegment = string | number;

/** One problem found while validating a value, as stored in `ValidationError.issues`. */
export interface ValidationIssue {
  readonly path: readonly PathSegment[];
  readonly message: string;
  readonly code?: string;
}

/** Options every Ratchet error accepts; subclasses add their own typed fields. */
export interface RatchetErrorOptions {
  code?: string;
  runId?: string;
  step?: string;
  attempt?: number;
  cause?: unknown;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
/** Characters of one path segment a message shows. */
const MAX_SEGMENT = 64;

/**
 * Formats a path as a reader would write it in code: `['input', 'user', 0, 'id']` →
 * `input.user[0].id`. The first segment is printed as is; odd keys are quoted (`a["b c"]`); a key
 * longer than 64 characters is cut there.
 */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  path.forEach((raw, i) => {
    // A key is caller data: a huge one is shortened here, so a message never echoes it whole.
    const segment = typeof raw === 'string' && raw.length > MAX_SEGMENT ? `${raw.slice(0, MAX_SEGMENT)}… (${raw.length} characters)` : raw;
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (i === 0) out += segment;
    else if (IDENTIFIER.test(segment)) out += `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  });
  return out;
}

/** Turns a dotted field name (`'retry.initial'`) into a path (`['retry', 'initial']`). */
export function fieldPath(field: string): PathSegment[] {
  return field === '' ? [] : field.split('.');
}

/** Base of every public Ratchet error: a stable string `code` plus the run, step and attempt it concerns. */
export class RatchetError extends Error {
  declare readonly [RATCHET_ERROR]: true;
  readonly code: string;
  declare readonly runId?: string;
  declare readonly step?: string;
  declare readonly attempt?: number;

  constructor(message: string, options: RatchetErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code ?? 'RATCHET';
    if (options.runId !== undefined) this.runId = options.runId;
    if (options.step !== undefined) this.step = options.step;
    if (options.attempt !== undefined) this.attempt = options.attempt;
  }
}
nameClass(RatchetError, 'RatchetError');
// The brand lives on the prototype: every subclass instance has it, no instance pays for it, and
// it never shows up in logs or in `serializeError`'s data.
Object.defineProperty(RatchetError.prototype, RATCHET_ERROR, { value: true, enumerable: false });

/** Options of the subclasses: the base options minus `code`, which each subclass fixes. */
export type RatchetErrorBaseOptions = Omit<RatchetErrorOptions, 'code'>;

/** A value (workflow input, a duration, a step result, an option…) is invalid; `path` names the field. */
export class ValidationError extends RatchetError {
  declare readonly code: 'VALIDATION';
  readonly path: PathSegment[];
  declare readonly issues?: ValidationIssue[];

  /** The message is prefixed with the formatted path unless it already names it. */
  constructor(message: string, options: RatchetErrorBaseOptions & { path?: readonly PathSegment[]; issues?: readonly ValidationIssue[] } = {}) {
    const path = Array.isArray(options.path) ? [...options.path] : [];
    const where = formatPath(path);
    super(where !== '' && !message.includes(where) ? `${where}: ${message}` : message, { ...options, code: 'VALIDATION' });
    this.path = path;
    if (options.issues !== undefined) this.issues = options.issues.map((issue) => ({ ...issue, path: [...issue.path] }));
  }
}
nameClass(ValidationError, 'ValidationError');

/** An idempotency key was reused with different input (a run start, an effect, a contract). */
export class IdempotencyConflictError extends RatchetError {
  declare readonly code: 'IDEMPOTENCY_CONFLICT';
  declare readonly key?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { key?: string } = {}) {
    super(message, { ...options, code: 'IDEMPOTENCY_CONFLICT' });
    if (options.key !== undefined) this.key = options.key;
  }
}
nameClass(IdempotencyConflictError, 'IdempotencyConflictError');

/** Replay reached a different call than the one recorded (a bad deploy); the run is parked, not destroyed. */
export class NonDeterminismError extends RatchetError {
  declare readonly code: 'NON_DETERMINISM';
  /** The recorded call, e.g. `effect charge#1`. */
  readonly expected: string;
  /** The call the code reached instead, e.g. `step charge#1` or `(workflow returned)`. */
  readonly actual: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { expected: string; actual: string }) {
    super(message, { ...options, code: 'NON_DETERMINISM' });
    this.expected = options.expected;
    this.actual = options.actual;
  }
}
nameClass(NonDeterminismError, 'NonDeterminismError');

/** This worker no longer owns the run (its lease expired or was taken); it must stop writing. */
export class LeaseLostError extends RatchetError {
  declare readonly code: 'LEASE_LOST';

  constructor(message: string, options: RatchetErrorBaseOptions = {}) {
    super(message, { ...options, code: 'LEASE_LOST' });
  }
}
nameClass(LeaseLostError, 'LeaseLostError');

/** A timeout passed: an effect's, a `waitFor`'s, a run's, or a caller's wait for a result. */
export class TimeoutError extends RatchetError {
  declare readonly code: 'TIMEOUT';
  declare readonly timeoutMs?: number;

  constructor(message: string, options: RatchetErrorBaseOptions & { timeoutMs?: number } = {}) {
    super(message, { ...options, code: 'TIMEOUT' });
    if (options.timeoutMs !== undefined) this.timeoutMs = options.timeoutMs;
  }
}
nameClass(TimeoutError, 'TimeoutError');

/** The run was cancelled. */
export class CancelledError extends RatchetError {
  declare readonly code: 'CANCELLED';

  constructor(message: string, options: RatchetErrorBaseOptions = {}) {
    super(message, { ...options, code: 'CANCELLED' });
  }
}
nameClass(CancelledError, 'CancelledError');

/** A step, effect or commit failed for good after `attempts` attempts; `cause` is the last error. */
export class StepFailedError extends RatchetError {
  declare readonly code: 'STEP_FAILED';
  declare readonly attempts?: number;

  constructor(message: string, options: RatchetErrorBaseOptions & { attempts?: number } = {}) {
    super(message, { ...options, code: 'STEP_FAILED' });
    if (options.attempts !== undefined) this.attempts = options.attempts;
  }
}
nameClass(StepFailedError, 'StepFailedError');

/** Thrown by user code inside a step or effect to stop retrying it: the step fails at once. */
export class NonRetryableError extends RatchetError {
  declare readonly code: 'NON_RETRYABLE';

  constructor(message: string, options: RatchetErrorBaseOptions = {}) {
    super(message, { ...options, code: 'NON_RETRYABLE' });
  }
}
nameClass(NonRetryableError, 'NonRetryableError');

/** A contract was sealed again under the same idempotency key with a different body hash. */
export class ContractConflictError extends RatchetError {
  declare readonly code: 'CONTRACT_CONFLICT';
  declare readonly idempotencyKey?: string;
  /** Hash of the contract already sealed under the key. */
  declare readonly existingHash?: string;
  /** Hash of the body that was refused. */
  declare readonly hash?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { idempotencyKey?: string; existingHash?: string; hash?: string } = {}) {
    super(message, { ...options, code: 'CONTRACT_CONFLICT' });
    if (options.idempotencyKey !== undefined) this.idempotencyKey = options.idempotencyKey;
    if (options.existingHash !== undefined) this.existingHash = options.existingHash;
    if (options.hash !== undefined) this.hash = options.hash;
  }
}
nameClass(ContractConflictError, 'ContractConflictError');

/** A stored contract body no longer matches its hash; the commit is refused. */
export class ContractTamperedError extends RatchetError {
  declare readonly code: 'CONTRACT_TAMPERED';
  declare readonly contractId?: string;
  declare readonly expectedHash?: string;
  declare readonly actualHash?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { contractId?: string; expectedHash?: string; actualHash?: string } = {}) {
    super(message, { ...options, code: 'CONTRACT_TAMPERED' });
    if (options.contractId !== undefined) this.contractId = options.contractId;
    if (options.expectedHash !== undefined) this.expectedHash = options.expectedHash;
    if (options.actualHash !== undefined) this.actualHash = options.actualHash;
  }
}
nameClass(ContractTamperedError, 'ContractTamperedError');

/** A contract dependency did not hold at commit; the contract is `failed` and the workflow may branch on this. */
export class ContractRejectedError extends RatchetError {
  declare readonly code: 'CONTRACT_REJECTED';
  readonly reason: string;
  /** The dependency that failed, as sealed. */
  declare readonly dependency?: Dependency;
  declare readonly contractId?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { reason?: string; dependency?: Dependency; contractId?: string } = {}) {
    super(message, { ...options, code: 'CONTRACT_REJECTED' });
    this.reason = options.reason ?? message;
    if (options.dependency !== undefined) this.dependency = options.dependency;
    if (options.contractId !== undefined) this.contractId = options.contractId;
  }
}
nameClass(ContractRejectedError, 'ContractRejectedError');

/**
 * No workflow of this (name, version) is registered with the engine or worker. The fields are
 * `workflowName`/`workflowVersion`, not `name`/`version`: an error's `name` is its class name.
 */
export class WorkflowNotRegisteredError extends RatchetError {
  declare readonly code: 'WORKFLOW_NOT_REGISTERED';
  readonly workflowName: string;
  readonly workflowVersion: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { workflowName: string; workflowVersion: string }) {
    super(message, { ...options, code: 'WORKFLOW_NOT_REGISTERED' });
    this.workflowName = options.workflowName;
    this.workflowVersion = options.workflowVersion;
  }
}
nameClass(WorkflowNotRegisteredError, 'WorkflowNotRegisteredError');

/** A row, run or signal was addressed under a tenant that does not own it. */
export class TenantMismatchError extends RatchetError {
  declare readonly code: 'TENANT_MISMATCH';
  declare readonly tenantId?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { tenantId?: string } = {}) {
    super(message, { ...options, code: 'TENANT_MISMATCH' });
    if (options.tenantId !== undefined) this.tenantId = options.tenantId;
  }
}
nameClass(TenantMismatchError, 'TenantMismatchError');

/** A run, step, contract or signal does not exist (for this tenant). */
export class NotFoundError extends RatchetError {
  declare readonly code: 'NOT_FOUND';
  /** What was looked for, e.g. `run` or `operation`. */
  declare readonly resource?: string;
  declare readonly id?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { resource?: string; id?: string } = {}) {
    super(message, { ...options, code: 'NOT_FOUND' });
    if (options.resource !== undefined) this.resource = options.resource;
    if (options.id !== undefined) this.id = options.id;
  }
}
nameClass(NotFoundError, 'NotFoundError');

/** The database schema is older or newer than this code understands (migrate, or deploy newer code). */
export class SchemaMismatchError extends RatchetError {
  declare readonly code: 'SCHEMA_MISMATCH';
  /** The schema version the database has. */
  declare readonly databaseVersion?: string;
  /** The schema version this code expects. */
  declare readonly codeVersion?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { databaseVersion?: string; codeVersion?: string } = {}) {
    super(message, { ...options, code: 'SCHEMA_MISMATCH' });
    if (options.databaseVersion !== undefined) this.databaseVersion = options.databaseVersion;
    if (options.codeVersion !== undefined) this.codeVersion = options.codeVersion;
  }
}
nameClass(SchemaMismatchError, 'SchemaMismatchError');

/** A message's NOTIFY payload is too large for Postgres (8000 bytes): publish it another way, or send a reference. */
export class NotifyPayloadTooLargeError extends RatchetError {
  declare readonly code: 'NOTIFY_PAYLOAD_TOO_LARGE';
  declare readonly messageId?: string;
  declare readonly bytes?: number;
  declare readonly limit?: number;

  constructor(message: string, options: RatchetErrorBaseOptions & { messageId?: string; bytes?: number; limit?: number } = {}) {
    super(message, { ...options, code: 'NOTIFY_PAYLOAD_TOO_LARGE' });
    if (options.messageId !== undefined) this.messageId = options.messageId;
    if (options.bytes !== undefined) this.bytes = options.bytes;
    if (options.limit !== undefined) this.limit = options.limit;
  }
}
nameClass(NotifyPayloadTooLargeError, 'NotifyPayloadTooLargeError');

/**
 * A run's idempotency key was found only as a tombstone: retention removed the run (its output
 * with it), but the key is still remembered (docs/retention.md). `outcome` is how the run ended.
 */
export class RunExpiredError extends RatchetError {
  declare readonly code: 'RUN_EXPIRED';
  /** The run's idempotency key. */
  declare readonly key?: string;
  /** How the run ended: `completed`, `failed` or `cancelled`. */
  declare readonly outcome?: string;
  /** When the run finished (ISO 8601). */
  declare readonly finishedAt?: string;
  /** When the key will be forgotten (ISO 8601): after it, the key starts a new run. */
  declare readonly expiresAt?: string;

  constructor(message: string, options: RatchetErrorBaseOptions & { key?: string; outcome?: string; finishedAt?: string; expiresAt?: string } = {}) {
    super(message, { ...options, code: 'RUN_EXPIRED' });
    if (options.key !== undefined) this.key = options.key;
    if (options.outcome !== undefined) this.outcome = options.outcome;
    if (options.finishedAt !== undefined) this.finishedAt = options.finishedAt;
    if (options.expiresAt !== undefined) this.expiresAt = options.expiresAt;
  }
}
nameClass(RunExpiredError, 'RunExpiredError');

/**
 * An explicit effect or contract key was found only as a tombstone: the effect ran (or the
 * contract was applied) in a run retention removed, so it is not executed again. `outcome` is
 * how it ended (`succeeded`, `failed`, `unknown`, `committed`, …), `heldByRunId` the run that held it.
 */
export class KeyExpiredError extends RatchetError {
  declare readonly code: 'KEY_EXPIRED';
  declare readonly key?: string;
  /** `effect` or `contract`. */
  declare readonly scope?: string;
  declare readonly outcome?: string;
  /** The removed run that used the key. */
  declare readonly heldByRunId?: string;
  /** When the key will be forgotten (ISO 8601). */
  declare readonly expiresAt?: string;

  constructor(
    message: string,
    options: RatchetErrorBaseOptions & { key?: string; scope?: string; outcome?: string; heldByRunId?: string; expiresAt?: string } = {},
  ) {
    super(message, { ...options, code: 'KEY_EXPIRED' });
    if (options.key !== undefined) this.key = options.key;
    if (options.scope !== undefined) this.scope = options.scope;
    if (options.outcome !== undefined) this.outcome = options.outcome;
    if (options.heldByRunId !== undefined) this.heldByRunId = options.heldByRunId;
    if (options.expiresAt !== undefined) this.expiresAt = options.expiresAt;
  }
}
nameClass(KeyExpiredError, 'KeyExpiredError');

function nameClass(cls: { prototype: Error }, name: string): void {
  // On the prototype (like built-in errors), so it is not an own enumerable field of instances.
  Object.defineProperty(cls.prototype, 'name', { value: name, enumerable: false, writable: true, configurable: true });
}

/** Every error class by its code; used to rebuild stored failures (serialized-error.ts). */
export const ERROR_CLASSES = {
  RATCHET: RatchetError,
  VALIDATION: ValidationError,
  IDEMPOTENCY_CONFLICT: IdempotencyConflictError,
  NON_DETERMINISM: NonDeterminismError,
  LEASE_LOST: LeaseLostError,
  TIMEOUT: TimeoutError,
  CANCELLED: CancelledError,
  STEP_FAILED: StepFailedError,
  NON_RETRYABLE: NonRetryableError,
  CONTRACT_CONFLICT: ContractConflictError,
  CONTRACT_TAMPERED: ContractTamperedError,
  CONTRACT_REJECTED: ContractRejectedError,
  WORKFLOW_NOT_REGISTERED: WorkflowNotRegisteredError,
  TENANT_MISMATCH: TenantMismatchError,
  NOT_FOUND: NotFoundError,
  SCHEMA_MISMATCH: SchemaMismatchError,
  NOTIFY_PAYLOAD_TOO_LARGE: NotifyPayloadTooLargeError,
  RUN_EXPIRED: RunExpiredError,
  KEY_EXPIRED: KeyExpiredError,
} as const;

/** The error class for each stable code. */
export type RatchetErrorByCode = { [C in keyof typeof ERROR_CLASSES]: InstanceType<(typeof ERROR_CLASSES)[C]> };

/** Every stable code a Ratchet error class fixes. */
export type RatchetErrorCode = keyof RatchetErrorByCode;

/** Every stable error code, for exhaustive handling and tests. */
export const RATCHET_ERROR_CODES: readonly RatchetErrorCode[] = Object.freeze(Object.keys(ERROR_CLASSES) as RatchetErrorCode[]);

/**
 * True when `e` is a Ratchet error (of `code`, if given) — also one made by another copy of this
 * package, since it checks the brand and not `instanceof`.
 */
export function isRatchetError<C extends RatchetErrorCode>(e: unknown, code: C): e is RatchetErrorByCode[C];
export function isRatchetError(e: unknown, code?: string): e is RatchetError;
export function isRatchetError(e: unknown, code?: string): e is RatchetError {
  if (typeof e !== 'object' || e === null) return false;
  const branded = (e as { [RATCHET_ERROR]?: unknown })[RATCHET_ERROR] === true;
  const errorCode = (e as { code?: unknown }).code;
  if (!branded || typeof errorCode !== 'string') return false;
  return code === undefined || errorCode === code;
}
