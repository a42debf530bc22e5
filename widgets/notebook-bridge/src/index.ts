/**
 * pi-kernel's notebook bridge: a JupyterLab 4 / Notebook 7 plugin through which
 * the Pi kernel reads and changes the notebook it runs in.
 *
 * For every notebook panel it opens the comm `pi.notebook` once the panel's
 * kernel is ready (and again after a restart or a kernel change), and it
 * registers the comm target `pi.notebook.hello`, which a kernel opens to ask for
 * the comm again (a stock kernel after `%load_ext pi_kernel`). The protocol is
 * in docs/notebook.md; the handlers live in ./bridge.ts.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { NotebookBridge } from './bridge';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'pi-kernel-notebook-bridge:plugin',
  description: "Lets the Pi kernel read and change the notebook it runs in.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    const frontend = /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
    const attach = (panel: NotebookPanel): void => {
      const bridge = new NotebookBridge(panel, frontend);
      panel.disposed.connect(() => bridge.dispose());
    };
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_sender, panel) => attach(panel));
  }
};

export default plugin;
