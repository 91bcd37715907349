// Public API of the Session Bundle v1 codec (spec §1–8) and the snapshot step before pack (§13).
export { packSessionBundle, type PackOptions } from './pack';
export { writtenArchiveOf, type WrittenArchive } from './publish';
export { inspectSessionBundle, type InspectOptions } from './inspect';
export { hydrateSessionBundle, type HydrateOptions } from './hydrate';
export { cleanupHydrationStaging } from './cleanup';
export { prepareWorkspaceSnapshot, type PreparedSnapshot, type SnapshotOptions } from './snapshot';
export { classifyWorkspacePath, type WorkspacePathVerdict } from './snapshotPolicy';
export { SessionBundleError, SessionSnapshotError, isSessionBundleError } from './errors';
export { assertSessionBundleLimits } from './limits';
export { readBundleManifest, type BundleProgress, type BundleSource } from './reader';
