/**
 * `postmaster.pid`, the file a running PostgreSQL server keeps in its data directory, and whether
 * the process it names is still there.
 *
 * Lines: 1 pid, 2 data directory, 3 start time (epoch s), 4 port, 5 first socket directory,
 * 6 first listen address, 7 shared memory key, 8 status (`starting`, `stopping`, `ready`,
 * `standby`, space-padded). Postgres deletes the file on a clean shutdown; after a crash or a
 * SIGKILL it stays, naming a dead pid, and the next server start replaces it.
 *
 *   const pm = await readPostmasterPid('/srv/pgdata');
 *   if (pm && isPostmasterAlive(pm.pid)) console.log(`running on port ${pm.port}`);
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface PostmasterPid {
  readonly pid: number;
  /** NaN while the server is still writing the file. */
  readonly port: number;
  readonly status: string | undefined;
}

/** Parses the file's text; undefined when it holds no pid. */
export function parsePostmasterPid(text: string): PostmasterPid | undefined {
  const lines = text.split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const status = lines[7]?.trim();
  return { pid, port: Number.parseInt(lines[3] ?? '', 10), status: status ? status : undefined };
}

export async function readPostmasterPid(dataDir: string): Promise<PostmasterPid | undefined> {
  try {
    return parsePostmasterPid(await readFile(postmasterPidFile(dataDir), 'utf8'));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/** For `process.on('exit')` handlers, which cannot await. */
export function readPostmasterPidSync(dataDir: string): PostmasterPid | undefined {
  try {
    return parsePostmasterPid(readFileSync(postmasterPidFile(dataDir), 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` names a live process. A zombie counts as gone: a postmaster started by pg_ctl is
 * reparented to PID 1, and in a container whose PID 1 does not reap, a stopped server would
 * otherwise look alive forever.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    if (errnoCode(error) !== 'EPERM') return false;
  }
  return !isZombie(pid);
}

/** Whether `pid` has exited but was not reaped yet. Postgres itself takes such a pid for a live server. */
export function isZombie(pid: number): boolean {
  const stat = readProc(pid, 'stat');
  // `pid (comm) S …`: the state letter follows the last ')', as comm may itself hold one.
  return stat !== undefined && stat.charAt(stat.lastIndexOf(')') + 2) === 'Z';
}

/**
 * Whether `pid` is a live PostgreSQL process. Where /proc exists this also checks the command
 * name, so a pid recycled by an unrelated process after a reboot is not taken for a server.
 */
export function isPostmasterAlive(pid: number): boolean {
  if (!isProcessAlive(pid)) return false;
  const comm = readProc(pid, 'comm');
  return comm === undefined || comm.trim() === 'postgres';
}

function postmasterPidFile(dataDir: string): string {
  return path.join(dataDir, 'postmaster.pid');
}

function readProc(pid: number, file: 'stat' | 'comm'): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return undefined;
  }
}

export function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}
