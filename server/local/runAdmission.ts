// What the local Runs API admits (server/gateway/runsApi.ts serves the routes; this file holds
// their rules, as an API server's admission does): a create is refused with 400 (namespace, UID,
// namespace mismatch), 409 (the name or UID is taken) or 422 (schema, name, labels, the CRD's CEL
// rules, session Runs only, a backend that exists); a merge patch with 400 (not an object) or 422
// (immutable fields, labels, the spec schema, the termination rule). Pure: it decides, the runtime stores.
import { randomBytes, randomUUID } from 'node:crypto';
import {
  IMMUTABLE_FIELDS_MESSAGE,
  RUN_API_VERSION,
  RUN_KIND,
  RunMessages,
  RunSchema,
  RunSpecSchema,
  checkRunSpecOnCreate,
  checkTerminationTransition,
  invalidRunMessage,
  type Run,
  type TerminationMode,
} from '../../protocol/kruntimes/run';
import { labelsProblem } from '../../protocol/kruntimes/labels';
import { ApiStatusError, invalidSpec } from './apiStatusError';
import { clone, mergePatch, rfc3339 } from './runStatus';

/** The local runtime serves session Runs only. */
export const SESSION_ONLY_MESSAGE = 'the local runtime serves session Runs only (spec.mode.session)';
/** A caller-chosen Run UID: a UUID, or any such safe name (it becomes a directory and a URL segment). */
const UID_RE = /^[a-z0-9]([-a-z0-9]{0,62}[a-z0-9])?$/;
const NAME_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const NAMESPACE_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const IMMUTABLE_SPEC_FIELDS = ['runtime', 'source', 'mode', 'artifactInputs', 'env', 'timeout', 'retryPolicy', 'resources', 'workspace', 'affinity'];
const IMMUTABLE_METADATA_FIELDS = ['name', 'namespace', 'uid', 'creationTimestamp', 'generateName'] as const;

export function isValidNamespace(ns: string): boolean {
  return NAMESPACE_RE.test(ns);
}

/** What admission needs to know about the Runs already stored and the backends there are. */
export interface AdmissionContext {
  nameTaken(namespace: string, name: string): boolean;
  uidTaken(uid: string): boolean;
  backends: readonly string[];
  /** Why the Run's backend cannot take it now (a remote backend without a connection), or undefined. */
  backendRefusal?(run: Run): string | undefined;
}

/** The new Run a create stores (Pending, with its UID and name), or the refusal the API answers. */
export function admitCreate(namespace: string, body: unknown, uid: string | undefined, ctx: AdmissionContext): Run {
  if (!isValidNamespace(namespace)) throw new ApiStatusError('BadRequest', `namespace "${namespace}" is not a valid DNS label`);
  if (uid !== undefined) {
    if (!UID_RE.test(uid)) throw new ApiStatusError('BadRequest', `Run UID "${uid}" is not valid: use lowercase letters, digits and "-" (at most 64, e.g. a UUID)`);
    if (ctx.uidTaken(uid)) throw new ApiStatusError('AlreadyExists', `a Run with UID "${uid}" already exists`);
  }
  const parsed = RunSchema.safeParse(body);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ApiStatusError('Invalid', `Run.kruntimes.io is invalid: ${issues}`);
  }
  const input = parsed.data;
  if (input.metadata.namespace !== undefined && input.metadata.namespace !== namespace) {
    throw new ApiStatusError('BadRequest', `the namespace of the object (${input.metadata.namespace}) does not match the namespace on the request (${namespace})`);
  }
  const name = admittedName(namespace, input, ctx);
  checkLabels(name, input.metadata.labels);
  checkSpec(name, input.spec, ctx.backends);
  const refusal = ctx.backendRefusal?.(input);
  if (refusal !== undefined) {
    throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: spec.runtime: ${refusal}`, name, [
      { reason: 'FieldValueInvalid', message: refusal, field: 'spec.runtime' },
    ]);
  }
  const run: Run = {
    apiVersion: RUN_API_VERSION,
    kind: RUN_KIND,
    metadata: { ...input.metadata, name, namespace, uid: uid ?? randomUUID(), creationTimestamp: rfc3339(), finalizers: ['kruntimes.io/registration-cleanup'] },
    spec: input.spec,
    status: { phase: 'Pending', message: RunMessages.pending },
  };
  delete run.metadata.generateName;
  if (input.metadata.generateName) run.metadata.generateName = input.metadata.generateName;
  return run;
}

/** The name the create asked for, or one generated from `generateName` that no Run of the namespace has. */
function admittedName(namespace: string, input: Run, ctx: AdmissionContext): string {
  let name = input.metadata.name;
  if (!name) {
    if (!input.metadata.generateName) throw new ApiStatusError('Invalid', 'Run.kruntimes.io is invalid: metadata.name: Required value: name or generateName is required');
    do name = input.metadata.generateName + randomBytes(4).toString('hex').slice(0, 5);
    while (ctx.nameTaken(namespace, name));
  }
  if (!NAME_RE.test(name)) throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: metadata.name: must be a lowercase RFC 1123 subdomain`, name);
  if (ctx.nameTaken(namespace, name)) throw new ApiStatusError('AlreadyExists', `runs.kruntimes.io "${name}" already exists`, name);
  return name;
}

/** The CRD's CEL rules, session Runs only, and a runtime that names a local backend. */
function checkSpec(name: string, spec: Run['spec'], backends: readonly string[]): void {
  const rule = checkRunSpecOnCreate(spec);
  if (!rule.ok) throw invalidSpec(name, invalidRunMessage(name, rule.message), rule.message);
  if (spec.mode.session === undefined) throw invalidSpec(name, invalidRunMessage(name, SESSION_ONLY_MESSAGE), SESSION_ONLY_MESSAGE);
  if (!backends.includes(spec.runtime)) {
    const msg = `spec.runtime must name a local backend (${backends.join(', ')}), not "${spec.runtime}"`;
    throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: spec.runtime: Unsupported value: "${spec.runtime}": ${msg}`, name, [
      { reason: 'FieldValueNotSupported', message: msg, field: 'spec.runtime' },
    ]);
  }
}

/** Labels by Kubernetes' rules (ValidateLabels), refused with 422 and the field as an API server does. */
function checkLabels(name: string, labels: unknown): void {
  if (labels === undefined) return;
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: metadata.labels: Invalid value: must be a map of strings`, name);
  }
  const problem = labelsProblem(labels as Record<string, unknown>);
  if (problem) {
    throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: ${problem.field}: ${problem.message}`, name, [
      { reason: 'FieldValueInvalid', message: problem.message, field: problem.field },
    ]);
  }
}

/** A merge patch must be a JSON object (400 otherwise). */
export function checkMergePatch(patch: unknown): asserts patch is { metadata?: unknown; spec?: unknown } {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
    throw new ApiStatusError('BadRequest', 'a merge patch must be a JSON object');
  }
}

/**
 * The Run after a merge patch, and the termination it newly asks for: only `spec.termination` (forward
 * only) and metadata other than the identity may change.
 */
export function admitPatch(current: Run, patch: { metadata?: unknown; spec?: unknown }): { run: Run; nextMode: TerminationMode | undefined } {
  const name = current.metadata.name ?? '';
  const merged = mergePatch(clone(current.spec), patch.spec ?? {}) as Record<string, unknown>;
  for (const field of IMMUTABLE_SPEC_FIELDS) {
    if (JSON.stringify((current.spec as Record<string, unknown>)[field]) !== JSON.stringify(merged[field])) {
      throw invalidSpec(name, invalidRunMessage(name, IMMUTABLE_FIELDS_MESSAGE), IMMUTABLE_FIELDS_MESSAGE);
    }
  }
  const specCheck = RunSpecSchema.safeParse(merged);
  if (!specCheck.success) {
    throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: ${specCheck.error.issues.map((i) => `spec.${i.path.join('.')}: ${i.message}`).join('; ')}`, name);
  }
  const from = current.spec.termination?.mode;
  const to = specCheck.data.termination?.mode;
  const rule = checkTerminationTransition(from, to);
  if (!rule.ok) throw invalidSpec(name, invalidRunMessage(name, rule.message), rule.message);
  let metadata = current.metadata;
  if (patch.metadata !== undefined) {
    const m = mergePatch(clone(current.metadata), patch.metadata) as Run['metadata'];
    for (const k of IMMUTABLE_METADATA_FIELDS) {
      if (m[k] !== current.metadata[k]) throw new ApiStatusError('Invalid', `Run.kruntimes.io "${name}" is invalid: metadata.${k}: field is immutable`, name);
    }
    checkLabels(name, m.labels);
    metadata = { ...m, resourceVersion: current.metadata.resourceVersion };
  }
  return { run: { ...current, metadata, spec: specCheck.data }, nextMode: to !== from ? to : undefined };
}
