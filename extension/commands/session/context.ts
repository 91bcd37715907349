// What every session command gets (the companion, the sandbox registry, the Sessions view, logs) and the
// small rules they share — a cancel is not an error, a progress notification with Cancel — so each command
// file under extension/commands/session/ holds only its own steps.
import type * as vscode from 'vscode';
import { type CompanionClient, CompanionRequestError } from '../../companion/companionClient';
import type { SandboxChangesView } from '../../changes/sandboxChangesView';
import type { SandboxRegistry } from '../../sandboxes/registry';
import type { SandboxResolver } from '../../sandboxes/sandboxPicker';
import type { SessionTreeNode, SessionTreeProvider } from '../../views/sessionTree';
import { withCancellableProgress } from '../progressNotification';

export interface SessionCommandDeps {
  companion: CompanionClient;
  registry: SandboxRegistry;
  sessions: SessionTreeProvider;
  log: vscode.LogOutputChannel;
  /** Where the workspace files of read-only revision windows are written (the extension's global storage). */
  storage: vscode.Uri;
  /** What sandboxes changed since their baseline revisions (set by opens, saves and Compare Sandbox with Revision…). */
  changes: SandboxChangesView;
}

export interface SessionContext extends SessionCommandDeps {
  resolveSandbox: SandboxResolver;
  /** Run Activation's provisional events. */
  activationLog: vscode.OutputChannel;
}

/** A revision: a Sessions view item, or `{sessionId, revision}` from scripts and tests. */
export type RevisionTarget = SessionTreeNode | { sessionId: string; revision?: string } | undefined;

export const cancelled = (err: unknown) => err instanceof CompanionRequestError && err.code === 'cancelled';
export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Work under a progress notification with Cancel that is gone before the caller shows the outcome. */
export const withProgress = withCancellableProgress;
