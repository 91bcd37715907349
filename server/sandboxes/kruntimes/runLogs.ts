// runtimed's log of a kruntimes sandbox's Run, read as the upstream SDKs' `Logs()` read it
// (kruntimes sdk/go/sandbox/client.go): the `runtimed` container log of the Run's assigned Runtime
// Pod (`status.assignedPod`, in the Run's namespace) through the Kubernetes pods/log API, keeping
// the JSON lines whose `run_uid` is the Run's UID — the Pod's log also holds other Runs' lines and
// runtimed's own. On top of that it reads like `kubectl logs` for the Run alone: `tailLines`
// counts the Run's lines (so it is applied here, after the filter), `sinceTime`/`sinceSeconds`
// go to the API server (per-line, so filtering first or last selects the same lines), `timestamps`
// prefixes the kubelet's stamp, and `follow` streams until the Run is terminal (a short grace
// for runtimed's last lines, then one more read) or the caller aborts. A user without `get` on
// `pods/log` is told so in words.
import { ApiException, type KubeConfig, Log, type LogOptions } from '@kubernetes/client-node';
import { PassThrough } from 'node:stream';
import { z } from 'zod';
import { isTerminalPhase } from '../../../protocol/kruntimes/run';
import type { RunLogQuery } from '../../../protocol/kruntimes/runtimedLog';
import type { SandboxRef } from '../../../protocol/sandboxes';
import { parseRfc3339Ns } from '../../local/containerLog';
import { SandboxError } from '../provider';
import type { RunStore } from '../runStore';
import type { ClusterApi } from './clusterApi';

/** The container of a Runtime Pod whose log holds runtimed's lines (the SDKs' LogReader opens this one). */
export const RUNTIMED_CONTAINER = 'runtimed';
/** How long a follow keeps reading after the Run turned terminal: runtimed may log a cancelled operation just after. */
const TERMINAL_GRACE_MS = 1000;

/** How long a follow the API server closed waits before it reads on. */
const RECONNECT_PAUSE_MS = 1000;

const RunUidSchema = z.looseObject({ run_uid: z.string() });

export interface RunLogPlace {
  context: string;
  config: KubeConfig;
  api: ClusterApi;
  store: RunStore;
}

/** One line of a pods/log answer read with `timestamps=true`. */
interface PodLine {
  timeNs: bigint;
  stamp: string;
  content: string;
}

function parsePodLine(text: string): PodLine | undefined {
  const i = text.indexOf(' ');
  if (i <= 0) return undefined;
  const stamp = text.slice(0, i);
  const timeNs = parseRfc3339Ns(stamp);
  return timeNs === undefined ? undefined : { timeNs, stamp, content: text.slice(i + 1) };
}

/** Whether a runtimed line is about the Run with `uid` (the SDKs: JSON whose `run_uid` matches). */
export function isRunLine(content: string, uid: string): boolean {
  if (!content.includes(uid)) return false;
  try {
    const parsed = RunUidSchema.safeParse(JSON.parse(content));
    return parsed.success && parsed.data.run_uid === uid;
  } catch {
    return false;
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** `sinceTime` as kubectl sends it: whole seconds (a line at a later fraction of that second is read again and skipped). */
function wholeSeconds(ns: bigint): string {
  return new Date(Number((ns / 1_000_000_000n) * 1000n)).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Opens the Pod's runtimed log (always with timestamps, to filter and resume by time); `onLine` per
 * line; resolves when the answer ends (a follow: when the caller aborts or the API server closes it).
 */
async function readPodLog(
  place: RunLogPlace,
  target: { namespace: string; pod: string; run: string },
  options: LogOptions,
  onLine: (line: PodLine) => void,
  signal: AbortSignal,
): Promise<void> {
  const sink = new PassThrough();
  let buffered = '';
  sink.setEncoding('utf8');
  const ended = new Promise<void>((resolve, reject) => {
    sink.on('data', (chunk: string) => {
      buffered += chunk;
      let i: number;
      while ((i = buffered.indexOf('\n')) >= 0) {
        const line = parsePodLine(buffered.slice(0, i).replace(/\r$/, ''));
        buffered = buffered.slice(i + 1);
        if (line) onLine(line);
      }
    });
    sink.on('end', () => {
      const last = buffered !== '' ? parsePodLine(buffered) : undefined;
      if (last) onLine(last);
      resolve();
    });
    sink.on('error', reject);
    // client-node pipes the HTTP body into the sink and leaves its errors unhandled (an abort is one):
    // the body is reached here, ending the sink on an error so nothing escapes as an uncaught exception.
    sink.on('pipe', (body: NodeJS.ReadableStream) => {
      body.on('error', () => {
        if (!sink.writableEnded) sink.end();
      });
    });
  });
  let controller: AbortController;
  try {
    controller = await new Log(place.config).log(target.namespace, target.pod, RUNTIMED_CONTAINER, sink, { ...options, timestamps: true });
  } catch (err) {
    throw refusal(place, target, err);
  }
  // An abort ends the HTTP answer without ending the sink: end it here.
  const abort = (): void => {
    controller.abort();
    if (!sink.writableEnded) sink.end();
  };
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  try {
    await ended;
  } finally {
    signal.removeEventListener('abort', abort);
  }
}

/** A refused pods/log request in words: who may not read what, and what to ask for. */
function refusal(place: RunLogPlace, target: { namespace: string; pod: string; run: string }, err: unknown): Error {
  if (!(err instanceof ApiException)) return err as Error;
  const pod = `Runtime Pod ${target.namespace}/${target.pod}`;
  switch (err.code) {
    case 403:
      return new SandboxError(
        'cluster_forbidden',
        `the user of context ${place.context} may not read the log of ${pod}, where runtimed logs ${target.run}'s operations: ` +
          `reading it needs "get" on "pods/log" in namespace ${target.namespace} (check with: kubectl auth can-i get pods/log -n ${target.namespace}); ask the cluster's administrator for it`,
      );
    case 404:
      return new SandboxError('provider_unavailable', `${pod}, which ran ${target.run}, is gone, and its log with it`);
    case 400:
      return new SandboxError('invalid_spec', `the API server refused to read the log of ${pod}: ${err.message}`);
    default:
      return place.api.translate(`reading the log of ${pod}`, err);
  }
}

/** runtimed's log of the sandbox's Run (SandboxProvider.logs for kruntimes). */
export async function readRunLog(
  place: RunLogPlace,
  ref: SandboxRef,
  query: RunLogQuery,
  onLine: (line: string) => void,
  signal: AbortSignal = new AbortController().signal,
): Promise<void> {
  const run = await place.store.get(ref.namespace, ref.name);
  const uid = run.metadata.uid ?? '';
  const pod = run.status?.assignedPod;
  if (!pod) {
    throw new SandboxError('run_state', `Session Run has no assigned Runtime Pod: ${ref.name} is ${run.status?.phase ?? 'Pending'}, and runtimed logs its operations only once a Pod runs it`);
  }
  const target = { namespace: run.metadata.namespace ?? ref.namespace, pod, run: ref.name };
  const emit = (l: PodLine): void => onLine(query.timestamps ? `${l.stamp} ${l.content}` : l.content);
  const since: LogOptions = {
    ...(query.sinceTime !== undefined ? { sinceTime: query.sinceTime } : {}),
    ...(query.sinceSeconds !== undefined ? { sinceSeconds: query.sinceSeconds } : {}),
  };

  // The Run's lines so far (the whole Pod log: its tail may hold other Runs' lines only).
  const mine: PodLine[] = [];
  let lastNs: bigint | undefined;
  await readPodLog(
    place,
    target,
    since,
    (l) => {
      lastNs = l.timeNs;
      if (isRunLine(l.content, uid)) mine.push(l);
    },
    signal,
  );
  const tail = query.tailLines === undefined ? mine : query.tailLines === 0 ? [] : mine.slice(-query.tailLines);
  for (const l of tail) emit(l);
  if (!query.follow || signal.aborted) return;

  // Then every newer line, from where the read ended, until the Run is terminal or the caller leaves.
  const stop = new AbortController();
  const leave = (): void => stop.abort();
  signal.addEventListener('abort', leave, { once: true });
  let grace: NodeJS.Timeout | undefined;
  const ending = (): void => {
    grace ??= setTimeout(leave, TERMINAL_GRACE_MS);
  };
  const watch = isTerminalPhase(run.status?.phase)
    ? undefined
    : await place.store.watch(
        { namespace: target.namespace, name: ref.name },
        {
          onEvent: (e) => {
            if (e.run.metadata.uid === uid && (e.type === 'DELETED' || isTerminalPhase(e.run.status?.phase))) ending();
          },
        },
      );
  if (!watch) ending();
  const fresh = (l: PodLine): void => {
    if (lastNs !== undefined && l.timeNs <= lastNs) return; // already read
    lastNs = l.timeNs;
    if (isRunLine(l.content, uid)) emit(l);
  };
  try {
    // The API server may close a long follow; read on from the last line while the Run lives.
    while (!stop.signal.aborted) {
      const from: LogOptions = lastNs !== undefined ? { sinceTime: wholeSeconds(lastNs) } : since;
      await readPodLog(place, target, { ...from, follow: true }, fresh, stop.signal);
      if (!stop.signal.aborted) await pause(RECONNECT_PAUSE_MS, stop.signal);
    }
    // Lines written between the last chunk and the stop (the Run's end): one more read.
    if (!signal.aborted) {
      await readPodLog(place, target, lastNs !== undefined ? { sinceTime: wholeSeconds(lastNs) } : since, fresh, signal);
    }
  } finally {
    clearTimeout(grace);
    watch?.stop();
    signal.removeEventListener('abort', leave);
  }
}
