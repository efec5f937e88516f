/**
 * Redaction of what the engine stores about a run outside its recorded values: every event
 * payload and every stored error (a run's, a step's, a contract's rejection). Defaults always
 * apply; an engine's `redact` hook runs after them and may remove more:
 *
 * - a field whose name says it holds a secret (`password`, `secret`, `token`, `apiKey`,
 *   `authorization`, `cookie`, `credentials`, `privateKey`, … in any case, with `-`/`_` or
 *   camelCase; `outputTokens` is a count, not a token) is replaced by `[redacted]`;
 * - in free text (an error message), `Bearer …`, `key=value` pairs with such names, and strings
 *   shaped like provider keys (`sk-…`, `ghp_…`, `xox…-…`, AWS access key ids) are replaced;
 * - strings are capped at 2,000 characters and a whole payload at 16 KB.
 *
 * Prompts never reach these places (infer records keep their SHA-256 unless `recordPrompts`).
 * Recorded step results and run inputs/outputs are the workflow's data, not redacted: keep
 * secrets out of them (pass references) — or they stay in `operations`/`tasks`, tenant-scoped.
 *
 * A stored error is what replay rethrows, so after a redaction the replayed message is the
 * redacted one.
 */
import type { SerializedError } from '@ratchet/sdk';

export interface RedactContext {
  /** `event`: an event payload; `error`: a stored error. */
  readonly where: 'event' | 'error';
  readonly runId?: string;
}

/** Returns the value to store in place of `value` (which has already had the defaults applied). */
export type Redactor = (value: unknown, context: RedactContext) => unknown;

export const REDACTED = '[redacted]';
const MAX_STRING = 2_000;
const MAX_BYTES = 16_384;
const MAX_DEPTH = 12;

const SECRET_NAMES = [
  'secret', 'password', 'passwd', 'pwd', 'passphrase', 'token', 'authorization', 'auth', 'apikey', 'cookie', 'setcookie',
  'credential', 'credentials', 'privatekey', 'accesskey', 'secretkey', 'sessionid', 'signature',
];

/** True for a field name that holds a secret: `apiKey`, `api_key`, `X-Api-Key`, `accessToken`, `DB_PASSWORD`… */
export function isSecretName(name: string): boolean {
  const n = name.toLowerCase().replace(/[-_\s.]/g, '');
  return SECRET_NAMES.some((s) => n === s || n.endsWith(s));
}

const TEXT_PATTERNS: [RegExp, string][] = [
  [/\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi, `$1 ${REDACTED}`],
  [/\b([A-Za-z0-9_-]*(?:secret|password|passwd|token|api[_-]?key|authorization|credential|private[_-]?key)[A-Za-z0-9_-]*)(["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"']+)/gi, `$1$2${REDACTED}`],
  [/\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}\b/g, REDACTED],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}\b/g, REDACTED],
  [/\bxox[abposr]-[A-Za-z0-9-]{10,}\b/g, REDACTED],
  [/\bAKIA[0-9A-Z]{16}\b/g, REDACTED],
];

/** Free text with its secrets replaced and its length capped. */
export function redactText(text: string): string {
  let out = text;
  for (const [pattern, replacement] of TEXT_PATTERNS) out = out.replace(pattern, replacement);
  return out.length > MAX_STRING ? `${out.slice(0, MAX_STRING)}…[${out.length - MAX_STRING} more characters]` : out;
}

/** The defaults applied to a JSON value: secret-named fields replaced, strings redacted and capped, size capped. */
export function redactValue(value: unknown): unknown {
  const out = walk(value, 0);
  const bytes = Buffer.byteLength(JSON.stringify(out ?? null));
  return bytes > MAX_BYTES ? { truncated: true, bytes } : out;
}

function walk(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return redactText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (Array.isArray(value)) return value.map((v) => walk(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = isSecretName(k) && v !== null && v !== undefined ? REDACTED : walk(v, depth + 1);
  return out;
}

/** Applies the defaults, then the engine's hook. */
export function makeRedaction(hook: Redactor | undefined): { payload(value: Record<string, unknown>, runId?: string): Record<string, unknown>; error(error: SerializedError, runId?: string): SerializedError } {
  const apply = (value: unknown, context: RedactContext) => {
    const redacted = redactValue(value);
    return hook ? hook(redacted, context) : redacted;
  };
  return {
    payload: (value, runId) => apply(value, { where: 'event', ...(runId ? { runId } : {}) }) as Record<string, unknown>,
    error: (error, runId) => {
      const out = apply(error, { where: 'error', ...(runId ? { runId } : {}) }) as SerializedError;
      // Whatever a hook returns, a stored error keeps its shape: replay rebuilds it into its class.
      return typeof out === 'object' && out !== null && typeof out.name === 'string' && typeof out.message === 'string'
        ? out
        : { name: error.name, ...(error.code ? { code: error.code } : {}), message: REDACTED };
    },
  };
}

export type Redaction = ReturnType<typeof makeRedaction>;
