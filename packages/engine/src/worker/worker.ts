/**
 * The worker: claims due runs of the workflows it has the code for and executes them.
 *
 * Loop states:
 *
 *   claiming ──got a full batch──▶ claiming (more may be waiting)
 *      │  ──got fewer / no slot──▶ idle ──(NOTIFY ratchet_work | a slot frees | next due_at | pollMs)──▶ claiming
 *      └── stop() ──▶ draining (no more claims; in-flight runs finish, or are released after the grace period) ──▶ stopped
 *
 * One claim is ONE statement (store/leases.ts). Idle waits are computed, not blind: the next
 * wake is the earliest `due_at` of a registered workflow (a sleeper, a wait timeout, an expired
 * lease), capped by `pollMs` as the safety net for a NOTIFY lost while reconnecting. A start's
 * NOTIFY names its run: a start of a workflow version this worker lacks, or of a run its last
 * claims already took, wakes nothing.
 */
import type { TaskRecord } from '../store/rows.js';
import { claimTasks } from '../store/leases.js';
import { transitionTask, WORK_CHANNEL, type ClaimedTask } from '../store/tasks.js';
import { listOperations } from '../store/operations.js';
import { checkSchema } from '../store/migrate.js';
import { fault } from '../faults.js';
import { Execution, type InFlightRun, type Outcome } from '../runtime/execution.js';
import { newOwnerId, type EngineCore } from '../core.js';
import { LeaseKeeper } from './lease.js';
import { Scheduler } from '../schedules/scheduler.js';
import { Heartbeat } from './heartbeat.js';
import { StartNotices } from './start-notices.js';
import { ValidationError } from '@ratchet/sdk';
import type { LocalWorker } from '../local.js';

export interface WorkerOptions {
  /** Runs executed at once. Default 10. */
  concurrency?: number;
  /** Lease length. Default: the engine's (30 s). Renewed every third of it. */
  leaseMs?: number;
  /** Longest idle wait between claims when nothing notifies. Default 5 s. */
  pollMs?: number;
  /** Identity written as `lease_owner` and on events. Default `worker:<host>:<pid>:<random>`. */
  workerId?: string;
  /** How long stop() lets in-flight runs finish before releasing them to other workers. Default 10 s. */
  shutdownGraceMs?: number;
  /** How often the worker's row in `ratchet.workers` is refreshed; three missed beats and it counts as gone. Default 10 s. */
  heartbeatMs?: number;
}

export interface WorkerStats {
  readonly claimed: number;
  readonly completed: number;
  readonly suspended: number;
  readonly failed: number;
  readonly lost: number;
  readonly active: number;
}

export class Worker {
  readonly workerId: string;
  readonly #core: EngineCore;
  readonly #concurrency: number;
  readonly #pollMs: number;
  readonly #graceMs: number;
  readonly #leases: LeaseKeeper;
  readonly #active = new Map<string, ActiveRun>();
  #loop: Promise<void> | undefined;
  #stopping = false;
  #wake: (() => void) | undefined;
  /** A wake-up (NOTIFY, a freed slot) that arrived while the loop was not idle: the next idle returns at once. */
  #woken = false;
  #unsubscribe: (() => void) | undefined;
  /** Every started worker also ticks the cron schedules (schedules/scheduler.ts). */
  #scheduler: Scheduler | undefined;
  #stats = { claimed: 0, completed: 0, suspended: 0, failed: 0, lost: 0 };
  readonly #heartbeatMs: number;
  /** The worker's row in ratchet.workers while started (worker/heartbeat.ts). */
  #heartbeat: Heartbeat | undefined;
  /**
   * Due runs may be waiting for a slot here: the last claim filled every free slot and said one
   * more was due, or the loop was woken with no slot free. Then a slot freeing claims at once;
   * otherwise the runs this worker finishes leave nothing to claim that a NOTIFY, a poke or the
   * idle timer would not bring.
   */
  #backlog = false;
  /** Slots held for eager starts whose INSERT is in flight (local.ts), and when each ends. */
  #reserved = 0;
  /** Slots the claim in flight may fill (its limit): not free for an eager start meanwhile. */
  #claiming = 0;
  /** Which `ratchet_work` notifications call for a claim (start-notices.ts). */
  readonly #notices = new StartNotices((name, version) => this.#core.registry.get(name, version) !== undefined);
  readonly #reservations = new Set<Promise<void>>();
  /** How this engine's clients wake this worker, and hand it eager starts, in memory (local.ts). */
  readonly #local: LocalWorker = {
    reserve: () => {
      if (this.#loop === undefined || this.#stopping || this.#free() <= 0) return undefined;
      this.#reserved += 1;
      let ended!: () => void;
      const reservation = new Promise<void>((resolve) => (ended = resolve));
      this.#reservations.add(reservation);
      let held = true;
      const end = () => {
        if (!held) throw new Error('a slot reservation ends once');
        held = false;
        this.#reserved -= 1;
        this.#reservations.delete(reservation);
        ended();
      };
      return {
        owner: this.workerId,
        leaseMs: this.#leases.leaseMs,
        take: (task) => {
          end();
          this.#stats.claimed += 1;
          this.#launch(task, Date.now());
        },
        release: (poke) => {
          end();
          if (poke) this.#poke();
        },
      };
    },
  };

  constructor(core: EngineCore, options: WorkerOptions = {}) {
    this.#core = core;
    this.workerId = options.workerId ?? newOwnerId('worker');
    this.#concurrency = positiveInt(options.concurrency ?? 10, 'concurrency');
    this.#pollMs = positiveInt(options.pollMs ?? 5_000, 'pollMs');
    this.#graceMs = positiveInt(options.shutdownGraceMs ?? 10_000, 'shutdownGraceMs', true);
    this.#heartbeatMs = positiveInt(options.heartbeatMs ?? 10_000, 'heartbeatMs');
    this.#leases = new LeaseKeeper(core.pool, this.workerId, positiveInt(options.leaseMs ?? core.leaseMs, 'leaseMs'), core.onError, core.faults);
  }

  /**
   * Checks the schema, subscribes to work notifications and starts claiming; resolves once the
   * first claim has looked (while a claim is in flight its slots take no eager starts).
   */
  async start(): Promise<void> {
    if (this.#loop) return;
    if (this.#core.registry.size === 0) {
      throw new ValidationError('the engine has no workflows to run: pass createEngine({ workflows: [...] })', { path: ['workflows'] });
    }
    await checkSchema(this.#core.pool);
    const { names, versions } = this.#core.registry.pairs();
    this.#heartbeat = new Heartbeat(
      this.#core.pool,
      { id: this.workerId, workflows: names.map((name, i) => ({ name, version: versions[i]! })), concurrency: this.#concurrency, heartbeatMs: this.#heartbeatMs },
      this.#core.onError,
    );
    await this.#heartbeat.start();
    this.#stopping = false;
    this.#unsubscribe = await this.#core.listener.subscribe(WORK_CHANNEL, (payload) => {
      if (this.#notices.heard(payload, this.#claiming > 0)) this.#poke();
    });
    await this.#core.running.listen();
    this.#scheduler = new Scheduler(this.#core, { actorId: this.workerId, pollMs: this.#pollMs });
    await this.#scheduler.start();
    let looked!: () => void;
    const firstClaim = new Promise<void>((resolve) => (looked = resolve));
    this.#loop = this.#run(looked);
    this.#core.local.addWorker(this.#local);
    await firstClaim;
  }

  /** Stops claiming; waits for in-flight runs up to the grace period, then releases the rest to other workers. */
  async stop(): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.#core.local.removeWorker(this.#local);
    await this.#scheduler?.stop();
    this.#scheduler = undefined;
    this.#poke();
    await this.#loop;
    this.#loop = undefined;
    this.#unsubscribe?.();
    // A start's INSERT may be leasing a run to this worker right now: it is launched (and, the
    // worker stopping, handed straight back) before the wait for in-flight runs below.
    await Promise.all(this.#reservations);
    const all = Promise.all([...this.#active.values()].map((a) => a.done));
    let graceTimer: NodeJS.Timeout | undefined;
    const graceful = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((resolve) => (graceTimer = setTimeout(() => resolve(false), this.#graceMs))),
    ]);
    clearTimeout(graceTimer);
    if (!graceful) {
      for (const [, entry] of this.#active) {
        const execution = entry.execution;
        if (!execution || execution.settled) continue;
        execution.abandon();
        // Hand the run back now instead of making others wait for the lease to expire.
        await transitionTask(this.#core.pool, execution.fence, { state: 'pending', event: 'released', payload: { reason: 'shutdown' } }).catch(
          this.#core.onError,
        );
      }
      await all;
    }
    await this.#heartbeat?.stop();
    this.#heartbeat = undefined;
  }

  get stats(): WorkerStats {
    return { ...this.#stats, active: this.#active.size };
  }

  /**
   * The runs this worker is executing and what each is doing: its ctx calls in flight and for how
   * long, a fenced write in flight. For operators and health checks — a run in flight for far
   * longer than its steps should take is stuck in user code (a step with no timeout) or in I/O.
   */
  inFlight(): InFlightRun[] {
    const now = Date.now();
    return [...this.#active.values()].map(
      (entry) =>
        entry.execution?.describe(now) ?? {
          runId: entry.task.id,
          tenantId: entry.task.tenantId,
          workflow: `${entry.task.workflowName}@${entry.task.workflowVersion}`,
          forMs: now - entry.claimedLocalAt,
          phase: 'starting',
          calls: [],
          writing: null,
        },
    );
  }

  async #run(looked: () => void): Promise<void> {
    const { names, versions } = this.#core.registry.pairs();
    let backoff = 100;
    /** Claims in a row that found due runs but took none (locked by others, or their concurrency key busy). */
    let empty = 0;
    while (!this.#stopping) {
      const free = this.#free();
      let waitMs = this.#pollMs;
      if (free <= 0) this.#backlog = true;
      else {
        let claimed: ClaimedTask[];
        let due: number | null;
        let claimedLocalAt: number;
        this.#claiming = free;
        try {
          ({ tasks: claimed, nextDueMs: due } = await claimTasks(this.#core.pool, {
            names,
            versions,
            limit: free,
            owner: this.workerId,
            leaseMs: this.#leases.leaseMs,
            maxClaims: this.#core.maxClaims,
            policyVersion: this.#core.runtime.policyVersion,
          }));
          claimedLocalAt = Date.now();
          backoff = 100;
        } catch (error) {
          this.#claiming = 0;
          this.#notices.claimFailed();
          looked();
          // The database went away (restart, terminated backend): back off, never crash.
          this.#core.onError(error);
          await this.#idle(backoff);
          backoff = Math.min(backoff * 2, 5_000);
          continue;
        }
        for (const task of claimed) {
          this.#stats.claimed += 1;
          if (task.state === 'parked') continue; // a poison pill, parked by the claim itself
          this.#launch(task, claimedLocalAt);
        }
        this.#claiming = 0;
        if (this.#notices.claimed(claimed.map((task) => task.id))) this.#woken = true;
        looked();
        // Full, with a run left due: claim again as soon as a slot frees.
        this.#backlog = claimed.length === free && due !== null && due <= 0;
        if (this.#backlog) continue;
        // A floor when nothing was claimed: due runs locked by someone else, or waiting for their
        // concurrency key, must not make this loop spin. It doubles while that lasts; a NOTIFY
        // (a key freed, new work) still wakes the loop at once.
        empty = claimed.length === 0 && due !== null && due <= 0 ? empty + 1 : 0;
        const floor = empty > 0 ? Math.min(this.#pollMs, 25 * 2 ** Math.min(empty - 1, 10)) : 0;
        if (due !== null) waitMs = Math.min(this.#pollMs, Math.max(floor, Math.ceil(due)));
      }
      if (waitMs > 0) await this.#idle(waitMs);
    }
    looked(); // stopped before it ever claimed
  }

  /** Slots neither running a run, nor held for an eager start, nor asked for by the claim in flight. */
  #free(): number {
    return this.#concurrency - this.#active.size - this.#reserved - this.#claiming;
  }

  #poke(): void {
    if (this.#wake) this.#wake();
    else this.#woken = true;
  }

  #idle(ms: number): Promise<void> {
    if (this.#stopping) return Promise.resolve();
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        // Cleared however the wait ends: a wake-up arriving while the loop is busy must set
        // #woken, not call a callback whose wait is already over.
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  #launch(task: ClaimedTask, claimedLocalAt: number): void {
    const entry: ActiveRun = { task, claimedLocalAt, done: Promise.resolve() };
    let outcome: Outcome | undefined;
    entry.done = (async () => {
      try {
        await fault(this.#core.faults, { point: 'afterClaim', runId: task.id });
        if (this.#stopping) {
          // Claimed just as the worker stops: hand it straight back rather than start it.
          const fence = { tenantId: task.tenantId, taskId: task.id, owner: this.workerId, stateVersion: task.stateVersion };
          await transitionTask(this.#core.pool, fence, { state: 'pending', event: 'released', payload: { reason: 'shutdown' } });
          return;
        }
        const workflow = this.#core.registry.get(task.workflowName, task.workflowVersion)!;
        // A fresh run has nothing to replay: the claim said so, and no statement is spent on it.
        const operations = task.hasOperations ? await listOperations(this.#core.pool, task.tenantId, task.id) : [];
        const execution = new Execution(
          {
            pool: this.#core.pool,
            workflow,
            task,
            owner: this.workerId,
            dbNow: task.claimedAt,
            claimedLocalAt,
            leases: this.#leases,
            options: this.#core.runtime,
            contracts: this.#core.contracts,
            faults: this.#core.faults,
            instrumentation: this.#core.instrumentation,
            onError: this.#core.onError,
            running: this.#core.running,
            local: this.#core.local,
          },
          operations,
        );
        entry.execution = execution;
        outcome = await execution.execute();
        this.#count(outcome);
      } catch (error) {
        // Unreachable database or a bug: the lease expires and the run is claimed again.
        this.#core.onError(error);
        this.#stats.lost += 1;
      } finally {
        if (this.#active.get(task.id) === entry) this.#active.delete(task.id);
        // A run that suspended is due again at its own time: the next claim learns when.
        if (this.#backlog || !outcome || !SETTLED.has(outcome.state)) this.#poke();
      }
    })();
    this.#active.set(task.id, entry);
  }

  #count(outcome: Outcome): void {
    if (outcome.state === 'completed') this.#stats.completed += 1;
    else if (outcome.state === 'sleeping' || outcome.state === 'waiting') this.#stats.suspended += 1;
    else if (outcome.state === 'lost') this.#stats.lost += 1;
    else this.#stats.failed += 1;
  }
}

const SETTLED = new Set<Outcome['state']>(['completed', 'failed', 'cancelled']);

interface ActiveRun {
  readonly task: TaskRecord;
  readonly claimedLocalAt: number;
  execution?: Execution;
  done: Promise<void>;
}

function positiveInt(value: number, field: string, zeroOk = false): number {
  if (!Number.isInteger(value) || value < (zeroOk ? 0 : 1)) throw new ValidationError(`must be a ${zeroOk ? 'non-negative' : 'positive'} integer`, { path: [field] });
  return value;
}

