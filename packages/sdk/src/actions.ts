// Actions and checks: the whitelist a contract commit may use (DESIGN §4). An action applies one
// contract operation inside the commit transaction; a check is a custom dependency evaluated in
// it. Both get the transaction as `tx` and must have no effect outside the database, because a
// serialization failure retries the whole commit and runs them again.

import type { z } from 'zod';
import { ValidationError } from './errors.js';
import { isZodSchema } from './schema.js';

/**
 * What an engine adds to `ActionTx` (declaration merging): @ratchet/engine adds `db`, a drizzle
 * database bound to the commit transaction. Empty here, so the SDK stays free of drizzle.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ActionTxExtensions {}

/**
 * The commit transaction as actions and checks see it. Bind every value through `values`
 * (`$1`, `$2`…) or drizzle's query builder; agent output is data, never spliced into SQL.
 */
export interface ActionTx extends ActionTxExtensions {
  // `any` rows: the caller knows its columns; a row type per query belongs in the action.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
  /** Writes an outbox message in the commit transaction: published only if the contract commits. */
  emit(topic: string, payload: unknown, options?: { key?: string }): Promise<void>;
}

/** What `defineAction()` takes. */
export interface ActionDefinition<I, R, In = I> {
  /** The name operations refer to, e.g. `tickets.insert`. */
  name: string;
  /** Validates each operation's input before `run`. */
  input: z.ZodType<I, In>;
  /** Applies the operation inside the commit transaction; its result is returned by `ctx.commit`. */
  run: (tx: ActionTx, input: I) => Promise<R>;
}

/**
 * A registered contract action. `run` and `check` below are methods on purpose: that makes
 * `Action<X>` assignable to `Action` (= `Action<unknown>`), so a registry can hold any action.
 */
export interface Action<I = unknown, R = unknown, In = I> {
  readonly kind: 'ratchet.action';
  readonly name: string;
  readonly input: z.ZodType<I, In>;
  run(tx: ActionTx, input: I): Promise<R>;
}

/** What `defineCheck()` takes. */
export interface CheckDefinition<I, In = I> {
  /** The name `{ kind: 'check', check: name }` dependencies refer to. */
  name: string;
  /** Validates the dependency's input before `check`. */
  input: z.ZodType<I, In>;
  /** True when the dependency holds; false rejects the contract (`ContractRejectedError`). */
  check: (tx: ActionTx, input: I) => Promise<boolean>;
}

/** A registered custom dependency. */
export interface Check<I = unknown, In = I> {
  readonly kind: 'ratchet.check';
  readonly name: string;
  readonly input: z.ZodType<I, In>;
  check(tx: ActionTx, input: I): Promise<boolean>;
}

// Lower-case first so action names never collide with SQL keywords in logs; dots for namespaces.
const NAME = /^[a-z][a-zA-Z0-9_.-]*$/;

/** Defines a commit action (name, zod input, run); a ValidationError names the bad field. */
export function defineAction<I, R, In = I>(definition: ActionDefinition<I, R, In>): Action<I, R, In> {
  validate(definition, 'run', 'defineAction');
  const { name, input, run } = definition;
  return Object.freeze({ kind: 'ratchet.action', name, input, run });
}

/** Defines a custom dependency check (name, zod input, check); a ValidationError names the bad field. */
export function defineCheck<I, In = I>(definition: CheckDefinition<I, In>): Check<I, In> {
  validate(definition, 'check', 'defineCheck');
  const { name, input, check } = definition;
  return Object.freeze({ kind: 'ratchet.check', name, input, check });
}

/** True when `x` was made by `defineAction()`. */
export function isAction(x: unknown): x is Action {
  return typeof x === 'object' && x !== null && (x as { kind?: unknown }).kind === 'ratchet.action';
}

/** True when `x` was made by `defineCheck()`. */
export function isCheck(x: unknown): x is Check {
  return typeof x === 'object' && x !== null && (x as { kind?: unknown }).kind === 'ratchet.check';
}

function validate(definition: unknown, fnKey: 'run' | 'check', caller: string): void {
  if (typeof definition !== 'object' || definition === null) {
    throw new ValidationError(`${caller}() takes { name, input, ${fnKey} }`, { path: ['definition'] });
  }
  const { name, input } = definition as { name?: unknown; input?: unknown };
  const fn = (definition as Record<string, unknown>)[fnKey];
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new ValidationError(
      `must start with a lower-case letter, then letters, digits, _ . or -, e.g. 'tickets.insert'; got ${typeof name === 'string' ? JSON.stringify(name) : typeof name}`,
      { path: ['name'] },
    );
  }
  if (!isZodSchema(input)) throw new ValidationError('must be a zod schema, e.g. z.object({ … })', { path: ['input'] });
  if (typeof fn !== 'function') throw new ValidationError(`must be an async function (tx, input) => …`, { path: [fnKey] });
}
