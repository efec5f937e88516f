// The deterministic generator behind `ctx.random()` and `ctx.uuid()`: seeded by a string (the
// engine uses the run id and step key), so replay reproduces every value without storing any.
//
// Never change this algorithm or its seeding: ctx.random() is not recorded, so replays of runs
// started under the old algorithm would diverge (and sealed contracts would hash differently).

import { createHash } from 'node:crypto';

/**
 * A generator of numbers in [0, 1) with 53 random bits, fully determined by `seed`: SHA-256 of
 * the seed's UTF-8 bytes initialises sfc32 (Chris Doty-Humphrey's small fast counter).
 */
export function seededRandom(seed: string): () => number {
  const digest = createHash('sha256').update(seed, 'utf8').digest();
  let a = digest.readUInt32LE(0);
  let b = digest.readUInt32LE(4);
  let c = digest.readUInt32LE(8);
  let d = digest.readUInt32LE(12);

  const next32 = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  // Mixing rounds recommended for sfc32 so the first outputs do not echo the seed words.
  for (let i = 0; i < 12; i++) next32();

  return () => {
    const high = next32() >>> 5; // 27 bits
    const low = next32() >>> 6; // 26 bits
    return (high * 67108864 + low) / 9007199254740992; // (high · 2^26 + low) / 2^53
  };
}

/** A UUID shaped as RFC 9562 version 4 (random), with its 122 random bits drawn from `random`. */
export function seededUuid(random: () => number): string {
  const bytes = new Array<number>(16);
  for (let i = 0; i < 16; i++) bytes[i] = Math.floor(random() * 256) & 0xff;
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40; // version 4
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // variant 10
  const hex = bytes.map((byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
