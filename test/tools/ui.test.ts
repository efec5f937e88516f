/**
 * The web view in a real browser: playwright-core drives Debian's Chromium (/usr/bin/chromium;
 * never a downloaded browser). It opens the runs list, clicks into a run, sees its steps and
 * its contract (hash and body), and keeps a screenshot under test-artifacts/ (gitignored). The
 * server's guards are checked over plain HTTP: read-only by default, actions only with the flag
 * and the custom header, loopback host names only, and a token required off loopback.
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startUi, type UiServer } from '../../packages/engine/src/ui/server.js';
import { createTestEngine, type TestEngine } from '@ratchet/engine/testing';
import { actions, approval, flaky, flakyFlow, reminder } from './fixtures/workflows.js';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
let t: TestEngine;
let ui: UiServer;
let browser: Browser;
let approved: string;

beforeAll(async () => {
  t = await createTestEngine({ adminUrl: inject('adminUrl'), workflows: [reminder, approval, flakyFlow], actions });
  const run = await t.engine.client.start(approval, { note: 'ship the fix' });
  approved = run.runId;
  await t.worker();
  for (let i = 0; i < 400 && (await t.engine.client.get(approved)).state !== 'waiting'; i += 1) await new Promise((r) => setTimeout(r, 25));
  await t.engine.client.signal(approved, 'approve', { ok: true });
  expect((await t.complete(approved)).state).toBe('completed');
  await t.engine.client.start(reminder, { to: 'ada' });
  ui = await startUi({ engine: t.engine, port: 0, refreshMs: 500, traceUrl: 'http://jaeger.local/trace/{traceId}' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await ui?.close();
  await t?.close();
});

describe('web view in Chromium', () => {
  it('lists runs, opens one, shows its steps and contract, and keeps a screenshot', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(ui.url);
    const row = page.locator('[data-testid=run-row]', { hasText: approved });
    await row.waitFor({ timeout: 30_000 });
    expect(await row.textContent()).toContain('approval@2');
    expect(await page.locator('[data-testid=run-row]').count()).toBe(2);
    expect(await page.textContent('[data-testid=live]')).toContain('live');

    await row.locator('a').click();
    await page.waitForSelector('[data-testid=run-id]');
    expect(await page.textContent('[data-testid=run-id]')).toBe(approved);
    const steps = page.locator('[data-testid=step-row]');
    await steps.first().waitFor();
    const stepText = await steps.allTextContents();
    expect(stepText.join('\n')).toMatch(/note#1\s*seal\s*succeeded/);
    expect(stepText.join('\n')).toMatch(/approve#1\s*wait\s*succeeded/);
    expect(stepText.join('\n')).toMatch(/commit:[0-9a-f-]{36}#1\s*commit\s*succeeded/);

    const hash = (await t.pool.query(`SELECT body_hash FROM ratchet.contracts WHERE task_id = $1`, [approved])).rows[0].body_hash as string;
    expect(await page.textContent('[data-testid=contract-hash]')).toBe(hash);
    expect(await page.textContent('[data-testid=contract] [data-testid=state]')).toBe('committed');
    await page.click('[data-testid=contract] summary');
    expect(JSON.parse((await page.textContent('[data-testid=contract-body]'))!)).toMatchObject({ operations: [{ action: 'notes.add', input: { text: 'ship the fix' } }] });
    expect(await page.locator('[data-testid=event-row]').count()).toBeGreaterThanOrEqual(5);
    // Read-only by default: no action buttons.
    expect(await page.locator('[data-testid=action-cancel], [data-testid=action-retry]').count()).toBe(0);

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}ui-run-detail.png`, fullPage: true });
    // The live refresh keeps the opened body open.
    await page.waitForTimeout(1_200);
    expect(await page.isVisible('[data-testid=contract-body]')).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('updates live: a run that changes state shows it without a reload', async () => {
    const page = await browser.newPage();
    await page.goto(ui.url);
    await page.locator('[data-testid=run-row]').first().waitFor();
    flaky.failing = true;
    const run = await t.engine.client.start(flakyFlow, { n: 1 });
    await page.locator('[data-testid=run-row]', { hasText: run.runId }).locator('[data-testid=state]', { hasText: 'failed' }).waitFor({ timeout: 30_000 });
    await page.close();
  });
});

describe('server guards', () => {
  it('is read-only unless actions are enabled, and actions need the custom header', async () => {
    const [failed] = await t.engine.client.list({ state: 'failed' });
    const post = (url: string, headers: Record<string, string>) => fetch(`${url}api/runs/${failed!.runId}/retry`, { method: 'POST', headers, body: '{}' });
    const readOnly = await post(ui.url, { 'content-type': 'application/json', 'x-ratchet-action': '1' });
    expect(readOnly.status).toBe(403);
    expect(((await readOnly.json()) as { error: { code: string } }).error.code).toBe('UI_READ_ONLY');

    const withActions = await startUi({ engine: t.engine, port: 0, actions: true });
    try {
      const noHeader = await post(withActions.url, { 'content-type': 'text/plain' });
      expect(noHeader.status).toBe(403);
      flaky.failing = false;
      const ok = await post(withActions.url, { 'content-type': 'application/json', 'x-ratchet-action': '1' });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({ runId: failed!.runId, rerun: ['check#1'] });
      expect((await t.complete(failed!.runId)).state).toBe('completed');
      const again = await post(withActions.url, { 'content-type': 'application/json', 'x-ratchet-action': '1' });
      expect(again.status).toBe(409);
      expect(((await again.json()) as { error: { code: string } }).error.code).toBe('NOT_FAILED');
    } finally {
      await withActions.close();
    }
  });

  it('answers only loopback host names, and refuses another address without a token', async () => {
    const port = new URL(ui.url).port;
    const rebinding = await new Promise<number>((resolve, reject) => {
      import('node:http').then(({ request }) => {
        const req = request({ host: '127.0.0.1', port, path: '/api/config', headers: { host: `evil.example:${port}` } }, (res) => resolve(res.statusCode ?? 0));
        req.on('error', reject);
        req.end();
      }, reject);
    });
    expect(rebinding).toBe(421);
    await expect(startUi({ engine: t.engine, host: '0.0.0.0', port: 0 })).rejects.toMatchObject({ code: 'UI_TOKEN_REQUIRED' });

    const token = 'a-long-enough-token-0123';
    const guarded = await startUi({ engine: t.engine, host: '127.0.0.1', port: 0, token });
    try {
      expect((await fetch(`${guarded.url}api/runs`)).status).toBe(401);
      expect((await fetch(`${guarded.url}api/runs`, { headers: { authorization: 'Bearer wrong-token-0000000000' } })).status).toBe(401);
      const ok = await fetch(`${guarded.url}api/runs`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-security-policy')).toContain("script-src 'self'");
      const cookie = await fetch(`${guarded.url}?token=${token}`, { redirect: 'manual' });
      expect(cookie.status).toBe(303);
      expect(cookie.headers.get('set-cookie')).toMatch(/^ratchet_token=.*HttpOnly; SameSite=Strict/);
    } finally {
      await guarded.close();
    }
  });
});
