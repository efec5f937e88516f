import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  ValidationError,
  isWorkflow,
  parseWithSchema,
  parseWorkflowInput,
  parseWorkflowOutput,
  workflow,
  type Workflow,
  type WorkflowContext,
  type WorkflowInput,
  type WorkflowOptions,
  type WorkflowOutput,
  type WorkflowRawInput,
} from '../src/index.js';

function validationError(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const input = z.object({ ticket: z.string(), user: z.object({ id: z.number() }), priority: z.enum(['high', 'low']).default('low') });

const triage = workflow({ name: 'triage-ticket', version: '2', input, retry: { maxAttempts: 5 }, timeout: '1h' }, async (ctx, { ticket, user, priority }) => {
  const summary = await ctx.step('summarise', () => ticket.slice(0, 10));
  return { summary, userId: user.id, priority };
});

describe('workflow()', () => {
  it('returns a frozen definition with resolved retry and timeout', () => {
    expect(triage.kind).toBe('ratchet.workflow');
    expect(triage.name).toBe('triage-ticket');
    expect(triage.version).toBe('2');
    expect(triage.input).toBe(input);
    expect(triage.retry).toEqual({ maxAttempts: 5, initial: 1000, factor: 2, max: 60_000, jitter: 0.2 });
    expect(triage.timeout).toBe(3_600_000);
    expect(typeof triage.fn).toBe('function');
    expect(Object.isFrozen(triage)).toBe(true);
    expect(isWorkflow(triage)).toBe(true);
  });

  it('leaves retry, timeout and output out when not given', () => {
    const wf = workflow({ name: 'a', version: '1', input: z.null() }, async () => 1);
    expect('retry' in wf).toBe(false);
    expect('timeout' in wf).toBe(false);
    expect('output' in wf).toBe(false);
  });

  it('infers input and output types', () => {
    expectTypeOf<WorkflowInput<typeof triage>>().toEqualTypeOf<{ ticket: string; user: { id: number }; priority: 'high' | 'low' }>();
    expectTypeOf<WorkflowRawInput<typeof triage>>().toEqualTypeOf<{ ticket: string; user: { id: number }; priority?: 'high' | 'low' | undefined }>();
    expectTypeOf<WorkflowOutput<typeof triage>>().toEqualTypeOf<{ summary: string; userId: number; priority: 'high' | 'low' }>();
    expectTypeOf(triage).toExtend<
      Workflow<
        { ticket: string; user: { id: number }; priority: 'high' | 'low' },
        { summary: string; userId: number; priority: 'high' | 'low' },
        { ticket: string; user: { id: number }; priority?: 'high' | 'low' | undefined }
      >
    >();
  });

  it('fits a registry typed with the defaults (what createEngine({ workflows }) takes)', () => {
    const registry: Workflow[] = [triage, workflow({ name: 'b', version: '1', input: z.number() }, async (_ctx, n) => n + 1)];
    expect(registry.every(isWorkflow)).toBe(true);
  });

  it('accepts every allowed name shape', () => {
    for (const name of ['a', 'A1', '9lives', 'billing/charge-card', 'ns:job.v2_final', 'x'.repeat(200)]) {
      expect(workflow({ name, version: '1', input: z.unknown() }, async () => null).name).toBe(name);
    }
  });

  const ok = { name: 'ok', version: '1', input: z.unknown() };
  const fn = async (): Promise<null> => null;
  it.each<[string, Record<string, unknown>, string]>([
    ['empty name', { ...ok, name: '' }, 'name'],
    ['long name', { ...ok, name: 'x'.repeat(201) }, 'name'],
    ['name with a space', { ...ok, name: 'my workflow' }, 'name'],
    ['name starting with a dash', { ...ok, name: '-x' }, 'name'],
    ['non-string name', { ...ok, name: 7 }, 'name'],
    ['empty version', { ...ok, version: '' }, 'version'],
    ['long version', { ...ok, version: '1'.repeat(101) }, 'version'],
    ['numeric version', { ...ok, version: 2 }, 'version'],
    ['missing input', { name: 'ok', version: '1' }, 'input'],
    ['input that is not zod', { ...ok, input: { parse: () => 1 } }, 'input'],
    ['output that is not zod', { ...ok, output: 'string' }, 'output'],
    ['bad retry', { ...ok, retry: { maxAttempts: 0 } }, 'retry.maxAttempts'],
    ['bad timeout', { ...ok, timeout: '1 hour' }, 'timeout'],
    ['zero timeout', { ...ok, timeout: 0 }, 'timeout'],
    ['unknown option', { ...ok, timout: '1h' }, 'timout'],
  ])('refuses %s, naming %s', (_label, options, field) => {
    const error = validationError(() => workflow(options as unknown as WorkflowOptions<unknown, unknown>, fn));
    expect(error.message.startsWith(`${field}: `)).toBe(true);
    expect(error.path).toEqual(field.split('.'));
  });

  it('refuses a missing function', () => {
    expect(validationError(() => workflow(ok, undefined as never)).path).toEqual(['fn']);
  });
});

describe('isWorkflow', () => {
  it('is false for look-alikes', () => {
    expect(isWorkflow({ kind: 'ratchet.workflow' })).toBe(false);
    expect(isWorkflow(null)).toBe(false);
    expect(isWorkflow({ ...triage, kind: 'other' })).toBe(false);
  });
});

describe('parseWorkflowInput', () => {
  it('returns the parsed input (defaults applied)', () => {
    expect(parseWorkflowInput(triage, { ticket: 't', user: { id: 1 } })).toEqual({ ticket: 't', user: { id: 1 }, priority: 'low' });
  });

  it('names the failing field under input, and lists every issue', () => {
    const error = validationError(() => parseWorkflowInput(triage, { ticket: 5, user: { id: 'seven' } }));
    expect(error.path).toEqual(['input', 'ticket']);
    expect(error.message).toMatch(/input\.ticket: /);
    expect(error.message).toMatch(/input\.user\.id: /);
    expect(error.issues?.map((issue) => issue.path)).toEqual([
      ['input', 'ticket'],
      ['input', 'user', 'id'],
    ]);
    expect(error.issues?.every((issue) => issue.message.length > 0 && issue.code === 'invalid_type')).toBe(true);
  });

  it('names a nested array element', () => {
    const wf = workflow({ name: 'batch', version: '1', input: z.object({ items: z.array(z.object({ qty: z.number().int() })) }) }, async () => 0);
    const error = validationError(() => parseWorkflowInput(wf, { items: [{ qty: 1 }, { qty: 1.5 }] }));
    expect(error.path).toEqual(['input', 'items', 1, 'qty']);
    expect(error.message).toMatch(/^input\.items\[1\]\.qty: /);
  });

  it('names the root when the whole input is wrong', () => {
    expect(validationError(() => parseWorkflowInput(triage, 'nope')).message).toMatch(/^input: /);
  });

  it('caps the listed issues but keeps all of them', () => {
    const wf = workflow({ name: 'many', version: '1', input: z.array(z.string()) }, async () => 0);
    const error = validationError(() => parseWorkflowInput(wf, [1, 2, 3, 4, 5, 6, 7]));
    expect(error.issues).toHaveLength(7);
    expect(error.message).toMatch(/and 2 more$/);
  });
});

describe('parseWorkflowOutput / parseWithSchema', () => {
  it('validates output with the output schema, under "output"', () => {
    const wf = workflow({ name: 'o', version: '1', input: z.unknown(), output: z.object({ n: z.number() }) }, async () => ({ n: 1 }));
    expect(parseWorkflowOutput(wf, { n: 2 })).toEqual({ n: 2 });
    expect(validationError(() => parseWorkflowOutput(wf, { n: 'x' })).message).toMatch(/^output\.n: /);
    expect(parseWorkflowOutput(triage, 'anything')).toBe('anything');
  });

  it('names the field it is given', () => {
    expect(validationError(() => parseWithSchema(z.object({ ok: z.boolean() }), {}, 'signals.approval')).message).toMatch(/^signals\.approval\.ok: /);
  });
});

describe('WorkflowContext typing', () => {
  it('types child runs, effects and infer from their arguments', () => {
    const typed = async (ctx: WorkflowContext): Promise<void> => {
      const out = await ctx.child('sub', triage, { ticket: 't', user: { id: 1 } });
      expectTypeOf(out).toEqualTypeOf<{ summary: string; userId: number; priority: 'high' | 'low' }>();
      // @ts-expect-error the child's input is checked against its schema's input type
      await ctx.child('sub', triage, { ticket: 1 });
      const charged = await ctx.effect('charge', {
        input: { cents: 100 },
        execute: async ({ idempotencyKey, input: { cents }, signal }) => ({ id: `${idempotencyKey}:${cents}`, aborted: signal.aborted }),
      });
      expectTypeOf(charged).toEqualTypeOf<{ id: string; aborted: boolean }>();
      const decision = await ctx.infer('classify', {
        model: 'm',
        schema: z.object({ team: z.string() }),
        call: async () => ({ output: '{"team":"x"}', usage: { inputTokens: 1 } }),
      });
      expectTypeOf(decision).toEqualTypeOf<{ team: string }>();
      const approval = await ctx.waitFor('approval', { schema: z.object({ ok: z.boolean() }), timeout: '1d' });
      expectTypeOf(approval).toEqualTypeOf<{ ok: boolean }>();
    };
    expect(typeof typed).toBe('function');
  });
});
