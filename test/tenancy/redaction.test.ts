/** Redaction: secrets never reach events or stored errors; the engine's hook runs after the defaults. */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NonRetryableError, workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { isSecretName, redactText, redactValue } from '../../packages/engine/src/redact.js';

const KEY = 'sk-live-4f9a8b7c6d5e4f3a2b1c';
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl';

let db: TestDatabase;
let engine: Engine;

const leaky = workflow(
  { name: 'leaky', version: '1', input: z.object({ apiKey: z.string(), email: z.string() }) },
  async (ctx, { apiKey, email }) => {
    await ctx.step('call', () => {
      throw new NonRetryableError(`provider refused ${apiKey} for ${email}; sent Authorization: Bearer ${JWT} and password=hunter2`);
    });
    return 'unreachable';
  },
);

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, {
    workflows: [leaky],
    // Runs after the defaults: an application rule of its own (emails).
    redact: (value) => JSON.parse(JSON.stringify(value).replace(/[\w.+-]+@[\w-]+\.[\w.]+/g, '[email]')),
  });
});

describe('redaction', () => {
  it('a secret placed in an input never appears in events or stored errors', async () => {
    const result = await engine.run(leaky, { apiKey: KEY, email: 'ada@example.com' });
    expect(result.state).toBe('failed');
    const stored = await db.pool.query(
      `SELECT (SELECT string_agg(coalesce(payload::text, ''), ' ') FROM ratchet.events WHERE task_id = $1) AS events,
              (SELECT error::text FROM ratchet.tasks WHERE id = $1) AS task_error,
              (SELECT string_agg(coalesce(error::text, ''), ' ') FROM ratchet.operations WHERE task_id = $1) AS op_errors`,
      [result.runId],
    );
    const { events, task_error, op_errors } = stored.rows[0];
    for (const text of [events, task_error, op_errors]) {
      expect(text).not.toContain(KEY);
      expect(text).not.toContain(JWT);
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('ada@example.com');
    }
    expect(op_errors).toContain('Authorization: [redacted]');
    expect(op_errors).toContain('password=[redacted]');
    expect(op_errors).toContain('[email]');
    // The input itself is the run's data (tenant-scoped, not an event): stored as given.
    expect((await db.pool.query(`SELECT input->>'apiKey' AS k FROM ratchet.tasks WHERE id = $1`, [result.runId])).rows[0].k).toBe(KEY);
  });

  it('names that hold secrets, and text that carries them', () => {
    for (const name of ['password', 'apiKey', 'api_key', 'X-Api-Key', 'accessToken', 'DB_PASSWORD', 'clientSecret', 'authorization', 'Cookie', 'privateKey']) {
      expect(isSecretName(name), name).toBe(true);
    }
    for (const name of ['outputTokens', 'inputTokens', 'tokenCount', 'author', 'name', 'hash', 'keyCount']) expect(isSecretName(name), name).toBe(false);
    expect(redactText(`token: "abc123" and ghp_${'a'.repeat(30)} and AKIAABCDEFGHIJKLMNOP`)).toBe('token: [redacted] and [redacted] and [redacted]');
    expect(redactValue({ user: 'ada', auth: { password: 'x', tokens: 3 }, list: [{ apiKey: 'k' }] })).toEqual({
      user: 'ada',
      auth: '[redacted]',
      list: [{ apiKey: '[redacted]' }],
    });
    expect(redactValue({ big: 'x'.repeat(5_000) })).toEqual({ big: expect.stringMatching(/^x{2000}…\[3000 more characters\]$/) });
    expect(redactValue({ many: Array.from({ length: 20 }, () => 'y'.repeat(1_999)) })).toEqual({ truncated: true, bytes: expect.any(Number) });
  });
});
