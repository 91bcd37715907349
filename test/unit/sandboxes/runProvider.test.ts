// The provider core (server/sandboxes/runProvider.ts) over a Run store held in memory: what every substrate's
// lifecycle means — create waits for Ready through the store's watch (never by reading the Run again and again),
// says which phase it is stuck in, fails with the Run's own words when it ends before Ready; terminate refuses a
// downgrade before asking the store and waits for the expected end; delete returns only once the store says the
// Run is gone (finalizers); artifacts are checked by name before the substrate fetches them; labels (the
// grant to agents) are merge-patched, and summaries say whether agents created or may use a sandbox.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { AGENTS_GRANTED, AGENTS_LABEL, agentGrantLabels, CREATOR_AGENT, CREATOR_LABEL } from '../../../protocol/agentAccess';
import { RUN_API_VERSION, RUN_KIND, type Run, type RunMetadataPatch, type RunPhase, type TerminationMode } from '../../../protocol/kruntimes/run';
import type { SandboxCreateSpec, SandboxRef } from '../../../protocol/sandboxes';
import { createLogger } from '../../../server/log';
import { SandboxError } from '../../../server/sandboxes/provider';
import { RunProvider, type RunPlace, type RunSubstrate } from '../../../server/sandboxes/runProvider';
import type { RunStore, RunStoreEvent, RunStoreWatchHandlers } from '../../../server/sandboxes/runStore';

/** Runs in memory; a delete only marks the Run (as a finalizer would) until `remove`. */
class MemoryRunStore implements RunStore {
  readonly runs = new Map<string, Run>();
  private readonly listeners = new Set<(e: RunStoreEvent) => void>();
  gets = 0;
  patches: TerminationMode[] = [];

  private emit(type: RunStoreEvent['type'], run: Run): void {
    for (const l of this.listeners) l({ type, run: structuredClone(run) });
  }
  async get(namespace: string, name: string): Promise<Run> {
    this.gets++;
    const run = this.runs.get(name);
    if (!run) throw new SandboxError('sandbox_not_found', `no sandbox ${namespace}/${name}`);
    return structuredClone(run);
  }
  async list(): Promise<Run[]> {
    return [...this.runs.values()];
  }
  async create(namespace: string, body: Run): Promise<Run> {
    const run: Run = { ...body, metadata: { ...body.metadata, name: 'sbx-1', namespace, uid: 'uid-1' }, status: { phase: 'Pending' } };
    this.runs.set('sbx-1', run);
    this.emit('ADDED', run);
    return structuredClone(run);
  }
  async patchTermination(_namespace: string, name: string, mode: TerminationMode): Promise<Run> {
    this.patches.push(mode);
    const run = this.runs.get(name) as Run;
    run.spec.termination = { mode };
    this.emit('MODIFIED', run);
    return structuredClone(run);
  }
  async patchMetadata(_namespace: string, name: string, patch: RunMetadataPatch): Promise<Run> {
    const run = this.runs.get(name);
    if (!run) throw new SandboxError('sandbox_not_found', `no sandbox ${name}`);
    for (const field of ['labels', 'annotations'] as const) {
      const next: Record<string, string> = { ...run.metadata[field] };
      for (const [k, v] of Object.entries(patch[field] ?? {})) {
        if (v === null) delete next[k];
        else next[k] = v;
      }
      if (patch[field] !== undefined) run.metadata[field] = next;
    }
    this.emit('MODIFIED', run);
    return structuredClone(run);
  }
  async delete(): Promise<void> {}
  async watch(query: { namespace: string; name?: string }, handlers: RunStoreWatchHandlers) {
    for (const run of this.runs.values()) if (query.name === undefined || run.metadata.name === query.name) handlers.onEvent({ type: 'ADDED', run: structuredClone(run) });
    this.listeners.add(handlers.onEvent);
    return { stop: () => void this.listeners.delete(handlers.onEvent) };
  }
  /** The controller moves the Run on. */
  phase(name: string, phase: RunPhase, message?: string): void {
    const run = this.runs.get(name) as Run;
    run.status = { ...run.status, phase, ...(message ? { message } : {}) };
    this.emit('MODIFIED', run);
  }
  remove(name: string): void {
    const run = this.runs.get(name) as Run;
    this.runs.delete(name);
    this.emit('DELETED', run);
  }
}

function substrate(store: MemoryRunStore, fetched: string[][]): RunSubstrate {
  const place: RunPlace = { context: 'mem', store };
  return {
    kind: 'local',
    log: createLogger(new PassThrough(), 'error'),
    readyTimeoutMs: 5000,
    waitProgress: 'start only',
    info: async () => ({ kind: 'local', label: 'memory', available: true, contexts: [], runtimes: [] }),
    place: (context) => (context === undefined || context === 'mem' ? place : undefined),
    creatingMessage: (spec) => `creating a ${spec.runtime} sandbox`,
    connect: async (_place, _run, endpoint) => ({ endpoint: { url: endpoint.url }, token: 't' }),
    fetchArtifacts: async (_place, _run, refs, destination) => {
      fetched.push(refs.map((r) => r.name));
      return refs.map((r) => ({ name: r.name, path: `${destination}/${r.name}`, type: r.type, sizeBytes: r.sizeBytes, digest: r.digest }));
    },
    watch: () => () => undefined,
    dispose: async () => undefined,
  };
}

const spec: SandboxCreateSpec = { provider: 'local', context: 'mem', namespace: 'default', runtime: 'process' };
const ref: SandboxRef = { provider: 'local', context: 'mem', namespace: 'default', name: 'sbx-1' };
const tick = () => new Promise((r) => setImmediate(r));

describe('provider core: one lifecycle over a Run store', () => {
  let store: MemoryRunStore;
  let provider: RunProvider;
  let fetched: string[][];
  beforeEach(() => {
    store = new MemoryRunStore();
    fetched = [];
    provider = new RunProvider(substrate(store, fetched));
  });
  afterEach(() => provider.dispose());

  it('create waits for Ready through the watch, reading the Run no more, and reports creating then starting', async () => {
    const progress: string[] = [];
    const created = provider.create(spec, { waitForReady: true, progress: (phase) => progress.push(phase) });
    await tick();
    for (const phase of ['Scheduled', 'Running', 'Ready'] as const) {
      store.phase('sbx-1', phase);
      await tick();
    }
    const ready = await created;
    assert.equal(ready.phase, 'Ready');
    assert.equal(ready.ref.context, 'mem');
    assert.equal(store.gets, 0, 'no polling: the wait followed the watch');
    assert.deepEqual(progress, ['creating', 'starting']);
    assert.equal(body(store).metadata.generateName, 'sbx-', 'the session Run body of the spec was stored');
  });

  it('a Run that ends before Ready fails the create with its phase and message; a stuck one times out naming its phase', async () => {
    const failed = provider.create(spec, { waitForReady: true });
    await tick();
    store.phase('sbx-1', 'Failed', 'open artifact input x: missing');
    await assert.rejects(failed, (e: unknown) => e instanceof SandboxError && e.code === 'run_state' && /sbx-1 is Failed \(open artifact input x: missing\)/.test(e.message));

    store.runs.clear();
    const stuck = provider.create(spec, { waitForReady: true, timeoutMs: 150 });
    await tick();
    store.phase('sbx-1', 'Scheduled');
    await assert.rejects(stuck, (e: unknown) => e instanceof SandboxError && e.code === 'sandbox_wait_timeout' && e.message === 'default/sbx-1 is still Scheduled after 0 s');
  });

  it('terminate refuses a downgrade before asking the store, and waits for the end the mode promises', async () => {
    await provider.create(spec, { waitForReady: false });
    store.phase('sbx-1', 'Ready');
    const draining = provider.terminate(ref, 'Drain', { wait: true });
    await tick();
    assert.deepEqual(store.patches, ['Drain']);
    store.phase('sbx-1', 'Finalizing');
    await tick();
    store.phase('sbx-1', 'Cancelled');
    await assert.rejects(draining, (e: unknown) => e instanceof SandboxError && e.code === 'run_state' && /Cancelled/.test(e.message));

    store.runs.clear();
    await provider.create(spec, { waitForReady: false });
    store.phase('sbx-1', 'Ready');
    await provider.terminate(ref, 'Immediate', { wait: false });
    await assert.rejects(provider.terminate(ref, 'Drain', { wait: false }), /Immediate/);
    assert.deepEqual(store.patches, ['Drain', 'Immediate'], 'the refused downgrade never reached the store');
  });

  it('delete returns only once the store reports the Run gone (a finalizer kept it)', async () => {
    await provider.create(spec, { waitForReady: false });
    let done = false;
    const deleting = provider.delete(ref).then(() => (done = true));
    for (let i = 0; i < 5; i++) await tick();
    assert.equal(done, false, 'still there: delete is waiting');
    store.remove('sbx-1');
    await deleting;
    assert.equal(done, true);
  });

  it('downloads only the artifacts asked for, refusing an unknown name and a relative destination', async () => {
    await provider.create(spec, { waitForReady: false });
    const run = store.runs.get('sbx-1') as Run;
    const artifact = (name: string) => ({ name, driver: 'filesystem' as const, type: 'file' as const, sizeBytes: 1, digest: `sha256:${'0'.repeat(64)}`, location: { filesystem: { path: name } } });
    run.status = { phase: 'Succeeded', artifactRefs: [artifact('a.txt'), artifact('b.txt')] };
    const got = await provider.downloadArtifacts(ref, '/tmp/out', { names: ['b.txt'], unpack: false });
    assert.deepEqual(got.map((a) => a.name), ['b.txt']);
    await assert.rejects(provider.downloadArtifacts(ref, '/tmp/out', { names: ['c.txt'], unpack: false }), /no artifact named c\.txt/);
    await assert.rejects(provider.downloadArtifacts(ref, 'out', { unpack: false }), (e: unknown) => e instanceof SandboxError && e.code === 'invalid_destination');
    assert.deepEqual(fetched, [['b.txt']]);
  });

  it('a create carries the caller\'s labels; patchMetadata grants and revokes agents\' use, keeping the other labels, and summaries say so', async () => {
    const created = await provider.create({ ...spec, labels: { [CREATOR_LABEL]: CREATOR_AGENT } }, { waitForReady: false });
    assert.equal(created.createdByAgent, true);
    assert.equal(created.grantedToAgents, undefined);
    const granted = await provider.patchMetadata(ref, { labels: agentGrantLabels(true) });
    assert.deepEqual([granted.createdByAgent, granted.grantedToAgents], [true, true]);
    assert.deepEqual(body(store).metadata.labels, { [CREATOR_LABEL]: CREATOR_AGENT, 'app.kubernetes.io/created-by': 'sandbox-sessions', [AGENTS_LABEL]: AGENTS_GRANTED });
    const listed = await provider.list({});
    assert.equal(listed[0]?.grantedToAgents, true, 'a list reads the grant too');
    const revoked = await provider.patchMetadata(ref, { labels: agentGrantLabels(false) });
    assert.equal(revoked.grantedToAgents, undefined);
    assert.equal(body(store).metadata.labels?.[AGENTS_LABEL], undefined);
    assert.equal(body(store).metadata.labels?.[CREATOR_LABEL], CREATOR_AGENT);
    await assert.rejects(provider.patchMetadata({ ...ref, name: 'sbx-9' }, { labels: agentGrantLabels(true) }), (e: unknown) => e instanceof SandboxError && e.code === 'sandbox_not_found');
  });
});

function body(store: MemoryRunStore): Run {
  const run = store.runs.get('sbx-1') as Run;
  assert.equal(run.apiVersion, RUN_API_VERSION);
  assert.equal(run.kind, RUN_KIND);
  return run;
}
