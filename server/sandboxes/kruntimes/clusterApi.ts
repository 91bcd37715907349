// The Kubernetes calls the kruntimes provider makes, through `@kubernetes/client-node`: Runs
// and Runtimes (kruntimes.io/v1alpha1), namespaces, Services and Pods. Every answer is parsed
// with the project's schemas, and every refusal becomes a SandboxError whose message is the API
// server's own (the CEL text of a 422, the RBAC text of a 403) with what to do about it.
import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { z } from 'zod';
import { RUN_GROUP, RUN_PLURAL, RUN_VERSION, RunSchema, type Run, type RunMetadataPatch, type TerminationMode } from '../../../protocol/kruntimes/run';
import { SandboxError } from '../provider';

const RunListSchema = z.looseObject({ metadata: z.looseObject({ resourceVersion: z.string().optional() }).optional(), items: z.array(RunSchema) });
const RuntimeSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string(), namespace: z.string().optional() }),
  spec: z.looseObject({ runs: z.number().optional(), artifactStore: z.looseObject({ driver: z.string() }).optional() }).optional(),
});
const RuntimeListSchema = z.looseObject({ items: z.array(RuntimeSchema) });
export type RuntimeResource = z.infer<typeof RuntimeSchema>;

const StatusBodySchema = z.looseObject({ kind: z.literal('Status').optional(), message: z.string().optional(), reason: z.string().optional() });

export class ClusterApi {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(
    readonly config: KubeConfig,
    /** The context's name, for messages. */
    readonly context: string,
  ) {
    this.custom = config.makeApiClient(CustomObjectsApi);
    this.core = config.makeApiClient(CoreV1Api);
  }

  /** Runs `call`, turning API exceptions into SandboxErrors that say what happened and where. */
  async call<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw this.translate(what, err);
    }
  }

  translate(what: string, err: unknown): Error {
    if (err instanceof SandboxError) return err;
    if (err instanceof ApiException) {
      const body = parseStatusBody(err.body);
      // client-node keeps the Status body for most answers; for some (401) only "Message: …" in its text.
      const text = body?.message ?? /^Message: (.+)$/m.exec(err.message)?.[1] ?? `HTTP ${err.code}`;
      const where = `context ${this.context}`;
      switch (err.code) {
        case 401:
          return new SandboxError('cluster_unauthorized', `the cluster of ${where} rejected its credentials (401 ${text}); refresh the kubeconfig user's token or certificate`);
        case 403:
          return new SandboxError('cluster_forbidden', `${what}: ${text}`);
        case 404:
          return new SandboxError('sandbox_not_found', `${what}: ${text}`);
        case 409:
          return new SandboxError('cluster_conflict', `${what}: ${text}`);
        case 422:
        case 400:
          return new SandboxError('invalid_spec', `${what}: ${text}`);
        default:
          return new SandboxError('provider_unavailable', `${what} (${where}): HTTP ${err.code} ${text}`);
      }
    }
    const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    const cause = e.cause?.code ?? e.code;
    return new SandboxError('provider_unavailable', `${what}: cannot reach the cluster of context ${this.context}${cause ? ` (${cause})` : ''}: ${e.message}`);
  }

  async getRun(namespace: string, name: string): Promise<Run> {
    const body = await this.call(`get Run ${namespace}/${name}`, () =>
      this.custom.getNamespacedCustomObject({ group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace, name }),
    );
    return RunSchema.parse(body);
  }

  async listRuns(namespace: string): Promise<{ items: Run[]; resourceVersion: string | undefined }> {
    const body = RunListSchema.parse(
      await this.call(`list Runs in ${namespace}`, () => this.custom.listNamespacedCustomObject({ group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace })),
    );
    return { items: body.items, resourceVersion: body.metadata?.resourceVersion };
  }

  /** Creates a Run; with `dryRun` the API server admits and prunes it exactly as a create but stores nothing. */
  async createRun(namespace: string, run: Run, opts: { dryRun?: boolean } = {}): Promise<Run> {
    const body = await this.call(`${opts.dryRun ? 'dry-run ' : ''}create a Run in ${namespace}`, () =>
      this.custom.createNamespacedCustomObject({ group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace, body: run, ...(opts.dryRun ? { dryRun: 'All' } : {}) }),
    );
    return RunSchema.parse(body);
  }

  /** The `runs.kruntimes.io` CustomResourceDefinition as JSON (cluster-scoped: many users may not read it). */
  getRunCrd(): Promise<unknown> {
    return this.call(`get CustomResourceDefinition ${RUN_PLURAL}.${RUN_GROUP}`, () =>
      this.custom.getClusterCustomObject({ group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', name: `${RUN_PLURAL}.${RUN_GROUP}` }),
    );
  }

  /** A JSON merge patch of `spec.termination` (conflict-free, unlike a whole-object update). */
  async patchTermination(namespace: string, name: string, mode: TerminationMode): Promise<Run> {
    const body = await this.call(`request ${mode} termination of ${namespace}/${name}`, () =>
      this.custom.patchNamespacedCustomObject(
        { group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace, name, body: { spec: { termination: { mode } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    return RunSchema.parse(body);
  }

  /** A JSON merge patch of `metadata.labels` and `metadata.annotations` (null removes one), as `kubectl label` sends it. */
  async patchMetadata(namespace: string, name: string, metadata: RunMetadataPatch): Promise<Run> {
    const body = await this.call(`label Run ${namespace}/${name}`, () =>
      this.custom.patchNamespacedCustomObject(
        { group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace, name, body: { metadata } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    return RunSchema.parse(body);
  }

  async deleteRun(namespace: string, name: string): Promise<void> {
    await this.call(`delete Run ${namespace}/${name}`, () =>
      this.custom.deleteNamespacedCustomObject({ group: RUN_GROUP, version: RUN_VERSION, plural: RUN_PLURAL, namespace, name }),
    );
  }

  async listRuntimes(namespace: string): Promise<RuntimeResource[]> {
    const body = await this.call(`list Runtimes in ${namespace}`, () =>
      this.custom.listNamespacedCustomObject({ group: RUN_GROUP, version: RUN_VERSION, plural: 'runtimes', namespace }),
    );
    return RuntimeListSchema.parse(body).items;
  }

  async listNamespaces(): Promise<string[]> {
    const list = await this.call('list namespaces', () => this.core.listNamespace());
    return list.items.map((n) => n.metadata?.name ?? '').filter((n) => n !== '');
  }

  getService(namespace: string, name: string) {
    return this.call(`get Service ${namespace}/${name}`, () => this.core.readNamespacedService({ namespace, name }));
  }

  async listPods(namespace: string, labelSelector: string) {
    return (await this.call(`list Pods (${labelSelector}) in ${namespace}`, () => this.core.listNamespacedPod({ namespace, labelSelector }))).items;
  }
}

function parseStatusBody(body: unknown): z.infer<typeof StatusBodySchema> | undefined {
  let value = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  const parsed = StatusBodySchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
