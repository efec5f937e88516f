/**
 * Time-ordered UUIDs (RFC 9562 version 7), made by the engine rather than a sequence so rows
 * can be created anywhere and the schema distributes by tenant unchanged.
 *
 * 48 bits of Unix milliseconds, then a 12-bit counter (monotonic within a millisecond in this
 * process), then 62 random bits.
 */
import { randomBytes } from 'node:crypto';

let lastMs = 0;
let counter = 0;

// Random bytes drawn in blocks: one crypto call per 256 ids instead of one per id.
let pool = Buffer.alloc(0);
let offset = 0;
function random16(): Buffer {
  if (offset + 16 > pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  const out = Buffer.from(pool.subarray(offset, offset + 16));
  offset += 16;
  return out;
}

/** A new UUIDv7 string. */
export function uuidv7(now: number = Date.now()): string {
  let ms = now;
  if (ms <= lastMs) {
    ms = lastMs;
    counter += 1;
    if (counter > 0xfff) {
      // The counter ran out inside one millisecond: borrow the next one.
      ms = lastMs + 1;
      counter = 0;
    }
  } else {
    counter = random16().readUInt16BE(0) & 0x3ff; // start low so the counter has room
  }
  lastMs = ms;
  const bytes = random16();
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | ((counter >> 8) & 0x0f);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a UUID string in canonical 8-4-4-4-12 form (any version). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}

/** The tenant of apps that never pass one. */
export const DEFAULT_TENANT_ID = '00000000-0000-0000-0000-000000000000';
