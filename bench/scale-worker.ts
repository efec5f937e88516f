/**
 * A worker process for bench/scale.ts: one engine on DATABASE_URL, one worker, driven by lines
 * on stdin and answering with one JSON line on stdout per command.
 *
 *   SCALE_KIND=sleeper|trivial SCALE_CONCURRENCY=50 DATABASE_URL=postgres://… \
 *     node --expose-gc --import tsx scale-worker.ts
 *
 *   sleeper   steps once, then ctx.sleep('nap', '1h'): the run suspends and the worker must forget it
 *   trivial   5 trivial steps (the throughput workload of bench/main.ts)
 *
 * Commands (stdin):  go     starts the worker (claiming begins)          → {"reply":"go"}
 *                    mem    global.gc(), then process.memoryUsage()      → {"reply":"mem","memory":{…},"stats":{…}}
 *                    stats  the worker's counters                        → {"reply":"stats","stats":{…}}
 *                    stop   stops the worker, closes the engine, exits   → {"reply":"stop","stats":{…}}
 * Before the first command it warms up (trivial: 20 direct runs) and prints {"reply":"ready"}.
 *
 * bench/scale.ts imports the workflow definitions from here, so both sides start and run the
 * very same (name, version).
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, type Worker } from '@ratchet/engine';

export const trivial = workflow({ name: 'scale-trivial', version: '1', input: z.object({ k: z.number().int() }) }, async (ctx, { k }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) last = await ctx.step('s', () => i);
  return last;
});

export const sleeper = workflow({ name: 'scale-sleeper', version: '1', input: z.object({ n: z.number().int() }) }, async (ctx, { n }) => {
  const first = await ctx.step('first', () => n);
  await ctx.sleep('nap', '1h');
  return first;
});

export const KINDS = { trivial, sleeper } as const;
export type Kind = keyof typeof KINDS;

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  const kind = process.env.SCALE_KIND as Kind | undefined;
  const concurrency = Number(process.env.SCALE_CONCURRENCY ?? '8');
  if (!url) throw new Error('scale-worker: DATABASE_URL is required');
  if (!kind || !(kind in KINDS)) throw new Error(`scale-worker: SCALE_KIND must be one of ${Object.keys(KINDS).join(', ')}`);
  if (typeof global.gc !== 'function') throw new Error('scale-worker: run with node --expose-gc');
  const wf = KINDS[kind];

  let errors = 0;
  const engine = await createEngine({
    database: url,
    workflows: [wf],
    poolSize: concurrency + 3,
    onError: (error) => {
      errors += 1;
      if (errors <= 5) process.stderr.write(`[scale-worker ${process.pid}] ${(error as Error)?.stack ?? String(error)}\n`);
    },
  });
  let worker: Worker | undefined;
  const send = (reply: string, extra: Record<string, unknown> = {}) => process.stdout.write(`${JSON.stringify({ reply, pid: process.pid, ...extra })}\n`);
  const stats = () => ({ ...(worker?.stats ?? {}), errors });

  // Warm up: connections, prepared statements and JIT of the hot path, without leaving runs behind.
  if (kind === 'trivial') {
    for (let i = 0; i < 20; i += 1) {
      const r = await engine.run(trivial, { k: 5 });
      if (r.state !== 'completed') throw new Error(`scale-worker: warm-up run ${r.runId} ended ${r.state}`);
    }
  } else {
    await engine.pool.query('SELECT 1');
  }
  send('ready');

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const command = line.trim();
    if (command === 'go') {
      worker ??= engine.worker({ concurrency });
      await worker.start();
      send('go');
    } else if (command === 'mem') {
      // Two collections with a turn of the event loop between them: finalizers and weak
      // references released by the first are collected by the second.
      global.gc();
      await new Promise((resolve) => setImmediate(resolve));
      global.gc();
      send('mem', { memory: process.memoryUsage(), stats: stats() });
    } else if (command === 'stats') {
      send('stats', { stats: stats() });
    } else if (command === 'stop') {
      await worker?.stop();
      await engine.close();
      send('stop', { stats: stats() });
      break;
    } else if (command) {
      send('error', { message: `unknown command ${JSON.stringify(command)}` });
    }
  }
  lines.close();
  await engine.close();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`[scale-worker ${process.pid}] ${(error as Error)?.stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
