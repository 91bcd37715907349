// The session Run a sandbox spec asks for — the same body for the local runtime and for
// kruntimes: `spec.runtime`, `mode.session` with its timeouts, `timeout`, `env` values and
// `artifactInputs`, the caller's labels, the server's annotations (the opensandbox backend's settings, the session
// revision the sandbox is opened from), and a generated `sbx-` name unless the caller chose one.
import { RUN_API_VERSION, RUN_KIND, type Run } from '../../protocol/kruntimes/run';
import type { SandboxCreateSpec } from '../../protocol/sandboxes';
import { openSandboxAnnotations } from './opensandbox/runSettings';

export const CREATED_BY_LABEL = 'app.kubernetes.io/created-by';

export function sessionRunBody(spec: SandboxCreateSpec, annotations: Record<string, string> = {}): Run {
  const session: NonNullable<Run['spec']['mode']['session']> = {};
  if (spec.idleTimeoutSeconds !== undefined) session.idleTimeoutSeconds = spec.idleTimeoutSeconds;
  if (spec.leaseTimeoutSeconds !== undefined) session.leaseTimeoutSeconds = spec.leaseTimeoutSeconds;
  if (spec.queueSize !== undefined) session.queueSize = spec.queueSize;
  if (spec.operationTimeout !== undefined) session.operationTimeout = spec.operationTimeout;
  // The opensandbox backend's settings travel as annotations too (opensandbox/runSettings.ts).
  const allAnnotations = { ...annotations, ...(spec.opensandbox ? openSandboxAnnotations(spec.opensandbox) : {}) };
  return {
    apiVersion: RUN_API_VERSION,
    kind: RUN_KIND,
    metadata: {
      ...(spec.name ? { name: spec.name } : { generateName: 'sbx-' }),
      namespace: spec.namespace,
      labels: { ...spec.labels, [CREATED_BY_LABEL]: 'sandbox-sessions' },
      ...(Object.keys(allAnnotations).length > 0 ? { annotations: allAnnotations } : {}),
    },
    spec: {
      runtime: spec.runtime,
      mode: { session },
      ...(spec.timeout ? { timeout: spec.timeout } : {}),
      ...(spec.env ? { env: Object.entries(spec.env).map(([name, value]) => ({ name, value })) } : {}),
      ...(spec.artifactInputs?.length ? { artifactInputs: spec.artifactInputs } : {}),
    },
  };
}
