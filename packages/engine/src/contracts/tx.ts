/**
 * The transaction actions and checks receive: raw parameterized `query`, a drizzle database on
 * the same connection (`db`), and `emit` for outbox messages that commit with the contract.
 */
import type pg from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { ValidationError, type ActionTx } from '@ratchet/sdk';
import { uuidv7 } from '../ids.js';
import { recordedValue } from '../runtime/json.js';

export interface OutboxMessage {
  id: string;
  topic: string;
  key: string | null;
  payload: unknown;
}

export function commitTx(client: pg.PoolClient, outbox: OutboxMessage[]): ActionTx {
  let db: NodePgDatabase | undefined;
  return {
    query: (text, values) => client.query(text, values as unknown[]),
    emit: async (topic, payload, options) => {
      if (typeof topic !== 'string' || topic.length === 0 || topic.length > 200) {
        throw new ValidationError('must be a non-empty string of at most 200 characters', { path: ['topic'] });
      }
      const key = options?.key;
      if (key !== undefined && (typeof key !== 'string' || key.length === 0 || key.length > 512 || key.includes('\u0000') || !key.isWellFormed())) {
        throw new ValidationError('must be a non-empty string of at most 512 characters without NUL', { path: ['key'] });
      }
      // No key: the commit gives the message `<contractId>:<n>` (runtime/commit.ts).
      outbox.push({ id: uuidv7(), topic, key: key ?? null, payload: recordedValue(payload, 'payload') ?? null });
    },
    get db() {
      return (db ??= drizzle({ client }));
    },
  };
}
