/**
 * CLI commands for operating the database: migrate, stats, workers, purge-tenant, retention.
 * Long jobs (purge, retention) draw a progress bar on stderr from their per-batch callbacks, so
 * stdout keeps only the result (a line, or `--json`).
 */
import { PURGE_POLICY } from '../tenants/tenants.js';
import { DEFAULT_TENANT_ID } from '../ids.js';
import { usageError, type CommandSpec } from './command.js';
import { age, duration, json, progressBar, table } from './format.js';

export const migrate: CommandSpec = {
  name: 'migrate',
  summary: 'Apply pending schema migrations (under an advisory lock: safe to run from many places at once).',
  json: true,
  async run(ctx) {
    const engine = await ctx.engine();
    const applied = await engine.migrate();
    const status = await engine.checkSchema();
    if (ctx.json) return ctx.out(json({ applied, known: status.known.length, pending: status.pending }));
    ctx.out(applied === 0 ? `schema up to date (${status.known.length} migrations)` : `applied ${applied} migration(s); schema up to date (${status.known.length} migrations)`);
  },
};

export const stats: CommandSpec = {
  name: 'stats',
  summary: 'Runs by state and version, failure ratio, contract backlog and p99 seal→commit, and the (workflow, version) pairs with runs but no live worker.',
  json: true,
  options: { since: { type: 'string', value: 'duration', description: 'Window for finished runs and contracts. Default 1h' } },
  async run(ctx) {
    const sinceMs = ctx.durationMs('since') ?? 3_600_000;
    const engine = await ctx.engine();
    const now = (await engine.pool.query<{ now: Date }>('SELECT ratchet.now() AS now')).rows[0]!.now;
    const report = await engine.stats({ ...(ctx.tenantId ? { tenantId: ctx.tenantId } : {}), since: new Date(now.getTime() - sinceMs) });
    if (ctx.json) return ctx.out(json(report));
    const byPair = new Map<string, Record<string, number>>();
    for (const r of report.runs) {
      const key = `${r.workflow}@${r.version}`;
      byPair.set(key, { ...(byPair.get(key) ?? {}), [r.state]: r.runs });
    }
    const states = ['pending', 'running', 'sleeping', 'waiting', 'parked', 'completed', 'failed', 'cancelled'];
    ctx.out('RUNS BY VERSION');
    ctx.out(byPair.size === 0 ? '  no runs' : indent(table(['WORKFLOW', ...states.map((s) => s.toUpperCase())], [...byPair].map(([k, v]) => [k, ...states.map((s) => String(v[s] ?? 0))]))));
    const f = report.finished;
    ctx.out('');
    ctx.out(`FINISHED IN THE LAST ${duration(sinceMs)}: ${f.completed} completed, ${f.failed} failed, ${f.cancelled} cancelled; failure ratio ${ratio(report.failureRatio)}`);
    const c = report.contracts;
    ctx.out(
      `CONTRACTS: sealed backlog ${c.sealedBacklog}${c.oldestSealedMs !== null ? ` (oldest ${duration(c.oldestSealedMs)})` : ''}; ${c.committed} committed, ${c.failed} failed (ratio ${ratio(c.failureRatio)}); ` +
        `seal→commit p50 ${c.sealToCommitP50Ms === null ? '-' : duration(c.sealToCommitP50Ms)}, p99 ${c.sealToCommitP99Ms === null ? '-' : duration(c.sealToCommitP99Ms)}`,
    );
    ctx.out('');
    const live = report.workers.filter((w) => w.live);
    ctx.out(`WORKERS: ${live.length} live${report.workers.length > live.length ? `, ${report.workers.length - live.length} gone` : ''}`);
    if (report.unserved.length === 0) {
      ctx.out('every (workflow, version) with runs to move has a live worker');
    } else {
      ctx.out('NO LIVE WORKER FOR:');
      ctx.out(indent(table(['WORKFLOW', 'RUNS', 'OLDEST'], report.unserved.map((u) => [`${u.workflow}@${u.version}`, String(u.runs), age(u.oldestAt, now)]))));
    }
  },
};

export const workers: CommandSpec = {
  name: 'workers',
  summary: 'List workers (live ones first): what they serve and when they last beat.',
  json: true,
  async run(ctx) {
    const engine = await ctx.engine();
    const report = await engine.stats(ctx.tenantId ? { tenantId: ctx.tenantId } : {});
    const now = (await engine.pool.query<{ now: Date }>('SELECT ratchet.now() AS now')).rows[0]!.now;
    if (ctx.json) return ctx.out(json(report.workers));
    if (report.workers.length === 0) return ctx.out('no workers');
    ctx.out(
      table(
        ['WORKER', 'LIVE', 'STARTED', 'LAST BEAT', 'CONCURRENCY', 'WORKFLOWS'],
        report.workers.map((w) => [w.id, w.live ? 'yes' : 'gone', age(w.startedAt, now), age(w.heartbeatAt, now), String(w.concurrency), w.workflows.map((p) => `${p.name}@${p.version}`).join(', ')]),
      ),
    );
  },
};

export const purgeTenant: CommandSpec = {
  name: 'purge-tenant',
  args: '<tenantId>',
  summary: "Delete every row of a tenant, in resumable batches, with a progress bar (the audit row stays).",
  details: `Irreversible: asks for --yes. Policy: ${PURGE_POLICY}. See docs/tenancy.md.`,
  json: true,
  options: {
    yes: { type: 'boolean', short: 'y', description: 'Confirm the purge' },
    'batch-size': { type: 'string', value: 'n', description: 'Runs per batch. Default 500' },
  },
  async run(ctx) {
    const tenantId = ctx.arg(0, 'tenantId');
    if (!ctx.flag('yes')) throw usageError(`purging tenant ${tenantId} deletes all of its runs and cannot be undone; add --yes`);
    const batchSize = ctx.integer('batch-size');
    const engine = await ctx.engine();
    const { rows } = await engine.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ratchet.tasks WHERE tenant_id = $1', [tenantId.toLowerCase()]).catch(() => ({ rows: [{ n: 0 }] }));
    const total = rows[0]?.n ?? 0;
    const bar = progressBar(ctx.io.stderr, 'purging');
    const report = await engine.tenants.purge(tenantId, {
      ...(batchSize !== undefined ? { batchSize } : {}),
      onProgress: (p) => bar.update(p.removed.tasks ?? 0, Math.max(total, p.removed.tasks ?? 0), `batch ${p.batches}`),
    });
    bar.finish(`purged tenant ${tenantId} in ${report.batches} batch(es)`);
    if (ctx.json) return ctx.out(json(report));
    ctx.out(`removed ${Object.entries(report.removed).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`).join(', ') || 'nothing'} (purge ${report.purgeId})`);
  },
};

export const retention: CommandSpec = {
  name: 'retention',
  summary: 'Remove finished runs older than a cutoff (their idempotency keys live on as tombstones), with a progress bar.',
  details: 'See docs/retention.md for what is kept and for how long.',
  json: true,
  options: {
    'older-than': { type: 'string', value: 'duration', description: 'Remove runs that finished at least this long ago. Default 30d' },
    'keep-keys-for': { type: 'string', value: 'duration', description: 'How long removed runs\u2019 keys are still recognised. Default 90d' },
    'batch-size': { type: 'string', value: 'n', description: 'Runs per batch. Default 500' },
    'all-tenants': { type: 'boolean', description: 'Every tenant (default: only --tenant, or the default tenant)' },
  },
  async run(ctx) {
    const olderThan = ctx.durationMs('older-than');
    const keepKeysFor = ctx.durationMs('keep-keys-for');
    const batchSize = ctx.integer('batch-size');
    const engine = await ctx.engine();
    const bar = progressBar(ctx.io.stderr, 'removing');
    const report = await engine.retention.run({
      ...(olderThan !== undefined ? { olderThan } : {}),
      ...(keepKeysFor !== undefined ? { keepKeysFor } : {}),
      ...(batchSize !== undefined ? { batchSize } : {}),
      ...(ctx.flag('all-tenants') ? {} : { tenantId: ctx.tenantId ?? DEFAULT_TENANT_ID }),
      onProgress: (p) => bar.update(p.removed.runs, Math.max(p.total, p.removed.runs), p.phase === 'keys' ? 'expired keys' : `batch ${p.batch}`),
    });
    bar.finish(`retention done in ${report.batches} batch(es)`);
    if (ctx.json) return ctx.out(json(report));
    const r = report.removed;
    ctx.out(`removed ${r.runs} run(s) finished before ${report.cutoff.toISOString()} (${r.operations} steps, ${r.events} events); ${r.tombstones} key tombstone(s) written, ${r.expiredKeys} expired removed`);
  },
};

function ratio(r: number | null): string {
  return r === null ? '-' : `${(r * 100).toFixed(1)}%`;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
