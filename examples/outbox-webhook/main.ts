/**
 * The outbox relay publishing to a webhook, on the default embedded PostgreSQL.
 *
 *   cd /work/main && pnpm exec tsx examples/outbox-webhook/main.ts
 *
 * A workflow records each order's messages with `ctx.emit`: the step and its outbox row are one
 * statement, so a message exists exactly when its step does. The relay POSTs them to a webhook
 * (a `node:http` server on 127.0.0.1 standing in for another service) with the message key as
 * `Idempotency-Key`. Delivery is at least once: to show why that is enough, the consumer handles
 * one message and then drops the connection before answering (as a crash or a timeout would).
 * The relay records the failure, backs off and delivers it again; the consumer sees a key it has
 * already handled and acknowledges it without handling it twice.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, type Publish } from '@ratchet/engine';

const order = workflow({ name: 'webhook-order', version: '1', input: z.object({ orderId: z.string(), cents: z.number().int() }) }, async (ctx, { orderId, cents }) => {
  const total = await ctx.step('price', () => Math.round(cents * 1.2)); // with tax
  await ctx.emit('order.paid', { orderId, total });
  await ctx.emit('order.receipt', { orderId, email: `${orderId}@example.com` });
  return { orderId, total };
});

// ── the consumer: a webhook that deduplicates on the message key ──────────────────────────────
const handled = new Map<string, { topic: string; payload: unknown }>(); // a table with a unique key, in a real service
const deliveries = new Map<string, number>();
let dropOne = true;

async function webhook(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = req.headers['idempotency-key'];
  if (req.method !== 'POST' || typeof key !== 'string') return void res.writeHead(400).end();
  let body = '';
  for await (const chunk of req) body += chunk;
  const message = JSON.parse(body) as { topic: string; payload: unknown };
  deliveries.set(key, (deliveries.get(key) ?? 0) + 1);
  if (handled.has(key)) return void res.writeHead(200).end('duplicate, already handled');
  handled.set(key, message);
  if (dropOne && message.topic === 'order.receipt') {
    dropOne = false;
    return void res.socket?.destroy(); // handled, but the answer never reaches the relay
  }
  res.writeHead(200).end('handled');
}

// ── the publisher: one POST per message; a failed one is retried alone ────────────────────────
function webhookPublisher(url: string): Publish {
  return async (messages, { signal }) => {
    const results = await Promise.allSettled(
      messages.map(async (m) => {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': m.key },
          body: JSON.stringify({ topic: m.topic, payload: m.payload, runId: m.runId, attempt: m.attempt }),
          signal,
        });
        if (!response.ok) throw new Error(`webhook answered ${response.status}`);
      }),
    );
    const failed = messages.flatMap((m, i) => {
      const r = results[i]!;
      return r.status === 'rejected' ? [{ id: m.id, error: r.reason }] : [];
    });
    return { failed };
  };
}

const server = createServer((req, res) => void webhook(req, res).catch(() => res.writeHead(500).end()));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`;

const engine = await createEngine({ workflows: [order] });
try {
  await engine.migrate();
  const relay = engine.relay({ publish: webhookPublisher(url), publishTimeout: '10s', backoff: { initial: '300ms', jitter: 0 } });
  await relay.start();

  const suffix = Date.now().toString(36);
  const runs = await Promise.all(['A', 'B', 'C'].map((o, i) => engine.run(order, { orderId: `${o}-${suffix}`, cents: 1_000 * (i + 1) })));
  const runIds = runs.map((r) => r.runId);
  console.log(`3 orders completed; their 6 messages are in ratchet.outbox, published to ${url}`);

  // Wait until the relay has marked every message of these runs dispatched.
  for (;;) {
    const { rows } = await engine.pool.query(`SELECT count(*)::int AS n FROM ratchet.outbox WHERE task_id = ANY($1::uuid[]) AND dispatched_at IS NULL`, [runIds]);
    if (rows[0].n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await relay.stop();

  const { rows } = await engine.pool.query(
    `SELECT message_key AS key, topic, attempts, last_error::jsonb ->> 'message' AS "lastError" FROM ratchet.outbox WHERE task_id = ANY($1::uuid[]) ORDER BY id`,
    [runIds],
  );
  console.table(rows.map((r) => ({ key: r.key, topic: r.topic, 'relay attempts': r.attempts, 'webhook deliveries': deliveries.get(r.key), 'handled once': handled.has(r.key), 'last error': r.lastError ?? '' })));
  console.log(`relay stats: ${JSON.stringify(relay.stats)}`);
  console.log(`the webhook received ${[...deliveries.values()].reduce((a, b) => a + b, 0)} deliveries and handled ${handled.size} messages: one each`);
} finally {
  await engine.close(); // also stops the embedded server if this process started it
  server.close();
}
