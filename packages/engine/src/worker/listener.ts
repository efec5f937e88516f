/**
 * One LISTEN connection per engine, shared by the worker loop (work available) and callers
 * awaiting results (run done). Two loops would double the empty claims (DESIGN §7).
 *
 * The connection is held out of the pool for the engine's life. When it drops (a Postgres
 * restart, pg_terminate_backend), it reconnects with backoff, re-LISTENs, and tells every
 * subscriber `reconnected` so it re-checks what it may have missed meanwhile.
 */
import type pg from 'pg';

type Handler = (payload: string | undefined) => void;

export class Listener {
  readonly #channels = new Map<string, Set<Handler>>();
  #client: pg.PoolClient | undefined;
  #connecting: Promise<pg.PoolClient> | undefined;
  #closed = false;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  /** Calls `handler(payload)` on each notification of `channel`, and `handler(undefined)` after a reconnect. */
  async subscribe(channel: string, handler: Handler): Promise<() => void> {
    let handlers = this.#channels.get(channel);
    const fresh = !handlers;
    if (!handlers) {
      handlers = new Set();
      this.#channels.set(channel, handlers);
    }
    handlers.add(handler);
    const client = await this.#connect();
    if (fresh) await client.query(`LISTEN ${channel}`);
    return () => {
      handlers.delete(handler);
    };
  }

  #connect(): Promise<pg.PoolClient> {
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= (async () => {
      const client = await this.pool.connect();
      client.on('notification', (msg) => {
        for (const handler of this.#channels.get(msg.channel) ?? []) handler(msg.payload ?? '');
      });
      client.on('error', (error) => this.#dropped(client, error));
      client.on('end', () => this.#dropped(client, undefined));
      try {
        for (const channel of this.#channels.keys()) await client.query(`LISTEN ${channel}`);
      } catch (error) {
        // Cut off between connecting and listening (a restart): give the connection back broken,
        // or the pool would lose it for good; the caller reconnects.
        client.release(true);
        throw error;
      }
      this.#client = client;
      return client;
    })().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  #dropped(client: pg.PoolClient, error: unknown): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    client.release(true);
    if (this.#closed) return;
    if (error) this.onError(error);
    this.#reconnect(250);
  }

  #reconnect(delayMs: number): void {
    this.#retryTimer = setTimeout(() => {
      this.#connect().then(
        () => {
          for (const handlers of this.#channels.values()) for (const handler of handlers) handler(undefined);
        },
        (error: unknown) => {
          this.onError(error);
          if (!this.#closed) this.#reconnect(Math.min(delayMs * 2, 10_000));
        },
      );
    }, delayMs);
    this.#retryTimer.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    const client = this.#client ?? (await this.#connecting?.catch(() => undefined));
    this.#client = undefined;
    if (client) {
      await client.query('UNLISTEN *').catch(() => {});
      client.release();
    }
  }
}
