/**
 * A worker process for the checkout demo: attaches to the embedded PostgreSQL the demo started
 * (same data dir) and executes checkouts until it is stopped — or killed.
 */
import { createEngine } from '@ratchet/engine';
import { checkout, usePaymentsDatabase } from './workflow.js';

const engine = await createEngine({ workflows: [checkout], leaseMs: 2_000, effectMargin: '1s' });
usePaymentsDatabase(process.env.PAYMENTS_URL!);
const worker = engine.worker({ concurrency: 2, pollMs: 250, workerId: `worker-pid-${process.pid}` });
await worker.start();
process.stdout.write(`ready\n`);
process.on('SIGTERM', () => void worker.stop().then(() => engine.close()).then(() => process.exit(0)));
