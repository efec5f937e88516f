// Durations: a number of milliseconds or a short string ('250ms', '5s', '1.5h', '1d'), parsed
// strictly so a typo in a timeout or a sleep is a ValidationError at definition time, not a run
// that sleeps for the wrong length.

import { ValidationError, fieldPath } from './errors.js';

/** A number of milliseconds, or a decimal number with a unit: `ms`, `s`, `m`, `h` or `d`. */
export type Duration = number | `${number}ms` | `${number}s` | `${number}m` | `${number}h` | `${number}d`;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY };

/**
 * The longest duration accepted: 10 years. Anything longer is almost certainly a unit mistake
 * (seconds passed as ms, or a timestamp passed as a duration).
 */
export const MAX_DURATION_MS = 10 * 365.25 * DAY;

// Digits with an optional fraction, then a unit. No sign, exponent or whitespace.
const DURATION_TEXT = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/**
 * Parses a duration to whole milliseconds (rounded to the nearest ms); `field` names the option
 * in the error. Default field: `'duration'`.
 */
export function parseDuration(d: Duration, field = 'duration'): number {
  let ms: number;
  if (typeof d === 'number') {
    if (!Number.isFinite(d) || d < 0) {
      throw invalid(field, `must be a non-negative, finite number of milliseconds or a string like '5s', got ${String(d)}`);
    }
    ms = d;
  } else if (typeof d === 'string') {
    const match = DURATION_TEXT.exec(d);
    if (match === null) {
      throw invalid(field, `must be a number of milliseconds or a string like '250ms', '5s', '5m', '2h' or '1d', got ${JSON.stringify(d)}`);
    }
    ms = Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN);
  } else {
    throw invalid(field, `must be a number of milliseconds or a string like '5s', got ${d === null ? 'null' : typeof d}`);
  }
  if (!(ms <= MAX_DURATION_MS)) {
    throw invalid(field, `must be at most 10 years, got ${JSON.stringify(d)}`);
  }
  return Math.round(ms);
}

function invalid(field: string, message: string): ValidationError {
  return new ValidationError(message, { path: fieldPath(field) });
}
