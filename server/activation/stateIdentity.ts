// The state identity descriptor of a Session's bundle (spec §1.1): the Maka cloud descriptor
// `{"schemaVersion":1,"makaSessionId":…}\n` when the agent reports a Maka session id, else a
// neutral descriptor of ours. Parsed only for the Maka media type; any other is opaque.
import { z } from 'zod';

export const MAKA_CLOUD_IDENTITY_MEDIA_TYPE = 'application/vnd.maka.session-state-identity+json;version=1';
export const NEUTRAL_IDENTITY_MEDIA_TYPE = 'application/vnd.sandbox-sessions.session-state-identity+json;version=1';

export interface StateIdentity {
  mediaType: string;
  bytes: Uint8Array;
}

const MakaSessionIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/);
const MakaCloudIdentitySchema = z.looseObject({ schemaVersion: z.literal(1), makaSessionId: MakaSessionIdSchema });

export function makaCloudIdentity(makaSessionId: string): StateIdentity {
  const id = MakaSessionIdSchema.parse(makaSessionId);
  return { mediaType: MAKA_CLOUD_IDENTITY_MEDIA_TYPE, bytes: Buffer.from(JSON.stringify({ schemaVersion: 1, makaSessionId: id }) + '\n', 'utf8') };
}

export function neutralIdentity(sessionId: string): StateIdentity {
  return { mediaType: NEUTRAL_IDENTITY_MEDIA_TYPE, bytes: Buffer.from(JSON.stringify({ schemaVersion: 1, sessionId }) + '\n', 'utf8') };
}

/** The makaSessionId of a Maka cloud descriptor; undefined for other media types or malformed bytes. */
export function makaSessionIdOf(identity: StateIdentity | undefined): string | undefined {
  if (identity?.mediaType !== MAKA_CLOUD_IDENTITY_MEDIA_TYPE) return undefined;
  try {
    const parsed = MakaCloudIdentitySchema.safeParse(JSON.parse(Buffer.from(identity.bytes).toString('utf8')));
    return parsed.success ? parsed.data.makaSessionId : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The identity to pack after an activation: the previous one when it already names the agent's
 * Maka session (or the agent reported none); a Maka cloud descriptor when the agent reported a
 * (new) Maka session id; a neutral one when there is nothing at all.
 */
export function identityAfterActivation(previous: StateIdentity | undefined, reportedMakaSessionId: string | undefined, sessionId: string): StateIdentity {
  if (reportedMakaSessionId !== undefined && MakaSessionIdSchema.safeParse(reportedMakaSessionId).success) {
    if (makaSessionIdOf(previous) === reportedMakaSessionId && previous) return previous;
    if (previous === undefined || previous.mediaType === MAKA_CLOUD_IDENTITY_MEDIA_TYPE || previous.mediaType === NEUTRAL_IDENTITY_MEDIA_TYPE) {
      return makaCloudIdentity(reportedMakaSessionId);
    }
  }
  return previous ?? neutralIdentity(sessionId);
}
