import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, ValidationError, resolveRetryPolicy, retryDelay, type RetryPolicy } from '../src/index.js';

const noJitter: RetryPolicy = { maxAttempts: 10, initial: '1s', factor: 2, max: '10s', jitter: 0 };

function validationError(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('resolveRetryPolicy', () => {
  it('fills defaults and converts durations to ms', () => {
    expect(DEFAULT_RETRY).toEqual({ maxAttempts: 3, initial: '1s', factor: 2, max: '1m', jitter: 0.2 });
    expect(resolveRetryPolicy(undefined)).toEqual({ maxAttempts: 3, initial: 1000, factor: 2, max: 60_000, jitter: 0.2 });
    expect(resolveRetryPolicy({ maxAttempts: 5 })).toEqual({ maxAttempts: 5, initial: 1000, factor: 2, max: 60_000, jitter: 0.2 });
    expect(Object.isFrozen(resolveRetryPolicy({ maxAttempts: 5 }))).toBe(true);
  });

  it('fills from a fallback (the workflow policy) before the defaults', () => {
    const workflowPolicy = resolveRetryPolicy({ maxAttempts: 7, initial: '2s' });
    expect(resolveRetryPolicy({ factor: 3 }, workflowPolicy)).toEqual({ maxAttempts: 7, initial: 2000, factor: 3, max: 60_000, jitter: 0.2 });
    expect(resolveRetryPolicy(undefined, { maxAttempts: 1 })).toEqual({ maxAttempts: 1, initial: 1000, factor: 2, max: 60_000, jitter: 0.2 });
  });

  it.each<[string, Partial<RetryPolicy> | Record<string, unknown>, string]>([
    ['zero attempts', { maxAttempts: 0 }, 'retry.maxAttempts'],
    ['fractional attempts', { maxAttempts: 2.5 }, 'retry.maxAttempts'],
    ['absurd attempts', { maxAttempts: 1e9 }, 'retry.maxAttempts'],
    ['bad initial', { initial: '5 sec' }, 'retry.initial'],
    ['negative max', { max: -1 }, 'retry.max'],
    ['max below initial', { initial: '10s', max: '1s' }, 'retry.max'],
    ['factor below 1', { factor: 0.5 }, 'retry.factor'],
    ['NaN factor', { factor: Number.NaN }, 'retry.factor'],
    ['jitter above 1', { jitter: 1.5 }, 'retry.jitter'],
    ['negative jitter', { jitter: -0.1 }, 'retry.jitter'],
    ['unknown key', { maxAttempt: 3 }, 'retry.maxAttempt'],
  ])('refuses %s, naming %s', (_label, partial, field) => {
    const error = validationError(() => resolveRetryPolicy(partial as Partial<RetryPolicy>));
    expect(error.message.startsWith(`${field}: `)).toBe(true);
    expect(error.path).toEqual(field.split('.'));
  });

  it('uses the field name it is given', () => {
    expect(validationError(() => resolveRetryPolicy({ factor: 0 }, undefined, 'steps.charge.retry')).message).toMatch(/^steps\.charge\.retry\.factor: /);
  });
});

describe('retryDelay', () => {
  const half = (): number => 0.5; // no spread: 2r − 1 = 0

  it('grows exponentially from initial and caps at max', () => {
    expect([1, 2, 3, 4, 5, 6].map((attempt) => retryDelay(noJitter, attempt, half))).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000]);
    expect(retryDelay(noJitter, 5000, half)).toBe(10_000); // factor^4999 overflows to Infinity: still capped
    expect(retryDelay({ ...noJitter, initial: 0 }, 5000, half)).toBe(0);
  });

  it('spreads by at most ±jitter and never exceeds max', () => {
    const policy = resolveRetryPolicy({ initial: '1s', factor: 2, max: '1m', jitter: 0.2 });
    expect(retryDelay(policy, 1, () => 0)).toBe(800);
    expect(retryDelay(policy, 1, () => 0.999999)).toBe(1200);
    expect(retryDelay(policy, 3, () => 0)).toBe(3200);
    for (let attempt = 1; attempt <= 12; attempt++) {
      const base = Math.min(60_000, 1000 * 2 ** (attempt - 1));
      for (const r of [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999]) {
        const delay = retryDelay(policy, attempt, () => r);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * 0.8));
        expect(delay).toBeLessThanOrEqual(Math.min(60_000, Math.ceil(base * 1.2)));
      }
    }
    expect(retryDelay(policy, 12, () => 0.999)).toBe(60_000); // at the cap, jitter only shortens
  });

  it('is deterministic for a given random source', () => {
    const policy = resolveRetryPolicy(undefined);
    const sequence = (): number[] => {
      let x = 0.1;
      const random = (): number => (x = (x * 7.13) % 1);
      return [1, 2, 3].map((attempt) => retryDelay(policy, attempt, random));
    };
    expect(sequence()).toEqual(sequence());
  });

  it('accepts unresolved policies and refuses a bad attempt number', () => {
    expect(retryDelay(DEFAULT_RETRY, 2, half)).toBe(2000);
    expect(validationError(() => retryDelay(DEFAULT_RETRY, 0, half)).path).toEqual(['attempt']);
  });
});
