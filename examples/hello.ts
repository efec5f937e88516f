/**
 * The smallest Ratchet program: a workflow of two steps around a 2-second sleep, on the default
 * embedded PostgreSQL (`.ratchet/postgres` under the current directory).
 *
 * `engine.run` executes the run inline until it suspends on the sleep; the run then holds no
 * worker and no memory. A worker claims it when the sleep is over, replays the first step from
 * its record, runs the second, and completes the run.
 *
 *   cd /work/main && pnpm exec tsx examples/hello.ts
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';

const hello = workflow(
  { name: 'hello', version: '1', input: z.object({ name: z.string() }) },
  async (ctx, { name }) => {
    const greeting = await ctx.step('compose', () => `Hello, ${name}!`);
    await ctx.sleep('pause', '2s');
    const shout = await ctx.step('shout', () => greeting.toUpperCase());
    // After a sleep, ctx.now() is the sleep's target time: the same on every replay.
    return { greeting, shout, wokeAt: ctx.now().toISOString() };
  },
);

const engine = await createEngine({ workflows: [hello] });
try {
  await engine.migrate();

  const { runId, state } = await engine.run(hello, { name: 'Ada' });
  console.log(`run ${runId} is ${state}`); // sleeping: the 2 s sleep suspended it

  const worker = engine.worker();
  await worker.start();
  const output = await engine.client.handle(runId).result({ timeout: '30s' });
  console.log('output:', output);
  await worker.stop();
} finally {
  await engine.close(); // also stops the embedded server if this process started it
}
