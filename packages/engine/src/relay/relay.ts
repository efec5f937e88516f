/**
 * The outbox relay: publishes the messages of `ratchet.outbox` at least once.
 *
 * @example
 * ```ts
 * const relay = engine.relay({ publish: async (messages) => { for (const m of messages) await bus.send(m.topic, m.key, m.payload) } });
 * await relay.start();
 * // …
 * await relay.stop();   // waits for the batch in flight
 * ```
 *
 * Loop states:
 *
 *   claiming ──got a full batch──▶ publishing ──▶ settling ──▶ claiming (more may be waiting)
 *      │  ──got fewer / none──▶ idle ──(NOTIFY ratchet_outbox | earliest available_at | pollMs)──▶ claiming
 *      │  ──database error──▶ backing off (100 ms doubling to 5 s, reported to onError) ──▶ claiming
 *      └── stop() ──▶ the batch in flight is published and settled ──▶ stopped
 *
 * A message's life (store/outbox.ts):
 *
 *   pending ──claim: attempts + 1, available_at = now + publishTimeout (the lease)──▶ leased
 *   leased ──publish resolved──▶ dispatched (dispatched_at set)
 *   leased ──publish threw, timed out, or listed it in `failed`──▶ pending at now + backoff(attempts), last_error set
 *   leased ──the relay died or lost the database──▶ pending again when the lease passes
 *
 * The claim is ONE statement (FOR UPDATE SKIP LOCKED) and commits before `publish` is called, so
 * no transaction or lock is held across the network call, and two relays never hold one message
 * at once. Outcomes are written only if `attempts` still shows this relay's claim: a relay whose
 * lease ran out (a long GC pause, a hung publish) cannot overwrite the outcome of the claim that
 * replaced it. Delivery is at least once — a message published just before its relay died is
 * published again with the same `key` — so consumers deduplicate on `key`.
 */
import { redactText } from '../redact.js';
import type pg from 'pg';
import { parseDuration, resolveRetryPolicy, retryDelay, TimeoutError, ValidationError, type Duration, type ResolvedRetryPolicy, type RetryPolicy } from '@ratchet/sdk';
import type { EngineCore } from '../core.js';
import { fault } from '../faults.js';
import { checkSchema } from '../store/migrate.js';
import {
  claimMessages,
  completeMessages,
  failMessages,
  nextMessageDueIn,
  OUTBOX_CHANNEL,
  type ClaimedMessage,
  type ClaimRef,
  type FailedClaim,
} from '../store/outbox.js';

/** One message handed to `publish`. */
export interface OutboxMessage {
  /** The outbox row's id (a UUIDv7). Name it in `PublishResult.failed`. */
  readonly id: string;
  readonly tenantId: string;
  /** The run that emitted it. */
  readonly runId: string;
  readonly topic: string;
  /**
   * Stable across every delivery of this message: `<runId>:<stepKey>` for `ctx.emit`, the key
   * given to `tx.emit` or `<contractId>:<n>` for a contract's messages. Consumers deduplicate on it.
   */
  readonly key: string;
  readonly payload: unknown;
  /** 1 on the first delivery; more after failures or a relay that died mid-publish. */
  readonly attempt: number;
  readonly createdAt: Date;
}

/** What `publish` receives beside the messages. */
export interface PublishContext {
  /** Fires when `publishTimeout` passes: stop, the batch is recorded as failed and retried. */
  readonly signal: AbortSignal;
  /** The engine's pool, for publishers that write to the same database (notifyPublisher). No transaction is open. */
  readonly pool: pg.Pool;
}

/**
 * What `publish` may resolve to. Resolving to nothing means every message was published. To
 * report some as not published, list them in `failed` (by `id`, optionally with the error to
 * store in `last_error`): those are retried after the backoff, the others are marked
 * dispatched. Throwing (or rejecting) fails the whole batch.
 */
export interface PublishResult {
  failed?: readonly (string | { id: string; error?: unknown })[];
}

export type Publish = (messages: readonly OutboxMessage[], context: PublishContext) => Promise<void | PublishResult>;

/** Backoff after a failed publish: `initial × factor^(attempt−1)`, capped at `max`, spread by ±`jitter`. */
export type RelayBackoff = Partial<Pick<RetryPolicy, 'initial' | 'factor' | 'max' | 'jitter'>>;

export interface RelayOptions {
  /** Publishes a batch (see PublishResult). Called with no transaction open, one batch at a time. */
  publish: Publish;
  /** Messages claimed and handed to `publish` at once. Default 100 (at most 1000). */
  batchSize?: number;
  /** Longest idle wait when nothing notifies (the safety net for a NOTIFY lost while reconnecting). Default 5 s. */
  pollMs?: number;
  /**
   * How long one `publish` call may take; also the lease on the batch's messages, after which
   * another relay may publish them again. Default 30 s.
   */
  publishTimeout?: Duration;
  /**
   * Retry delays of failed messages. Default 1 s doubling to 5 min, ±20 % (an `initial` above
   * 5 min without `max` raises the cap to it). A message is never given up.
   */
  backoff?: RelayBackoff;
}

export interface RelayStats {
  /** Messages claimed (a message claimed again after a failure counts again). */
  readonly claimed: number;
  /** Messages marked dispatched. */
  readonly published: number;
  /** Failed publishes recorded (each is retried after its backoff). */
  readonly failed: number;
  /** Outcomes dropped because the lease had passed and another claim had replaced this one. */
  readonly superseded: number;
  /** Batches handed to `publish`. */
  readonly batches: number;
}

const OPTION_KEYS = ['publish', 'batchSize', 'pollMs', 'publishTimeout', 'backoff'] as const;
const MAX_BATCH = 1000;
// The lease must outlast a claim round trip and a short publish; below this it only causes double sends.
const MIN_PUBLISH_TIMEOUT_MS = 100;
const RELAY_BACKOFF = { maxAttempts: 1, initial: '1s', factor: 2, max: 300_000, jitter: 0.2 } satisfies RetryPolicy;
const LAST_ERROR_MESSAGE_CHARS = 1000;
const SETTLE_TRIES = 3;

export class Relay {
  readonly #core: EngineCore;
  readonly #publish: Publish;
  readonly #batchSize: number;
  readonly #pollMs: number;
  readonly #leaseMs: number;
  readonly #backoff: ResolvedRetryPolicy;
  #loop: Promise<void> | undefined;
  #stopping = false;
  #wake: (() => void) | undefined;
  /** A NOTIFY that arrived while the loop was busy: the next idle returns at once. */
  #woken = false;
  #unsubscribe: (() => void) | undefined;
  #stats = { claimed: 0, published: 0, failed: 0, superseded: 0, batches: 0 };

  constructor(core: EngineCore, options: RelayOptions) {
    this.#core = core;
    const o = checkedOptions(options);
    this.#publish = o.publish;
    this.#batchSize = intIn(o.batchSize ?? 100, 'batchSize', 1, MAX_BATCH);
    this.#pollMs = intIn(o.pollMs ?? 5_000, 'pollMs', 1, 2 ** 31 - 1);
    this.#leaseMs = parseDuration(o.publishTimeout ?? '30s', 'publishTimeout');
    if (this.#leaseMs < MIN_PUBLISH_TIMEOUT_MS) {
      throw new ValidationError(`must be at least ${MIN_PUBLISH_TIMEOUT_MS} ms, got ${this.#leaseMs} ms`, { path: ['publishTimeout'] });
    }
    this.#backoff = resolveBackoff(o.backoff);
  }

  /** Checks the schema, subscribes to `ratchet_outbox` and starts publishing. */
  async start(): Promise<void> {
    if (this.#loop) return;
    await checkSchema(this.#core.pool);
    this.#stopping = false;
    this.#unsubscribe = await this.#core.listener.subscribe(OUTBOX_CHANNEL, () => this.#poke());
    this.#loop = this.#run();
  }

  /** Stops claiming and waits for the batch in flight to be published and settled. */
  async stop(): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.#poke();
    await this.#loop;
    this.#loop = undefined;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  get stats(): RelayStats {
    return { ...this.#stats };
  }

  async #run(): Promise<void> {
    let backoff = 100;
    while (!this.#stopping) {
      let waitMs: number;
      try {
        waitMs = await this.#cycle();
        backoff = 100;
      } catch (error) {
        // The database went away (restart, terminated backend): back off, never crash.
        this.#core.onError(error);
        waitMs = backoff;
        backoff = Math.min(backoff * 2, 5_000);
      }
      if (waitMs > 0) await this.#idle(waitMs);
    }
  }

  /** One claim and its batch; resolves to how long to idle before the next claim. */
  async #cycle(): Promise<number> {
    // Measured before the claim is sent, so the local deadline falls before the lease's end in the database.
    const claimSentAt = Date.now();
    const messages = await claimMessages(this.#core.pool, this.#batchSize, this.#leaseMs);
    if (messages.length > 0) await this.#deliver(messages, claimSentAt);
    if (messages.length === this.#batchSize) return 0;
    const due = await nextMessageDueIn(this.#core.pool);
    if (due === null) return this.#pollMs;
    // A floor when nothing was claimed: a due message locked by a claim in flight must not make this loop spin.
    return Math.min(this.#pollMs, Math.max(messages.length === 0 ? 25 : 0, Math.ceil(due)));
  }

  async #deliver(claimed: ClaimedMessage[], claimSentAt: number): Promise<void> {
    this.#stats.claimed += claimed.length;
    this.#stats.batches += 1;
    const first = claimed[0]!;
    await fault(this.#core.faults, { point: 'afterCommitBeforePublish', runId: first.runId, attempt: first.attempt });
    const failures = await this.#callPublish(claimed, claimSentAt);
    const done: ClaimRef[] = [];
    const failed: FailedClaim[] = [];
    for (const m of claimed) {
      const ref = { tenantId: m.tenantId, id: m.id, attempt: m.attempt };
      if (!failures.has(m.id)) done.push(ref);
      else failed.push({ ...ref, error: lastError(failures.get(m.id)), retryInMs: retryDelay(this.#backoff, m.attempt, Math.random) });
    }
    const published = await this.#settle(() => completeMessages(this.#core.pool, done));
    const recorded = await this.#settle(() => failMessages(this.#core.pool, failed));
    this.#stats.published += published;
    this.#stats.failed += recorded;
    this.#stats.superseded += done.length - published + (failed.length - recorded);
  }

  /** Calls `publish` under the timeout; resolves to the failed messages by id, with their errors. */
  async #callPublish(claimed: ClaimedMessage[], claimSentAt: number): Promise<Map<string, unknown>> {
    const messages: OutboxMessage[] = claimed.map((m) => Object.freeze({ ...m }));
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new TimeoutError(`publish did not finish within publishTimeout (${this.#leaseMs} ms); the batch will be retried`, { timeoutMs: this.#leaseMs });
        controller.abort(error);
        reject(error);
      }, Math.max(0, this.#leaseMs - (Date.now() - claimSentAt)));
    });
    try {
      const result = await Promise.race([Promise.resolve().then(() => this.#publish(messages, { signal: controller.signal, pool: this.#core.pool })), timeout]);
      return failedOf(result, claimed);
    } catch (error) {
      return new Map(claimed.map((m) => [m.id, error]));
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Writes an outcome, retrying a lost connection a few times. If it still fails the messages
   * stay leased and are published again when the lease passes (at least once, never lost).
   */
  async #settle(write: () => Promise<number>): Promise<number> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await write();
      } catch (error) {
        if (attempt >= SETTLE_TRIES) throw error;
        this.#core.onError(error);
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
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
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }
}

/**
 * The messages `publish` reported as failed. A malformed result, or an id not in the batch (a
 * key passed where an id belongs?), fails the whole batch: guessing could mark an unpublished
 * message dispatched and lose it.
 */
function failedOf(result: unknown, claimed: readonly ClaimedMessage[]): Map<string, unknown> {
  const failed = new Map<string, unknown>();
  // Anything but an object with `failed` (nothing, a Response, an array of acks) means all were published.
  if (typeof result !== 'object' || result === null) return failed;
  const list = (result as PublishResult).failed;
  if (list === undefined) return failed;
  const fail = (message: string, path: (string | number)[]) => new Map(claimed.map((m) => [m.id, new ValidationError(message, { path })]));
  if (!Array.isArray(list)) return fail('publish must resolve to nothing or { failed: [ids] }', ['failed']);
  const ids = new Set(claimed.map((m) => m.id));
  for (const [i, entry] of list.entries()) {
    const id = typeof entry === 'string' ? entry : (entry as { id?: unknown } | null)?.id;
    if (typeof id !== 'string' || !ids.has(id)) {
      return fail(`must be the id of a message of this batch (or { id, error }), got ${JSON.stringify(id ?? entry)}`, ['failed', i]);
    }
    failed.set(id, typeof entry === 'string' ? new Error('publish reported the message as failed') : (entry.error ?? new Error('publish reported the message as failed')));
  }
  return failed;
}

/** `last_error`: structured and bounded (`{ name, code?, message }`); never the payload. */
function lastError(error: unknown): string {
  const e = error as { name?: unknown; code?: unknown; message?: unknown } | null;
  const isObject = typeof e === 'object' && e !== null;
  const name = isObject && typeof e.name === 'string' ? e.name : 'Error';
  const message = isObject && typeof e.message === 'string' ? e.message : String(error);
  const code = isObject && (typeof e.code === 'string' || typeof e.code === 'number') ? e.code : undefined;
  const bounded = message.length > LAST_ERROR_MESSAGE_CHARS ? `${message.slice(0, LAST_ERROR_MESSAGE_CHARS)}…` : message;
  return JSON.stringify({ name, ...(code !== undefined ? { code } : {}), message: redactText(bounded) });
}

function checkedOptions(options: RelayOptions): RelayOptions {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('pass relay options like { publish: async (messages) => {} }', { path: ['options'] });
  }
  for (const key of Object.keys(options)) {
    if (!(OPTION_KEYS as readonly string[]).includes(key)) {
      throw new ValidationError(`unknown relay option; expected one of ${OPTION_KEYS.join(', ')}`, { path: [key] });
    }
  }
  if (typeof options.publish !== 'function') {
    throw new ValidationError('must be a function (messages, { signal, pool }) => Promise<void | { failed }>', { path: ['publish'] });
  }
  if (options.backoff !== undefined && typeof options.backoff === 'object' && options.backoff !== null && 'maxAttempts' in options.backoff) {
    throw new ValidationError('the relay never gives up on a message; set initial, factor, max or jitter', { path: ['backoff', 'maxAttempts'] });
  }
  return options;
}

/** The relay's backoff; an `initial` above the default cap (5 min) without a `max` raises the cap to it. */
function resolveBackoff(backoff: RelayBackoff | undefined): ResolvedRetryPolicy {
  const initialOnly = typeof backoff === 'object' && backoff !== null && backoff.initial !== undefined && backoff.max === undefined;
  const max = initialOnly ? Math.max(RELAY_BACKOFF.max, parseDuration(backoff.initial!, 'backoff.initial')) : RELAY_BACKOFF.max;
  return resolveRetryPolicy(backoff, { ...RELAY_BACKOFF, max }, 'backoff');
}

function intIn(value: number, field: string, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`must be an integer from ${min} to ${max}, got ${String(value)}`, { path: [field] });
  }
  return value;
}
