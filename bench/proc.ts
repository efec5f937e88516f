/** CPU figures read from /proc (Linux), shared by the benchmarks. */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** USER_HZ on Linux: /proc reports CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/**
 * CPU of the postmaster of `dataDir` and all its children (live ones, plus exited ones through
 * the postmaster's cutime/cstime), in ms. NaN without a data dir: an external server's processes
 * are not ours to read.
 */
export async function postgresCpuMs(dataDir: string | undefined): Promise<number> {
  if (!dataDir) return Number.NaN;
  const postmaster = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(entry);
    if (pid !== postmaster && Number(fields[1]) !== postmaster) continue;
    total += Number(fields[11]) + Number(fields[12]); // utime + stime
    if (pid === postmaster) total += Number(fields[13]) + Number(fields[14]); // + exited children
  }
  return (total / TICKS_PER_SECOND) * 1000;
}
