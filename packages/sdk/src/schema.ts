// Zod schemas at Ratchet's boundaries: recognising one, and parsing a value with it into a
// ValidationError whose path names the field (`input.user.id`), never a raw ZodError.

import { z } from 'zod';
import { ValidationError, fieldPath, formatPath, type PathSegment, type ValidationIssue } from './errors.js';

// A message lists this many issues at most; all of them stay in `issues`.
const MAX_LISTED_ISSUES = 5;

/**
 * True when `x` is a zod 4 schema (classic or mini). Checked structurally, so a schema made by
 * another copy of zod is accepted too.
 */
export function isZodSchema(x: unknown): x is z.ZodType {
  if (typeof x !== 'object' || x === null) return false;
  const internals: unknown = (x as { _zod?: unknown })._zod;
  return typeof internals === 'object' && internals !== null && typeof (internals as { run?: unknown }).run === 'function';
}

/**
 * Parses `value` with `schema` (synchronously); on failure throws a ValidationError whose path is
 * `field` plus the first issue's path and whose message lists the issues. Default field: `'value'`.
 */
export function parseWithSchema<T>(schema: z.ZodType<T>, value: unknown, field = 'value'): T {
  const result = z.safeParse(schema, value);
  if (result.success) return result.data;
  const root = fieldPath(field);
  const issues: ValidationIssue[] = result.error.issues.map((issue) => ({
    path: [...root, ...issue.path.map(toSegment)],
    message: issue.message,
    code: issue.code,
  }));
  const listed = issues.slice(0, MAX_LISTED_ISSUES).map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
  if (issues.length > MAX_LISTED_ISSUES) listed.push(`and ${issues.length - MAX_LISTED_ISSUES} more`);
  return fail(listed.join('; '), issues[0]?.path ?? root, issues);
}

function fail(message: string, path: readonly PathSegment[], issues: ValidationIssue[]): never {
  throw new ValidationError(message, { path, issues });
}

function toSegment(key: PropertyKey): PathSegment {
  return typeof key === 'symbol' ? String(key) : key;
}
