/**
 * The operations of the `pi.notebook` protocol against one notebook's model:
 * read, edit, insert, delete, set_outputs and highlight. Each checks its
 * request, refuses a change over a cell the user changed since the kernel read
 * it (`stale`), and changes the notebook through its shared model, the way
 * JupyterLab's own actions do (so collaboration, the undo history and saving
 * see an ordinary change).
 */

import * as nbformat from '@jupyterlab/nbformat';
import { Cell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';

export type ErrorCode = 'stale' | 'not_found' | 'bad_request' | 'failed';

/** A refusal the kernel can act on: becomes `{ok: false, error: code, message}`. */
export class BridgeError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string
  ) {
    super(message);
  }
}

export const HIGHLIGHT_CLASS = 'pi-bridge-highlight';
/** On the notebook while one of its cells is highlighted (style/index.css: that cell anchors the scroll). */
export const HIGHLIGHTING_CLASS = 'pi-bridge-highlighting';
/** About this many characters of output summary per cell. */
const OUTPUT_SUMMARY_CHARS = 200;
const CELL_TYPES: ReadonlySet<string> = new Set(['code', 'markdown', 'raw']);
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

type Handler = (panel: NotebookPanel, request: JSONObject) => Promise<JSONObject> | JSONObject;

const HANDLERS: { [op: string]: Handler } = {
  read,
  edit,
  insert,
  delete: remove,
  set_outputs: setOutputs,
  highlight
};

/** Carry out one request; throws a BridgeError for a refusal. */
export async function handle(panel: NotebookPanel, request: JSONObject): Promise<JSONObject> {
  const op = request.op;
  const handler = typeof op === 'string' && Object.prototype.hasOwnProperty.call(HANDLERS, op) ? HANDLERS[op] : null;
  if (!handler) {
    throw new BridgeError('bad_request', `unknown op ${JSON.stringify(op)}`);
  }
  return handler(panel, request);
}

function cellsOf(panel: NotebookPanel): ICellModel[] {
  const model = panel.content.model;
  if (!model) {
    throw new BridgeError('failed', 'the notebook is not loaded');
  }
  const cells: ICellModel[] = [];
  for (let index = 0; index < model.cells.length; index++) {
    cells.push(model.cells.get(index));
  }
  return cells;
}

function position(cells: ICellModel[], id: string): number {
  const index = cells.findIndex(cell => cell.id === id);
  if (index < 0) {
    throw new BridgeError('not_found', `no cell with id ${JSON.stringify(id)} in this notebook`);
  }
  return index;
}

function stringField(request: JSONObject, name: string): string {
  const value = request[name];
  if (typeof value !== 'string') {
    throw new BridgeError('bad_request', `"${name}" must be a string`);
  }
  return value;
}

function stringList(request: JSONObject, name: string): string[] {
  const value = request[name];
  if (!Array.isArray(value) || !value.every(item => typeof item === 'string')) {
    throw new BridgeError('bad_request', `"${name}" must be a list of strings`);
  }
  return value as string[];
}

function staleMessage(index: number): string {
  return `cell #${index + 1} was changed in the notebook since it was read; read it again`;
}

// ---------------------------------------------------------------- read

function read(panel: NotebookPanel, request: JSONObject): JSONObject {
  const cells = cellsOf(panel);
  const maxChars = request.max_chars;
  if (maxChars !== undefined && maxChars !== null && !(Number.isInteger(maxChars) && (maxChars as number) >= 0)) {
    throw new BridgeError('bad_request', '"max_chars" must be a whole number >= 0');
  }
  let indices: number[];
  if (request.cell_ids === undefined || request.cell_ids === null) {
    indices = cells.map((_cell, index) => index);
  } else {
    indices = stringList(request, 'cell_ids').map(id => position(cells, id));
  }
  const limit = typeof maxChars === 'number' ? maxChars : Infinity;
  return { cells: indices.map(index => describe(cells[index], index, limit)) };
}

function describe(cell: ICellModel, index: number, maxChars: number): JSONObject {
  const source = cell.sharedModel.getSource();
  const code = cell.type === 'code' ? (cell as ICodeCellModel) : null;
  return {
    id: cell.id,
    index,
    type: cell.type,
    source: source.length > maxChars ? source.slice(0, maxChars) : source,
    execution_count: code ? code.executionCount : null,
    outputs: code ? summarizeOutputs(code.outputs.toJSON()) : '',
    source_length: source.length,
    truncated: source.length > maxChars
  };
}

function multiline(value: unknown): string {
  if (Array.isArray(value)) {
    return value.join('');
  }
  return typeof value === 'string' ? value : '';
}

function oneLine(text: string): string {
  return text.replace(ANSI, '').replace(/\s+/g, ' ').trim();
}

function head(text: string, chars: number): string {
  return text.length > chars ? `${text.slice(0, chars - 1)}…` : text;
}

function tail(text: string, chars: number): string {
  return text.length > chars ? `…${text.slice(text.length - chars + 1)}` : text;
}

/** A short text summary of a code cell's outputs: stream tails, `ename: evalue`, mime types and text/plain. */
export function summarizeOutputs(outputs: nbformat.IOutput[]): string {
  const parts: string[] = [];
  for (const output of outputs) {
    if (nbformat.isStream(output)) {
      parts.push(tail(oneLine(multiline(output.text)), 120));
    } else if (nbformat.isError(output)) {
      parts.push(oneLine(`${output.ename}: ${output.evalue}`));
    } else if (nbformat.isExecuteResult(output) || nbformat.isDisplayData(output)) {
      const data = output.data ?? {};
      const plain = oneLine(multiline(data['text/plain']));
      const mimes = Object.keys(data).join(', ');
      parts.push(plain ? `[${mimes}] ${head(plain, 120)}` : `[${mimes}]`);
    } else {
      parts.push(String(output.output_type));
    }
  }
  return head(parts.filter(part => part).join(' | '), OUTPUT_SUMMARY_CHARS);
}

// ---------------------------------------------------------------- changes

function edit(panel: NotebookPanel, request: JSONObject): JSONObject {
  const id = stringField(request, 'cell_id');
  const expected = stringField(request, 'expected');
  const replacement = stringField(request, 'new');
  const cells = cellsOf(panel);
  const index = position(cells, id);
  const cell = cells[index];
  if (cell.sharedModel.getSource() !== expected) {
    throw new BridgeError('stale', staleMessage(index));
  }
  cell.sharedModel.setSource(replacement);
  return { index };
}

function insert(panel: NotebookPanel, request: JSONObject): JSONObject {
  const cells = cellsOf(panel);
  const index = request.index;
  if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index > cells.length) {
    throw new BridgeError('bad_request', `"index" must be a whole number from 0 to ${cells.length}`);
  }
  const specs = request.cells;
  if (!Array.isArray(specs)) {
    throw new BridgeError('bad_request', '"cells" must be a list of {type, source}');
  }
  const news = specs.map((spec, position) => {
    const type = (spec as JSONObject | null)?.type;
    const source = (spec as JSONObject | null)?.source;
    if (typeof type !== 'string' || !CELL_TYPES.has(type) || typeof source !== 'string') {
      throw new BridgeError(
        'bad_request',
        `cells[${position}] must be {"type": "code" | "markdown" | "raw", "source": string}`
      );
    }
    return { cell_type: type as nbformat.CellType, source, metadata: {} };
  });
  if (news.length === 0) {
    return { ids: [] };
  }
  const created = panel.content.model!.sharedModel.insertCells(index, news);
  const ids = created.map(cell => cell.getId());
  renderMarkdown(panel, index, news.length);
  return { ids };
}

/** A markdown cell inserted for the user shows rendered, as one the user ran. */
function renderMarkdown(panel: NotebookPanel, start: number, count: number): void {
  for (let index = start; index < start + count; index++) {
    const widget: Cell | undefined = panel.content.widgets[index];
    if (widget && widget.model.type === 'markdown' && 'rendered' in widget) {
      (widget as Cell & { rendered: boolean }).rendered = true;
    }
  }
}

function remove(panel: NotebookPanel, request: JSONObject): JSONObject {
  const ids = stringList(request, 'cell_ids');
  const expected = stringList(request, 'expected');
  if (ids.length !== expected.length) {
    throw new BridgeError('bad_request', '"cell_ids" and "expected" must have the same length');
  }
  if (new Set(ids).size !== ids.length) {
    throw new BridgeError('bad_request', '"cell_ids" names a cell twice');
  }
  const cells = cellsOf(panel);
  const indices = ids.map(id => position(cells, id));
  indices.forEach((index, position) => {
    if (cells[index].sharedModel.getSource() !== expected[position]) {
      throw new BridgeError('stale', staleMessage(index));
    }
  });
  const shared = panel.content.model!.sharedModel;
  shared.transact(() => {
    for (const index of [...indices].sort((a, b) => b - a)) {
      shared.deleteCell(index);
    }
  });
  return { indices };
}

function setOutputs(panel: NotebookPanel, request: JSONObject): JSONObject {
  const id = stringField(request, 'cell_id');
  const outputs = request.outputs;
  if (
    !Array.isArray(outputs) ||
    !outputs.every(
      output => output !== null && typeof output === 'object' && typeof (output as JSONObject).output_type === 'string'
    )
  ) {
    throw new BridgeError('bad_request', '"outputs" must be a list of nbformat outputs');
  }
  const count = request.execution_count;
  if (count !== undefined && count !== null && !Number.isInteger(count)) {
    throw new BridgeError('bad_request', '"execution_count" must be a whole number or null');
  }
  const cells = cellsOf(panel);
  const index = position(cells, id);
  const cell = cells[index];
  if (cell.type !== 'code') {
    throw new BridgeError('bad_request', `cell #${index + 1} is a ${cell.type} cell: only code cells have outputs`);
  }
  const code = cell as ICodeCellModel;
  // The kernel produced these outputs just now, as when the user runs the cell.
  code.trusted = true;
  code.outputs.fromJSON(outputs as unknown as nbformat.IOutput[]);
  code.executionCount = (count ?? null) as nbformat.ExecutionCount;
  return { index };
}

// ---------------------------------------------------------------- highlight

export function clearHighlight(panel: NotebookPanel): void {
  if (panel.isDisposed) {
    return;
  }
  panel.content.removeClass(HIGHLIGHTING_CLASS);
  for (const widget of panel.content.widgets) {
    widget.removeClass(HIGHLIGHT_CLASS);
  }
}

async function highlight(panel: NotebookPanel, request: JSONObject): Promise<JSONObject> {
  const id = request.cell_id;
  if (id !== null && id !== undefined && typeof id !== 'string') {
    throw new BridgeError('bad_request', '"cell_id" must be a string or null');
  }
  if (typeof id !== 'string') {
    clearHighlight(panel);
    return {};
  }
  const index = position(cellsOf(panel), id);
  clearHighlight(panel);
  const widget = panel.content.widgets[index];
  widget.addClass(HIGHLIGHT_CLASS);
  panel.content.addClass(HIGHLIGHTING_CLASS);
  // Scroll without selecting or focusing it: the user may be typing in the approval card.
  await Promise.race([
    panel.content.scrollToItem(index, 'center').catch(() => undefined),
    new Promise(resolve => setTimeout(resolve, 1000))
  ]);
  return { index };
}
