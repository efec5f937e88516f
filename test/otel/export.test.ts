/**
 * The setup docs/observability.md tells users to write — NodeSDK with `ratchetInstrumentation()`
 * in its instrumentations list, an engine created with no `instrumentation` option — exporting
 * over OTLP/HTTP in JSON and in protobuf to a real `node:http` receiver on 127.0.0.1 (standing
 * in for Jaeger, Tempo or a Collector). The receiver decodes what arrived: the agent run's
 * spans, their GenAI attributes, and ids equal to those on the run's rows; the metrics export
 * carries the GenAI histograms.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { ratchetInstrumentation } from '@ratchet/otel';
import { engineOn, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { APP_DDL, appActions, appChecks, appTables } from '../fixtures/triage.js';
import { eventIds, operationIds, supportAgent } from './agent.js';

interface Received {
  path: string;
  contentType: string;
  body: Buffer;
}

let db: TestDatabase;
let server: Server;
let endpoint: string;
const received: Received[] = [];

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(APP_DDL);
  await db.pool.query(`INSERT INTO users (id, name) VALUES (1, 'Ada')`);
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', contentType: String(req.headers['content-type']), body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': String(req.headers['content-type']) }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A span as the receiver decoded it: ids in hex, attributes as plain values. */
interface WireSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  attributes: Record<string, unknown>;
}

describe('OTLP/HTTP export through NodeSDK', () => {
  it('delivers the agent run’s spans in JSON and in protobuf, with the ids written on its rows', async () => {
    const sdk = new NodeSDK({
      serviceName: 'ratchet-otlp-test',
      autoDetectResources: false,
      spanProcessors: [
        new BatchSpanProcessor(new JsonTraceExporter({ url: `${endpoint}/json/v1/traces` })),
        new BatchSpanProcessor(new ProtoTraceExporter({ url: `${endpoint}/proto/v1/traces` })),
      ],
      metricReaders: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: `${endpoint}/json/v1/metrics` }), exportIntervalMillis: 60_000 })],
      instrumentations: [ratchetInstrumentation()],
    });
    sdk.start();
    let runId: string;
    let request: { traceId: string; spanId: string };
    try {
      // No `instrumentation` option: the engine uses the one NodeSDK enabled.
      const engine = await engineOn(db, { workflows: [supportAgent], actions: appActions, checks: appChecks, contractTables: appTables });
      const tracer = trace.getTracer('app');
      ({ runId, request } = await tracer.startActiveSpan('POST /tickets', async (span) => {
        try {
          const result = await engine.run(supportAgent, { ticket: 'the export is broken', userId: 1 });
          expect(result.state).toBe('completed');
          return { runId: result.runId, request: { traceId: span.spanContext().traceId, spanId: span.spanContext().spanId } };
        } finally {
          span.end();
        }
      }));
    } finally {
      await sdk.shutdown(); // flushes both span processors and the metric reader
    }

    const json = received.filter((r) => r.path === '/json/v1/traces');
    const proto = received.filter((r) => r.path === '/proto/v1/traces');
    expect(json.length).toBeGreaterThan(0);
    expect(proto.length).toBeGreaterThan(0);
    expect(json.every((r) => r.contentType.startsWith('application/json'))).toBe(true);
    expect(proto.every((r) => r.contentType.startsWith('application/x-protobuf'))).toBe(true);

    const fromJson = json.flatMap((r) => decodeJson(r.body));
    const fromProto = proto.flatMap((r) => decodeProtobuf(r.body));
    const summary = (spans: WireSpan[]) => spans.map((s) => `${s.name} ${s.traceId}/${s.spanId}<${s.parentSpanId}`).sort();
    expect(summary(fromProto)).toEqual(summary(fromJson));

    for (const spans of [fromJson, fromProto]) {
      const byName = (name: string) => spans.filter((s) => s.name === name);
      const [segment] = byName('invoke_workflow support-agent');
      expect(segment).toBeDefined();
      expect(segment!.parentSpanId).toBe(request!.spanId);
      expect(segment!.attributes).toMatchObject({ 'ratchet.run.id': runId!, 'gen_ai.operation.name': 'invoke_workflow', 'ratchet.segment.outcome': 'completed' });
      const chats = byName('chat gpt-4.1-mini');
      expect(chats).toHaveLength(2);
      expect(chats.map((c) => c.attributes['gen_ai.usage.output_tokens']).sort()).toEqual([5, 9]);
      expect(chats[0]!.attributes).toMatchObject({ 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4.1-mini' });
      const [tool] = byName('execute_tool lookup_user');
      expect(tool!.attributes['gen_ai.tool.call.id']).toBe(`${runId!}:lookup_user#1`);

      // Every operation and event row names a span that was exported.
      const exported = new Map(spans.map((s) => [`${s.traceId}/${s.spanId}`, s.name]));
      exported.set(`${request!.traceId}/${request!.spanId}`, 'POST /tickets');
      const rows = [...(await operationIds(db, runId!)), ...(await eventIds(db, runId!))];
      for (const row of rows) expect(exported.get(`${row.traceId}/${row.spanId}`), JSON.stringify(row)).toBeDefined();
      const [infer] = (await operationIds(db, runId!)).filter((o) => o.kind === 'infer');
      expect(exported.get(`${infer!.traceId}/${infer!.spanId}`)).toBe('chat gpt-4.1-mini');
      expect(await task(db, runId!)).toMatchObject({ trace_id: request!.traceId, span_id: request!.spanId });
    }

    const metricBodies = received.filter((r) => r.path === '/json/v1/metrics').map((r) => JSON.parse(r.body.toString('utf8')));
    const names = metricBodies.flatMap((b) => b.resourceMetrics.flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics.map((m: any) => m.name))));
    expect(names).toEqual(expect.arrayContaining(['gen_ai.client.operation.duration', 'gen_ai.client.token.usage', 'ratchet.segment.duration', 'ratchet.contract.seal_to_commit.duration']));
  });
});

// ---------------------------------------------------------------- decoding what arrived

function decodeJson(body: Buffer): WireSpan[] {
  const request = JSON.parse(body.toString('utf8'));
  return request.resourceSpans.flatMap((rs: any) =>
    rs.scopeSpans.flatMap((ss: any) =>
      ss.spans.map((s: any) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        attributes: Object.fromEntries((s.attributes ?? []).map((kv: any) => [kv.key, anyValue(kv.value)])),
      })),
    ),
  );
}

function anyValue(v: any): unknown {
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(anyValue);
  return undefined;
}

/**
 * Just enough of the protobuf wire format for ExportTraceServiceRequest: resource_spans (1) →
 * scope_spans (2) → spans (2) → Span { trace_id 1, span_id 2, parent_span_id 4, name 5,
 * attributes 9: KeyValue { key 1, value 2: AnyValue { string 1, bool 2, int 3, double 4 } } }.
 */
function decodeProtobuf(body: Buffer): WireSpan[] {
  const spans: WireSpan[] = [];
  for (const rs of fields(body).filter((f) => f.no === 1)) {
    for (const ss of fields(rs.bytes!).filter((f) => f.no === 2)) {
      for (const s of fields(ss.bytes!).filter((f) => f.no === 2)) {
        const span: WireSpan = { traceId: '', spanId: '', parentSpanId: '', name: '', attributes: {} };
        for (const f of fields(s.bytes!)) {
          if (f.no === 1) span.traceId = f.bytes!.toString('hex');
          else if (f.no === 2) span.spanId = f.bytes!.toString('hex');
          else if (f.no === 4) span.parentSpanId = f.bytes!.toString('hex');
          else if (f.no === 5) span.name = f.bytes!.toString('utf8');
          else if (f.no === 9) {
            const kv = fields(f.bytes!);
            const key = kv.find((k) => k.no === 1)!.bytes!.toString('utf8');
            const value = fields(kv.find((k) => k.no === 2)?.bytes ?? Buffer.alloc(0))[0];
            if (!value) continue;
            span.attributes[key] =
              value.no === 1 ? value.bytes!.toString('utf8') : value.no === 2 ? value.varint === 1n : value.no === 3 ? Number(value.varint) : value.no === 4 ? value.bytes!.readDoubleLE(0) : undefined;
          }
        }
        spans.push(span);
      }
    }
  }
  return spans;
}

interface Field {
  no: number;
  varint?: bigint;
  bytes?: Buffer;
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const no = tag >> 3;
    const wire = tag & 7;
    if (wire === 0) out.push({ no, varint: varint() });
    else if (wire === 1) {
      out.push({ no, bytes: buf.subarray(i, i + 8) });
      i += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, bytes: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 5) {
      out.push({ no, bytes: buf.subarray(i, i + 4) });
      i += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}
