/**
 * The commit whitelist: registered actions (name → zod input → function of the transaction),
 * custom checks, and the application tables `exists` / `notExists` dependencies may name
 * (`contractTables`: drizzle tables). Anything else in a contract is refused when it is sealed,
 * with a ValidationError naming the field — never discovered at commit time.
 */
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import { ValidationError, isAction, isCheck, parseWithSchema, type Action, type Check, type ContractOperation, type Dependency, type PathSegment } from '@ratchet/sdk';

export interface RegisteredTable {
  /** As dependencies name it: `users`, or `app.users` for a table outside `public`. */
  readonly name: string;
  /** Quoted, schema-qualified, for SQL. */
  readonly sql: string;
  /** Column names as dependencies may write them (the drizzle key or the database name) → quoted database name. */
  readonly columns: ReadonlyMap<string, string>;
  /** Column sets (database names) covered by a unique constraint or unique index. */
  readonly uniqueKeys: readonly (readonly string[])[];
}

export class ContractRegistry {
  readonly #actions = new Map<string, Action>();
  readonly #checks = new Map<string, Check>();
  readonly #tables = new Map<string, RegisteredTable>();

  constructor(options: { actions?: readonly Action<any, any, any>[]; checks?: readonly Check<any, any>[]; contractTables?: readonly PgTable[] } = {}) {
    (options.actions ?? []).forEach((action, i) => {
      if (!isAction(action)) throw new ValidationError('must be an action made by defineAction()', { path: ['actions', i] });
      if (this.#actions.has(action.name) && this.#actions.get(action.name) !== action) {
        throw new ValidationError(`two actions are named "${action.name}"`, { path: ['actions', i, 'name'] });
      }
      this.#actions.set(action.name, action as Action);
    });
    (options.checks ?? []).forEach((check, i) => {
      if (!isCheck(check)) throw new ValidationError('must be a check made by defineCheck()', { path: ['checks', i] });
      if (this.#checks.has(check.name) && this.#checks.get(check.name) !== check) {
        throw new ValidationError(`two checks are named "${check.name}"`, { path: ['checks', i, 'name'] });
      }
      this.#checks.set(check.name, check as Check);
    });
    (options.contractTables ?? []).forEach((table, i) => {
      let config: ReturnType<typeof getTableConfig>;
      try {
        config = getTableConfig(table);
      } catch {
        throw new ValidationError('must be a drizzle pgTable', { path: ['contractTables', i] });
      }
      const name = config.schema && config.schema !== 'public' ? `${config.schema}.${config.name}` : config.name;
      const columns = new Map<string, string>();
      const tableColumns = table as unknown as Record<string, { name?: unknown }>;
      for (const [key, column] of Object.entries(tableColumns)) {
        if (column && typeof column === 'object' && typeof column.name === 'string' && config.columns.some((c) => c.name === column.name)) {
          columns.set(key, quote(column.name));
        }
      }
      for (const column of config.columns) columns.set(column.name, quote(column.name));
      const uniqueKeys = [
        ...config.primaryKeys.map((k) => k.columns.map((c) => c.name)),
        ...config.uniqueConstraints.map((u) => u.columns.map((c) => c.name)),
        ...config.indexes.filter((x) => x.config.unique && !x.config.where).map((x) => x.config.columns.map((c) => (c as { name?: string }).name ?? '')),
        ...config.columns.filter((c) => c.primary || c.isUnique).map((c) => [c.name]),
      ];
      this.#tables.set(name, {
        name,
        sql: config.schema ? `${quote(config.schema)}.${quote(config.name)}` : quote(config.name),
        columns,
        uniqueKeys,
      });
    });
  }

  action(name: string): Action | undefined {
    return this.#actions.get(name);
  }

  check(name: string): Check | undefined {
    return this.#checks.get(name);
  }

  table(name: string): RegisteredTable | undefined {
    return this.#tables.get(name);
  }

  /** Validates operations at seal time: each names a registered action and fits its input schema. */
  validateOperations(operations: unknown): ContractOperation[] {
    if (!Array.isArray(operations) || operations.length === 0) {
      throw new ValidationError('must be a non-empty array of { action, input }', { path: ['operations'] });
    }
    return operations.map((op: unknown, i) => {
      const path: PathSegment[] = ['operations', i];
      if (typeof op !== 'object' || op === null) throw new ValidationError('must be { action, input }', { path });
      const { action: name, input } = op as { action?: unknown; input?: unknown };
      const action = typeof name === 'string' ? this.#actions.get(name) : undefined;
      if (!action) {
        const known = [...this.#actions.keys()].join(', ') || 'none registered';
        throw new ValidationError(`unknown action ${JSON.stringify(name)}; registered actions: ${known}`, { path: [...path, 'action'] });
      }
      parseWithSchema(action.input, input, `operations[${i}].input`);
      return { action: action.name, input };
    });
  }

  /** Validates dependencies at seal time: known tables, columns and checks. */
  validateDependencies(dependencies: unknown): Dependency[] {
    if (dependencies === undefined) return [];
    if (!Array.isArray(dependencies)) throw new ValidationError('must be an array', { path: ['dependencies'] });
    return dependencies.map((dep: unknown, i) => {
      const path: PathSegment[] = ['dependencies', i];
      if (typeof dep !== 'object' || dep === null) throw new ValidationError('must be a dependency object', { path });
      const d = dep as Record<string, unknown>;
      if (d.kind === 'exists' || d.kind === 'notExists') {
        const table = typeof d.table === 'string' ? this.#tables.get(d.table) : undefined;
        if (!table) {
          const known = [...this.#tables.keys()].join(', ') || 'none registered';
          throw new ValidationError(`unknown table ${JSON.stringify(d.table)}; tables registered with contractTables: ${known}`, { path: [...path, 'table'] });
        }
        if (typeof d.where !== 'object' || d.where === null || Array.isArray(d.where) || Object.keys(d.where).length === 0) {
          throw new ValidationError('must be an object of column: value, e.g. { id: 7 }', { path: [...path, 'where'] });
        }
        for (const column of Object.keys(d.where)) {
          if (!table.columns.has(column)) throw new ValidationError(`table ${table.name} has no column ${JSON.stringify(column)}`, { path: [...path, 'where', column] });
        }
        return { kind: d.kind, table: table.name, where: d.where as Record<string, unknown> };
      }
      if (d.kind === 'check') {
        const check = typeof d.check === 'string' ? this.#checks.get(d.check) : undefined;
        if (!check) throw new ValidationError(`unknown check ${JSON.stringify(d.check)}`, { path: [...path, 'check'] });
        parseWithSchema(check.input, d.input, `dependencies[${i}].input`);
        return { kind: 'check', check: check.name, input: d.input };
      }
      throw new ValidationError(`unknown dependency kind ${JSON.stringify(d.kind)}; expected exists, notExists or check`, { path: [...path, 'kind'] });
    });
  }
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
