import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS, ValidationError, parseDuration, type Duration } from '../src/index.js';

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('parseDuration', () => {
  it.each<[Duration, number]>([
    [0, 0],
    [1500, 1500],
    [2.4, 2],
    ['0ms', 0],
    ['250ms', 250],
    ['5s', 5000],
    ['0.3s', 300],
    ['5m', 300_000],
    ['1.5h', 5_400_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['3650d', 3650 * 86_400_000],
  ])('%j is %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  it('accepts exactly 10 years and refuses more', () => {
    expect(parseDuration(MAX_DURATION_MS)).toBe(MAX_DURATION_MS);
    expect(errorOf(() => parseDuration(MAX_DURATION_MS + 1, 'timeout')).message).toMatch(/^timeout: must be at most 10 years/);
    expect(errorOf(() => parseDuration('3653d', 'timeout')).path).toEqual(['timeout']);
  });

  const bad: [string, unknown][] = [
    ['negative number', -1],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['negative string', '-5s'],
    ['empty string', ''],
    ['no unit', '5'],
    ['unknown unit', '5w'],
    ['upper-case unit', '5S'],
    ['leading space', ' 5s'],
    ['trailing space', '5s '],
    ['inner space', '5 s'],
    ['exponent', '1e3ms'],
    ['two units', '1h30m'],
    ['bare dot', '.5s'],
    ['junk', 'soon'],
    ['null', null],
    ['object', { ms: 5 }],
  ];
  it.each(bad)('refuses %s, naming the field', (_label, input) => {
    const error = errorOf(() => parseDuration(input as Duration, 'retry.initial'));
    expect(error.code).toBe('VALIDATION');
    expect(error.path).toEqual(['retry', 'initial']);
    expect(error.message).toMatch(/^retry\.initial: /);
  });

  it('names "duration" when no field is given', () => {
    expect(errorOf(() => parseDuration('5 minutes' as Duration)).message).toMatch(/^duration: .*"5 minutes"/);
  });
});
