// Test helpers for `operations:ws` against a real local gateway: a client socket whose text
// frames can be awaited one by one (bounded), its close code and reason, and a raw upgrade
// request whose refusal (status, headers, JSON body) can be checked byte for byte.
import assert from 'node:assert/strict';
import http from 'node:http';
import { WebSocket } from 'ws';
import type { Run } from '../../../protocol/kruntimes/run';
import { call, runsPath } from './harness';

export interface OpenSocket {
  ws: WebSocket;
  /** The next text frame (bounded wait). */
  next(timeoutMs?: number): Promise<string>;
  /** Frames received and not yet taken by `next`. */
  pending(): string[];
  closed: Promise<{ code: number; reason: string }>;
  send(value: unknown): void;
}

export function wsUrl(gwUrl: string, P: string): string {
  return `${gwUrl.replace(/^http/, 'ws')}${P}/operations:ws`;
}

export function openSocket(gw: { url: string; token: string }, P: string, headers: Record<string, string> = {}): Promise<OpenSocket> {
  return wrapSocket(new WebSocket(wsUrl(gw.url, P), { headers: { authorization: `Bearer ${gw.token}`, ...headers } }));
}

/** Wraps a client WebSocket as an OpenSocket (frames awaited one by one, bounded). */
export function wrapSocket(ws: WebSocket): Promise<OpenSocket> {
  const queue: string[] = [];
  const waiters: Array<(frame: string) => void> = [];
  ws.on('message', (data, isBinary) => {
    assert.equal(isBinary, false, 'server frames are text frames');
    const text = (data as Buffer).toString('utf8');
    const waiter = waiters.shift();
    if (waiter) waiter(text);
    else queue.push(text);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({
        ws,
        closed,
        pending: () => [...queue],
        send: (value) => ws.send(JSON.stringify(value)),
        next: (timeoutMs = 10_000) =>
          new Promise<string>((res, rej) => {
            const queued = queue.shift();
            if (queued !== undefined) return res(queued);
            const timer = setTimeout(() => rej(new Error('no frame in time')), timeoutMs);
            waiters.push((frame) => {
              clearTimeout(timer);
              res(frame);
            });
          }),
      }),
    );
    ws.once('error', reject);
  });
}

export interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  upgraded: boolean;
}

/** A raw upgrade request (so a refusal's status, headers and body can be checked exactly). */
export function rawUpgrade(gwUrl: string, path: string, headers: Record<string, string>, method = 'GET'): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gwUrl}${path}`, {
      method,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        ...headers,
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '', upgraded: true });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), upgraded: false }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('upgrade request timed out')));
    req.end();
  });
}

export const errBody = (message: string): string => JSON.stringify({ error: message }) + '\n';

export interface OperationRecord {
  operationId: string;
  state: string;
  outcome?: string;
  exitCode?: number;
}

/** The Run's exec records (`GET …/runs/{name}/operations`, a local extension). */
export async function operations(gw: { url: string; token: string }, run: Run): Promise<OperationRecord[]> {
  return ((await call(gw, 'GET', `${runsPath(run.metadata.namespace, run.metadata.name)}/operations`)).json() as { items: OperationRecord[] }).items;
}

/** Waits (bounded) until the operation's exec record is in `state`; returns the record. */
export async function waitOperationState(gw: { url: string; token: string }, run: Run, id: string, state: 'running' | 'ended', timeoutMs = 10_000): Promise<OperationRecord> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rec = (await operations(gw, run)).find((o) => o.operationId === id);
    if (rec?.state === state) return rec;
    assert.ok(Date.now() < deadline, `operation ${id} is ${rec?.state ?? 'unknown'}, not ${state}, after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
