// Canonical JSON, SHA-256 hashing, and the JSON view of step results.
//
// `canonicalJson` gives one text per value (sorted keys, no whitespace), so a sealed contract
// hashes the same whatever order its keys were written in and whichever process seals it.
// `toJsonValue` is a value "as replay will see it": replay decodes stored JSON, so the first
// execution must see the same decoded value, and anything JSON would silently change (undefined
// dropped, NaN turned into null, a Map into {}) is refused with the path of the offending value.
//
// Both accept only JSON data: null, booleans, finite numbers, strings, plain objects (prototype
// Object.prototype or null), plain arrays, and Dates (written as their ISO string, as
// JSON.stringify does).

import { createHash } from 'node:crypto';
import { ValidationError, fieldPath, type PathSegment } from './errors.js';

// Deeper nesting than this is refused rather than risking a stack overflow mid-walk.
const MAX_DEPTH = 1000;

/**
 * Serializes JSON data canonically: object keys sorted by UTF-16 code units, no whitespace,
 * strings escaped as JSON.stringify does, Dates as ISO strings, -0 as 0. Anything else
 * (undefined, NaN, ±Infinity, functions, symbols, BigInt, Maps, Sets, class instances, cycles)
 * is a ValidationError naming its path from `path`. Default path: `'value'`.
 */
export function canonicalJson(value: unknown, path = 'value'): string {
  return writeCanonical(value, fieldPath(path), new Set());
}

function writeCanonical(value: unknown, path: PathSegment[], ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw reject(path, value);
      return value === 0 ? '0' : JSON.stringify(value); // -0 === 0, and writes as 0
    case 'object': {
      if (value === null) return 'null';
      if (value instanceof Date) return JSON.stringify(isoString(value, path));
      enter(value, path, ancestors);
      let text: string;
      if (Array.isArray(value)) {
        const parts: string[] = [];
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          parts.push(writeCanonical(value[i], path, ancestors));
          path.pop();
        }
        text = `[${parts.join(',')}]`;
      } else {
        const record = value as Record<string, unknown>;
        const parts: string[] = [];
        for (const key of Object.keys(record).sort()) {
          path.push(key);
          parts.push(`${JSON.stringify(key)}:${writeCanonical(record[key], path, ancestors)}`);
          path.pop();
        }
        text = `{${parts.join(',')}}`;
      }
      ancestors.delete(value);
      return text;
    }
    default:
      throw reject(path, value);
  }
}

/** SHA-256 of the UTF-8 bytes of `text`, as 64 lowercase hex digits. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Canonical JSON of `value` and its SHA-256 (see `canonicalJson`). Default path: `'value'`. */
export function hashCanonical(value: unknown, path = 'value'): { json: string; hash: string } {
  const json = canonicalJson(value, path);
  return { json, hash: sha256Hex(json) };
}

/**
 * The value as replay will see it: a copy equal to `JSON.parse(JSON.stringify(value))`, after
 * checking that JSON carries it faithfully. Top-level `undefined` is allowed and stays
 * `undefined` (a step that returns nothing). Dates become their ISO string, exactly as
 * JSON.stringify writes them, so the first execution and every replay see the same string; -0
 * becomes 0. Anything JSON would drop or alter (undefined inside objects or arrays, array holes,
 * NaN, ±Infinity, BigInt, functions, symbols, Maps, Sets, class instances, cycles) is a
 * ValidationError naming its path from `path`. Default path: `'result'`.
 */
export function toJsonValue<T>(value: T, path = 'result'): T {
  if (value === undefined) return value;
  return copyJson(value, fieldPath(path), new Set()) as T;
}

function copyJson(value: unknown, path: PathSegment[], ancestors: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw reject(path, value);
      return value === 0 ? 0 : value;
    case 'object': {
      if (value === null) return null;
      if (value instanceof Date) return isoString(value, path);
      enter(value, path, ancestors);
      let copy: unknown;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          if (!(i in value)) throw new ValidationError('an array hole is not JSON (JSON would turn it into null); fill it with null', { path: [...path] });
          out[i] = copyJson(value[i], path, ancestors);
          path.pop();
        }
        copy = out;
      } else {
        const record = value as Record<string, unknown>;
        const out: Record<string, unknown> = {};
        for (const key of Object.keys(record)) {
          path.push(key);
          const item = copyJson(record[key], path, ancestors);
          // `out[key] = …` would set the prototype for '__proto__'; JSON.parse makes it an own key.
          if (key === '__proto__') Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
          else out[key] = item;
          path.pop();
        }
        copy = out;
      }
      ancestors.delete(value);
      return copy;
    }
    default:
      throw reject(path, value);
  }
}

// Checks that an object is a plain object or array, not on the current path (a cycle), and not
// too deep; then marks it as an ancestor of what is walked next.
function enter(value: object, path: PathSegment[], ancestors: Set<object>): void {
  if (ancestors.has(value)) {
    throw new ValidationError('circular reference: this value contains itself; JSON cannot carry a cycle', { path: [...path] });
  }
  const proto: unknown = Object.getPrototypeOf(value);
  const plain = Array.isArray(value) ? proto === Array.prototype : proto === Object.prototype || proto === null;
  if (!plain) throw reject(path, value);
  if (ancestors.size >= MAX_DEPTH) {
    throw new ValidationError(`nested more than ${MAX_DEPTH} levels deep`, { path: [...path] });
  }
  for (const symbol of Object.getOwnPropertySymbols(value)) {
    if (Object.prototype.propertyIsEnumerable.call(value, symbol)) {
      throw new ValidationError(`has a symbol-keyed property (${String(symbol)}), which JSON drops; use a string key`, { path: [...path] });
    }
  }
  ancestors.add(value);
}

function isoString(date: Date, path: PathSegment[]): string {
  if (Number.isNaN(date.getTime())) throw new ValidationError('is an invalid Date', { path: [...path] });
  return date.toISOString();
}

function reject(path: PathSegment[], value: unknown): ValidationError {
  return new ValidationError(describe(value), { path: [...path] });
}

function describe(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined is not JSON; omit the property or use null';
    case 'number':
      return `${String(value)} is not JSON; use a finite number or null`;
    case 'bigint':
      return 'a BigInt is not JSON; convert it to a string (or a number if it is small enough)';
    case 'function':
      return 'a function is not JSON';
    case 'symbol':
      return 'a symbol is not JSON; use a string';
    case 'object': {
      const name = constructorName(value);
      return `${name === undefined ? 'an object with a custom prototype' : `a ${name}`} is not a plain object or array; convert it to plain data first (e.g. Object.fromEntries(map), [...set], buffer.toString('base64'))`;
    }
    default:
      return `a ${typeof value} is not JSON`;
  }
}

function constructorName(value: unknown): string | undefined {
  try {
    const ctor: unknown = (value as { constructor?: unknown }).constructor;
    return typeof ctor === 'function' && ctor.name !== '' ? ctor.name : undefined;
  } catch {
    return undefined;
  }
}
