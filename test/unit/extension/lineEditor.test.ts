// The Sandbox terminal's line editor, fed keystrokes as VS Code delivers them.
import assert from 'node:assert/strict';
import { displayWidth, LineEditor } from '../../../extension/terminal/lineEditor';
import { VtScreen } from '../../fixtures/vtScreen';

function type(editor: LineEditor, ...keys: string[]) {
  const actions = keys.flatMap((k) => editor.handleInput(k).actions);
  return actions;
}

describe('terminal line editor', () => {
  it('submits the typed line on Enter', () => {
    const e = new LineEditor();
    e.begin('$ ');
    const actions = type(e, 'e', 'c', 'h', 'o', ' ', 'h', 'i', '\r');
    assert.deepEqual(actions, [{ kind: 'submit', line: 'echo hi' }]);
  });

  it('edits in the middle with the cursor keys, Home/End, Backspace and Delete', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, 'ac', '\x1b[D', 'b'); // a|c → ab|c
    assert.equal(e.line, 'abc');
    type(e, '\x1b[H', 'X', '\x1b[F', 'Y'); // Home, End
    assert.equal(e.line, 'XabcY');
    type(e, '\x1b[D', '\x1b[D', '\x7f'); // Xab|cY → backspace removes 'b'
    assert.equal(e.line, 'XacY');
    type(e, '\x01', '\x1b[3~'); // Ctrl+A then Delete removes 'X'
    assert.equal(e.line, 'acY');
  });

  it('walks history with up/down and keeps the draft', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, 'one\r');
    e.begin('$ ');
    type(e, 'two\r');
    e.begin('$ ');
    type(e, 'dr');
    type(e, '\x1b[A');
    assert.equal(e.line, 'two');
    type(e, '\x1b[A', '\x1b[A');
    assert.equal(e.line, 'one');
    type(e, '\x1b[B', '\x1b[B');
    assert.equal(e.line, 'dr');
    assert.deepEqual(e.historyEntries, ['one', 'two']);
  });

  it('turns Ctrl+C into an interrupt and Ctrl+D on an empty line into eof', () => {
    const e = new LineEditor();
    e.begin('$ ');
    assert.deepEqual(type(e, 'sleep 60', '\x03'), [{ kind: 'interrupt' }]);
    assert.equal(e.line, '');
    assert.deepEqual(type(e, '\x04'), [{ kind: 'eof' }]);
  });

  it('submits a multi-line paste line by line', () => {
    const e = new LineEditor();
    e.begin('$ ');
    const first = e.handleInput('\x1b[200~echo a\r\necho b\r\x1b[201~');
    assert.deepEqual(first.actions, [{ kind: 'submit', line: 'echo a' }]);
    e.begin('$ ');
    const next = e.takePendingInput();
    assert.ok(next !== undefined);
    assert.deepEqual(e.handleInput(next).actions, [{ kind: 'submit', line: 'echo b' }]);
  });

  it('places the cursor by display width (wide characters take two cells)', () => {
    const e = new LineEditor();
    const screen = new VtScreen(80);
    screen.write(e.begin('> '));
    screen.write(e.handleInput('好x').output);
    screen.write(e.handleInput('\x1b[D\x1b[D').output);
    assert.deepEqual(screen.lines(), ['> 好x']);
    assert.deepEqual(screen.cursor(), { row: 0, col: 2 });
    assert.equal(displayWidth('a好'), 3);
  });

  describe('a line wider than the terminal', () => {
    const COLUMNS = 20;
    const PROMPT = '\x1b[36msbx\x1b[0m:\x1b[34m/\x1b[0m$ '; // 7 cells, coloured like the real one
    /** Rows without the empty one a line that fills its last row exactly wraps onto. */
    const trimEnd = (rows: string[]) => (rows.at(-1) === '' ? rows.slice(0, -1) : rows);
    const LINE = 'echo 0123456789 abcdefghij ABCDEFGHIJ 0123456789 the-end';
    /** The screen as a person sees it: the prompt and the line, wrapped at COLUMNS. */
    const wrapped = (line: string) => {
      const text = `sbx:/$ ${line}`;
      const rows: string[] = [];
      for (let i = 0; i < text.length; i += COLUMNS) rows.push(text.slice(i, i + COLUMNS).replace(/\s+$/, ''));
      return rows;
    };
    const setup = () => {
      const e = new LineEditor();
      e.setColumns(COLUMNS);
      const screen = new VtScreen(COLUMNS);
      screen.write(e.begin(PROMPT));
      const key = (k: string) => screen.write(e.handleInput(k).output);
      return { e, screen, key, shown: () => trimEnd(screen.lines()) };
    };

    it('is shown once, wrapped, while it is typed key by key', () => {
      const { screen, key, shown } = setup();
      let written = '';
      for (const ch of LINE) {
        const before = screen.lines().join('\n');
        key(ch);
        written += ch;
        assert.deepEqual(shown(), wrapped(written), `after typing ${JSON.stringify(written)} (screen was ${JSON.stringify(before)})`);
      }
      assert.deepEqual(screen.cursor(), { row: 3, col: (7 + LINE.length) % COLUMNS });
    });

    it('writes only the typed characters when typing at the end', () => {
      const e = new LineEditor();
      e.setColumns(COLUMNS);
      e.begin(PROMPT);
      const outputs = [...'0123456789abcdefghij'].map((ch) => e.handleInput(ch).output);
      // The 13th character fills the first row: the editor wraps to the next row explicitly.
      assert.deepEqual(outputs.filter((o) => o.length > 1), ['c\r\n']);
      assert.equal(outputs.join(''), '0123456789abc\r\ndefghij');
    });

    it('redraws in place when edited in the middle, after Home and End, and after Backspace', () => {
      const { e, screen, key, shown } = setup();
      key(LINE);
      assert.deepEqual(shown(), wrapped(LINE));
      for (let i = 0; i < 30; i++) key('\x1b[D');
      // The cursor is on the character 30 from the end, wherever that wrapped to.
      const at = 7 + LINE.length - 30;
      assert.deepEqual(screen.cursor(), { row: Math.floor(at / COLUMNS), col: at % COLUMNS });
      key('X');
      const edited = LINE.slice(0, LINE.length - 30) + 'X' + LINE.slice(LINE.length - 30);
      assert.equal(e.line, edited);
      assert.deepEqual(shown(), wrapped(edited));
      key('\x1b[H');
      assert.deepEqual(screen.cursor(), { row: 0, col: 7 });
      key('\x1b[F');
      assert.deepEqual(screen.cursor(), { row: Math.floor((7 + edited.length) / COLUMNS), col: (7 + edited.length) % COLUMNS });
      for (let i = 0; i < 25; i++) key('\x7f');
      assert.deepEqual(shown(), wrapped(edited.slice(0, -25)));
      key('\x15'); // Ctrl+U: the whole line goes, the rows it wrapped onto are cleared
      assert.deepEqual(screen.lines(), ['sbx:/$']);
      assert.deepEqual(screen.cursor(), { row: 0, col: 7 });
    });

    it('walks history between a long and a short line without leaving rows behind', () => {
      const { e, screen, key } = setup();
      key(LINE + '\r');
      screen.write(e.begin(PROMPT));
      key('ls\r');
      screen.write(e.begin(PROMPT));
      const top = screen.lines().length - 1;
      key('\x1b[A');
      key('\x1b[A');
      assert.deepEqual(trimEnd(screen.lines().slice(top)), wrapped(LINE));
      key('\x1b[B');
      assert.deepEqual(trimEnd(screen.lines().slice(top)), ['sbx:/$ ls']);
    });

    it('ends a line that fills its last row exactly without an empty row', () => {
      const { e, screen, key } = setup();
      const exact = 'x'.repeat(COLUMNS * 2 - 7); // prompt + line = two full rows
      key(exact);
      assert.deepEqual(screen.cursor(), { row: 2, col: 0 });
      const { actions, output } = e.handleInput('\r');
      screen.write(output);
      assert.deepEqual(actions, [{ kind: 'submit', line: exact }]);
      assert.deepEqual(screen.cursor(), { row: 2, col: 0 });
    });
  });

  describe('Tab', () => {
    it('asks for a completion of the word before the cursor and inserts nothing itself', () => {
      const e = new LineEditor();
      e.begin('$ ');
      const { output, actions } = e.handleInput('cat src/ap\t');
      assert.deepEqual(actions, [{ kind: 'complete', word: 'src/ap' }]);
      assert.equal(e.line, 'cat src/ap');
      assert.ok(!output.includes('\t'));
    });

    it('completes one match, the common prefix of several, and lists them when that adds nothing', () => {
      const e = new LineEditor();
      const screen = new VtScreen(80);
      screen.write(e.begin('$ '));
      screen.write(e.handleInput('cat src/ap').output);
      screen.write(e.complete('src/ap', ['src/app.js']));
      assert.equal(e.line, 'cat src/app.js ');
      screen.write(e.handleInput('sr').output);
      screen.write(e.complete('sr', ['src/', 'srv/']));
      screen.write(e.complete('sr', ['src/', 'srv/']));
      assert.equal(e.line, 'cat src/app.js sr');
      assert.deepEqual(screen.lines().slice(-2), ['src/  srv/', '$ cat src/app.js sr']);
      // A completion that arrives after the line changed is dropped.
      screen.write(e.handleInput('c').output);
      assert.equal(e.complete('sr', ['src/']), '');
      assert.equal(e.line, 'cat src/app.js src');
    });
  });

  it('swallows unknown escape sequences and control characters', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, '\x1b[15~', '\x1b[I', 'a', '\x07');
    assert.equal(e.line, 'a');
  });
});
