/**
 * `ratchet ui`: serves the web view (ui/server.ts) until SIGINT/SIGTERM.
 */
import { startUi } from '../ui/server.js';
import type { CommandSpec } from './command.js';

export const ui: CommandSpec = {
  name: 'ui',
  summary: 'Serve a local web view of runs (list, timeline, contracts, events, trace links), refreshed live. Read-only unless --actions.',
  details: 'Binds 127.0.0.1. Another --host needs --token (every request then carries it; open /?token=<token> once in a browser).',
  options: {
    host: { type: 'string', value: 'address', description: 'Address to bind. Default 127.0.0.1' },
    port: { type: 'string', short: 'p', value: 'port', description: 'Port (0: any free one). Default 4000' },
    token: { type: 'string', value: 'token', description: 'Access token (at least 16 characters). Default: $RATCHET_UI_TOKEN' },
    actions: { type: 'boolean', description: 'Enable cancel, retry, signal and resolve from the page' },
    'trace-url': { type: 'string', value: 'template', description: 'Trace link template, e.g. http://localhost:16686/trace/{traceId}. Default: $RATCHET_TRACE_URL' },
    'refresh-ms': { type: 'string', value: 'ms', description: 'How often the page refreshes. Default 2000' },
  },
  async run(ctx) {
    const port = ctx.integer('port');
    const refreshMs = ctx.integer('refresh-ms');
    const token = ctx.string('token') ?? (ctx.io.env.RATCHET_UI_TOKEN || undefined);
    const traceUrl = ctx.string('trace-url') ?? (ctx.io.env.RATCHET_TRACE_URL || undefined);
    const engine = await ctx.engine();
    const server = await startUi({
      engine,
      ...(ctx.string('host') ? { host: ctx.string('host')! } : {}),
      ...(port !== undefined ? { port } : {}),
      ...(token ? { token } : {}),
      ...(traceUrl ? { traceUrl } : {}),
      ...(refreshMs !== undefined ? { refreshMs } : {}),
      ...(ctx.tenantId ? { tenantId: ctx.tenantId } : {}),
      actions: ctx.flag('actions'),
    });
    ctx.out(`ratchet ui on ${server.url} (${ctx.flag('actions') ? 'actions enabled' : 'read-only'}${token ? ', token required' : ''})`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
    await server.close();
  },
};
