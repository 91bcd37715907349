// The file index behind Go to File in Sandbox… (without VS Code, so it is tested alone): one listing
// per sandbox folder, shared by quick opens that ask at the same time, kept until the file system
// reports a file created or deleted in that sandbox (a change of contents keeps it), or the listing fails.
export type IndexChange = { authority: string; kind: 'created' | 'changed' | 'deleted' };

export class SandboxFileIndex {
  /** Folder key → its listing (a promise, so two quick opens share one). */
  private readonly listings = new Map<string, { authority: string; files: Promise<string[]> }>();

  /** The folder's files: the cached listing, or a new one from `list`. */
  filesOf(key: string, authority: string, list: () => Promise<string[]>): Promise<string[]> {
    const cached = this.listings.get(key);
    if (cached) return cached.files;
    const entry = { authority, files: list() };
    this.listings.set(key, entry);
    // A failed listing is not kept (unless a newer one replaced it meanwhile).
    entry.files.catch(() => {
      if (this.listings.get(key) === entry) this.listings.delete(key);
    });
    return entry.files;
  }

  /** The file system's change events: a created or deleted file drops that sandbox's listings. */
  onChanges(changes: readonly IndexChange[]): void {
    for (const change of changes) {
      if (change.kind === 'changed') continue;
      for (const [key, entry] of this.listings) if (entry.authority === change.authority) this.listings.delete(key);
    }
  }
}
