/**
 * Cron slots: parsing a schedule's timing and deciding which slots a tick fires. Pure: no I/O,
 * no clock — every instant comes in as an argument (the tick passes `ratchet.now()`).
 *
 * A slot is an instant, to the second, that the cron expression matches in the schedule's time
 * zone (croner 11 does the calendar and DST arithmetic). Given the slot a schedule was waiting
 * for (`next_at`) and the time now, `slotsToFire` applies the catch-up policy:
 *
 *   all     every missed slot, oldest first; when more than `maxCatchUp` were missed, only the
 *           most recent `maxCatchUp` (the older ones are skipped)
 *   latest  only the most recent missed slot
 *   none    the most recent slot only if it is on time (at most ON_TIME_TOLERANCE_MS late), else nothing
 *
 * and returns where the schedule goes next: the first slot after now — or, when a tick fires a
 * long backlog in chunks of `limit`, the first slot it left unfired (still due, so the next tick
 * continues at once). Every fired slot is ≤ now and the new `next_at` is > every fired slot, so a
 * slot can never be computed twice for one schedule.
 */
import { Cron } from 'croner';
import { ValidationError } from '@ratchet/sdk';
import type { CatchUpPolicy } from '../schema/index.js';

/** How late a slot may fire under `catchUp: 'none'` and still count as on time. */
export const ON_TIME_TOLERANCE_MS = 30_000;
/** The longest cron expression accepted. */
const MAX_CRON_LENGTH = 200;

/** A parsed schedule timing: `next(after)` is the first slot strictly after `after`. */
export interface Timing {
  readonly cron: string;
  readonly timezone: string;
  next(after: Date): Date | null;
  /** Up to `n` slots ≤ `atOrBefore`, most recent first. */
  previous(n: number, atOrBefore: Date): Date[];
}

/**
 * Parses a cron expression (5 fields, or 6 with seconds first; `@daily` and friends) in an IANA
 * time zone. A malformed expression is a ValidationError on `cron`, an unknown zone on `timezone`,
 * an expression that never matches (`0 0 31 2 *`) on `cron`.
 */
export function parseTiming(cron: unknown, timezone: unknown = 'UTC'): Timing {
  const zone = timeZoneOf(timezone);
  if (typeof cron !== 'string' || cron.trim() === '' || cron.length > MAX_CRON_LENGTH) {
    throw new ValidationError(`must be a cron expression of at most ${MAX_CRON_LENGTH} characters, e.g. "0 9 * * *"`, { path: ['cron'] });
  }
  let job: Cron;
  let first: Date | null;
  try {
    job = new Cron(cron, { timezone: zone, mode: '5-or-6-parts' });
    first = job.nextRun(new Date(0));
  } catch (error) {
    throw new ValidationError(`not a cron expression: ${(error as Error).message.replace(/^CronPattern: /, '')}`, { path: ['cron'], cause: error });
  }
  if (first === null) throw new ValidationError(`"${cron}" never matches a date`, { path: ['cron'] });
  return {
    cron,
    timezone: zone,
    next: (after) => job.nextRun(after),
    // croner's previousRuns is strictly before its reference, to the second.
    previous: (n, atOrBefore) => job.previousRuns(n, new Date(Math.floor(atOrBefore.getTime() / 1000) * 1000 + 1000)),
  };
}

/** An IANA time zone name, checked (kept as given: ICU would turn `Asia/Kolkata` into `Asia/Calcutta`). */
export function timeZoneOf(timezone: unknown): string {
  if (typeof timezone !== 'string' || timezone === '' || timezone.length > 100) {
    throw new ValidationError('must be an IANA time zone such as "Europe/Berlin" or "UTC"', { path: ['timezone'] });
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new ValidationError(`unknown time zone "${timezone}": use an IANA name such as "Europe/Berlin" or "UTC"`, { path: ['timezone'] });
  }
  return timezone;
}

export interface SlotPlan {
  /** Slots to start runs for, oldest first; each is ≤ now. */
  fire: Date[];
  /** The schedule's next `next_at`: after every slot in `fire`. */
  nextAt: Date;
}

/**
 * What a tick does for one due schedule: `nextAt` (≤ now) is the slot it was waiting for. At
 * most `limit` slots are returned; a longer backlog continues from the returned `nextAt`.
 */
export function slotsToFire(timing: Timing, policy: CatchUpPolicy, nextAt: Date, now: Date, maxCatchUp: number, limit: number): SlotPlan {
  if (nextAt > now) return { fire: [], nextAt };
  // A cron always matches again (years are never restricted), so this is null only past year
  // 9999; park the schedule a day on rather than spin.
  const after = timing.next(now) ?? new Date(now.getTime() + 86_400_000);

  // The common case walks forward from next_at: one or a few slots are due.
  const missed: Date[] = [];
  for (let slot: Date | null = nextAt; slot && slot <= now && missed.length <= maxCatchUp; slot = timing.next(slot)) missed.push(slot);
  const complete = missed.length <= maxCatchUp;

  let candidates: Date[];
  if (policy === 'all') {
    // More than maxCatchUp missed: keep the most recent maxCatchUp, found backwards from now
    // (never by walking a month of every-second slots forward).
    candidates = complete ? missed : timing.previous(maxCatchUp, now).filter((s) => s >= nextAt).reverse();
  } else {
    const latest = complete ? missed[missed.length - 1]! : (timing.previous(1, now)[0] ?? nextAt);
    const last = latest < nextAt ? nextAt : latest;
    candidates = policy === 'latest' || now.getTime() - last.getTime() <= ON_TIME_TOLERANCE_MS ? [last] : [];
  }
  if (candidates.length > limit) return { fire: candidates.slice(0, limit), nextAt: candidates[limit]! };
  return { fire: candidates, nextAt: after };
}
