/**
 * Named fault-injection points. Tests hook them to crash (SIGKILL the process), delay or drop
 * the connection at an exact phase of a run, so "a worker dies between reserve and execute" is a
 * deterministic test rather than a hope. Production passes no hooks; each point then costs one
 * property lookup.
 */
export const FAULT_POINTS = [
  'afterClaim',
  'afterReserveBeforeExecute',
  'afterExecuteBeforeRecord',
  'afterRecord',
  'beforeStepRecord',
  'duringLeaseRenewal',
  'beforeCommit',
  'beforeCommitRetry',
  'afterCommitBeforePublish',
  // ctx.child, before the statement that starts the child run (runId: the parent).
  'beforeChildStart',
  // A retention batch done but not committed (runId 'retention', attempt = the batch number).
  'retentionBeforeCommit',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultContext {
  readonly point: FaultPoint;
  readonly runId: string;
  readonly stepKey?: string;
  readonly attempt?: number;
}

export type FaultHooks = Partial<Record<FaultPoint, (context: FaultContext) => void | Promise<void>>>;

export async function fault(hooks: FaultHooks | undefined, context: FaultContext): Promise<void> {
  const hook = hooks?.[context.point];
  if (hook) await hook(context);
}

/** What a fault does at its point (see `faultsFromEnv`). */
export type FaultAction = { kind: 'kill' } | { kind: 'delay'; ms: number } | { kind: 'drop' };

export interface FaultsFromEnvOptions {
  /**
   * Cuts the process's database connections, for the `drop` action: the connections in use fail
   * with a connection error and the pool reconnects. Default: terminates every other backend of
   * DATABASE_URL's database (one fresh connection does it), as a restarting server would.
   */
  drop?: () => Promise<void>;
}

/**
 * Hooks from the RATCHET_FAULTS environment variable, for child processes in crash tests:
 * a comma-separated list of `<point>:<action>[@n|@*]`, where the action is
 *
 * - `kill`        SIGKILLs the process at that point;
 * - `delay=<ms>`  holds the run there for that long (a GC pause, a slow network);
 * - `drop`        cuts the database connections there (a restart, pg_terminate_backend), then goes on.
 *
 * It fires the first time the point is reached; `@2` the second time; `@*` every time.
 * `RATCHET_FAULTS=afterReserveBeforeExecute:kill`, `duringLeaseRenewal:delay=800@*`, `beforeCommit:drop@2`.
 */
export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env, options: FaultsFromEnvOptions = {}): FaultHooks {
  const spec = env.RATCHET_FAULTS;
  if (!spec) return {};
  const hooks: FaultHooks = {};
  for (const item of spec.split(',')) {
    const match = /^(\w+):(kill|delay=(\d+)|drop)(?:@(\d+|\*))?$/.exec(item.trim());
    if (!match || !(FAULT_POINTS as readonly string[]).includes(match[1]!)) {
      throw new Error(
        `RATCHET_FAULTS: cannot read "${item}"; expected <point>:<kill|delay=ms|drop>[@n|@*] with a point of ${FAULT_POINTS.join(', ')}`,
      );
    }
    const action: FaultAction = match[2] === 'kill' ? { kind: 'kill' } : match[2] === 'drop' ? { kind: 'drop' } : { kind: 'delay', ms: Number(match[3]) };
    const every = match[4] === '*';
    const nth = every ? 0 : Number(match[4] ?? 1);
    const drop = options.drop ?? (() => dropConnections(env.DATABASE_URL));
    let seen = 0;
    hooks[match[1] as FaultPoint] = async () => {
      seen += 1;
      if (!every && seen !== nth) return;
      if (action.kind === 'kill') process.kill(process.pid, 'SIGKILL');
      else if (action.kind === 'delay') await new Promise((resolve) => setTimeout(resolve, action.ms));
      else await drop();
    };
  }
  return hooks;
}

/** Terminates every other backend connected to `url`'s database, through one short-lived connection. */
async function dropConnections(url: string | undefined): Promise<void> {
  if (!url) throw new Error('RATCHET_FAULTS: a drop action needs DATABASE_URL (or faultsFromEnv(env, { drop }))');
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  } finally {
    await client.end().catch(() => {});
  }
}
