/** Real worker processes for crash tests: spawned with node + tsx, killed with real signals. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = fileURLToPath(new URL('../fixtures/worker-process.ts', import.meta.url));

export interface WorkerProcess {
  readonly child: ChildProcess;
  /** Resolves with the signal or exit code when the process ends. */
  readonly exited: Promise<NodeJS.Signals | number | null>;
  readonly output: () => string;
  kill(signal?: NodeJS.Signals): Promise<NodeJS.Signals | number | null>;
}

export function spawnWorker(env: Record<string, string>): WorkerProcess {
  // node --import tsx, not the tsx binary: tsx's CLI runs the script in a second process, so a
  // SIGKILL sent to it would leave the real worker alive.
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  return {
    child,
    exited,
    output: () => output,
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
