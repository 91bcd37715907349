// The Sandbox terminal's line editor. The kruntimes API has no PTY, so the terminal edits one
// line locally (cursor keys, history, Home/End, paste) and runs it as one command. Pure: it
// turns keystrokes into screen output and actions, so it is tested without VS Code. It knows the
// terminal's width, so a line longer than one row wraps and is redrawn in place (moving up over
// its wrapped rows), and typing at the end writes only the new characters.
import { layoutLine, visibleChars, type Cell } from './terminalCells';
import { matchEscape, type EscapeName } from './terminalKeys';

export { displayWidth } from './terminalCells';

export type LineEditorAction =
  | { kind: 'submit'; line: string }
  | { kind: 'interrupt' }
  | { kind: 'eof' }
  | { kind: 'clear' }
  /** Tab: complete `word` (the text before the cursor back to the last unquoted space). */
  | { kind: 'complete'; word: string };

export interface LineEditorResult {
  /** Bytes to write to the terminal (VT sequences). */
  output: string;
  actions: LineEditorAction[];
}

const ESC = '\x1b';
const MAX_HISTORY = 500;

export class LineEditor {
  private chars: string[] = [];
  private cursor = 0;
  private readonly history: string[] = [];
  private historyIndex = 0;
  /** The line being edited before the user walked into history. */
  private draft: string[] = [];
  private prompt = '';
  private promptChars: string[] = [];
  private readonly pendingPaste: string[] = [];
  /** The terminal's width in cells (0: unknown, treated as unlimited). */
  private columns = 0;
  /** The row the terminal's cursor is on, counted from the prompt's first row. */
  private cursorRow = 0;

  /** Starts a new empty line after `prompt` and returns what to write. */
  begin(prompt: string): string {
    this.prompt = prompt;
    this.promptChars = visibleChars(prompt);
    this.chars = [];
    this.cursor = 0;
    this.historyIndex = this.history.length;
    this.draft = [];
    const end = this.layout().end;
    this.cursorRow = end.row;
    return prompt + (end.pendingWrap ? '\r\n' : '');
  }

  /**
   * The terminal's column count (Pseudoterminal.setDimensions). The terminal re-wraps the line
   * itself on a resize, so only where the cursor now is changes.
   */
  setColumns(columns: number): void {
    this.columns = Number.isInteger(columns) && columns > 0 ? columns : 0;
    this.cursorRow = this.layout().cursor.row;
  }

  get line(): string {
    return this.chars.join('');
  }

  get historyEntries(): readonly string[] {
    return this.history;
  }

  /** Feeds raw terminal input (one keystroke, an escape sequence, or a paste). */
  handleInput(data: string): LineEditorResult {
    const actions: LineEditorAction[] = [];
    let output = '';
    let i = 0;
    while (i < data.length) {
      const rest = data.slice(i);
      const seq = matchEscape(rest);
      if (seq) {
        output += this.applyEscape(seq.name);
        i += seq.length;
        continue;
      }
      const ch = data[i] as string;
      i += 1;
      switch (ch) {
        case '\r':
        case '\n': {
          if (ch === '\n' && data[i - 2] === '\r') break; // CRLF from a paste
          const line = this.line;
          output += this.toFreshRow();
          this.remember(line);
          actions.push({ kind: 'submit', line });
          // A paste of several lines submits each; the caller re-begins the editor in between.
          const remaining = data.slice(i).replace(/^\n/, '');
          if (remaining !== '') this.pendingPaste.push(remaining);
          return { output, actions };
        }
        case '\x03':
          output += '^C\r\n';
          this.chars = [];
          this.cursor = 0;
          actions.push({ kind: 'interrupt' });
          return { output, actions };
        case '\x04':
          if (this.chars.length === 0) {
            actions.push({ kind: 'eof' });
            return { output, actions };
          }
          output += this.deleteForward();
          break;
        case '\x7f':
        case '\b':
          output += this.backspace();
          break;
        case '\x01':
          output += this.home();
          break;
        case '\x05':
          output += this.moveToEnd();
          break;
        case '\x15':
          this.chars = this.chars.slice(this.cursor);
          this.cursor = 0;
          output += this.redraw();
          break;
        case '\x0b':
          this.chars = this.chars.slice(0, this.cursor);
          output += this.redraw();
          break;
        case '\x0c':
          actions.push({ kind: 'clear' });
          this.cursorRow = 0;
          output += `${ESC}[2J${ESC}[H` + this.redraw();
          break;
        case '\t': {
          // Completion needs the sandbox's listing: the caller answers with complete().
          actions.push({ kind: 'complete', word: this.wordBeforeCursor() });
          return { output, actions };
        }
        default:
          if (ch >= ' ' || ch.codePointAt(0)! > 0x7f) output += this.insert(ch);
      }
    }
    return { output, actions };
  }

  /**
   * Completes the word before the cursor with one of `candidates` (full words, directories
   * ending in `/`), if the line is still as it was when `word` was asked for: a single candidate
   * is inserted (a file followed by a space), several insert their common prefix, and when that
   * adds nothing they are listed below the line, which is then drawn again.
   */
  complete(word: string, candidates: readonly string[]): string {
    if (this.wordBeforeCursor() !== word) return '';
    const matches = [...new Set(candidates.filter((c) => c.startsWith(word)))].sort();
    if (matches.length === 0) return '';
    if (matches.length === 1) {
      const only = matches[0] as string;
      return this.insert(only.slice(word.length) + (only.endsWith('/') ? '' : ' '));
    }
    const prefix = commonPrefix(matches);
    if (prefix.length > word.length) return this.insert(prefix.slice(word.length));
    const listing = `${this.toFreshRow()}${matches.map((m) => m.slice(m.lastIndexOf('/', m.length - 2) + 1)).join('  ')}\r\n`;
    const cursor = this.cursor;
    const begun = this.restart();
    this.cursor = cursor;
    return listing + begun + this.redraw();
  }

  /** The word Tab completes: from the last space before the cursor (not escaped by `\`). */
  private wordBeforeCursor(): string {
    const before = this.chars.slice(0, this.cursor).join('');
    const m = /(?:\\ |[^\s])*$/.exec(before);
    return m ? m[0] : '';
  }

  /** Draws the prompt again on a fresh row, keeping the line (after a listing). */
  private restart(): string {
    const chars = this.chars;
    const out = this.begin(this.prompt);
    this.chars = chars;
    return out;
  }

  /** Lines left over from a multi-line paste, to be fed after the current command ends. */
  takePendingInput(): string | undefined {
    return this.pendingPaste.shift();
  }

  private remember(line: string): void {
    if (line.trim() !== '' && this.history[this.history.length - 1] !== line) {
      this.history.push(line);
      if (this.history.length > MAX_HISTORY) this.history.shift();
    }
    this.historyIndex = this.history.length;
  }

  private applyEscape(name: EscapeName): string {
    switch (name) {
      case 'left':
        if (this.cursor === 0) return '';
        this.cursor -= 1;
        return this.redraw();
      case 'right':
        if (this.cursor >= this.chars.length) return '';
        this.cursor += 1;
        return this.redraw();
      case 'home':
        return this.home();
      case 'end':
        return this.moveToEnd();
      case 'delete':
        return this.deleteForward();
      case 'up':
        if (this.historyIndex === 0) return '';
        if (this.historyIndex === this.history.length) this.draft = this.chars;
        this.historyIndex -= 1;
        this.chars = [...(this.history[this.historyIndex] ?? '')];
        this.cursor = this.chars.length;
        return this.redraw();
      case 'down':
        if (this.historyIndex >= this.history.length) return '';
        this.historyIndex += 1;
        this.chars = this.historyIndex === this.history.length ? this.draft : [...(this.history[this.historyIndex] ?? '')];
        this.cursor = this.chars.length;
        return this.redraw();
      case 'wordLeft':
        while (this.cursor > 0 && this.chars[this.cursor - 1] === ' ') this.cursor -= 1;
        while (this.cursor > 0 && this.chars[this.cursor - 1] !== ' ') this.cursor -= 1;
        return this.redraw();
      case 'wordRight':
        while (this.cursor < this.chars.length && this.chars[this.cursor] === ' ') this.cursor += 1;
        while (this.cursor < this.chars.length && this.chars[this.cursor] !== ' ') this.cursor += 1;
        return this.redraw();
      case 'pasteStart':
      case 'pasteEnd':
      case 'ignored':
        return '';
    }
  }

  private insert(text: string): string {
    // eslint-disable-next-line no-control-regex -- terminal input is control characters
    const added = [...text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '')];
    if (added.length === 0) return '';
    const atEnd = this.cursor === this.chars.length;
    this.chars.splice(this.cursor, 0, ...added);
    this.cursor += added.length;
    if (!atEnd) return this.redraw();
    // Typing at the end: the terminal wraps the new characters itself; write only them.
    const end = this.layout().end;
    this.cursorRow = end.row;
    return added.join('') + (end.pendingWrap ? '\r\n' : '');
  }

  private backspace(): string {
    if (this.cursor === 0) return '';
    this.chars.splice(this.cursor - 1, 1);
    this.cursor -= 1;
    return this.redraw();
  }

  private deleteForward(): string {
    if (this.cursor >= this.chars.length) return '';
    this.chars.splice(this.cursor, 1);
    return this.redraw();
  }

  private home(): string {
    this.cursor = 0;
    return this.redraw();
  }

  private moveToEnd(): string {
    this.cursor = this.chars.length;
    return this.redraw();
  }

  /** Moves below the line: to the start of the row after its end. */
  private toFreshRow(): string {
    const out = this.moveToEnd();
    return out + (this.layout().end.pendingWrap ? '' : '\r\n');
  }

  /**
   * Rewrites the prompt and line from the prompt's first row (moving up over the rows the line
   * wrapped onto), clears what an older, longer line left below, then puts the cursor where it
   * belongs.
   */
  private redraw(): string {
    const { end, cursor } = this.layout();
    let out = (this.cursorRow > 0 ? `${ESC}[${this.cursorRow}A` : '') + `\r${this.prompt}${this.line}`;
    // At the last column the terminal waits to wrap until the next character: wrap now, so the
    // cursor is where the arithmetic below says.
    if (end.pendingWrap) out += '\r\n';
    out += `${ESC}[J`;
    if (end.row > cursor.row) out += `${ESC}[${end.row - cursor.row}A`;
    if (cursor.col !== end.col) out += cursor.col < end.col ? `${ESC}[${end.col - cursor.col}D` : `${ESC}[${cursor.col - end.col}C`;
    this.cursorRow = cursor.row;
    return out;
  }

  /** Where the line's end and the cursor are on screen (see layoutLine). */
  private layout(): { end: Cell & { pendingWrap: boolean }; cursor: Cell } {
    return layoutLine(this.promptChars, this.chars, this.cursor, this.columns);
  }
}

function commonPrefix(words: readonly string[]): string {
  let prefix = words[0] ?? '';
  for (const w of words) while (!w.startsWith(prefix)) prefix = prefix.slice(0, -1);
  return prefix;
}
