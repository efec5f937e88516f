/**
 * What the engine's parts share: the pool, the registry of workflows by (name, version), the
 * runtime defaults, the LISTEN connection, and the optional hooks.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { ValidationError, isWorkflow, type Workflow } from '@ratchet/sdk';
import type { FaultHooks } from './faults.js';
import type { Instrumentation } from './instrumentation.js';
import type { RuntimeOptions } from './runtime/execution.js';
import type { Listener } from './worker/listener.js';
import type { RunningExecutions } from './worker/running.js';
import type { LocalHub } from './local.js';
import type { ConcurrencyLimits } from './concurrency.js';
import type { ContractRegistry } from './contracts/registry.js';
import { DEFAULT_TENANT_ID, isUuid } from './ids.js';

export interface EngineCore {
  readonly pool: pg.Pool;
  readonly registry: Registry;
  readonly contracts: ContractRegistry;
  readonly runtime: RuntimeOptions;
  readonly leaseMs: number;
  readonly maxClaims: number;
  readonly listener: Listener;
  /** Runs this process executes, told of signals and cancel requests (worker/running.ts). */
  readonly running: RunningExecutions;
  /** In-process wake-ups and result hand-offs between this engine's clients and workers (local.ts). */
  readonly local: LocalHub;
  /** Per-key concurrency limits by key pattern (concurrency.ts). */
  readonly limits: ConcurrencyLimits;
  readonly faults: FaultHooks | undefined;
  readonly instrumentation: Instrumentation | false | undefined;
  readonly onError: (error: unknown) => void;
}

/** Workflows by `name@version`: a worker claims only runs of versions it has the code for. */
export class Registry {
  readonly #byKey = new Map<string, Workflow>();

  constructor(workflows: readonly Workflow[] = []) {
    workflows.forEach((wf, i) => this.add(wf, `workflows[${i}]`));
  }

  add(wf: Workflow, field = 'workflow'): void {
    if (!isWorkflow(wf)) throw new ValidationError('must be a workflow made by workflow()', { path: fieldPathOf(field) });
    const key = `${wf.name}@${wf.version}`;
    const existing = this.#byKey.get(key);
    if (existing && existing !== wf) {
      throw new ValidationError(`two different workflows are registered as ${wf.name} version ${wf.version}; bump the version of one`, {
        path: fieldPathOf(field),
      });
    }
    this.#byKey.set(key, wf);
  }

  get(name: string, version: string): Workflow | undefined {
    return this.#byKey.get(`${name}@${version}`);
  }

  /** The registered pairs as two parallel arrays, for `unnest($1::text[], $2::text[])`. */
  pairs(): { names: string[]; versions: string[] } {
    const all = [...this.#byKey.values()];
    return { names: all.map((w) => w.name), versions: all.map((w) => w.version) };
  }

  get size(): number {
    return this.#byKey.size;
  }
}

function fieldPathOf(field: string): (string | number)[] {
  return field.split(/[.[\]]/).filter(Boolean).map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

/** `host:pid:random` — unique per process and per worker, readable in `lease_owner` and events. */
export function newOwnerId(prefix = 'engine'): string {
  return `${prefix}:${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

/** The tenant a call names, or the default one; a malformed id is a ValidationError. */
export function tenantOf(tenantId: string | undefined, field = 'tenantId'): string {
  if (tenantId === undefined) return DEFAULT_TENANT_ID;
  if (!isUuid(tenantId)) throw new ValidationError('must be a UUID', { path: [field] });
  return tenantId.toLowerCase();
}

const MAX_KEY_LENGTH = 512;

/** An idempotency key as given, checked: 1–512 characters, no NUL. */
export function idempotencyKeyOf(key: string | undefined, field = 'idempotencyKey'): string | null {
  if (key === undefined) return null;
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH || key.includes('\u0000') || !key.isWellFormed()) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, well-formed Unicode without NUL`, { path: [field] });
  }
  return key;
}
