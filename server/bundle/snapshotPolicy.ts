// Workspace snapshot policy V1 (spec §13, Maka's SESSION_SNAPSHOT_WORKSPACE_POLICY_V1; not overridable):
// which workspace entries are left out of a portable session (and reported by category) and which are known
// secret files that refuse the whole snapshot. Segment matching is case-insensitive.
import type { SnapshotExclusionCategory, WorkspaceSnapshotReport } from '../../protocol/bundle';

export type WorkspacePathVerdict =
  | { verdict: 'include' }
  | { verdict: 'exclude'; category: SnapshotExclusionCategory }
  | { verdict: 'reject'; reason: 'known_secret_file' };

const EXCLUDED_SEGMENTS: ReadonlyMap<string, SnapshotExclusionCategory> = new Map([
  ['.git', 'source_control'],
  ['node_modules', 'dependency_tree'],
  ['.cache', 'cache'],
  ['.maka-cache', 'cache'],
  ['.turbo', 'cache'],
  ['logs', 'log'],
  ['.logs', 'log'],
  ['.maka-runtime', 'runtime_scratch'],
  ['.maka-activation', 'runtime_scratch'],
]);

/** The names (lower case) the policy leaves out wherever they appear in a workspace, whatever their case there. */
export function excludedSegmentNames(): string[] {
  return [...EXCLUDED_SEGMENTS.keys()];
}

const SECRET_NAMES = new Set(['.npmrc', '.netrc', '.pypirc', '.terraformrc', '.git-credentials', '.git-credentials.lock', 'service-account.json', 'service-account-key.json']);
const SECRET_NAME_PATTERNS: readonly RegExp[] = [
  /^\.env/,
  /^credentials?/,
  /^secrets?/,
  /^id_(rsa|dsa|ecdsa|ed25519)(?!.*\.pub$)/,
  /private[-_.]?key/,
  /\.(key|p12|pfx)$/,
];
const SECRET_SUFFIXES: readonly string[][] = [
  ['.docker', 'config.json'],
  ['.aws', 'credentials'],
  ['.cargo', 'credentials'],
  ['.kube', 'config'],
  ['.config', 'gcloud', 'application_default_credentials.json'],
];

function endsWith(segments: readonly string[], suffix: readonly string[]): boolean {
  if (suffix.length > segments.length) return false;
  const offset = segments.length - suffix.length;
  return suffix.every((s, i) => segments[offset + i] === s);
}

/**
 * Classify a workspace-relative path (segments, lower-cased here) reached while walking top-down: callers
 * do not descend into excluded directories. Secrets win over exclusions: a `secret.log` refuses the snapshot.
 */
export function classifyWorkspacePath(segments: readonly string[], isDirectory: boolean): WorkspacePathVerdict {
  const lower = segments.map((s) => s.toLowerCase());
  const leaf = lower[lower.length - 1] ?? '';
  if (lower.slice(0, -1).includes('.ssh') || (!isDirectory && isSecretFile(lower, leaf))) {
    return { verdict: 'reject', reason: 'known_secret_file' };
  }
  const category = EXCLUDED_SEGMENTS.get(leaf);
  if (category !== undefined) return { verdict: 'exclude', category };
  if (!isDirectory && leaf.endsWith('.log')) return { verdict: 'exclude', category: 'log' };
  return { verdict: 'include' };
}

function isSecretFile(lower: readonly string[], leaf: string): boolean {
  return SECRET_NAMES.has(leaf) || SECRET_NAME_PATTERNS.some((p) => p.test(leaf)) || SECRET_SUFFIXES.some((s) => endsWith(lower, s));
}

/**
 * A listing's `skip` for a workspace copied out of a sandbox: true for what the policy excludes (not worth the
 * transfer), which is pushed onto `skipped` as the snapshot would report it.
 */
export function skipExcluded(skipped: WorkspaceSnapshotReport['excludedEntries']): (rel: string, isDirectory: boolean) => boolean {
  return (rel, isDirectory) => {
    const verdict = classifyWorkspacePath(rel.split('/'), isDirectory);
    if (verdict.verdict !== 'exclude') return false;
    skipped.push({ path: isDirectory ? `${rel}/` : rel, category: verdict.category });
    return true;
  };
}
