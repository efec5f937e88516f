/**
 * `ratchet worker <module>`: a worker process for the workflows (and commit actions, checks,
 * dependency tables) a module exports. SIGINT/SIGTERM stop it gracefully — no more claims,
 * in-flight runs finish within the grace period, the rest are handed back to other workers, the
 * worker's heartbeat row is removed — and a second signal exits at once (leases then expire).
 */
import { usageError, loadModule, type CommandSpec } from './command.js';

export const worker: CommandSpec = {
  name: 'worker',
  args: '<module>',
  summary: 'Run a worker for the workflows a module exports, until SIGINT/SIGTERM (graceful).',
  details: 'The module exports workflows (and actions, checks, drizzle tables its contracts use), directly or in arrays/objects.',
  options: {
    concurrency: { type: 'string', short: 'c', value: 'n', description: 'Runs executed at once. Default 10' },
    'lease-ms': { type: 'string', value: 'ms', description: 'Lease length. Default 30000' },
    'poll-ms': { type: 'string', value: 'ms', description: 'Longest idle wait between claims. Default 5000' },
    'heartbeat-ms': { type: 'string', value: 'ms', description: 'Heartbeat period of the worker row. Default 10000' },
    'grace-ms': { type: 'string', value: 'ms', description: 'How long shutdown lets in-flight runs finish. Default 10000' },
    migrate: { type: 'boolean', description: 'Apply pending migrations before starting' },
  },
  async run(ctx) {
    const path = ctx.arg(0, 'module');
    const mod = await loadModule(path, ctx.io.cwd);
    if (mod.workflows.length === 0) throw usageError(`${path} exports no workflow (made by workflow() from @ratchet/sdk)`);
    const concurrency = ctx.integer('concurrency') ?? 10;
    ctx.configure({
      workflows: mod.workflows,
      actions: mod.actions,
      checks: mod.checks,
      contractTables: mod.contractTables,
      poolSize: concurrency + 3,
      onError: (error) => ctx.err(`worker: ${(error as Error)?.message ?? String(error)}`),
    });
    const engine = await ctx.engine();
    if (ctx.flag('migrate')) await engine.migrate();
    const leaseMs = ctx.integer('lease-ms');
    const pollMs = ctx.integer('poll-ms');
    const heartbeatMs = ctx.integer('heartbeat-ms');
    const graceMs = ctx.integer('grace-ms');
    const w = engine.worker({
      concurrency,
      ...(leaseMs !== undefined ? { leaseMs } : {}),
      ...(pollMs !== undefined ? { pollMs } : {}),
      ...(heartbeatMs !== undefined ? { heartbeatMs } : {}),
      ...(graceMs !== undefined ? { shutdownGraceMs: graceMs } : {}),
    });
    let stopping: Promise<void> | undefined;
    const stopped = new Promise<void>((resolveStopped) => {
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) {
          ctx.err(`${signal} again: exiting now (leases of in-flight runs expire)`);
          process.exit(130);
        }
        ctx.err(`${signal}: stopping (in-flight runs finish, or are handed back)`);
        stopping = w.stop().then(resolveStopped);
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
    await w.start();
    ctx.out(`worker ${w.workerId} serving ${mod.workflows.map((f) => `${f.name}@${f.version}`).join(', ')} (concurrency ${concurrency})`);
    await stopped;
    const s = w.stats;
    ctx.out(`worker stopped: ${s.claimed} claimed, ${s.completed} completed, ${s.suspended} suspended, ${s.failed} failed`);
  },
};
