/**
 * A sealed contract's dependencies, checked inside its commit transaction (runtime/commit.ts,
 * step 4) so that each holds against concurrent writers until COMMIT, whatever their isolation:
 * `exists` locks the rows it finds FOR SHARE; `notExists` serializes on a transaction-scoped
 * advisory lock of its table and key (a unique constraint on those columns makes it hold against
 * every other writer too); `check` runs a predicate registered with the engine. An unknown
 * table, column or check rejects the contract.
 */
import type pg from 'pg';
import { ContractRejectedError, canonicalJson, parseWithSchema, type Dependency } from '@ratchet/sdk';
import type { commitTx } from '../contracts/tx.js';
import type { ContractRegistry } from '../contracts/registry.js';

/** `exists` locks what it finds; `notExists` serializes on an advisory lock of its key; `check` asks the registered predicate. */
export async function dependencyHolds(client: pg.PoolClient, tx: ReturnType<typeof commitTx>, registry: ContractRegistry, dependency: Dependency): Promise<boolean> {
  if (dependency.kind === 'check') {
    const check = registry.check(dependency.check);
    if (!check) throw new ContractRejectedError(`check ${dependency.check} is not registered in this deployment`, { reason: 'unknown_check', dependency });
    return (await check.check(tx, parseWithSchema(check.input, dependency.input, 'dependency.input'))) === true;
  }
  const table = registry.table(dependency.table);
  if (!table) throw new ContractRejectedError(`table ${dependency.table} is not registered in this deployment`, { reason: 'unknown_table', dependency });
  const values: unknown[] = [];
  const conditions = Object.entries(dependency.where).map(([column, value]) => {
    const sqlColumn = table.columns.get(column);
    if (!sqlColumn) throw new ContractRejectedError(`table ${table.name} has no column ${column}`, { reason: 'unknown_column', dependency });
    if (value === null) return `${sqlColumn} IS NULL`;
    values.push(typeof value === 'object' ? JSON.stringify(value) : value);
    return `${sqlColumn} = $${values.length}`;
  });
  if (dependency.kind === 'exists') {
    const { rows } = await client.query(`SELECT 1 FROM ${table.sql} WHERE ${conditions.join(' AND ')} FOR SHARE`, values);
    return rows.length > 0;
  }
  // notExists: commits racing on the same key serialize here; a unique constraint on these
  // columns makes it hold against every other writer too (their insert, or ours, fails).
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`ratchet:notExists:${table.name}:${canonicalJson(dependency.where, 'where')}`]);
  const { rows } = await client.query(`SELECT 1 FROM ${table.sql} WHERE ${conditions.join(' AND ')} LIMIT 1`, values);
  return rows.length === 0;
}

/** A dependency as a rejection's reason names it. */
export function describeDependency(dependency: Dependency): string {
  if (dependency.kind === 'check') return `check ${dependency.check}`;
  return `${dependency.kind} ${dependency.table} where ${JSON.stringify(dependency.where)}`;
}
