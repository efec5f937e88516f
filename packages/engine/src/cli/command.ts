/**
 * What every CLI command is made of: its spec (name, usage, options, positionals — the source of
 * its `--help`), argument parsing with `node:util` parseArgs, and the context it runs in (output
 * streams, the environment, the engine opened lazily from `--database`, DATABASE_URL or the
 * embedded PostgreSQL, and the user's module of workflows).
 *
 * Failure is one line and a non-zero exit: a usage mistake is a RatchetError with code
 * `CLI_USAGE` (exit 2), anything else exits 1 with the error's code and message (main.ts).
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { readFile } from 'node:fs/promises';
import { RatchetError, isAction, isCheck, isWorkflow, parseDuration, type Action, type Check, type Workflow } from '@ratchet/sdk';
import type { PgTable } from 'drizzle-orm/pg-core';
import { is, Table } from 'drizzle-orm';
import { createEngine, type Engine, type EngineOptions } from '../engine.js';
import { embedded } from '../embedded/embedded.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** The value's name in help (`--state <state>`). */
  value?: string;
  description: string;
  multiple?: boolean;
}

export interface CommandSpec {
  name: string;
  summary: string;
  /** Positionals as help shows them: `<runId>`, `[module]`. */
  args?: string;
  /** More lines of help after the usage. */
  details?: string;
  options?: Record<string, OptionSpec>;
  /** Adds --json. */
  json?: boolean;
  /** Opens no database (help-only commands). */
  offline?: boolean;
  run(ctx: CommandContext): Promise<number | void>;
}

export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/** Options every command takes. */
export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  database: { type: 'string', value: 'url', description: 'PostgreSQL URL. Default: $DATABASE_URL, else the embedded PostgreSQL under --data-dir' },
  'data-dir': { type: 'string', value: 'dir', description: 'Data directory of the embedded PostgreSQL. Default: $RATCHET_DATA_DIR or .ratchet/postgres' },
  tenant: { type: 'string', value: 'uuid', description: 'Tenant of the runs. Default: $RATCHET_TENANT or the default tenant' },
  help: { type: 'boolean', short: 'h', description: 'Show this help' },
};

const JSON_OPTION: OptionSpec = { type: 'boolean', description: 'Print JSON (for scripts) instead of a table' };

export function usageError(message: string): RatchetError {
  return new RatchetError(message, { code: 'CLI_USAGE' });
}

export function optionsOf(spec: CommandSpec): Record<string, OptionSpec> {
  return { ...(spec.options ?? {}), ...(spec.json ? { json: JSON_OPTION } : {}), ...GLOBAL_OPTIONS };
}

export function helpText(spec: CommandSpec): string {
  const options = optionsOf(spec);
  const rows = Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ` <${o.value ?? 'value'}>` : ''}`;
    return [flag, o.description] as const;
  });
  const width = Math.max(...rows.map(([f]) => f.length));
  return [
    `Usage: ratchet ${spec.name}${spec.args ? ` ${spec.args}` : ''} [options]`,
    '',
    spec.summary,
    ...(spec.details ? ['', spec.details] : []),
    '',
    'Options:',
    ...rows.map(([f, d]) => `  ${f.padEnd(width)}  ${d}`),
  ].join('\n');
}

export class CommandContext {
  readonly positionals: string[];
  readonly values: Record<string, string | boolean | string[] | undefined>;
  readonly io: Io;
  #engine: Promise<Engine> | undefined;
  #engineOptions: Omit<EngineOptions, 'database'> = {};

  constructor(spec: CommandSpec, argv: string[], io: Io) {
    const options = optionsOf(spec);
    let parsed;
    try {
      parsed = parseArgs({
        args: argv,
        allowPositionals: true,
        strict: true,
        options: Object.fromEntries(
          Object.entries(options).map(([name, o]) => [name, { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) }]),
        ),
      });
    } catch (error) {
      throw usageError(`${(error as Error).message.replace(/\. To specify.*$/s, '')} (see ratchet ${spec.name} --help)`);
    }
    this.positionals = parsed.positionals;
    this.values = parsed.values as Record<string, string | boolean | string[] | undefined>;
    this.io = io;
  }

  out(line = ''): void {
    this.io.stdout.write(`${line}\n`);
  }

  err(line: string): void {
    this.io.stderr.write(`${line}\n`);
  }

  string(name: string): string | undefined {
    const v = this.values[name];
    return typeof v === 'string' ? v : undefined;
  }

  flag(name: string): boolean {
    return this.values[name] === true;
  }

  get json(): boolean {
    return this.flag('json');
  }

  get tenantId(): string | undefined {
    return this.string('tenant') ?? (this.io.env.RATCHET_TENANT || undefined);
  }

  /** The positional at `index`, or a usage error naming it. */
  arg(index: number, name: string): string {
    const v = this.positionals[index];
    if (v === undefined || v === '') throw usageError(`missing <${name}>`);
    return v;
  }

  /** A JSON value given inline or as `@file` (relative to the working directory). */
  async jsonValue(name: string, text: string): Promise<unknown> {
    const source = text.startsWith('@') ? await readFile(resolve(this.io.cwd, text.slice(1)), 'utf8').catch((e: Error) => {
      throw usageError(`--${name}: cannot read ${text.slice(1)}: ${e.message}`);
    }) : text;
    try {
      return JSON.parse(source) as unknown;
    } catch (error) {
      throw usageError(`--${name} is not valid JSON: ${(error as Error).message}`);
    }
  }

  /** A duration option (`30s`, `1d`, or ms), as ms. */
  durationMs(name: string): number | undefined {
    const v = this.string(name);
    if (v === undefined) return undefined;
    try {
      return parseDuration(/^\d+$/.test(v) ? Number(v) : (v as never), name);
    } catch {
      throw usageError(`--${name} must be a duration such as 500ms, 30s, 5m, 2h or 1d`);
    }
  }

  integer(name: string): number | undefined {
    const v = this.string(name);
    if (v === undefined) return undefined;
    if (!/^-?\d+$/.test(v)) throw usageError(`--${name} must be an integer`);
    return Number(v);
  }

  /** Options for the engine this command opens (set before the first `engine()`). */
  configure(options: Omit<EngineOptions, 'database'>): void {
    this.#engineOptions = { ...this.#engineOptions, ...options };
  }

  /** The engine, opened on first use. */
  engine(): Promise<Engine> {
    return (this.#engine ??= (async () => {
      const url = this.string('database') ?? (this.io.env.DATABASE_URL || undefined);
      const dataDir = this.string('data-dir') ?? (this.io.env.RATCHET_DATA_DIR || undefined);
      const database = url ?? embedded({ dataDir: resolve(this.io.cwd, dataDir ?? '.ratchet/postgres') });
      return createEngine({ database, poolSize: 5, ...this.#engineOptions });
    })());
  }

  async close(): Promise<void> {
    if (this.#engine) await (await this.#engine).close();
  }
}

export interface LoadedModule {
  path: string;
  workflows: Workflow<any, any, any>[];
  actions: Action<any, any, any>[];
  checks: Check<any, any>[];
  contractTables: PgTable[];
}

/**
 * The workflows (and commit actions, checks, drizzle tables for dependencies) a module exports,
 * found by kind among its exports, one level into arrays and plain objects (so `export const
 * workflows = [a, b]` and `export default { workflows, actions }` both work).
 */
export async function loadModule(path: string, cwd: string): Promise<LoadedModule> {
  const file = resolve(cwd, path);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    throw new RatchetError(`cannot load module ${path}: ${(error as Error).message}`, { code: 'CLI_MODULE', cause: error });
  }
  const found: LoadedModule = { path: file, workflows: [], actions: [], checks: [], contractTables: [] };
  const seen = new Set<unknown>();
  const visit = (value: unknown, depth: number) => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value)) return;
    seen.add(value);
    if (isWorkflow(value)) found.workflows.push(value);
    else if (isAction(value)) found.actions.push(value);
    else if (isCheck(value)) found.checks.push(value);
    else if (is(value, Table)) found.contractTables.push(value as PgTable);
    else if (depth < 2 && (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)) {
      for (const v of Object.values(value as object)) visit(v, depth + 1);
    }
  };
  for (const value of Object.values(mod)) visit(value, 0);
  return found;
}
