// A watch of Runs that survives the network: list, then watch from the list's resourceVersion
// (with bookmarks); when the stream ends or breaks, resume from the last version seen; when the
// API server answers 410 Gone (that version was compacted), list again and report what changed
// meanwhile. Every phase a Run passes through while the stream is up reaches the listener, and
// none is lost across a reconnect.
import { type KubeConfig, Watch } from '@kubernetes/client-node';
import { RUN_GROUP, RUN_PLURAL, RUN_VERSION, RunSchema, type Run } from '../../../protocol/kruntimes/run';
import type { Logger } from '../../log';
import type { ClusterApi } from './clusterApi';

export type RunWatchEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED'; run: Run };

export interface RunWatchOptions {
  namespace: string;
  /** Only this Run (a `metadata.name` field selector). */
  name?: string;
  onEvent: (event: RunWatchEvent) => void;
  /** Called when (re)connecting fails; the watch keeps retrying until stopped. */
  onError?: (err: Error) => void;
  log?: Logger;
}

const BACKOFF_MS = [100, 250, 500, 1000, 2000, 5000];

export class RunWatch {
  private readonly watch: Watch;
  private resourceVersion: string | undefined;
  private readonly known = new Map<string, Run>();
  private stopped = false;
  private abort: (() => void) | undefined;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  /** How many times the stream was (re)opened and how many relists a 410 caused. */
  readonly stats = { connects: 0, relists: 0 };

  constructor(
    config: KubeConfig,
    private readonly api: ClusterApi,
    private readonly opts: RunWatchOptions,
  ) {
    this.watch = new Watch(config);
  }

  async start(): Promise<void> {
    await this.relist();
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort?.();
  }

  private emit(type: RunWatchEvent['type'], run: Run): void {
    const uid = run.metadata.uid ?? `${run.metadata.namespace}/${run.metadata.name}`;
    if (type === 'DELETED') this.known.delete(uid);
    else this.known.set(uid, run);
    this.opts.onEvent({ type, run });
  }

  /** Lists the Runs and reports the difference from what was known. */
  private async relist(): Promise<void> {
    const { items, resourceVersion } = await this.api.listRuns(this.opts.namespace);
    const wanted = items.filter((r) => this.opts.name === undefined || r.metadata.name === this.opts.name);
    const seen = new Set<string>();
    for (const run of wanted) {
      const uid = run.metadata.uid ?? '';
      seen.add(uid);
      const before = this.known.get(uid);
      if (!before) this.emit('ADDED', run);
      else if (before.metadata.resourceVersion !== run.metadata.resourceVersion) this.emit('MODIFIED', run);
    }
    for (const [uid, run] of [...this.known]) if (!seen.has(uid)) this.emit('DELETED', run);
    this.resourceVersion = resourceVersion;
  }

  private retry(err?: Error): void {
    if (this.stopped) return;
    if (err) {
      this.failures++;
      this.opts.onError?.(err);
    }
    const delay = err ? (BACKOFF_MS[Math.min(this.failures - 1, BACKOFF_MS.length - 1)] ?? 5000) : 50;
    this.timer = setTimeout(() => void this.connect(), delay);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    let gone = false;
    const query: Record<string, string | boolean> = { allowWatchBookmarks: true };
    if (this.resourceVersion) query.resourceVersion = this.resourceVersion;
    if (this.opts.name) query.fieldSelector = `metadata.name=${this.opts.name}`;
    const path = `/apis/${RUN_GROUP}/${RUN_VERSION}/namespaces/${encodeURIComponent(this.opts.namespace)}/${RUN_PLURAL}`;
    try {
      this.stats.connects++;
      const request = await this.watch.watch(
        path,
        query,
        (type: string, obj: unknown) => {
          if (type === 'BOOKMARK') {
            const rv = (obj as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
            if (rv) this.resourceVersion = rv;
            return;
          }
          if (type === 'ERROR') {
            const code = (obj as { code?: number }).code;
            if (code === 410) gone = true;
            return;
          }
          const parsed = RunSchema.safeParse(obj);
          if (!parsed.success || (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED')) return;
          this.failures = 0;
          if (parsed.data.metadata.resourceVersion) this.resourceVersion = parsed.data.metadata.resourceVersion;
          this.emit(type, parsed.data);
        },
        (err: unknown) => {
          this.abort = undefined;
          if (this.stopped) return;
          if (gone) {
            this.opts.log?.info('Run watch expired (410); listing again', { namespace: this.opts.namespace });
            this.stats.relists++;
            this.relist().then(
              () => this.retry(),
              (e: Error) => this.retry(e),
            );
            return;
          }
          this.retry(err ? (err as Error) : undefined);
        },
      );
      this.abort = () => request.abort();
      if (this.stopped) request.abort();
    } catch (err) {
      this.retry(this.api.translate(`watch Runs in ${this.opts.namespace}`, err));
    }
  }
}
