// The few abortable I/O steps artifact downloads and the unpacker share: an iterator step that an abort ends at
// once (a stalled source cannot hold it up), ending an iteration without waiting on it, and a complete write.
import type fsp from 'node:fs/promises';

/** Ends an iteration early (abort, error): a pending `next()` may never settle, so never await `return()`. */
export function release(iterator: AsyncIterator<unknown>): void {
  const done = iterator.return?.();
  if (done) done.then(undefined, () => undefined);
}

/** `iterator.next()`, or the abort reason as soon as `signal` fires (a stalled source cannot hold it up). */
export function nextOrAbort<T>(iterator: AsyncIterator<T>, signal: AbortSignal | undefined): Promise<IteratorResult<T>> {
  if (!signal) return iterator.next();
  signal.throwIfAborted();
  return new Promise<IteratorResult<T>>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    iterator.next().then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export async function writeAll(handle: fsp.FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}
