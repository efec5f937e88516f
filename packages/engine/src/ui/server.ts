/**
 * `ratchet ui`: a small read-only web view over the same queries as the CLI, on `node:http`.
 *
 * Routes: `GET /` (the page, ui/assets.ts), `/app.js`, `/app.css`, and a JSON API —
 * `GET /api/config`, `/api/runs?state=&workflow=&version=&limit=`, `/api/runs/<id>`,
 * `/api/stats`; with actions enabled, `POST /api/runs/<id>/{cancel,retry,signal,resolve}`.
 *
 * Safety, in the order a request meets it:
 * - Binding: loopback (127.0.0.1) by default. Any other address needs an access token, or the
 *   server refuses to start (RatchetError `UI_TOKEN_REQUIRED`).
 * - Host header: without a token, only loopback host names are answered, so a web page on
 *   another site cannot reach the view through DNS rebinding.
 * - Token: when set, every request carries it — `Authorization: Bearer <token>`, or the cookie
 *   that opening `/?token=<token>` once sets (HttpOnly, SameSite=Strict) — compared in constant time.
 * - Actions: off unless enabled; a POST needs `Content-Type: application/json` and the custom
 *   header `X-Ratchet-Action`, which a cross-site form cannot send and no CORS preflight here allows.
 * - Every response: a strict Content-Security-Policy (no inline script, same-origin only),
 *   nosniff, no-referrer, no caching. The page renders data with textContent only.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { RatchetError, ValidationError, isRatchetError, type SerializedError } from '@ratchet/sdk';
import type { Engine } from '../engine.js';
import { TASK_STATES, type TaskState } from '../schema/index.js';
import { DEFAULT_TENANT_ID } from '../ids.js';
import { PAGE_CSS, PAGE_HTML, PAGE_JS } from './assets.js';

export interface UiOptions {
  engine: Engine;
  /** Address to bind. Default 127.0.0.1. Another than loopback needs `token`. */
  host?: string;
  /** Port. Default 4000; 0 picks a free one. */
  port?: number;
  /** Access token every request must carry. Required off loopback. */
  token?: string;
  /** Enable cancel, retry, signal and resolve. Default false (read-only). */
  actions?: boolean;
  /** The tenant shown. Default: the default tenant. */
  tenantId?: string;
  /** Trace link template, `{traceId}` / `{spanId}` replaced. */
  traceUrl?: string;
  /** How often the page refreshes. Default 2000 ms. */
  refreshMs?: number;
}

export interface UiServer {
  /** Where the view is, e.g. http://127.0.0.1:4000/ */
  readonly url: string;
  close(): Promise<void>;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '::1', 'localhost', '[::1]']);
const MAX_BODY = 64 * 1024;

export function isLoopback(host: string): boolean {
  return LOOPBACK_HOSTS.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function startUi(options: UiOptions): Promise<UiServer> {
  const host = options.host ?? '127.0.0.1';
  const token = options.token && options.token.length > 0 ? options.token : undefined;
  if (!isLoopback(host) && !token) {
    throw new RatchetError(`refusing to serve the web view on ${host} without an access token: pass --token (or RATCHET_UI_TOKEN), or bind 127.0.0.1`, {
      code: 'UI_TOKEN_REQUIRED',
    });
  }
  if (token !== undefined && token.length < 16) throw new ValidationError('an access token must have at least 16 characters', { path: ['token'] });
  const tenantOpt = options.tenantId ? { tenantId: options.tenantId } : {};
  const config = {
    actions: options.actions === true,
    refreshMs: options.refreshMs ?? 2_000,
    traceUrl: options.traceUrl ?? null,
    tenantId: options.tenantId ?? DEFAULT_TENANT_ID,
  };
  const engine = options.engine;
  const tokenDigest = token ? digest(token) : undefined;

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => sendError(res, error));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://ui.invalid');
    const hostHeader = (req.headers.host ?? '').replace(/:\d+$/, '');
    if (!token && !isLoopback(hostHeader)) return send(res, 421, { error: { code: 'UI_HOST', message: 'this view answers only to loopback host names' } });
    if (tokenDigest) {
      const given = url.searchParams.get('token') ?? bearer(req) ?? cookie(req, 'ratchet_token');
      if (!given || !timingSafeEqual(digest(given), tokenDigest)) return send(res, 401, { error: { code: 'UI_UNAUTHORIZED', message: 'a valid access token is required' } });
      if (url.searchParams.has('token')) {
        res.setHeader('Set-Cookie', `ratchet_token=${encodeURIComponent(given)}; HttpOnly; SameSite=Strict; Path=/`);
        res.setHeader('Location', '/');
        return send(res, 303, '');
      }
    }
    const path = url.pathname;
    if (req.method === 'GET') {
      if (path === '/') return sendText(res, PAGE_HTML, 'text/html; charset=utf-8');
      if (path === '/app.js') return sendText(res, PAGE_JS, 'text/javascript; charset=utf-8');
      if (path === '/app.css') return sendText(res, PAGE_CSS, 'text/css; charset=utf-8');
      if (path === '/api/config') return send(res, 200, config);
      if (path === '/api/stats') return send(res, 200, await engine.stats(tenantOpt));
      if (path === '/api/runs') {
        const state = url.searchParams.get('state') || undefined;
        if (state !== undefined && !(TASK_STATES as readonly string[]).includes(state)) throw new ValidationError(`must be one of ${TASK_STATES.join(', ')}`, { path: ['state'] });
        const limit = Number(url.searchParams.get('limit') ?? 100);
        return send(
          res,
          200,
          await engine.client.list({
            ...tenantOpt,
            ...(state ? { state: state as TaskState } : {}),
            ...(url.searchParams.get('workflow') ? { workflow: url.searchParams.get('workflow')! } : {}),
            ...(url.searchParams.get('version') ? { version: url.searchParams.get('version')! } : {}),
            limit,
          }),
        );
      }
      const run = /^\/api\/runs\/([0-9a-fA-F-]{36})$/.exec(path);
      if (run) return send(res, 200, await engine.client.inspect(run[1]!, tenantOpt));
      return send(res, 404, { error: { code: 'NOT_FOUND', message: `no such page: ${path}` } });
    }
    if (req.method === 'POST') {
      const action = /^\/api\/runs\/([0-9a-fA-F-]{36})\/(cancel|retry|signal|resolve)$/.exec(path);
      if (!action) return send(res, 404, { error: { code: 'NOT_FOUND', message: `no such action: ${path}` } });
      if (!config.actions) return send(res, 403, { error: { code: 'UI_READ_ONLY', message: 'actions are disabled; start the view with --actions to enable them' } });
      if (req.headers['x-ratchet-action'] === undefined || !/^application\/json\b/.test(req.headers['content-type'] ?? '')) {
        return send(res, 403, { error: { code: 'UI_ACTION_HEADER', message: 'an action needs Content-Type: application/json and the X-Ratchet-Action header' } });
      }
      const body = (await readJson(req)) as Record<string, unknown>;
      const runId = action[1]!;
      switch (action[2]) {
        case 'cancel':
          return send(res, 200, await engine.client.cancel(runId, tenantOpt));
        case 'retry':
          return send(res, 200, await engine.client.retry(runId, tenantOpt));
        case 'signal':
          if (typeof body.name !== 'string') throw new ValidationError('must be a string', { path: ['name'] });
          return send(res, 200, await engine.client.signal(runId, body.name, body.payload ?? null, tenantOpt));
        default: {
          if (typeof body.stepKey !== 'string') throw new ValidationError('must be a step key', { path: ['stepKey'] });
          const outcome = 'result' in body ? { result: body.result } : { error: String(body.error ?? 'settled as failed by an operator') };
          await engine.client.resolve(runId, body.stepKey, outcome, tenantOpt);
          return send(res, 200, { ok: true });
        }
      }
    }
    res.setHeader('Allow', 'GET, POST');
    return send(res, 405, { error: { code: 'METHOD_NOT_ALLOWED', message: `${req.method} is not allowed` } });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 4000, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function bearer(req: IncomingMessage): string | undefined {
  const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return undefined;
}

function securityHeaders(res: ServerResponse): void {
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  );
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
}

function sendText(res: ServerResponse, text: string, type: string): void {
  securityHeaders(res);
  res.writeHead(200, { 'Content-Type': type });
  res.end(text);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  securityHeaders(res);
  if (status === 303) {
    res.writeHead(status);
    res.end();
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) return void res.end();
  const status = isRatchetError(error, 'NOT_FOUND') ? 404 : isRatchetError(error, 'VALIDATION') ? 400 : isRatchetError(error) ? 409 : 500;
  const e = error as { code?: string; message?: string };
  const body: { error: Pick<SerializedError, 'message'> & { code: string } } = {
    error: { code: isRatchetError(error) ? String(e.code) : 'INTERNAL', message: status === 500 ? 'internal error (see the server log)' : String(e.message) },
  };
  if (status === 500) process.stderr.write(`ratchet ui: ${(error as Error)?.stack ?? String(error)}\n`);
  send(res, status, body);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new ValidationError(`the request body is larger than ${MAX_BODY} bytes`, { path: ['body'] });
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return {};
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object');
    return value;
  } catch {
    throw new ValidationError('the request body must be a JSON object', { path: ['body'] });
  }
}
