import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ContractConflictError,
  ContractRejectedError,
  ContractTamperedError,
  IdempotencyConflictError,
  LeaseLostError,
  NonDeterminismError,
  NonRetryableError,
  NotFoundError,
  RATCHET_ERROR_CODES,
  NotifyPayloadTooLargeError,
  RatchetError,
  RunExpiredError,
  KeyExpiredError,
  SchemaMismatchError,
  StepFailedError,
  Suspension,
  TenantMismatchError,
  TimeoutError,
  ValidationError,
  WorkflowNotRegisteredError,
  deserializeError,
  formatPath,
  isRatchetError,
  isSuspension,
  serializeError,
} from '../src/index.js';

const base = { runId: 'run-1', step: 'charge#2', attempt: 3 };

// One instance of every class, with every typed field set, and the fields to compare.
const cases: { error: RatchetError; cls: new (...args: never[]) => RatchetError; name: string; code: string; fields: Record<string, unknown> }[] = [
  {
    error: new ValidationError('must be a number', { ...base, path: ['input', 'user', 0, 'id'], issues: [{ path: ['input', 'user', 0, 'id'], message: 'Expected number', code: 'invalid_type' }] }),
    cls: ValidationError,
    name: 'ValidationError',
    code: 'VALIDATION',
    fields: { path: ['input', 'user', 0, 'id'], issues: [{ path: ['input', 'user', 0, 'id'], message: 'Expected number', code: 'invalid_type' }] },
  },
  { error: new IdempotencyConflictError('key reused', { ...base, key: 'k-1' }), cls: IdempotencyConflictError, name: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT', fields: { key: 'k-1' } },
  {
    error: new NonDeterminismError('replay diverged', { ...base, expected: 'effect charge#1', actual: 'step charge#1' }),
    cls: NonDeterminismError,
    name: 'NonDeterminismError',
    code: 'NON_DETERMINISM',
    fields: { expected: 'effect charge#1', actual: 'step charge#1' },
  },
  { error: new LeaseLostError('lease lost', base), cls: LeaseLostError, name: 'LeaseLostError', code: 'LEASE_LOST', fields: {} },
  { error: new TimeoutError('too slow', { ...base, timeoutMs: 5000 }), cls: TimeoutError, name: 'TimeoutError', code: 'TIMEOUT', fields: { timeoutMs: 5000 } },
  { error: new CancelledError('cancelled', base), cls: CancelledError, name: 'CancelledError', code: 'CANCELLED', fields: {} },
  {
    error: new StepFailedError('gave up', { ...base, attempts: 3, cause: new TypeError('socket hang up') }),
    cls: StepFailedError,
    name: 'StepFailedError',
    code: 'STEP_FAILED',
    fields: { attempts: 3 },
  },
  { error: new NonRetryableError('card declined', base), cls: NonRetryableError, name: 'NonRetryableError', code: 'NON_RETRYABLE', fields: {} },
  {
    error: new ContractConflictError('other body', { ...base, idempotencyKey: 'c-1', existingHash: 'aa', hash: 'bb' }),
    cls: ContractConflictError,
    name: 'ContractConflictError',
    code: 'CONTRACT_CONFLICT',
    fields: { idempotencyKey: 'c-1', existingHash: 'aa', hash: 'bb' },
  },
  {
    error: new ContractTamperedError('hash mismatch', { ...base, contractId: 'c-1', expectedHash: 'aa', actualHash: 'bb' }),
    cls: ContractTamperedError,
    name: 'ContractTamperedError',
    code: 'CONTRACT_TAMPERED',
    fields: { contractId: 'c-1', expectedHash: 'aa', actualHash: 'bb' },
  },
  {
    error: new ContractRejectedError('user 7 does not exist', {
      ...base,
      reason: 'exists failed',
      dependency: { kind: 'exists', table: 'users', where: { id: 7 } },
      contractId: 'c-1',
    }),
    cls: ContractRejectedError,
    name: 'ContractRejectedError',
    code: 'CONTRACT_REJECTED',
    fields: { reason: 'exists failed', dependency: { kind: 'exists', table: 'users', where: { id: 7 } }, contractId: 'c-1' },
  },
  {
    error: new WorkflowNotRegisteredError('no worker serves it', { ...base, workflowName: 'triage', workflowVersion: '2' }),
    cls: WorkflowNotRegisteredError,
    name: 'WorkflowNotRegisteredError',
    code: 'WORKFLOW_NOT_REGISTERED',
    fields: { workflowName: 'triage', workflowVersion: '2' },
  },
  { error: new TenantMismatchError('wrong tenant', { ...base, tenantId: 't-1' }), cls: TenantMismatchError, name: 'TenantMismatchError', code: 'TENANT_MISMATCH', fields: { tenantId: 't-1' } },
  { error: new NotFoundError('no such run', { ...base, resource: 'run', id: 'r-9' }), cls: NotFoundError, name: 'NotFoundError', code: 'NOT_FOUND', fields: { resource: 'run', id: 'r-9' } },
  {
    error: new NotifyPayloadTooLargeError('too big', { ...base, messageId: 'm-1', bytes: 9000, limit: 8000 }),
    cls: NotifyPayloadTooLargeError,
    name: 'NotifyPayloadTooLargeError',
    code: 'NOTIFY_PAYLOAD_TOO_LARGE',
    fields: { messageId: 'm-1', bytes: 9000, limit: 8000 },
  },
  {
    error: new RunExpiredError('run expired', { ...base, key: 'order-7', outcome: 'completed', finishedAt: '2026-01-01T00:00:00.000Z', expiresAt: '2026-04-01T00:00:00.000Z' }),
    cls: RunExpiredError,
    name: 'RunExpiredError',
    code: 'RUN_EXPIRED',
    fields: { key: 'order-7', outcome: 'completed', finishedAt: '2026-01-01T00:00:00.000Z', expiresAt: '2026-04-01T00:00:00.000Z' },
  },
  {
    error: new KeyExpiredError('key expired', { ...base, key: 'charge-7', scope: 'effect', outcome: 'succeeded', heldByRunId: 'run-0', expiresAt: '2026-04-01T00:00:00.000Z' }),
    cls: KeyExpiredError,
    name: 'KeyExpiredError',
    code: 'KEY_EXPIRED',
    fields: { key: 'charge-7', scope: 'effect', outcome: 'succeeded', heldByRunId: 'run-0', expiresAt: '2026-04-01T00:00:00.000Z' },
  },
  {
    error: new SchemaMismatchError('database is newer', { ...base, databaseVersion: '7', codeVersion: '5' }),
    cls: SchemaMismatchError,
    name: 'SchemaMismatchError',
    code: 'SCHEMA_MISMATCH',
    fields: { databaseVersion: '7', codeVersion: '5' },
  },
];

describe('error classes', () => {
  it('covers every stable code once', () => {
    expect(cases.map((c) => c.code).sort()).toEqual(RATCHET_ERROR_CODES.filter((c) => c !== 'RATCHET').sort());
  });

  for (const { error, cls, name, code, fields } of cases) {
    it(`${name} has its code, name, fields and brand`, () => {
      expect(error).toBeInstanceOf(cls);
      expect(error).toBeInstanceOf(RatchetError);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(name);
      expect(error.code).toBe(code);
      expect(error.runId).toBe('run-1');
      expect(error.step).toBe('charge#2');
      expect(error.attempt).toBe(3);
      for (const [key, value] of Object.entries(fields)) expect((error as unknown as Record<string, unknown>)[key]).toEqual(value);
      expect(isRatchetError(error)).toBe(true);
      expect(isRatchetError(error, code)).toBe(true);
      expect(isRatchetError(error, 'SOMETHING_ELSE')).toBe(false);
    });

    it(`${name} round-trips through serializeError / deserializeError`, () => {
      const stored = JSON.parse(JSON.stringify(serializeError(error))) as ReturnType<typeof serializeError>;
      expect(stored.name).toBe(name);
      expect(stored.code).toBe(code);
      expect(stored).not.toHaveProperty('stack');
      const rebuilt = deserializeError(stored);
      expect(rebuilt).toBeInstanceOf(cls);
      expect(rebuilt.name).toBe(name);
      expect(rebuilt.message).toBe(error.message);
      expect((rebuilt as RatchetError).code).toBe(code);
      expect((rebuilt as RatchetError).runId).toBe('run-1');
      expect((rebuilt as RatchetError).step).toBe('charge#2');
      expect((rebuilt as RatchetError).attempt).toBe(3);
      for (const [key, value] of Object.entries(fields)) expect((rebuilt as unknown as Record<string, unknown>)[key]).toEqual(value);
      // Serializing the rebuilt error gives the same record: nothing is lost or added.
      expect(serializeError(rebuilt)).toEqual(stored);
    });
  }

  it('ValidationError names its path in the message', () => {
    expect(new ValidationError('expected a number', { path: ['input', 'user', 'id'] }).message).toBe('input.user.id: expected a number');
    // A message that already names the path is kept as is.
    expect(new ValidationError('input.user.id must be a number', { path: ['input', 'user', 'id'] }).message).toBe('input.user.id must be a number');
    expect(formatPath(['value', 'operations', 1, 'input', 'at'])).toBe('value.operations[1].input.at');
    expect(formatPath(['value', 'a b', 'ok'])).toBe('value["a b"].ok');
  });

  it('keeps no stack, and keeps the cause chain', () => {
    const error = new StepFailedError('gave up after 3 attempts', { attempts: 3, cause: new TypeError('socket hang up') });
    const stored = serializeError(error);
    expect(JSON.stringify(stored)).not.toMatch(/at .*\.ts/);
    expect(stored.cause).toEqual({ name: 'TypeError', message: 'socket hang up' });
    const rebuilt = deserializeError(stored) as StepFailedError;
    expect(rebuilt.cause).toBeInstanceOf(Error);
    expect((rebuilt.cause as Error).name).toBe('TypeError');
    expect((rebuilt.cause as Error).message).toBe('socket hang up');
  });

  it('rebuilds plain errors with their name (and code) but not as Ratchet errors', () => {
    const err = Object.assign(new RangeError('out of range'), { code: 'ERR_OUT_OF_RANGE', secret: 'hunter2' });
    const stored = serializeError(err);
    expect(stored).toEqual({ name: 'RangeError', message: 'out of range', data: { code: 'ERR_OUT_OF_RANGE' } });
    const rebuilt = deserializeError(stored);
    expect(rebuilt.name).toBe('RangeError');
    expect(rebuilt.message).toBe('out of range');
    expect((rebuilt as Error & { code?: string }).code).toBe('ERR_OUT_OF_RANGE');
    expect(isRatchetError(rebuilt)).toBe(false);

    class PaymentError extends Error {
      override name = 'PaymentError';
    }
    const custom = deserializeError(serializeError(new PaymentError('declined')));
    expect(custom.name).toBe('PaymentError');
    expect(custom.message).toBe('declined');
  });

  it('serializes thrown non-errors', () => {
    expect(serializeError('boom')).toEqual({ name: 'Error', message: 'boom' });
    expect(serializeError({ reason: 'x' })).toEqual({ name: 'Error', message: '{"reason":"x"}' });
    expect(serializeError(undefined)).toEqual({ name: 'Error', message: 'undefined' });
  });

  it('rebuilds an unknown code as a RatchetError carrying that code and its fields', () => {
    const rebuilt = deserializeError({ name: 'QuotaError', code: 'QUOTA', message: 'over quota', data: { runId: 'r', limit: 5 } });
    expect(rebuilt).toBeInstanceOf(RatchetError);
    expect(isRatchetError(rebuilt, 'QUOTA')).toBe(true);
    expect(rebuilt.name).toBe('QuotaError');
    expect((rebuilt as RatchetError).runId).toBe('r');
    expect((rebuilt as unknown as { limit: number }).limit).toBe(5);
    expect(serializeError(rebuilt)).toEqual({ name: 'QuotaError', code: 'QUOTA', message: 'over quota', data: { runId: 'r', limit: 5 } });
  });

  it('keeps the name of a user subclass, and survives hostile codes', () => {
    class QuotaValidationError extends ValidationError {}
    Object.defineProperty(QuotaValidationError.prototype, 'name', { value: 'QuotaValidationError' });
    const rebuilt = deserializeError(serializeError(new QuotaValidationError('too many', { path: ['input', 'n'] })));
    expect(rebuilt).toBeInstanceOf(ValidationError);
    expect(rebuilt.name).toBe('QuotaValidationError');
    expect((rebuilt as ValidationError).path).toEqual(['input', 'n']);
    for (const code of ['toString', 'constructor', '__proto__']) {
      const odd = deserializeError({ name: 'X', code, message: 'm' });
      expect(isRatchetError(odd, code)).toBe(true);
    }
  });

  it('does not loop on a cyclic cause chain', () => {
    const a = new RatchetError('a');
    const b = new RatchetError('b', { cause: a });
    Object.defineProperty(a, 'cause', { value: b });
    const stored = serializeError(b);
    expect(stored.cause?.message).toBe('a');
    expect(stored.cause?.cause).toBeUndefined();
  });
});

describe('isRatchetError', () => {
  it('recognises an error from a duplicate package copy by its brand, not instanceof', () => {
    // What another copy of @ratchet/sdk produces: same global-registry symbol, different class.
    class OtherCopyError extends Error {
      readonly code = 'LEASE_LOST';
    }
    Object.defineProperty(OtherCopyError.prototype, Symbol.for('ratchet.error'), { value: true });
    const foreign = new OtherCopyError('lease lost elsewhere');
    expect(foreign).not.toBeInstanceOf(RatchetError);
    expect(isRatchetError(foreign)).toBe(true);
    expect(isRatchetError(foreign, 'LEASE_LOST')).toBe(true);
    expect(isRatchetError(foreign, 'TIMEOUT')).toBe(false);
    // And it serializes with its code, so it rebuilds as this copy's class.
    expect(deserializeError(serializeError(foreign))).toBeInstanceOf(LeaseLostError);

    const plainObject = { [Symbol.for('ratchet.error')]: true, code: 'TIMEOUT', message: 'x' };
    expect(isRatchetError(plainObject, 'TIMEOUT')).toBe(true);
  });

  it('rejects look-alikes without the brand', () => {
    expect(isRatchetError(Object.assign(new Error('x'), { code: 'TIMEOUT' }))).toBe(false);
    expect(isRatchetError({ code: 'TIMEOUT' })).toBe(false);
    expect(isRatchetError(null)).toBe(false);
    expect(isRatchetError('TIMEOUT')).toBe(false);
  });

  it('narrows to the class of the code', () => {
    const e: unknown = new ContractRejectedError('no', { reason: 'user missing' });
    if (isRatchetError(e, 'CONTRACT_REJECTED')) expect(e.reason).toBe('user missing');
    else expect.unreachable();
  });
});

describe('Suspension (internal)', () => {
  it('is recognised by brand and is not a Ratchet error', () => {
    const s = new Suspension('sleep');
    expect(isSuspension(s)).toBe(true);
    expect(isRatchetError(s)).toBe(false);
    expect(s.message).toMatch(/Rethrow/);
    expect(isSuspension({ [Symbol.for('ratchet.suspend')]: true })).toBe(true);
    expect(isSuspension(new Error('x'))).toBe(false);
    expect(isSuspension(new CancelledError('x'))).toBe(false);
  });
});
