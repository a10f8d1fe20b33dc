"""The ``kiln`` command: compile / run / tune / bench / plot / rpc, with ``tvmc``'s flags where they do the same job.

    kiln compile model.onnx --target llvm -O3 -o model.so
    kiln run model.so -i input.npz --print-time --print-top 5
    kiln tune model.onnx --target llvm -o tune.log --trials 200
    kiln bench model.onnx --tuning-records tune.log
    kiln plot tune.log -o curve.png
    kiln rpc tracker --port 9190

Each subcommand lives in its own module (``cmd_<name>``) with ``add_parser(subparsers)`` and a handler.
User mistakes end with a one-line message and exit code 1 (argparse's usage errors: 2, shown with the usage of
the subcommand they belong to), never a traceback. ``-v``/``-vv``/``-q`` go before or after the subcommand.
"""
from __future__ import annotations

import argparse
import logging
import sys
import traceback

from ..error import KilnError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of the ``kiln`` command."""
    from . import cmd_bench, cmd_compile, cmd_plot, cmd_rpc, cmd_run, cmd_tune
    parser = argparse.ArgumentParser(
        prog="kiln", description="kiln: compile, run, tune and benchmark deep learning models "
        "(ONNX, TorchScript, Relay text) for the CPU.",
        epilog="Run `kiln <command> --help` for the options of one command.")
    _add_verbosity(parser, 0)
    parser.add_argument("--version", action="version", version=f"kiln {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_SubParser)
    for mod in (cmd_compile, cmd_run, cmd_tune, cmd_bench, cmd_plot, cmd_rpc):
        mod.add_parser(sub)
    for subparser in sub.choices.values():
        _add_verbosity(subparser, argparse.SUPPRESS)   # `kiln compile -v ...` as well as `kiln -v compile ...`
    parser.set_defaults(_subparsers=sub.choices)
    return parser


class _SubParser(argparse.ArgumentParser):
    """A subcommand's parser (argparse's default class; named so the top level can find its usage)."""


def _add_verbosity(p: argparse.ArgumentParser, default) -> None:
    p.add_argument("-v", "--verbose", action="count", default=default,
                   help="more output: -v prints what each step did, -vv debug logging and tracebacks")
    p.add_argument("-q", "--quiet", action="store_true", default=default if default is argparse.SUPPRESS else False,
                   help="print only results and errors (no progress lines)")


def _version() -> str:
    from .. import __version__
    return __version__


def _setup_logging(verbosity: int, quiet: bool = False) -> None:
    level = logging.ERROR if quiet else logging.WARNING if verbosity == 0 else \
        logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)


def main(argv: list | None = None) -> int:
    """Entry point of the ``kiln`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # argparse would blame the top level; the flags belong to the subcommand
            sub = args._subparsers.get(getattr(args, "command", None) or "")
            (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:  # --help, --version, or a usage error argparse already printed
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.quiet and args.verbose:
        print(f"kiln {args.command}: error: -q and -v contradict each other; give one", file=sys.stderr)
        return EXIT_USAGE
    _setup_logging(args.verbose, args.quiet)
    from .common import set_verbosity
    set_verbosity(-1 if args.quiet else args.verbose)
    where = f"kiln {args.command}"
    try:
        code = args.handler(args)
        return EXIT_OK if code is None else int(code)
    except KeyboardInterrupt:
        print(f"\n{where}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (KilnError, NotImplementedError) as err:
        _report(where, err, args.verbose)
        return EXIT_ERROR
    except (OSError, UnicodeDecodeError) as err:
        _report(where, err, args.verbose)
        return EXIT_ERROR
    except Exception as err:  # noqa: BLE001 - anything else is a bug in kiln, said so
        print(f"{where}: internal error (a bug in kiln): {type(err).__name__}: {err}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        else:
            print("rerun with -v for the traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _report(where: str, err: BaseException, verbose: int) -> None:
    text = str(err).strip() or type(err).__name__
    if isinstance(err, OSError) and err.filename and err.strerror:
        text = f"{err.filename}: {err.strerror}"
    print(f"{where}: error: {text}", file=sys.stderr)
    if verbose > 1:
        traceback.print_exc()


__all__ = ["main", "build_parser"]
