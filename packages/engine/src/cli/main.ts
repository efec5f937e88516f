#!/usr/bin/env node
/**
 * `ratchet` — the operator's command line: runs, workers, migrations, tenants, and the web view.
 *
 * @example
 * ```sh
 * ratchet migrate
 * ratchet worker ./src/workflows.ts
 * ratchet start triage-ticket --module ./src/workflows.ts --input '{"ticket":"Printer on fire","userId":7}'
 * ratchet list --state failed,parked --older-than 1h
 * ratchet show 0190f5c2-…            # the timeline
 * ratchet retry 0190f5c2-…
 * ratchet ui                          # http://127.0.0.1:4000/
 * ```
 *
 * `runCli(argv, io)` is the whole program without process globals (the tests call it); the
 * module's bottom runs it when executed directly. Exit codes: 0 ok, 1 the operation failed,
 * 2 a usage mistake. A failure prints one line: `ratchet: <CODE>: <message>`.
 */
import { fileURLToPath } from 'node:url';
import { realpathSync } from 'node:fs';
import { isRatchetError } from '@ratchet/sdk';
import { CommandContext, helpText, type CommandSpec, type Io } from './command.js';
import { cancel, list, resolve, retry, show, signal, start } from './runs.js';
import { migrate, purgeTenant, retention, stats, workers } from './admin.js';
import { worker } from './worker.js';
import { ui } from './ui.js';

export const COMMANDS: readonly CommandSpec[] = [migrate, worker, start, list, show, signal, cancel, resolve, retry, stats, workers, purgeTenant, retention, ui];

export function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length + (c.args ? c.args.length + 1 : 0)));
  return [
    'Usage: ratchet <command> [options]',
    '',
    'Operate Ratchet runs on PostgreSQL ($DATABASE_URL, or the embedded server under .ratchet/postgres).',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${`${c.name}${c.args ? ` ${c.args}` : ''}`.padEnd(width)}  ${c.summary}`),
    '',
    "Run 'ratchet <command> --help' for a command's options. Docs: docs/cli.md",
  ].join('\n');
}

export async function runCli(argv: readonly string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const spec = name === 'help' ? COMMANDS.find((c) => c.name === rest[0]) : undefined;
    io.stdout.write(`${spec ? helpText(spec) : overview()}\n`);
    return 0;
  }
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) {
    io.stderr.write(`ratchet: CLI_USAGE: unknown command "${name}"; run 'ratchet --help' for the list\n`);
    return 2;
  }
  let ctx: CommandContext | undefined;
  try {
    ctx = new CommandContext(spec, [...rest], io);
    if (ctx.flag('help')) {
      io.stdout.write(`${helpText(spec)}\n`);
      return 0;
    }
    const code = await spec.run(ctx);
    return typeof code === 'number' ? code : 0;
  } catch (error) {
    io.stderr.write(`ratchet: ${describe(error)}\n`);
    return isRatchetError(error, 'CLI_USAGE') ? 2 : 1;
  } finally {
    await ctx?.close().catch(() => {});
  }
}

/** One line: the stable code and the message (no stack: it is not for operators). */
function describe(error: unknown): string {
  if (isRatchetError(error)) return `${error.code}: ${error.message}`.replace(/\s*\n\s*/g, ' ');
  const e = error as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string' && /^(ECONNREFUSED|ENOTFOUND|28P01|3D000|28000)$/.test(e.code)) {
    return `DATABASE: cannot connect (${e.code}): ${String(e.message)}; check --database or DATABASE_URL`;
  }
  return `${typeof e?.code === 'string' ? `${e.code}: ` : 'ERROR: '}${String(e?.message ?? error)}`.replace(/\s*\n\s*/g, ' ');
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  const code = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() });
  process.exitCode = code;
  // Nothing more to do: do not wait for idle pool timers of a library the module loaded.
  if (!['worker', 'ui'].includes(process.argv[2] ?? '')) setTimeout(() => process.exit(code), 50).unref();
}
