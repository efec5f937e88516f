/**
 * @ratchet/otel/testing — spans in memory, for tests and local runs: a tracer provider with an
 * in-memory exporter, a Ratchet instrumentation bound to it (not registered process-wide: pass
 * it to `createEngine({ instrumentation })`), and the span tree printed as text. Span context
 * follows async calls only with a context manager: NodeSDK installs one; without it,
 * `captureSpans` installs a minimal AsyncLocalStorage one (the same mechanism).
 *
 * @example
 * ```ts
 * import { captureSpans } from '@ratchet/otel/testing';
 * const capture = captureSpans();
 * const engine = await createEngine({ workflows: [triage], instrumentation: capture.instrumentation });
 * await engine.run(triage, input);
 * console.log(capture.tree());       // invoke_workflow triage → chat gpt-4.1-mini, seal ticket, …
 * ```
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { context, ROOT_CONTEXT, type Context, type ContextManager } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { RatchetInstrumentation, type RatchetInstrumentationConfig } from './instrumentation.js';

export interface SpanCapture {
  readonly instrumentation: RatchetInstrumentation;
  readonly provider: BasicTracerProvider;
  readonly exporter: InMemorySpanExporter;
  /** Every finished span so far, in the order they ended. */
  spans(): ReadableSpan[];
  /** Finished spans named `name` (exactly, or starting with `name ` as in `chat gpt-4.1`). */
  named(name: string): ReadableSpan[];
  /** The finished spans as an indented tree, one line per span with its key attributes. */
  tree(): string;
  reset(): void;
  shutdown(): Promise<void>;
}

export function captureSpans(config: RatchetInstrumentationConfig = {}): SpanCapture {
  installContextManager();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const instrumentation = new RatchetInstrumentation({ register: false, ...config });
  instrumentation.setTracerProvider(provider);
  const spans = () => exporter.getFinishedSpans();
  return {
    instrumentation,
    provider,
    exporter,
    spans,
    named: (name) => spans().filter((s) => s.name === name || s.name.startsWith(`${name} `)),
    tree: () => formatSpanTree(spans()),
    reset: () => exporter.reset(),
    shutdown: () => provider.shutdown(),
  };
}

const SHOWN = ['ratchet.segment.outcome', 'ratchet.infer.accepted', 'ratchet.segment.resumed_after', 'gen_ai.response.model', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'gen_ai.tool.call.id', 'ratchet.contract.status', 'error.type'];

/** Spans as an indented tree by parent; roots (and spans whose parent was not captured) at the left. Links are shown as `↪`. */
export function formatSpanTree(spans: readonly ReadableSpan[]): string {
  const byParent = new Map<string, ReadableSpan[]>();
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const roots: ReadableSpan[] = [];
  for (const span of [...spans].sort((a, b) => compareTime(a.startTime, b.startTime))) {
    const parent = span.parentSpanContext?.spanId;
    if (parent && ids.has(parent)) byParent.set(parent, [...(byParent.get(parent) ?? []), span]);
    else roots.push(span);
  }
  const lines: string[] = [];
  const walk = (span: ReadableSpan, depth: number) => {
    const ms = span.duration[0] * 1e3 + span.duration[1] / 1e6;
    const facts = SHOWN.filter((k) => span.attributes[k] !== undefined).map((k) => `${k.split('.').slice(-1)[0]}=${String(span.attributes[k])}`);
    const links = span.links.map((l) => `↪ ${String(l.attributes?.['ratchet.link.type'] ?? 'link')} ${l.context.spanId}`);
    lines.push(`${'  '.repeat(depth)}${span.name}  ${ms.toFixed(1)} ms  [${span.spanContext().traceId.slice(0, 8)}/${span.spanContext().spanId}]${facts.length ? `  ${facts.join(' ')}` : ''}${links.length ? `  ${links.join(' ')}` : ''}`);
    for (const child of byParent.get(span.spanContext().spanId) ?? []) walk(child, depth + 1);
  };
  for (const root of roots) walk(root, 0);
  return lines.join('\n');
}

function compareTime(a: [number, number], b: [number, number]): number {
  return a[0] - b[0] || a[1] - b[1];
}

/** Installs an AsyncLocalStorage context manager unless one is registered already (false then). */
export function installContextManager(): boolean {
  const storage = new AsyncLocalStorage<Context>();
  const manager: ContextManager = {
    active: () => storage.getStore() ?? ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
    bind: (ctx, target) => (typeof target === 'function' ? ((...args: unknown[]) => storage.run(ctx, () => (target as (...a: unknown[]) => unknown)(...args))) : target) as typeof target,
    enable: () => manager,
    disable: () => {
      storage.disable();
      return manager;
    },
  };
  return context.setGlobalContextManager(manager);
}
