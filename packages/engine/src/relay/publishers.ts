/**
 * Built-in publishers for `engine.relay({ publish })`.
 *
 * @example
 * ```ts
 * import { notifyPublisher } from '@ratchet/engine';
 * const relay = engine.relay({ publish: notifyPublisher() });   // NOTIFY on each message's topic
 * await relay.start();
 * // a consumer: LISTEN "order.paid"; each payload is { id, key, topic, tenantId, runId, attempt, createdAt, payload }
 * ```
 *
 * `notifyPublisher` sends the batch with `pg_notify` in ONE statement on the engine's pool: the
 * notifications of a batch are delivered together, in order, when it commits, or not at all.
 * Postgres refuses a NOTIFY payload of 8000 bytes or more and a channel name over 63 bytes; such
 * a message is reported failed with a typed error (`NotifyPayloadTooLargeError`, or a
 * `ValidationError` naming `channel`) and stays in the outbox with it in `last_error`, retried
 * after the backoff, while the rest of the batch is published. LISTEN/NOTIFY reaches only
 * sessions listening at that moment: it suits cache invalidation and live updates, not a
 * consumer that must see every message after a restart.
 */
import { NotifyPayloadTooLargeError, RatchetError, ValidationError } from '@ratchet/sdk';
import type { OutboxMessage, Publish, PublishResult } from './relay.js';

/** Postgres refuses NOTIFY payloads of this many bytes or more (default build). */
export const NOTIFY_PAYLOAD_LIMIT = 8000;
/** NAMEDATALEN − 1: the longest channel name Postgres accepts. */
const MAX_CHANNEL_BYTES = 63;


export interface NotifyPublisherOptions {
  /** The channel every message is sent on. Default: each message's topic. */
  channel?: string;
}

/** What a listener receives as the notification payload (JSON). */
export interface NotifyPayload {
  id: string;
  key: string;
  topic: string;
  tenantId: string;
  runId: string;
  attempt: number;
  createdAt: string;
  payload: unknown;
}

/** Publishes each message with `pg_notify(channel, json)` on the engine's database. */
export function notifyPublisher(options: NotifyPublisherOptions = {}): Publish {
  if (typeof options !== 'object' || options === null) throw new ValidationError('must be an object like { channel }', { path: ['options'] });
  if (options.channel !== undefined) checkChannel(options.channel);
  return async (messages, { pool }) => {
    const failed: NonNullable<PublishResult['failed']>[number][] = [];
    const channels: string[] = [];
    const payloads: string[] = [];
    for (const message of messages) {
      const prepared = prepare(message, options.channel ?? message.topic);
      if (prepared instanceof RatchetError) failed.push({ id: message.id, error: prepared });
      else {
        channels.push(prepared.channel);
        payloads.push(prepared.payload);
      }
    }
    if (channels.length > 0) {
      await pool.query({
        name: 'ratchet_notify_publish',
        text: `SELECT count(pg_notify(m.channel, m.payload)) FROM unnest($1::text[], $2::text[]) AS m(channel, payload)`,
        values: [channels, payloads],
      });
    }
    return failed.length > 0 ? { failed } : undefined;
  };
}

function prepare(message: OutboxMessage, channel: string): { channel: string; payload: string } | RatchetError {
  try {
    checkChannel(channel);
  } catch (error) {
    return error as ValidationError;
  }
  const body: NotifyPayload = {
    id: message.id,
    key: message.key,
    topic: message.topic,
    tenantId: message.tenantId,
    runId: message.runId,
    attempt: message.attempt,
    createdAt: message.createdAt.toISOString(),
    payload: message.payload,
  };
  const payload = JSON.stringify(body);
  const bytes = Buffer.byteLength(payload, 'utf8');
  if (bytes >= NOTIFY_PAYLOAD_LIMIT) {
    return new NotifyPayloadTooLargeError(
      `message ${message.id} (topic ${JSON.stringify(message.topic)}) is ${bytes} bytes as a NOTIFY payload; Postgres accepts fewer than ${NOTIFY_PAYLOAD_LIMIT}. Send a reference (an id to fetch) instead of the data, or use another publisher`,
      { messageId: message.id, bytes, limit: NOTIFY_PAYLOAD_LIMIT },
    );
  }
  return { channel, payload };
}

function checkChannel(channel: unknown): void {
  if (typeof channel !== 'string' || channel.length === 0 || Buffer.byteLength(channel, 'utf8') > MAX_CHANNEL_BYTES || channel.includes('\u0000')) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_CHANNEL_BYTES} bytes (a Postgres channel name), got ${JSON.stringify(channel)}`, { path: ['channel'] });
  }
}
