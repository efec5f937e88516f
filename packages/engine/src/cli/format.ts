/**
 * Text output of the CLI, by hand (no dependency): aligned tables, ages and durations a person
 * reads at a glance, one-line JSON of values, and a progress bar that redraws in place on a TTY
 * and prints a line per step otherwise (so logs and tests read it too).
 */

/** Columns left-aligned and padded to their widest cell; a header row first. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** 950 → "950ms", 61_000 → "1m1s", 90_061_000 → "1d1h1m". */
export function duration(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(Math.round(ms));
  if (rest < 1_000) return `${sign}${rest}ms`;
  if (rest < 60_000) return `${sign}${(rest / 1_000).toFixed(rest < 10_000 ? 2 : 1).replace(/\.?0+$/, '')}s`;
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0) parts.push(`${n}${unit}`);
    if (parts.length === 2) break;
  }
  return sign + parts.join('');
}

/** "3m ago" / "in 2h" relative to `now`. */
export function age(at: Date | null | undefined, now: Date = new Date()): string {
  if (!at) return '-';
  const ms = now.getTime() - at.getTime();
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
}

/** ISO time without milliseconds: 2025-01-02T03:04:05Z. */
export function time(at: Date | null | undefined): string {
  return at ? at.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-';
}

/** A value as compact JSON, cut at `max` characters. */
export function brief(value: unknown, max = 80): string {
  if (value === undefined) return '';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** JSON for `--json`: dates as ISO strings, two-space indent. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A run id shortened for tables (the full id is in `--json` and `show`). */
export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

/** A trace link from a template: `{traceId}` (and `{spanId}`) replaced. Null without a template or a trace. */
export function traceLink(template: string | undefined, traceId: string | null, spanId: string | null = null): string | null {
  if (!template || !traceId) return null;
  return template.replaceAll('{traceId}', traceId).replaceAll('{spanId}', spanId ?? '');
}

export interface ProgressBar {
  update(done: number, total: number, note?: string): void;
  finish(note: string): void;
}

/** `[#######.....]  42/100  note`: redrawn in place on a TTY, one line per update otherwise. */
export function progressBar(stream: NodeJS.WritableStream & { isTTY?: boolean }, label: string, width = 30): ProgressBar {
  const tty = stream.isTTY === true;
  const draw = (done: number, total: number, note = '') => {
    const ratio = total > 0 ? Math.min(1, done / total) : 1;
    const filled = Math.round(ratio * width);
    return `${label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${note ? `  ${note}` : ''}`;
  };
  return {
    update(done, total, note) {
      stream.write(tty ? `\r${draw(done, total, note)}\u001b[K` : `${draw(done, total, note)}\n`);
    },
    finish(note) {
      stream.write(tty ? `\r${note}\u001b[K\n` : `${note}\n`);
    },
  };
}
