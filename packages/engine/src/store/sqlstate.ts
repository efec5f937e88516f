/** SQLSTATE codes the engine branches on, by name. */
export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';
export const CHECK_VIOLATION = '23514';
export const NOT_NULL_VIOLATION = '23502';
export const SERIALIZATION_FAILURE = '40001';
export const DEADLOCK_DETECTED = '40P01';
export const DUPLICATE_DATABASE = '42P04';
export const UNDEFINED_TABLE = '42P01';
export const INSUFFICIENT_PRIVILEGE = '42501';
export const QUERY_CANCELED = '57014';
export const ADMIN_SHUTDOWN = '57P01';
export const CANNOT_CONNECT_NOW = '57P03';
/** Raised by the `events` append-only trigger (migration 0001). */
export const EVENTS_APPEND_ONLY = 'RT001';

/**
 * The SQLSTATE of a node-pg error, or undefined. Wrappers are looked through: drizzle reports a
 * failed query as its own error with the driver's error as `cause`.
 */
export function sqlState(error: unknown): string | undefined {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth += 1) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.length === 5) return code;
  }
  return undefined;
}

/** Raised by the contracts guard trigger (migration 0003). */
export const CONTRACT_GUARD = 'RT002';
export const INTEGRITY_CONSTRAINT_CLASS = '23';

/**
 * An error that says nothing about the statement, only about the connection or the server's
 * state: no SQLSTATE (a socket closed), connection exceptions (class 08), the server shutting
 * down or starting (57P01–57P03), insufficient resources (class 53), or a serialization failure
 * or deadlock. Repeating the statement on a new connection is the right answer to all of them.
 */
export function isTransient(error: unknown): boolean {
  const state = sqlState(error);
  if (state === undefined) return true;
  return (
    state.startsWith('08') ||
    state.startsWith('53') ||
    state === ADMIN_SHUTDOWN ||
    state === '57P02' ||
    state === CANNOT_CONNECT_NOW ||
    state === SERIALIZATION_FAILURE ||
    state === DEADLOCK_DETECTED
  );
}
