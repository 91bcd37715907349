// Kubeconfig as kubectl reads it: the files of KUBECONFIG (path-list, missing files skipped,
// the first file to set a value wins), else ~/.kube/config, else the in-cluster service
// account. Credentials — tokens, client certificates, exec plugins — are applied by
// `@kubernetes/client-node`; this module only finds the configuration and names its contexts.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { SandboxSessionsError } from '../../../protocol/errors';

export interface LoadedKubeConfig {
  config: KubeConfig;
  /** Where it came from, for messages: the files, or "in-cluster service account". */
  source: string;
  inCluster: boolean;
}

export class KubeConfigError extends SandboxSessionsError<'kubeconfig_invalid'> {
  override readonly name = 'KubeConfigError';
  readonly service = 'cluster';
  constructor(message: string) {
    super('kubeconfig_invalid', message);
  }
}

const IN_CLUSTER_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

function kubeconfigFiles(env: NodeJS.ProcessEnv): string[] {
  const list = (env.KUBECONFIG ?? '').split(path.delimiter).filter((f) => f !== '');
  return list.length > 0 ? list : [path.join(env.HOME ?? os.homedir(), '.kube', 'config')];
}

/** What the kubeconfig files look like now (paths, sizes, mtimes): a change means "read them again", as kubectl would. */
export function kubeconfigStamp(env: NodeJS.ProcessEnv = process.env): string {
  return kubeconfigFiles(env)
    .map((f) => {
      const st = fs.statSync(f, { throwIfNoEntry: false });
      return st ? `${f}:${st.size}:${st.mtimeMs}` : `${f}:-`;
    })
    .join('|');
}

/**
 * Loads the kubeconfig the environment names; undefined when there is none at all. `serviceAccountRoot` is where
 * the in-cluster service account's `/var/run/secrets/kubernetes.io/serviceaccount` lives ('' — the root, as
 * Kubernetes mounts it; tests point it at a folder of their own).
 */
export function loadKubeConfig(env: NodeJS.ProcessEnv = process.env, serviceAccountRoot = ''): LoadedKubeConfig | undefined {
  const files = kubeconfigFiles(env).filter((f) => fs.existsSync(f));
  if (files.length > 0) {
    const config = new KubeConfig();
    try {
      config.loadFromFile(files[0] as string);
      for (const file of files.slice(1)) {
        const next = new KubeConfig();
        next.loadFromFile(file);
        config.mergeConfig(next, true);
      }
    } catch (err) {
      throw new KubeConfigError(`cannot read kubeconfig ${files.join(path.delimiter)}: ${(err as Error).message}`);
    }
    return { config, source: files.join(path.delimiter), inCluster: false };
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host && port && fs.existsSync(`${serviceAccountRoot}${IN_CLUSTER_TOKEN}`)) {
    const config = new KubeConfig();
    config.loadFromCluster(serviceAccountRoot);
    // client-node takes the API server's address from process.env; this provider reads the environment it was given.
    const server = `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
    config.clusters = config.clusters.map((cluster) => ({ ...cluster, server }));
    return { config, source: 'in-cluster service account', inCluster: true };
  }
  return undefined;
}

/** A copy of `base` whose current context is `context` (other users' requests are unaffected). */
export function configForContext(base: KubeConfig, context: string): KubeConfig {
  if (!base.getContextObject(context)) throw new KubeConfigError(`kubeconfig has no context "${context}" (contexts: ${base.getContexts().map((c) => c.name).join(', ') || 'none'})`);
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: base.getClusters(), users: base.getUsers(), contexts: base.getContexts(), currentContext: context });
  return kc;
}

/** The namespace a context names, else `default` (as kubectl). */
export function contextNamespace(kc: KubeConfig, context: string): string {
  return kc.getContextObject(context)?.namespace || 'default';
}

/** The bearer token the context's user presents (static, token file, exec plugin, in-cluster), if any. */
export async function bearerToken(kc: KubeConfig): Promise<string | undefined> {
  const opts: { headers?: Record<string, string | string[] | undefined> } = { headers: {} };
  await kc.applyToHTTPSOptions(opts as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
  const header = opts.headers?.Authorization ?? opts.headers?.authorization;
  const value = Array.isArray(header) ? header[0] : header;
  const m = value ? /^\s*bearer\s+(.+)$/i.exec(value) : null;
  return m?.[1]?.trim() || undefined;
}
