/**
 * A worker process of the triage demo: attaches to the embedded PostgreSQL the demo started
 * (same data dir) and runs triage until it is stopped — or killed. With PAUSE_BEFORE_COMMIT=n it
 * announces its n-th commit ("about to commit") and pauses there, so the demo can SIGKILL it
 * between a sealed contract and its commit.
 */
import { createEngine } from '@ratchet/engine';
import { engineOptions } from './engine.js';
import { useModelDatabase } from './workflow.js';

const pauseAt = Number(process.env.PAUSE_BEFORE_COMMIT ?? 0);
let commits = 0;
const engine = await createEngine({
  ...engineOptions,
  faults: {
    beforeCommit: async ({ runId }) => {
      commits += 1;
      if (commits === pauseAt) {
        process.stdout.write(`about to commit ${runId}\n`);
        await new Promise((resolve) => setTimeout(resolve, 60_000));
      }
    },
  },
});
useModelDatabase(process.env.MODEL_URL!);
const worker = engine.worker({ concurrency: 3, pollMs: 250, workerId: `worker-pid-${process.pid}` });
await worker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void worker.stop().then(() => engine.close()).then(() => process.exit(0)));
