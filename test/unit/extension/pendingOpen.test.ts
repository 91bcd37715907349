// The intent to finish opening a sandbox (reveal its folder, open a terminal) is finished once, by the window that
// shows the folder — also when that window's folders arrive after its extension host started (code-server reads the
// workspace a moment later) — and never by a window that does not show it.
import assert from 'node:assert/strict';
import type * as vscode from 'vscode';
import { finishPendingOpenWhenShown, type PendingOpen, recordPendingOpen, takePendingOpen } from '../../../extension/sandboxes/pendingOpen';

/** globalState: one map, shared by every window's extension host. */
class MemoryState {
  private readonly values = new Map<string, unknown>();
  get<T>(key: string): T | undefined {
    return this.values.get(key) as T | undefined;
  }
  async update(key: string, value: unknown): Promise<void> {
    if (value === undefined) this.values.delete(key);
    else this.values.set(key, value);
  }
  keys(): readonly string[] {
    return [...this.values.keys()];
  }
  asMemento(): vscode.Memento {
    return this as unknown as vscode.Memento;
  }
}

/** A window's workspace folders and their change event. */
class Window {
  shown = new Set<string>();
  private readonly listeners = new Set<(e: unknown) => void>();
  readonly onDidChangeFolders: vscode.Event<unknown> = (listener: (e: unknown) => unknown) => {
    const l = (e: unknown) => void listener(e);
    this.listeners.add(l);
    return { dispose: () => this.listeners.delete(l) } as vscode.Disposable;
  };
  listening(): number {
    return this.listeners.size;
  }
  addFolder(key: string): void {
    this.shown.add(key);
    for (const l of [...this.listeners]) l({});
  }
  isShownHere = (key: string) => this.shown.has(key);
}

describe('extension: finishing a pending sandbox open', () => {
  const KEY = 'local.local.default.beside';
  const fail = (err: unknown) => assert.fail(err as Error);

  it('is finished at once by a window that shows the folder, and only once', async () => {
    const state = new MemoryState();
    await recordPendingOpen(state.asMemento(), { key: KEY, openTerminal: true });
    const here = new Window();
    here.shown.add(KEY);
    const finished: PendingOpen[] = [];
    const done = new Promise<void>((resolve) => {
      finishPendingOpenWhenShown(state.asMemento(), here.isShownHere, here.onDidChangeFolders, async (i) => void (finished.push(i), resolve()), fail);
    });
    await done;
    assert.deepEqual(finished.map((i) => [i.key, i.openTerminal]), [[KEY, true]]);
    assert.equal(here.listening(), 0, 'no longer waiting');
    assert.equal(await takePendingOpen(state.asMemento(), here.isShownHere), undefined, 'cleared');
  });

  it('is left to the window that shows the folder, which may get it after it started', async () => {
    const state = new MemoryState();
    await recordPendingOpen(state.asMemento(), { key: KEY, openTerminal: false });
    // A window without the folder (the one that is going away) does not take it.
    const other = new Window();
    other.shown.add('local.local.default.someother');
    const otherFinished: PendingOpen[] = [];
    const otherWait = finishPendingOpenWhenShown(state.asMemento(), other.isShownHere, other.onDidChangeFolders, async (i) => void otherFinished.push(i), fail);

    // The new window's host starts before its folders arrive: it waits for them.
    const late = new Window();
    let finish!: (i: PendingOpen) => void;
    const finished = new Promise<PendingOpen>((resolve) => (finish = resolve));
    const lateWait = finishPendingOpenWhenShown(state.asMemento(), late.isShownHere, late.onDidChangeFolders, async (i) => finish(i), fail);
    assert.equal(late.listening(), 1);
    late.addFolder('local.local.default.unrelated'); // not yet
    late.addFolder(KEY);
    assert.equal((await finished).key, KEY);
    assert.equal(late.listening(), 0);
    assert.deepEqual(otherFinished, []);
    // The other window stops waiting when disposed; the intent is gone for it anyway.
    other.addFolder(KEY);
    assert.deepEqual(otherFinished, []);
    otherWait.dispose();
    lateWait.dispose();
    assert.equal(other.listening(), 0);
  });

  it('ignores an intent older than two minutes, and an unreadable one', async () => {
    const state = new MemoryState();
    await state.update('sandboxSessions.pendingOpen', { key: KEY, openTerminal: false, at: Date.now() - 3 * 60_000 });
    const here = new Window();
    here.shown.add(KEY);
    assert.equal(await takePendingOpen(state.asMemento(), here.isShownHere), undefined);
    assert.deepEqual(state.keys(), [], 'a stale intent is cleared');
    await state.update('sandboxSessions.pendingOpen', { key: 7 });
    const wait = finishPendingOpenWhenShown(state.asMemento(), here.isShownHere, here.onDidChangeFolders, async () => assert.fail('finished'), fail);
    assert.equal(here.listening(), 0, 'nothing to wait for');
    wait.dispose();
  });
});
