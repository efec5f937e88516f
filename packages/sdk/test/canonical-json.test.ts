import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ValidationError, canonicalJson, hashCanonical, sha256Hex, toJsonValue } from '../src/index.js';

function validationError(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

class Money {
  constructor(readonly cents: number) {}
}

// Values JSON cannot carry, the path each is reported at (relative to the root), and a word of the message.
function badValues(): [string, (bad: unknown) => unknown, string][] {
  return [
    ['as a property', (bad) => ({ a: 1, b: bad }), '.b'],
    ['nested in arrays and objects', (bad) => ({ operations: [{ input: {} }, { input: { at: bad } }] }), '.operations[1].input.at'],
    ['under an odd key', (bad) => ({ 'the key': [bad] }), '["the key"][0]'],
  ];
}

const rejected: [string, () => unknown, RegExp][] = [
  ['undefined', () => undefined, /undefined/],
  ['NaN', () => Number.NaN, /NaN/],
  ['Infinity', () => Number.POSITIVE_INFINITY, /Infinity/],
  ['-Infinity', () => Number.NEGATIVE_INFINITY, /-Infinity/],
  ['a function', () => () => 1, /function/],
  ['a symbol', () => Symbol('s'), /symbol/],
  ['a BigInt', () => 10n, /BigInt/],
  ['a Map', () => new Map([[1, 2]]), /Map/],
  ['a Set', () => new Set([1]), /Set/],
  ['a class instance', () => new Money(5), /Money/],
  ['a Buffer', () => Buffer.from('hi'), /Buffer/],
  ['a boxed string', () => new String('x'), /String/],
  ['an Error', () => new Error('x'), /Error/],
  ['an invalid Date', () => new Date(Number.NaN), /invalid Date/],
  ['an array subclass', () => new (class Tuple extends Array {})(), /Tuple/],
];

describe('canonicalJson', () => {
  it('sorts keys at every level, so key order does not change the text or the hash', () => {
    const a = { b: 1, a: { y: [3, { z: true, c: null }], x: 'é' } };
    const b = { a: { x: 'é', y: [3, { c: null, z: true }] }, b: 1 };
    expect(canonicalJson(a)).toBe('{"a":{"x":"é","y":[3,{"c":null,"z":true}]},"b":1}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(hashCanonical(a).hash).toBe(hashCanonical(b).hash);
    expect(hashCanonical(a).hash).not.toBe(hashCanonical({ ...a, b: 2 }).hash);
  });

  it('sorts by UTF-16 code units, not locale and not integer-key order', () => {
    expect(canonicalJson({ b: 1, a: 2, B: 3, '10': 4, '9': 5, é: 6, z: 7, '😀': 8, '\uffff': 9 })).toBe(
      '{"10":4,"9":5,"B":3,"a":2,"b":1,"z":7,"é":6,"😀":8,"\uffff":9}',
    );
  });

  it('escapes strings as JSON.stringify does and writes numbers as JSON does', () => {
    const s = 'quote " backslash \\ newline \n tab \t nul \u0000 lone \ud800 emoji 😀';
    expect(canonicalJson(s)).toBe(JSON.stringify(s));
    expect(canonicalJson([1, 1.5, 1e21, 1e-7, -3, 0])).toBe('[1,1.5,1e+21,1e-7,-3,0]');
  });

  it('writes -0 as 0, and Dates as their ISO string', () => {
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson({ at: new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)) })).toBe('{"at":"2024-01-02T03:04:05.006Z"}');
  });

  it('accepts null-prototype objects, shared (non-cyclic) references, and empty containers', () => {
    const inner = Object.assign(Object.create(null) as Record<string, unknown>, { k: 1 });
    expect(canonicalJson({ x: inner, y: inner, e: {}, f: [] })).toBe('{"e":{},"f":[],"x":{"k":1},"y":{"k":1}}');
  });

  it('has no whitespace and round-trips through JSON.parse', () => {
    const value = { list: [1, 'two', { three: [null, false] }], n: -12.5 };
    const text = canonicalJson(value);
    expect(text).not.toMatch(/\s/);
    expect(JSON.parse(text)).toEqual(value);
  });

  for (const [label, make, message] of rejected) {
    it(`refuses ${label} at the top and nested, naming the exact path`, () => {
      expect(validationError(() => canonicalJson(make())).message).toMatch(new RegExp(`^value: .*${message.source}`));
      for (const [, wrap, suffix] of badValues()) {
        const error = validationError(() => canonicalJson(wrap(make()), 'contract'));
        expect(error.message).toMatch(message);
        expect(error.message.startsWith(`contract${suffix}: `)).toBe(true);
      }
    });
  }

  it('reports a deep path as an array in the error', () => {
    const error = validationError(() => canonicalJson({ operations: [{ input: {} }, { input: { at: undefined } }] }));
    expect(error.message).toMatch(/^value\.operations\[1\]\.input\.at: /);
    expect(error.path).toEqual(['value', 'operations', 1, 'input', 'at']);
  });

  it('refuses cycles, naming where the cycle closes', () => {
    const a: Record<string, unknown> = { list: [] };
    (a['list'] as unknown[]).push({ back: a });
    expect(validationError(() => canonicalJson(a)).message).toMatch(/^value\.list\[0\]\.back: circular reference/);
  });

  it('refuses enumerable symbol keys and array holes', () => {
    expect(validationError(() => canonicalJson({ a: { [Symbol('s')]: 1 } })).message).toMatch(/^value\.a: .*symbol-keyed/);
    // eslint-disable-next-line no-sparse-arrays
    expect(validationError(() => canonicalJson([1, , 3])).message).toMatch(/^value\[1\]: undefined/);
  });

  it('refuses absurd nesting without overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 5000; i++) deep = [deep];
    expect(validationError(() => canonicalJson(deep)).message).toMatch(/nested more than 1000 levels/);
  });
});

describe('sha256Hex / hashCanonical', () => {
  it('hashes the UTF-8 text', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('é')).toBe(createHash('sha256').update(Buffer.from('é', 'utf8')).digest('hex'));
    const { json, hash } = hashCanonical({ b: [1], a: 'x' });
    expect(json).toBe('{"a":"x","b":[1]}');
    expect(hash).toBe(sha256Hex(json));
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('toJsonValue', () => {
  it('returns what JSON.parse(JSON.stringify(value)) returns, as a copy', () => {
    const value = { b: 1, a: [true, null, 'x', { n: -2.5 }], nested: { empty: {}, list: [] } };
    const copy = toJsonValue(value);
    expect(copy).toEqual(JSON.parse(JSON.stringify(value)));
    expect(Object.keys(copy)).toEqual(['b', 'a', 'nested']); // order kept, as JSON keeps it
    expect(copy).not.toBe(value);
    expect(copy.a).not.toBe(value.a);
  });

  it('maps top-level undefined to undefined (a step that returns nothing)', () => {
    expect(toJsonValue(undefined)).toBeUndefined();
  });

  it('turns Dates into ISO strings and -0 into 0, as replay will see them', () => {
    const at = new Date(Date.UTC(2024, 5, 1));
    const copy = toJsonValue({ at, zero: -0 }) as unknown as { at: unknown; zero: number };
    expect(copy.at).toBe('2024-06-01T00:00:00.000Z');
    expect(copy).toEqual(JSON.parse(JSON.stringify({ at, zero: -0 })));
    expect(Object.is(copy.zero, 0)).toBe(true);
    expect(toJsonValue(at)).toBe('2024-06-01T00:00:00.000Z');
  });

  it('keeps a "__proto__" key as data, as JSON.parse does', () => {
    const value = JSON.parse('{"__proto__":{"polluted":true},"ok":1}') as Record<string, unknown>;
    const copy = toJsonValue(value);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'ok']);
    expect(JSON.stringify(copy)).toBe(JSON.stringify(value));
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('round-trips primitives', () => {
    for (const v of ['', 'text', 0, 42, -1.5, true, false, null]) expect(toJsonValue(v)).toBe(v);
  });

  for (const [label, make, message] of rejected.filter(([label]) => label !== 'undefined')) {
    it(`refuses ${label}, naming the path`, () => {
      expect(validationError(() => toJsonValue(make())).message).toMatch(new RegExp(`^result: .*${message.source}`));
      for (const [, wrap, suffix] of badValues()) {
        const error = validationError(() => toJsonValue(wrap(make()), 'steps.charge'));
        expect(error.message).toMatch(message);
        expect(error.message.startsWith(`steps.charge${suffix}: `)).toBe(true);
      }
    });
  }

  it('refuses undefined inside objects and arrays, and array holes', () => {
    expect(validationError(() => toJsonValue({ a: { b: undefined } })).message).toMatch(/^result\.a\.b: undefined/);
    expect(validationError(() => toJsonValue([1, undefined])).message).toMatch(/^result\[1\]: undefined/);
    expect(validationError(() => toJsonValue(new Array(3))).message).toMatch(/^result\[0\]: an array hole/);
  });

  it('refuses cycles', () => {
    const a: Record<string, unknown> = {};
    a['self'] = a;
    expect(validationError(() => toJsonValue(a)).path).toEqual(['result', 'self']);
  });
});
