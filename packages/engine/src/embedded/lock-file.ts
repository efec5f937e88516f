/**
 * A cross-process lock file for the embedded server: `<dataDir>.lock`, created with O_EXCL and
 * holding the holder's pid, around attaching, initialising, starting and stopping.
 */
import { readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { errnoCode, isProcessAlive } from './postmaster-pid.js';

/** How long to wait for a live holder before giving up. */
const LOCK_TIMEOUT_MS = 60_000;

/**
 * Cross-process lock: `<dataDir>.lock` created with O_EXCL, holding the holder's pid. A lock
 * whose pid is dead is broken, under a second O_EXCL file so that two breakers cannot delete a
 * lock a third process has just taken.
 */
export async function withLock<T>(dataDir: string, body: () => Promise<T>): Promise<T> {
  const file = `${dataDir}.lock`;
  const deadline = Date.now() + LOCK_TIMEOUT_MS;
  for (;;) {
    try {
      await writeFile(file, String(process.pid), { flag: 'wx', mode: 0o600 });
      break;
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST') throw error;
    }
    const holder = await readFile(file, 'utf8').catch(() => undefined);
    // An empty file is a holder between its create and its write, unless that was long ago.
    const stale = holder === undefined ? false : holder === '' ? (await fileAge(file)) > 10_000 : !isProcessAlive(Number(holder));
    if (stale && holder !== undefined) {
      await breakLock(file, holder);
    } else if (Date.now() > deadline) {
      throw new Error(`embedded: timed out after ${LOCK_TIMEOUT_MS / 1000} s waiting for ${file}, held by pid ${holder}; if that process is stuck, stop it (or delete the file)`);
    } else {
      await sleep(25 + Math.random() * 50);
    }
  }
  try {
    return await body();
  } finally {
    await unlink(file).catch(() => {});
  }
}

async function breakLock(file: string, staleContent: string): Promise<void> {
  const guard = `${file}.break`;
  try {
    await writeFile(guard, String(process.pid), { flag: 'wx' });
  } catch {
    if ((await fileAge(guard)) > 10_000) await unlink(guard).catch(() => {});
    return;
  }
  try {
    if ((await readFile(file, 'utf8').catch(() => undefined)) === staleContent) await unlink(file).catch(() => {});
  } finally {
    await unlink(guard).catch(() => {});
  }
}

async function fileAge(file: string): Promise<number> {
  const info = await stat(file).catch(() => undefined);
  return info ? Date.now() - info.mtimeMs : 0;
}


function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
