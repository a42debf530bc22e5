"""``python -m pi_kernel``: start the kernel, or run a subcommand.

    python -m pi_kernel -f CONNECTION_FILE       the kernel (what kernel.json runs)
    python -m pi_kernel install [--user | --sys-prefix | --prefix P] [--name NAME]
    python -m pi_kernel serve-local [--port P]    the local model as an OpenAI-compatible server

Anything that is not a subcommand goes to the kernel application unchanged.

Each subcommand's module (``pi_kernel.kernel.kernel``, ``pi_kernel.kernel.kernelspec``,
``pi_kernel.ai.providers.local_server``) is imported lazily, when that subcommand runs:
the kernel does not load the kernelspec writer (about 80 ms: the tool layer) nor the
local model server.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def _install(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pi_kernel install", description="Register the Pi Agent kernel.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true", help=f"install into {sys.prefix}")
    where.add_argument("--prefix", help="install into PREFIX/share/jupyter/kernels")
    parser.add_argument("--name", default=None, help="kernelspec name (default: pi)")
    args = parser.parse_args(list(argv))

    from pi_kernel.kernel.kernelspec import KERNEL_NAME, install

    prefix = sys.prefix if args.sys_prefix else args.prefix
    path = install(user=args.user, prefix=prefix, kernel_name=args.name or KERNEL_NAME)
    print(f"Installed kernelspec {args.name or KERNEL_NAME} in {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"]:
        return _install(args[1:])
    if args[:1] == ["serve-local"]:
        from pi_kernel.ai.providers.local_server import main as serve_local

        return serve_local(args[1:])
    from ipykernel.kernelapp import IPKernelApp

    from pi_kernel.kernel.kernel import PiKernel

    IPKernelApp.launch_instance(argv=args, kernel_class=PiKernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
