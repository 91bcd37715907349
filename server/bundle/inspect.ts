// inspect: read and validate every byte of a bundle without writing anything, and report its manifest and
// counts. A successful inspection proves nothing to a later hydrate, which validates again on its own.
import { SHA256_DIGEST_PATTERN, type SessionBundleInspection, type SessionBundleLimits } from '../../protocol/bundle';
import { assertSessionBundleLimits } from './limits';
import { readBundle, type BundleProgress, type BundleSource } from './reader';

export interface InspectOptions {
  source: BundleSource;
  limits: SessionBundleLimits;
  onProgress?: (p: BundleProgress) => void;
}

export function assertBundleSource(source: unknown): BundleSource {
  if (typeof source !== 'object' || source === null) throw new TypeError('source must be {path, expectedArchiveDigest?}');
  const { path, expectedArchiveDigest } = source as Record<string, unknown>;
  if (typeof path !== 'string' || path === '') throw new TypeError('source.path must be a non-empty string');
  if (expectedArchiveDigest !== undefined && (typeof expectedArchiveDigest !== 'string' || !SHA256_DIGEST_PATTERN.test(expectedArchiveDigest))) {
    throw new TypeError('source.expectedArchiveDigest must be sha256:<64 lowercase hex>');
  }
  return expectedArchiveDigest === undefined ? { path } : { path, expectedArchiveDigest };
}

export async function inspectSessionBundle(options: InspectOptions): Promise<SessionBundleInspection> {
  const source = assertBundleSource(options.source);
  const limits = assertSessionBundleLimits(options.limits);
  return readBundle(source, limits, 'inspect', {}, options.onProgress);
}
