// Retry policies: how many times a failing step, effect or commit is attempted, and how long to
// wait between attempts (exponential backoff, capped, with jitter).

import { parseDuration, type Duration } from './duration.js';
import { ValidationError, fieldPath } from './errors.js';

/** How a failing step is retried. */
export interface RetryPolicy {
  /** Total attempts, the first included (1 = no retry). */
  maxAttempts: number;
  /** Delay after the first failed attempt. */
  initial: Duration;
  /** Each further delay is the previous one times `factor` (≥ 1). */
  factor: number;
  /** Upper bound of any delay, jitter included. */
  max: Duration;
  /** Random spread of each delay, as a fraction in [0, 1]: 0.2 means ±20 %. */
  jitter: number;
}

/** A validated policy with its durations in milliseconds. */
export interface ResolvedRetryPolicy extends RetryPolicy {
  readonly maxAttempts: number;
  readonly initial: number;
  readonly factor: number;
  readonly max: number;
  readonly jitter: number;
}

/**
 * The policy used when neither the step nor its workflow sets one. Three attempts ride out a
 * transient blip (a dropped connection, a 503) without hammering a dependency that is really
 * down; 1 s doubling to at most 1 min keeps a retried run's total added delay small; ±20 % jitter
 * spreads out workers that all failed at the same moment (a shared outage) so they do not retry
 * in lockstep.
 */
export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({ maxAttempts: 3, initial: '1s', factor: 2, max: '1m', jitter: 0.2 });

const DEFAULT_RESOLVED: ResolvedRetryPolicy = Object.freeze({ maxAttempts: 3, initial: 1000, factor: 2, max: 60_000, jitter: 0.2 });

const KEYS = ['maxAttempts', 'initial', 'factor', 'max', 'jitter'] as const;

// A bound on attempts keeps a misconfigured policy from retrying (and storing attempts) forever.
const MAX_ATTEMPTS = 1000;

/**
 * Validates a (partial) retry policy and fills the missing fields from `fallback`; `field` names
 * the option in errors. Defaults: fallback `DEFAULT_RETRY`, field `'retry'`.
 */
export function resolveRetryPolicy(
  partial: Partial<RetryPolicy> | undefined,
  fallback: Partial<RetryPolicy> = DEFAULT_RETRY,
  field = 'retry',
): ResolvedRetryPolicy {
  const base = fallback === DEFAULT_RETRY || fallback === DEFAULT_RESOLVED ? DEFAULT_RESOLVED : resolveRetryPolicy(fallback, DEFAULT_RESOLVED, field);
  if (partial === undefined) return base;
  if (typeof partial !== 'object' || partial === null || Array.isArray(partial)) {
    throw new ValidationError(`must be an object like { maxAttempts: 5 }, got ${partial === null ? 'null' : typeof partial}`, { path: fieldPath(field) });
  }
  for (const key of Object.keys(partial)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new ValidationError(`unknown retry option; expected one of ${KEYS.join(', ')}`, { path: [...fieldPath(field), key] });
    }
  }
  const pick = <K extends (typeof KEYS)[number]>(key: K): RetryPolicy[K] => partial[key] ?? base[key];
  const path = (key: string): string => (field === '' ? key : `${field}.${key}`);

  const maxAttempts = pick('maxAttempts');
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_ATTEMPTS) {
    throw new ValidationError(`must be an integer from 1 to ${MAX_ATTEMPTS} (1 = no retry), got ${String(maxAttempts)}`, { path: fieldPath(path('maxAttempts')) });
  }
  const initial = parseDuration(pick('initial'), path('initial'));
  const max = parseDuration(pick('max'), path('max'));
  if (max < initial) {
    throw new ValidationError(`must be at least initial (${initial} ms), got ${max} ms`, { path: fieldPath(path('max')) });
  }
  const factor = pick('factor');
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1) {
    throw new ValidationError(`must be a finite number ≥ 1, got ${String(factor)}`, { path: fieldPath(path('factor')) });
  }
  const jitter = pick('jitter');
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
    throw new ValidationError(`must be a fraction from 0 to 1 (0.2 = ±20 %), got ${String(jitter)}`, { path: fieldPath(path('jitter')) });
  }
  return Object.freeze({ maxAttempts, initial, factor, max, jitter });
}

/**
 * Milliseconds to wait after `attempt` (1-based, the attempt that just failed) before the next:
 * `initial × factor^(attempt−1)`, capped at `max`, spread by ±`jitter` with `random()` ∈ [0, 1),
 * and never above `max`. Deterministic for a given `random`.
 */
export function retryDelay(policy: RetryPolicy, attempt: number, random: () => number): number {
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new ValidationError(`must be a positive integer, got ${String(attempt)}`, { path: ['attempt'] });
  }
  const initial = typeof policy.initial === 'number' ? policy.initial : parseDuration(policy.initial, 'retry.initial');
  const max = typeof policy.max === 'number' ? policy.max : parseDuration(policy.max, 'retry.max');
  if (initial === 0) return 0; // (0 × Infinity would be NaN for huge attempts)
  const base = Math.min(max, initial * policy.factor ** (attempt - 1));
  const r = Math.min(Math.max(random(), 0), 1);
  const spread = base * policy.jitter * (2 * r - 1);
  return Math.round(Math.min(max, Math.max(0, base + spread)));
}
