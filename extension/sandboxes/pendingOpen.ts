// Opening a sandbox as a workspace folder can restart the extension host (VS Code does so when
// the first folder changes or a window becomes multi-root), killing the code that asked. So the
// intent is saved first and finished by the window that shows the folder: reveal it, open a terminal.
// Only a host whose window shows the folder may take the intent. A host that is going away never
// shows it (code-server navigates the page to the new workspace), and a new host may come up before
// its folders do (the workspace is read a moment later), so it waits for them a while.
import type * as vscode from 'vscode';
import { z } from 'zod';

const KEY = 'sandboxSessions.pendingOpen';
const MAX_AGE_MS = 2 * 60_000;

const PendingOpenSchema = z.object({
  key: z.string(),
  openTerminal: z.boolean(),
  at: z.number(),
});
export type PendingOpen = z.infer<typeof PendingOpenSchema>;

export async function recordPendingOpen(state: vscode.Memento, intent: Omit<PendingOpen, 'at'>): Promise<void> {
  await state.update(KEY, { ...intent, at: Date.now() });
}

/** The saved intent if it is recent (a stale or unreadable one is cleared). */
function pendingOpen(state: vscode.Memento): PendingOpen | undefined {
  const parsed = PendingOpenSchema.safeParse(state.get(KEY));
  if (parsed.success && Date.now() - parsed.data.at <= MAX_AGE_MS) return parsed.data;
  if (state.get(KEY) !== undefined) void state.update(KEY, undefined);
  return undefined;
}

/**
 * The saved intent, cleared so it is finished once — but only if `isShownHere` says this window shows
 * its folder; otherwise it is left for the window that does.
 */
export async function takePendingOpen(state: vscode.Memento, isShownHere: (key: string) => boolean): Promise<PendingOpen | undefined> {
  const intent = pendingOpen(state);
  if (!intent || !isShownHere(intent.key)) return undefined;
  await state.update(KEY, undefined);
  return intent;
}

/**
 * Finishes a recent intent with `finish` once this window shows its folder: now, or when the
 * folder arrives (`onDidChangeFolders`: the workspace's event) while the intent is still recent.
 * The returned disposable stops waiting.
 */
export function finishPendingOpenWhenShown(
  state: vscode.Memento,
  isShownHere: (key: string) => boolean,
  onDidChangeFolders: vscode.Event<unknown>,
  finish: (intent: PendingOpen) => Promise<void>,
  onError: (err: unknown) => void,
): vscode.Disposable {
  let sub: vscode.Disposable | undefined;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    sub?.dispose();
    if (timer) clearTimeout(timer);
    sub = timer = undefined;
  };
  const attempt = async (): Promise<void> => {
    const intent = await takePendingOpen(state, isShownHere);
    if (!intent) return;
    stop();
    await finish(intent);
  };
  const waiting = pendingOpen(state);
  if (waiting) {
    sub = onDidChangeFolders(() => void attempt().catch(onError));
    timer = setTimeout(stop, Math.max(0, waiting.at + MAX_AGE_MS - Date.now()));
    void attempt().catch(onError);
  }
  return { dispose: stop };
}
