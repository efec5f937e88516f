/**
 * Failures as the engine stores them: any thrown value to plain JSON (`serializeError`: name,
 * stable code, message, typed fields, a few levels of causes, no stack), and back to an error of
 * the class its code names (`deserializeError`), so a replayed step rethrows what it threw.
 */
import { ERROR_CLASSES, RatchetError, isRatchetError } from './errors.js';

/** A failure as stored: plain JSON, no stack. */
export interface SerializedError {
  /** The class name, e.g. `ValidationError` or `TypeError`. */
  name: string;
  /** Present only for Ratchet errors: the stable code that picks the class when rebuilding. */
  code?: string;
  message: string;
  /** Typed fields (`path`, `runId`, `attempts`…); for other errors, their string `code` if any. */
  data?: Record<string, unknown>;
  /** The error's `cause`, serialized the same way (a few levels deep at most). */
  cause?: SerializedError;
}

// Fields that are carried by name/message/stack/cause/code, never in `data`.
const NOT_DATA = new Set(['name', 'message', 'stack', 'cause', 'code']);
// A cause chain is cut after this many levels: enough to explain, bounded in size.
const MAX_CAUSE_DEPTH = 4;

/** Serializes any thrown value to plain JSON `{ name, code?, message, data?, cause? }`; stacks are omitted. Default depth of causes kept: 4. */
export function serializeError(e: unknown): SerializedError {
  return serializeAt(e, 0, new Set());
}

function serializeAt(e: unknown, depth: number, seen: Set<unknown>): SerializedError {
  if (!(e instanceof Error) && !isRatchetError(e)) {
    return { name: 'Error', message: describeThrown(e) };
  }
  seen.add(e);
  const err = e as Error & { code?: unknown };
  const out: SerializedError = { name: typeof err.name === 'string' ? err.name : 'Error', message: String(err.message) };
  const data: Record<string, unknown> = {};
  if (isRatchetError(e)) {
    out.code = e.code;
    for (const key of Object.keys(e)) {
      if (NOT_DATA.has(key)) continue;
      const value = jsonSafe((e as unknown as Record<string, unknown>)[key]);
      if (value !== undefined) data[key] = value;
    }
  } else if (typeof err.code === 'string' || typeof err.code === 'number') {
    // Node and driver errors (`ECONNRESET`, SQLSTATE `40001`): the code is what retry logic reads.
    data['code'] = err.code;
  }
  if (Object.keys(data).length > 0) out.data = data;
  const cause = err.cause;
  if (cause !== undefined && depth < MAX_CAUSE_DEPTH && !seen.has(cause)) out.cause = serializeAt(cause, depth + 1, seen);
  return out;
}

function describeThrown(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    const text = JSON.stringify(value);
    if (typeof text === 'string') return text.length > 1000 ? `${text.slice(0, 1000)}…` : text;
  } catch {
    // fall through
  }
  return String(value);
}

function jsonSafe(value: unknown): unknown {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return undefined;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}

/**
 * Rebuilds a stored failure: the Ratchet class picked by `code` (an unknown code gives a
 * `RatchetError` carrying that code), or a plain `Error` with the original `name` otherwise.
 */
export function deserializeError(s: SerializedError): Error {
  const cause = s.cause === undefined ? undefined : deserializeError(s.cause);
  const data: Record<string, unknown> = { ...(s.data ?? {}) };
  let error: Error;
  if (typeof s.code === 'string') {
    const cls = Object.prototype.hasOwnProperty.call(ERROR_CLASSES, s.code)
      ? (ERROR_CLASSES as Record<string, new (message: string, options: never) => RatchetError>)[s.code]
      : undefined;
    const options = { ...data, cause, ...(cls === undefined ? { code: s.code } : {}) };
    error = new (cls ?? RatchetError)(s.message, options as never);
    // A subclass this copy does not know (a user's `class QuotaError extends RatchetError`) keeps its name.
    if (s.name !== error.name) nameInstance(error, s.name);
    if (cls === undefined) {
      // Fields of a class this copy does not know: kept as they were.
      for (const [key, value] of Object.entries(data)) {
        if (!NOT_DATA.has(key) && !(key in error)) (error as unknown as Record<string, unknown>)[key] = value;
      }
    }
  } else {
    error = new Error(s.message, cause === undefined ? undefined : { cause });
    if (s.name !== 'Error') nameInstance(error, s.name);
    if (data['code'] !== undefined) (error as Error & { code?: unknown }).code = data['code'];
  }
  return error;
}

function nameInstance(error: Error, name: string): void {
  Object.defineProperty(error, 'name', { value: name, enumerable: false, writable: true, configurable: true });
}
