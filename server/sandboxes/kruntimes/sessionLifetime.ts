// How long a sandbox on a kruntimes cluster may live, given what that cluster's Run CRD has.
// Upstream era D removed `mode.session.idleTimeoutSeconds` (spec §10.3): its API server prunes
// the field (with a warning), no idle expiry happens, and a Run with neither `timeout` nor a lease
// holds its Runtime capacity until someone deletes it. So the provider never sends the field to
// such a cluster, and gives every sandbox there a session lease (held while a window or process
// uses it) and a total `timeout` unless the caller chose them.
//
// How the field set is learnt, per context (cached for a while):
//  1. the CRD's openAPIV3Schema (`get customresourcedefinitions/runs.kruntimes.io`): the
//     authority, one GET without side effects — but cluster-scoped, and many developers have no
//     RBAC for it;
//  2. otherwise a server-side dry-run create (`dryRun=All`) of the Run with the field: it needs
//     only the `create runs` right the real create needs anyway, goes through the same decoding
//     and pruning, and stores nothing; an answer without the field means the CRD lacks it.
// Not used: the `Warning` header (client-node's typed calls do not surface it, and
// `fieldValidation=Ignore` or a proxy can drop it) and the real create's answer (too late: mode
// is immutable after creation, so a Run that lost its idle timeout could not be fixed).
import { z } from 'zod';
import { RUN_VERSION, type Run } from '../../../protocol/kruntimes/run';
import type { SandboxCreateSpec } from '../../../protocol/sandboxes';
import { SandboxError } from '../provider';
import type { ClusterApi } from './clusterApi';

/** The lease an era-D sandbox gets when the caller set none: a window's use holds it; 5 min after the last use it ends. */
export const ERA_D_DEFAULT_LEASE_SECONDS = 300;
/** The total timeout an era-D sandbox gets when the caller set none (a working day). */
export const ERA_D_DEFAULT_TIMEOUT = '8h';
/** How long a context's answer is trusted (a cluster may be upgraded under a running editor). */
export const SESSION_FIELDS_CACHE_MS = 10 * 60_000;

export interface SessionFieldSupport {
  /** The Run CRD has `spec.mode.session.idleTimeoutSeconds` (era C and before). */
  idleTimeout: boolean;
  learnedFrom: 'crd' | 'dry-run';
}

const SchemaNodeSchema = z.looseObject({
  properties: z.record(z.string(), z.unknown()).optional(),
  'x-kubernetes-preserve-unknown-fields': z.boolean().optional(),
});
const CrdSchema = z.looseObject({
  spec: z.looseObject({
    versions: z.array(z.looseObject({ name: z.string(), schema: z.looseObject({ openAPIV3Schema: z.unknown() }).optional() })),
  }),
});

function child(node: unknown, name: string): unknown {
  const parsed = SchemaNodeSchema.safeParse(node);
  return parsed.success ? parsed.data.properties?.[name] : undefined;
}

/**
 * Whether the CRD keeps `spec.mode.session.idleTimeoutSeconds` for `version`: true when the session
 * schema lists it (or preserves unknown fields), false when it lists others but not it,
 * undefined when the CRD does not say (no such version, no session schema).
 */
export function crdKeepsSessionIdleTimeout(crd: unknown, version = RUN_VERSION): boolean | undefined {
  const parsed = CrdSchema.safeParse(crd);
  if (!parsed.success) return undefined;
  const root = parsed.data.spec.versions.find((v) => v.name === version)?.schema?.openAPIV3Schema;
  const session = SchemaNodeSchema.safeParse(child(child(child(root, 'spec'), 'mode'), 'session'));
  if (!session.success) return undefined;
  if (session.data['x-kubernetes-preserve-unknown-fields'] === true) return true;
  if (!session.data.properties) return undefined;
  return Object.hasOwn(session.data.properties, 'idleTimeoutSeconds');
}

/** Learns from the cluster whether its Run CRD has the session idle timeout (see the file comment). */
export async function learnSessionFields(api: ClusterApi, namespace: string, body: Run): Promise<SessionFieldSupport> {
  try {
    const keeps = crdKeepsSessionIdleTimeout(await api.getRunCrd());
    if (keeps !== undefined) return { idleTimeout: keeps, learnedFrom: 'crd' };
  } catch (err) {
    // No RBAC for CRDs, or a cluster that hides them: ask the API server's admission instead.
    if (!(err instanceof SandboxError) || (err.code !== 'cluster_forbidden' && err.code !== 'sandbox_not_found')) throw err;
  }
  const session = body.spec.mode.session ?? {};
  const probe: Run = { ...body, spec: { ...body.spec, mode: { ...body.spec.mode, session: { ...session, idleTimeoutSeconds: session.idleTimeoutSeconds ?? 3600 } } } };
  const answer = await api.createRun(namespace, probe, { dryRun: true });
  return { idleTimeout: answer.spec.mode.session?.idleTimeoutSeconds !== undefined, learnedFrom: 'dry-run' };
}

/**
 * The create spec for a cluster with `support`: unchanged where the idle timeout exists (era C
 * honours it); otherwise without it, with a lease and a total timeout (the caller's, else the
 * defaults). `notes` say what was changed, for the log and the user.
 */
export function specForCluster(spec: SandboxCreateSpec, support: SessionFieldSupport): { spec: SandboxCreateSpec; notes: string[] } {
  if (support.idleTimeout) return { spec, notes: [] };
  const { idleTimeoutSeconds, ...rest } = spec;
  const notes: string[] = [];
  if (idleTimeoutSeconds !== undefined) notes.push(`this cluster's Run CRD has no idle timeout (kruntimes era D): idleTimeoutSeconds ${idleTimeoutSeconds} not sent`);
  const out: SandboxCreateSpec = { ...rest };
  if (out.leaseTimeoutSeconds === undefined) {
    out.leaseTimeoutSeconds = ERA_D_DEFAULT_LEASE_SECONDS;
    notes.push(`session lease ${ERA_D_DEFAULT_LEASE_SECONDS} s (the default without idle timeouts): the sandbox ends ${ERA_D_DEFAULT_LEASE_SECONDS} s after the last window or process lets go`);
  }
  if (!out.timeout) {
    out.timeout = ERA_D_DEFAULT_TIMEOUT;
    notes.push(`total timeout ${ERA_D_DEFAULT_TIMEOUT} (the default without idle timeouts)`);
  }
  return { spec: out, notes };
}
