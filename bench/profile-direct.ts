/** Profiles the direct path alone: `node --cpu-prof --import tsx bench/profile-direct.ts` (an embedded PostgreSQL under /tmp unless DATABASE_URL is set). */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, embedded } from '@ratchet/engine';

const trivial = workflow({ name: 'profile-trivial', version: '1', input: z.object({ k: z.number().int() }) }, async (ctx, { k }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) last = await ctx.step('s', () => i);
  return last;
});
const engine = await createEngine({ database: process.env.DATABASE_URL ?? embedded({ dataDir: '/tmp/ratchet-profile/data' }), workflows: [trivial], poolSize: 12 });
await engine.migrate();
const runs = Number(process.env.RUNS ?? 2000);
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: 8 }, async () => {
  while (next < runs) {
    next += 1;
    await engine.run(trivial, { k: 5 });
  }
}));
console.log(`${runs} runs in ${Math.round(performance.now() - t0)} ms`);
await engine.close();
