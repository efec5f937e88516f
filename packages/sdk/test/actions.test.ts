import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ValidationError, defineAction, defineCheck, isAction, isCheck, type Action, type ActionTx } from '../src/index.js';

function validationError(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

// A fake transaction: enough to call run/check, which is all these tests need.
const tx = { query: async (text: string, values?: unknown[]) => ({ rows: [{ text, values }], rowCount: 1 }), emit: async () => {} } as unknown as ActionTx;

describe('defineAction', () => {
  const insert = defineAction({
    name: 'tickets.insert',
    input: z.object({ summary: z.string() }),
    run: async (t, { summary }) => (await t.query('INSERT INTO tickets (summary) VALUES ($1) RETURNING id', [summary])).rowCount,
  });

  it('returns a frozen, recognisable action that runs', async () => {
    expect(insert.kind).toBe('ratchet.action');
    expect(insert.name).toBe('tickets.insert');
    expect(Object.isFrozen(insert)).toBe(true);
    expect(isAction(insert)).toBe(true);
    expect(isCheck(insert)).toBe(false);
    expect(await insert.run(tx, { summary: 's' })).toBe(1);
    expectTypeOf(insert.run).parameter(1).toEqualTypeOf<{ summary: string }>();
    const registry: Action[] = [insert]; // what createEngine({ actions }) takes
    expect(registry).toHaveLength(1);
  });

  it.each(['Tickets.insert', '1st', '', 'has space', '_x', 'a/b'])('refuses the name %j', (name) => {
    const error = validationError(() => defineAction({ name, input: z.unknown(), run: async () => null }));
    expect(error.path).toEqual(['name']);
    expect(error.message).toMatch(/^name: /);
  });

  it('accepts names with dots, dashes, underscores and capitals after the first letter', () => {
    for (const name of ['a', 'users.touch', 'billing.chargeCard', 'x_y-z.v2']) {
      expect(defineAction({ name, input: z.unknown(), run: async () => null }).name).toBe(name);
    }
  });

  it('requires a zod input and a run function', () => {
    expect(validationError(() => defineAction({ name: 'a', input: {} as never, run: async () => null })).path).toEqual(['input']);
    expect(validationError(() => defineAction({ name: 'a', input: z.unknown(), run: 'no' as never })).path).toEqual(['run']);
  });
});

describe('defineCheck', () => {
  it('returns a frozen, recognisable check that runs', async () => {
    const quota = defineCheck({ name: 'quota.available', input: z.object({ userId: z.number() }), check: async (t, { userId }) => (await t.query('SELECT $1', [userId])).rowCount === 1 });
    expect(quota.kind).toBe('ratchet.check');
    expect(Object.isFrozen(quota)).toBe(true);
    expect(isCheck(quota)).toBe(true);
    expect(isAction(quota)).toBe(false);
    expect(await quota.check(tx, { userId: 1 })).toBe(true);
  });

  it('validates like defineAction', () => {
    expect(validationError(() => defineCheck({ name: 'Bad', input: z.unknown(), check: async () => true })).path).toEqual(['name']);
    expect(validationError(() => defineCheck({ name: 'ok', input: z.unknown(), check: undefined as never })).path).toEqual(['check']);
  });
});
