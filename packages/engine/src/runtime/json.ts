/**
 * The JSON boundary every recorded value crosses. Postgres `jsonb` reorders object keys (shorter
 * keys first, then by bytes) and refuses the NUL character; a value handed back to the workflow
 * on its first execution must be exactly what replay will read from the database, so values are
 * normalized here the same way before the first execution sees them.
 */
import { ValidationError, toJsonValue, formatPath, type PathSegment } from '@ratchet/sdk';

/** `value` as replay will see it: JSON round trip (see `toJsonValue`), jsonb key order, no NUL. */
export function recordedValue<T>(value: T, path: string): T {
  return jsonbOrdered(toJsonValue(value, path), [path]) as T;
}

function jsonbOrdered(value: unknown, path: PathSegment[]): unknown {
  if (typeof value === 'string') {
    if (!value.isWellFormed()) {
      throw new ValidationError(`${formatPath(path)}: contains a lone UTF-16 surrogate, which is not valid Unicode and cannot be stored; fix the string (String.prototype.toWellFormed)`, { path });
    }
    if (value.includes('\u0000')) {
      throw new ValidationError(`${formatPath(path)}: contains the NUL character (\\u0000), which PostgreSQL cannot store in JSON; remove or encode it`, { path });
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((v, i) => jsonbOrdered(v, [...path, i]));
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    for (const key of keys) {
      if (key.includes('\u0000') || !key.isWellFormed()) {
        throw new ValidationError(`${formatPath(path)}: a key contains the NUL character or a lone surrogate, which PostgreSQL cannot store in JSON`, { path });
      }
    }
    keys.sort(compareJsonbKeys);
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      // defineProperty, not assignment: a "__proto__" key is data here, as in JSON.parse.
      Object.defineProperty(out, key, {
        value: jsonbOrdered((value as Record<string, unknown>)[key], [...path, key]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/** jsonb's key order: by length in bytes, then bytewise. */
function compareJsonbKeys(a: string, b: string): number {
  const la = Buffer.byteLength(a);
  const lb = Buffer.byteLength(b);
  if (la !== lb) return la - lb;
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
