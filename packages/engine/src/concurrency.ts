/**
 * Per-key concurrency limits: how many runs of a concurrency key may run at once, configured by
 * key pattern (`createEngine({ concurrencyLimits: { 'tenant:*': 5, 'export': 1 } })`). A run's
 * limit is resolved when it starts and stored on its row, so the claim statement enforces it
 * without knowing the configuration (store/leases.ts), and every process agrees on a run's limit.
 *
 * Matching: an exact key first, then the most specific pattern — the longest, `*` matching any
 * run of characters — then the default of 1.
 */
import { ValidationError } from '@ratchet/sdk';

export const DEFAULT_CONCURRENCY_LIMIT = 1;
const MAX_LIMIT = 10_000;

export class ConcurrencyLimits {
  readonly #exact = new Map<string, number>();
  readonly #patterns: { pattern: string; regex: RegExp; limit: number }[] = [];

  constructor(limits: Readonly<Record<string, number>> = {}) {
    if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) {
      throw new ValidationError('must be an object of limits by key pattern, e.g. { "tenant:*": 5 }', { path: ['concurrencyLimits'] });
    }
    for (const [pattern, limit] of Object.entries(limits)) {
      if (pattern.length === 0 || pattern.length > 512) {
        throw new ValidationError('a key pattern is 1 to 512 characters', { path: ['concurrencyLimits', pattern] });
      }
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
        throw new ValidationError(`must be an integer from 1 to ${MAX_LIMIT}`, { path: ['concurrencyLimits', pattern] });
      }
      if (!pattern.includes('*')) {
        this.#exact.set(pattern, limit);
        continue;
      }
      const source = pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*');
      this.#patterns.push({ pattern, regex: new RegExp(`^${source}$`, 's'), limit });
    }
    this.#patterns.sort((a, b) => b.pattern.length - a.pattern.length);
  }

  /** The limit of `key`: its exact entry, else the longest matching pattern, else 1. */
  limitFor(key: string): number {
    const exact = this.#exact.get(key);
    if (exact !== undefined) return exact;
    return this.#patterns.find((p) => p.regex.test(key))?.limit ?? DEFAULT_CONCURRENCY_LIMIT;
  }
}
