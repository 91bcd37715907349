// The one digest format on every wire this project speaks (bundles, repository objects,
// kruntimes artifacts): `sha256:` and 64 lowercase hex digits.
import { z } from 'zod';

export const SHA256_DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
export const Sha256DigestSchema = z.string().regex(SHA256_DIGEST_PATTERN, 'must be sha256: + 64 lowercase hex digits');
export type Sha256Digest = z.infer<typeof Sha256DigestSchema>;
