/**
 * One notebook panel's side of the `pi.notebook` comm: when to open it (the
 * kernel is there, again after a restart, a kernel change or a `pi.notebook.hello`
 * from the kernel) and how requests become replies, one at a time in order.
 */

import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject } from '@lumino/coreutils';
import { IDisposable } from '@lumino/disposable';

import { BridgeError, clearHighlight, handle } from './operations';

export const TARGET = 'pi.notebook';
export const HELLO_TARGET = 'pi.notebook.hello';
export const PROTOCOL = 1;

/**
 * Statuses in which the kernel process is gone or new: whatever comm we had is dead. Not `unknown`
 * (the websocket is down): the kernel keeps our comm and JupyterLab keeps it across a reconnection.
 */
const NEW_LIFE: ReadonlySet<Kernel.Status> = new Set<Kernel.Status>([
  'starting',
  'restarting',
  'autorestarting',
  'terminating',
  'dead'
]);
/** Statuses in which a kernel answers comm_open (busy too: comms may run on subshells). */
const ALIVE: ReadonlySet<Kernel.Status> = new Set<Kernel.Status>(['idle', 'busy']);

export class NotebookBridge implements IDisposable {
  constructor(panel: NotebookPanel, frontend: 'jupyterlab' | 'notebook') {
    this._panel = panel;
    this._frontend = frontend;
    panel.sessionContext.kernelChanged.connect(this._onKernelChanged, this);
    this._watch(panel.sessionContext.session?.kernel ?? null);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._panel.sessionContext.kernelChanged.disconnect(this._onKernelChanged, this);
    this._watch(null);
  }

  private _onKernelChanged(): void {
    this._watch(this._panel.sessionContext.session?.kernel ?? null);
  }

  /** Follow this kernel connection (null: none); forget the previous one and its comm. */
  private _watch(kernel: Kernel.IKernelConnection | null): void {
    if (this._kernel === kernel) {
      return;
    }
    if (this._kernel && !this._kernel.isDisposed) {
      this._kernel.statusChanged.disconnect(this._onStatus, this);
      this._kernel.removeCommTarget(HELLO_TARGET, this._onHello);
    }
    this._closeComm();
    this._kernel = kernel;
    this._opened = false;
    if (!kernel || this._isDisposed || !kernel.handleComms) {
      return;
    }
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.registerCommTarget(HELLO_TARGET, this._onHello);
    this._onStatus(kernel, kernel.status);
  }

  private _onStatus(kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (kernel !== this._kernel) {
      return;
    }
    if (NEW_LIFE.has(status)) {
      // The kernel's comms are gone with it (JupyterLab disposes them without a close).
      this._forgetComm();
      this._opened = false;
    } else if (ALIVE.has(status) && !this._opened) {
      this._opened = true;
      void this._open();
    }
  }

  /** The kernel opened `pi.notebook.hello`: (re)open `pi.notebook`. */
  private _onHello = (): void => {
    this._closeComm();
    this._opened = true;
    void this._open();
  };

  private async _open(): Promise<void> {
    const kernel = this._kernel;
    await this._panel.context.ready;
    if (!kernel || kernel !== this._kernel || kernel.isDisposed || this._isDisposed) {
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(TARGET);
    } catch (error) {
      console.warn('pi-kernel notebook bridge: cannot open the comm', error);
      return;
    }
    this._comm = comm;
    comm.onMsg = msg => this._onRequest(comm, msg);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._forgetComm();
      }
    };
    try {
      comm.open({ protocol: PROTOCOL, frontend: this._frontend, path: this._panel.context.path });
    } catch (error) {
      console.warn('pi-kernel notebook bridge: cannot open the comm', error);
      this._forgetComm();
    }
  }

  /** Requests are handled one after the other, in the order they came. */
  private _onRequest(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const request = msg.content.data as JSONObject;
    this._queue = this._queue.then(async () => {
      const reply = await this._reply(request);
      if (!comm.isDisposed && this._comm === comm) {
        comm.send(reply);
      }
    });
  }

  private async _reply(request: JSONObject): Promise<JSONObject> {
    const id = request.request;
    if (typeof id !== 'string') {
      // Nothing to answer to: the kernel never sends this.
      return { reply_to: null, ok: false, error: 'bad_request', message: 'a request needs a string "request" id' };
    }
    try {
      const result = await handle(this._panel, request);
      return { ...result, reply_to: id, ok: true };
    } catch (error) {
      if (error instanceof BridgeError) {
        return { reply_to: id, ok: false, error: error.code, message: error.message };
      }
      return { reply_to: id, ok: false, error: 'failed', message: String((error as Error)?.message ?? error) };
    }
  }

  private _closeComm(): void {
    const comm = this._comm;
    this._forgetComm();
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // The kernel is gone: nothing to tell it.
      }
    }
  }

  private _forgetComm(): void {
    this._comm = null;
    clearHighlight(this._panel);
  }

  private _panel: NotebookPanel;
  private _frontend: 'jupyterlab' | 'notebook';
  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _opened = false;
  private _isDisposed = false;
  private _queue: Promise<void> = Promise.resolve();
}
