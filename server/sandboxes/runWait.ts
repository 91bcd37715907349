// Waiting for a Run, once for every substrate: through the store's watch (never by polling), bounded,
// abortable, reporting each phase it passes. Used by the provider core for Ready after create, the
// end of a termination, and a Run's disappearance after delete (finalizers may keep it a while).
import { isTerminalPhase, type Run } from '../../protocol/kruntimes/run';
import { SandboxError } from './provider';
import type { RunStore, RunStoreWatch } from './runStore';

export interface RunWaitOptions {
  /** Resolve once this holds (a terminal phase always ends the wait). */
  done: (run: Run) => boolean;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Called when the Run's phase changes (the first event included). */
  onPhase?: (run: Run) => void;
}

/** Follows one Run until `done` holds or it is terminal; rejects when it is deleted, on timeout or abort. */
export function waitForRun(store: RunStore, namespace: string, name: string, options: RunWaitOptions): Promise<Run> {
  return new Promise<Run>((resolve, reject) => {
    let lastPhase: string | undefined;
    let lastError: Error | undefined;
    let watch: RunStoreWatch | undefined;
    let finished = false;
    const finish = (fn: () => void): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      watch?.stop();
      fn();
    };
    const timer = setTimeout(() => {
      const watchNote = lastError ? ` (watch: ${lastError.message})` : '';
      const after = Math.round(options.timeoutMs / 1000);
      finish(() => reject(new SandboxError('sandbox_wait_timeout', `${namespace}/${name} is still ${lastPhase ?? 'Pending'} after ${after} s${watchNote}`)));
    }, options.timeoutMs);
    const onAbort = (): void => finish(() => reject(options.signal?.reason ?? new Error('aborted')));
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    store
      .watch(
        { namespace, name },
        {
          onError: (err) => (lastError = err),
          onEvent: ({ type, run }) => {
            if (finished || run.metadata.name !== name) return;
            if (type === 'DELETED') return finish(() => reject(new SandboxError('sandbox_not_found', `${namespace}/${name} was deleted while waiting for it`)));
            const phase = run.status?.phase ?? 'Pending';
            if (phase !== lastPhase) {
              lastPhase = phase;
              options.onPhase?.(run);
            }
            if (options.done(run) || isTerminalPhase(run.status?.phase)) finish(() => resolve(run));
          },
        },
      )
      .then(
        (w) => {
          watch = w;
          if (finished) w.stop();
        },
        (err: unknown) => finish(() => reject(err as Error)),
      );
  });
}

/**
 * Resolves true once the Run is gone (its DELETED event, or a get that finds none), false when it is
 * still there after `timeoutMs`. The watch starts before the second look, so the deletion cannot slip between.
 */
export async function waitUntilGone(store: RunStore, namespace: string, name: string, timeoutMs: number): Promise<boolean> {
  if (!(await exists(store, namespace, name))) return true;
  let settled = false;
  let watch: RunStoreWatch | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<boolean>((resolve, reject) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      store
        .watch({ namespace, name }, { onEvent: ({ type, run }) => type === 'DELETED' && run.metadata.name === name && resolve(true) })
        .then(async (w) => {
          watch = w;
          if (settled) w.stop();
          else if (!(await exists(store, namespace, name))) resolve(true);
        })
        .catch(reject);
    });
  } finally {
    settled = true;
    clearTimeout(timer);
    watch?.stop();
  }
}

async function exists(store: RunStore, namespace: string, name: string): Promise<boolean> {
  try {
    await store.get(namespace, name);
    return true;
  } catch (err) {
    if (err instanceof SandboxError && err.code === 'sandbox_not_found') return false;
    throw err;
  }
}
