/**
 * Resolving `createEngine({ database })` into a node-postgres pool.
 *
 * `database` is a Postgres URL, a `pg.Pool` (the caller keeps ownership: the engine never ends
 * it), or `embedded({ dataDir })`, which is also the default: a real PostgreSQL from npm, shared
 * by every process that points at the same data dir.
 */
import pg from 'pg';
import { ValidationError } from '@ratchet/sdk';
import { embedded, isEmbeddedDatabase, startEmbedded, type EmbeddedDatabase, type EmbeddedServer } from '../embedded/embedded.js';

export type DatabaseOption = string | pg.Pool | EmbeddedDatabase;

export interface Database {
  readonly pool: pg.Pool;
  /** The embedded server, when the engine runs on one. */
  readonly embedded?: EmbeddedServer;
  /** Ends what the engine opened (its pool, a server it started); leaves a caller's pool alone. */
  close(): Promise<void>;
}

/** Pool size. Default 10: a worker needs one connection per run in flight plus its claim loop. */
export const DEFAULT_POOL_SIZE = 10;

export async function openDatabase(option: DatabaseOption | undefined, poolSize = DEFAULT_POOL_SIZE): Promise<Database> {
  if (option instanceof pg.Pool) {
    hearClientErrors(option);
    return { pool: option, close: async () => {} };
  }
  if (typeof option === 'string') {
    if (!/^postgres(ql)?:\/\//.test(option)) {
      throw new ValidationError('database must be a postgres:// URL, a pg.Pool or embedded()', { path: ['database'] });
    }
    const pool = newPool(option, poolSize);
    return { pool, close: () => pool.end() };
  }
  const descriptor = option ?? embedded();
  if (!isEmbeddedDatabase(descriptor)) {
    throw new ValidationError('database must be a postgres:// URL, a pg.Pool or embedded()', { path: ['database'] });
  }
  const server = await startEmbedded(descriptor.options);
  const pool = newPool(server.url, poolSize);
  return {
    pool,
    embedded: server,
    close: async () => {
      await pool.end();
      await server.release();
    },
  };
}

/**
 * How long a checkout may wait for a connection (an idle one, or a new one to finish its
 * handshake) before it fails. node-pg waits for ever by default: a connection attempt that never
 * completes (a server caught mid-restart) or a pool drained by a stuck caller would then hang
 * every statement behind it — the claim loop included — while the process looks alive. A failed
 * checkout is a transient error: the statement is repeated, a checkpoint gives its segment up.
 */
export const CHECKOUT_TIMEOUT_MS = 15_000;

function newPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    application_name: 'ratchet',
    connectionTimeoutMillis: CHECKOUT_TIMEOUT_MS,
    // A server that vanished without closing the socket (a host lost, a network cut) is found by
    // TCP keepalive instead of never.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Before the connection is handed out: a SET sent from the 'connect' event raced the first
    // checkout's own statement on the same client (node-pg warns; pg 9 refuses). A failure here
    // fails the checkout, a transient error like any other connection failure.
    onConnect: (client) => client.query(GENERIC_PLANS),
  });
  // An idle client that loses its server (restart, pg_terminate_backend) emits 'error' on the
  // pool; unhandled, that would crash the process. The next checkout simply reconnects.
  pool.on('error', () => {});
  hearClientErrors(pool);
  return pool;
}

/**
 * The engine's statements are named prepared statements, planned once per connection — unless
 * PostgreSQL's `plan_cache_mode = auto` judges the generic plan costlier than a plan for the
 * values at hand, and then it plans again on every call. It does so for the claim (its generic
 * plan assumes 100 workflow pairs from `unnest($1)`; planning it costs ≈ 2.7 ms, four times its
 * execution) and for the start (a custom plan drops the tombstone probe of a keyless start):
 * measured, planning was most of a queued run's Postgres CPU. On the connections the engine
 * opens, its statements use their generic plans (test/schema/plans.test.ts checks the ones of
 * the hot path). A pool the caller passes in keeps its settings, and user code in a commit
 * transaction gets the database's default back (SET LOCAL … TO DEFAULT, runtime/commit.ts).
 */
export const GENERIC_PLANS = 'SET plan_cache_mode = force_generic_plan';

/**
 * A checked-out client whose backend dies mid-transaction (a restart, pg_terminate_backend)
 * fails its query AND emits 'error'; unheard, the event would crash the process. Every client
 * gets a listener when it connects: the failed query is what the engine acts on.
 */
function hearClientErrors(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
}
