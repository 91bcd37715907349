// Close Sandbox (Drain) and Cancel Sandbox (Immediate): the sandbox finishes or is killed, and the window
// says what became of it (artifacts to download, read-only files).
import * as vscode from 'vscode';
import type { TerminationMode } from '../../../protocol/kruntimes/run';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { CompanionRequestError } from '../../companion/companionClient';
import { closeReportedHere } from '../../sandboxes/lifecycleNotice';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { type SandboxCommandContext, errorText, progress, READ_ONLY_NOW } from './context';

export async function terminate(ctx: SandboxCommandContext, target: SandboxTarget, mode: TerminationMode): Promise<SandboxSummary | undefined> {
  const { companion, registry, log, resolve } = ctx;
  const s = await resolve(target, mode === 'Drain' ? ['Ready', 'Pending', 'Scheduled', 'Running'] : ['Ready', 'Pending', 'Scheduled', 'Running', 'Finalizing']);
  if (!s) return;
  if (mode === 'Immediate') {
    const ok = await vscode.window.showWarningMessage(
      `Cancel sandbox ${s.ref.name}? Running commands are killed and no artifacts are exported.`,
      { modal: true },
      'Cancel Sandbox',
    );
    if (ok !== 'Cancel Sandbox') return;
  }
  closeReportedHere(s.key);
  try {
    const { sandbox } = await progress(mode === 'Drain' ? `Closing ${s.ref.name} (Drain)` : `Cancelling ${s.ref.name}`, (report, token) =>
      companion.request('sandboxes/terminate', { ref: s.ref, mode, wait: true }, { token, onProgress: (v) => v.message && report(v.message) }),
    );
    registry.fireChanged(sandbox);
    if (mode === 'Drain') {
      const n = sandbox.artifacts?.length ?? 0;
      // The offer does not hold the command: it resolves with the closed sandbox right away.
      if (n > 0) {
        void vscode.window.showInformationMessage(`${s.ref.name} closed with ${n} artifact(s). ${READ_ONLY_NOW}`, 'Download Artifacts…').then((action) => {
          if (action) void vscode.commands.executeCommand('sandboxSessions.downloadArtifacts', sandbox.key);
        });
      } else {
        void vscode.window.showInformationMessage(`${s.ref.name} closed; it exported no artifacts. ${READ_ONLY_NOW}`);
      }
    } else {
      void vscode.window.showInformationMessage(`${s.ref.name} was cancelled. ${READ_ONLY_NOW}`);
    }
    return sandbox;
  } catch (err) {
    if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
    log.error(`terminate ${s.key} (${mode}) failed: ${errorText(err)}`);
    void vscode.window.showErrorMessage(`Could not ${mode === 'Drain' ? 'close' : 'cancel'} ${s.ref.name}: ${errorText(err)}`);
  }
}
