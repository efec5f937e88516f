/**
 * CLI commands on runs: start, list, show, signal, cancel, resolve, retry. Each is a thin shell
 * over one client method (the same the web view calls), its output a table or `--json`.
 */
import { z } from 'zod';
import { workflow, type Workflow } from '@ratchet/sdk';
import { TASK_STATES, type TaskState } from '../schema/index.js';
import { loadModule, usageError, type CommandContext, type CommandSpec } from './command.js';
import { age, brief, json, table } from './format.js';
import { renderRun } from './timeline.js';

const TRACE_OPTION = {
  type: 'string' as const,
  value: 'template',
  description: 'Trace link template, e.g. http://localhost:16686/trace/{traceId} (Jaeger). Default: $RATCHET_TRACE_URL',
};

export const start: CommandSpec = {
  name: 'start',
  args: '<workflow>',
  summary: 'Start a run of a workflow and print its id.',
  details: [
    'With --module, the input is validated against the workflow the module exports (latest version',
    'unless --version). Without it, --version is required and the worker validates the input.',
  ].join('\n'),
  json: true,
  options: {
    input: { type: 'string', short: 'i', value: 'json|@file', description: 'The input: JSON, or @path to a JSON file. Default: null' },
    version: { type: 'string', value: 'version', description: 'Workflow version' },
    module: { type: 'string', short: 'm', value: 'path', description: 'Module exporting the workflow. Default: $RATCHET_MODULE' },
    key: { type: 'string', value: 'key', description: 'Idempotency key: starting again with it returns the same run' },
    'concurrency-key': { type: 'string', value: 'key', description: 'Concurrency key' },
    priority: { type: 'string', value: 'n', description: 'Priority (integer; higher is claimed first)' },
    wait: { type: 'boolean', description: 'Wait for the result and print it (a worker must be running)' },
    timeout: { type: 'string', value: 'duration', description: 'With --wait: give up after this long. Default: wait forever' },
  },
  async run(ctx) {
    const name = ctx.arg(0, 'workflow');
    const version = ctx.string('version');
    const modulePath = ctx.string('module') ?? (ctx.io.env.RATCHET_MODULE || undefined);
    let wf: Workflow<any, any, any>;
    if (modulePath) {
      const mod = await loadModule(modulePath, ctx.io.cwd);
      const candidates = mod.workflows.filter((w) => w.name === name && (version === undefined || w.version === version));
      if (candidates.length === 0) {
        const known = mod.workflows.map((w) => `${w.name}@${w.version}`).join(', ') || 'none';
        throw usageError(`${modulePath} exports no workflow ${name}${version ? `@${version}` : ''} (it exports: ${known})`);
      }
      wf = candidates.sort((a, b) => b.version.localeCompare(a.version, undefined, { numeric: true }))[0]!;
    } else {
      if (!version) throw usageError('give --version (or --module to take the workflow, and its input schema, from your code)');
      wf = workflow({ name, version, input: z.unknown() }, async () => {
        throw new Error('started from the CLI: this stand-in never runs');
      });
    }
    const input = ctx.string('input') === undefined ? null : await ctx.jsonValue('input', ctx.string('input')!);
    const priority = ctx.integer('priority');
    const timeoutMs = ctx.durationMs('timeout');
    const engine = await ctx.engine();
    const run = await engine.client.start(wf, input, {
      ...(ctx.tenantId ? { tenantId: ctx.tenantId } : {}),
      ...(ctx.string('key') ? { idempotencyKey: ctx.string('key')! } : {}),
      ...(ctx.string('concurrency-key') ? { concurrencyKey: ctx.string('concurrency-key')! } : {}),
      ...(priority !== undefined ? { priority } : {}),
    });
    if (!ctx.flag('wait')) {
      if (ctx.json) ctx.out(json({ runId: run.runId, workflow: wf.name, version: wf.version }));
      else ctx.out(run.runId);
      return;
    }
    const output = await run.result(timeoutMs === undefined ? {} : { timeout: timeoutMs });
    if (ctx.json) ctx.out(json({ runId: run.runId, workflow: wf.name, version: wf.version, state: 'completed', output }));
    else ctx.out(`${run.runId} completed: ${brief(output, 1000)}`);
  },
};

export function parseStates(value: string | undefined): TaskState[] | undefined {
  if (value === undefined) return undefined;
  const states = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of states) {
    if (!(TASK_STATES as readonly string[]).includes(s)) throw usageError(`--state: unknown state "${s}" (one of ${TASK_STATES.join(', ')})`);
  }
  return states as TaskState[];
}

export const list: CommandSpec = {
  name: 'list',
  summary: 'List runs, newest first.',
  json: true,
  options: {
    state: { type: 'string', short: 's', value: 'states', description: `Only these states, comma-separated (${TASK_STATES.join(', ')})` },
    workflow: { type: 'string', short: 'w', value: 'name', description: 'Only runs of this workflow' },
    version: { type: 'string', value: 'version', description: 'Only runs of this workflow version' },
    'older-than': { type: 'string', value: 'duration', description: 'Only runs created at least this long ago (e.g. 1h)' },
    'newer-than': { type: 'string', value: 'duration', description: 'Only runs created within this long (e.g. 1d)' },
    limit: { type: 'string', short: 'n', value: 'n', description: 'At most this many runs (1–1000). Default 50' },
  },
  async run(ctx) {
    const states = parseStates(ctx.string('state'));
    const older = ctx.durationMs('older-than');
    const newer = ctx.durationMs('newer-than');
    const limit = ctx.integer('limit') ?? 50;
    const engine = await ctx.engine();
    const now = await dbNow(ctx);
    const runs = await engine.client.list({
      ...(ctx.tenantId ? { tenantId: ctx.tenantId } : {}),
      ...(states ? { state: states } : {}),
      ...(ctx.string('workflow') ? { workflow: ctx.string('workflow')! } : {}),
      ...(ctx.string('version') ? { version: ctx.string('version')! } : {}),
      ...(older !== undefined ? { createdBefore: new Date(now.getTime() - older) } : {}),
      ...(newer !== undefined ? { createdAfter: new Date(now.getTime() - newer) } : {}),
      limit,
    });
    if (ctx.json) return ctx.out(json(runs));
    if (runs.length === 0) return ctx.out('no runs match');
    ctx.out(
      table(
        ['RUN', 'WORKFLOW', 'STATE', 'CREATED', 'UPDATED', 'DETAIL'],
        runs.map((r) => [
          r.runId,
          `${r.workflow}@${r.version}`,
          r.state,
          age(r.createdAt, now),
          age(r.updatedAt, now),
          r.error ? `${r.error.code ?? r.error.name}: ${brief(r.error.message, 60).replace(/^"|"$/g, '')}` : r.wakeAt ? `wakes ${age(r.wakeAt, now)}` : r.idempotencyKey ? `key ${r.idempotencyKey}` : '',
        ]),
      ),
    );
  },
};

/** ratchet.now(): ages are shown against the database's clock (which a test may shift). */
async function dbNow(ctx: CommandContext): Promise<Date> {
  const engine = await ctx.engine();
  const { rows } = await engine.pool.query<{ now: Date }>('SELECT ratchet.now() AS now');
  return rows[0]!.now;
}

export const show: CommandSpec = {
  name: 'show',
  args: '<runId>',
  summary: 'Show a run as a timeline: steps, effects, sleeps and waits, contracts, signals, children, events, trace link.',
  details: '--json prints the whole record (the history format the replay helper of @ratchet/engine/testing reads).',
  json: true,
  options: { 'trace-url': TRACE_OPTION },
  async run(ctx) {
    const runId = ctx.arg(0, 'runId');
    const engine = await ctx.engine();
    const detail = await engine.client.inspect(runId, ctx.tenantId ? { tenantId: ctx.tenantId } : {});
    if (ctx.json) return ctx.out(json(detail));
    ctx.out(renderRun(detail, ctx.string('trace-url') ?? (ctx.io.env.RATCHET_TRACE_URL || undefined), await dbNow(ctx)));
  },
};

export const signal: CommandSpec = {
  name: 'signal',
  args: '<runId> <name>',
  summary: 'Send a signal to a run (stored first: a run not yet waiting receives it when it waits).',
  json: true,
  options: {
    payload: { type: 'string', short: 'p', value: 'json|@file', description: 'The payload: JSON, or @path. Default: null' },
    key: { type: 'string', value: 'key', description: 'Idempotency key: a retried send is stored once' },
  },
  async run(ctx) {
    const runId = ctx.arg(0, 'runId');
    const name = ctx.arg(1, 'name');
    const payload = ctx.string('payload') === undefined ? null : await ctx.jsonValue('payload', ctx.string('payload')!);
    const engine = await ctx.engine();
    const sent = await engine.client.signal(runId, name, payload, {
      ...(ctx.tenantId ? { tenantId: ctx.tenantId } : {}),
      ...(ctx.string('key') ? { idempotencyKey: ctx.string('key')! } : {}),
    });
    if (ctx.json) ctx.out(json({ runId, name, ...sent }));
    else ctx.out(`signal ${name} sent to ${runId} (${sent.signalId})`);
  },
};

export const cancel: CommandSpec = {
  name: 'cancel',
  args: '<runId>',
  summary: 'Cancel a run and its children (a running run is asked to stop at its next step).',
  json: true,
  async run(ctx) {
    const runId = ctx.arg(0, 'runId');
    const engine = await ctx.engine();
    const result = await engine.client.cancel(runId, ctx.tenantId ? { tenantId: ctx.tenantId } : {});
    if (ctx.json) return ctx.out(json({ runId, ...result }));
    if (result.cancelled.length === 0 && result.requested.length === 0) return ctx.out(`${runId} had already finished: nothing to cancel`);
    if (result.cancelled.length > 0) ctx.out(`cancelled ${result.cancelled.length} run(s): ${result.cancelled.join(', ')}`);
    if (result.requested.length > 0) ctx.out(`asked ${result.requested.length} running run(s) to stop: ${result.requested.join(', ')}`);
  },
};

export const resolve: CommandSpec = {
  name: 'resolve',
  args: '<runId> <stepKey>',
  summary: 'Settle the step a parked run waits on (an at-most-once effect whose outcome was lost) with the outcome you established.',
  json: true,
  options: {
    result: { type: 'string', value: 'json|@file', description: 'The step succeeded with this result' },
    error: { type: 'string', value: 'message', description: 'The step failed with this message' },
  },
  async run(ctx) {
    const runId = ctx.arg(0, 'runId');
    const stepKey = ctx.arg(1, 'stepKey');
    const result = ctx.string('result');
    const error = ctx.string('error');
    if ((result === undefined) === (error === undefined)) throw usageError('give exactly one of --result <json> or --error <message>');
    const outcome = result !== undefined ? { result: await ctx.jsonValue('result', result) } : { error: error! };
    const engine = await ctx.engine();
    await engine.client.resolve(runId, stepKey, outcome, ctx.tenantId ? { tenantId: ctx.tenantId } : {});
    if (ctx.json) ctx.out(json({ runId, stepKey, state: 'result' in outcome ? 'succeeded' : 'failed' }));
    else ctx.out(`${stepKey} of ${runId} settled as ${'result' in outcome ? 'succeeded' : 'failed'}; the run resumes`);
  },
};

export const retry: CommandSpec = {
  name: 'retry',
  args: '<runId>',
  summary: 'Re-run a failed run from its failure point: recorded steps are kept, the failed step runs again.',
  details: 'Failed child runs behind a failed child step are retried first. See docs/cli.md for what "failure point" means.',
  json: true,
  async run(ctx) {
    const runId = ctx.arg(0, 'runId');
    const engine = await ctx.engine();
    const result = await engine.client.retry(runId, ctx.tenantId ? { tenantId: ctx.tenantId } : {});
    if (ctx.json) return ctx.out(json(result));
    ctx.out(`${result.runId} is pending again${result.rerun.length > 0 ? `; runs again from ${result.rerun.join(', ')}` : '; its code runs again over its records'}`);
    if (result.children.length > 0) ctx.out(`retried failed child run(s) first: ${result.children.join(', ')}`);
  },
};

