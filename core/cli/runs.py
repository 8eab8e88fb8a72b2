"""``runs`` (the runs browser in a terminal) and ``runs compare A B ...`` (runs side by side).

``runs`` lists every run under the runs root from each run's cached summary
(:mod:`core.run.index`): name, cluster file, start, duration, outcome, roles, backend, last and
best loss, global steps/s over the run's last 30 s (:mod:`core.views.rates`), restarts, then a
column per hyperparameter (a flag of the run's command or an ``[env]`` value);
``--outcome`` and ``--filter`` narrow it, ``--sort`` orders it, ``--json`` prints it for scripts.
``runs compare`` prints 2-8 runs side by side with the rows that differ marked
(:mod:`core.views.compare_table`), and ``--csv FILE`` writes the same table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from core.cli.exits import EXIT_OK, EXIT_USAGE, resolve_run
from core.cli.tensorboard import cmd_runs_tensorboard
from core.run import index as runs_index
from core.run.rundir import runs_root
from core.textsafe import terminal
from core.views import runs_select
from core.views.rates import summary_rates
from core.views.runs_table import COLUMNS, hyperparam_cells, hyperparam_keys, row_cells

HYPERPARAM_WIDTH = 24  # a column's most characters; a longer value is cut in its middle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``runs [--outcome O] [--filter TEXT] [--sort KEY] [--json]``, ``runs tensorboard RUN ...``,
    ``runs compare A B ... [--csv FILE]``."""
    parser.add_argument(
        "action",
        nargs="?",
        choices=("tensorboard", "compare"),
        help="tensorboard RUN ...: open the runs in one TensorBoard, overlaid; compare A B ...: 2-8 runs side by side",
    )
    parser.add_argument("run", nargs="*", help="runs: a run directory, a run id from `runs`, or 'latest'")
    parser.add_argument(
        "--no-browser", action="store_true", help="with tensorboard: print the address, open no browser"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with tensorboard: the run's profiles (`ctl RUN profile`) in TensorBoard's Profile tab",
    )
    parser.add_argument(
        "--outcome",
        action="append",
        choices=runs_index.OUTCOMES,
        default=[],
        help="list only runs with this outcome (repeatable)",
    )
    parser.add_argument("--filter", default="", metavar="TEXT", help="list only runs whose row contains every word")
    parser.add_argument(
        "--sort", choices=runs_select.SORT_KEYS, default="start", help="order of the list (default: newest first)"
    )
    parser.add_argument("--reverse", action="store_true", help="reverse the order")
    parser.add_argument("--json", action="store_true", help="print JSON, one object per run")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="with compare: also write the table as CSV")


def cmd_runs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.action == "tensorboard":
        return cmd_runs_tensorboard(args, out, err)
    if args.action == "compare":
        return cmd_compare(args, out, err)
    root = args.root or runs_root()
    summaries = runs_index.list_summaries(root)
    chosen = runs_select.select(
        summaries, text=args.filter, outcomes=args.outcome, sort=args.sort, reverse=args.reverse
    )
    if args.json:
        for s in chosen:
            rates = summary_rates(s)
            data = {
                **s.to_json(),
                "rates": {
                    "window_s": rates.window_s,
                    "global_steps_per_s": rates.global_steps_per_s,
                    "examples_per_s": rates.examples_per_s,
                    "batches_per_s": dict(rates.batches_per_s),
                },
            }
            print(json.dumps(data, default=str), file=out)
        return EXIT_OK
    if not summaries:
        print(terminal(f"no runs in {root}"), file=out)
        return EXIT_OK
    print_list(chosen, out)
    shown = f"{len(chosen)} of {len(summaries)}" if len(chosen) != len(summaries) else str(len(summaries))
    print("\n" + terminal(f"{shown} run{'s' if len(summaries) != 1 else ''} in {root}"), file=out)
    return EXIT_OK


def _cut_end(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle elided: both ends of a path or a value say most."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def print_list(summaries: list[runs_index.RunSummary], out: TextIO) -> None:
    keys = hyperparam_keys(summaries)
    # Flags and env values come from the users' cluster files: escaped before they are measured.
    extra = [[terminal(v) for v in hyperparam_cells(s, keys)] for s in summaries]
    widths = [
        min(HYPERPARAM_WIDTH, max([len(terminal(k)), *(len(row[i]) for row in extra)])) for i, k in enumerate(keys)
    ]
    columns = [*COLUMNS, *zip((terminal(k) for k in keys), widths, strict=True)]
    print(" ".join(f"{_cut_middle(name, w):<{w}}" for name, w in columns).rstrip(), file=out)
    for s, values in zip(summaries, extra, strict=True):
        # Names and cluster files come from each run's run.json: escaped, then cut to the column.
        fixed = [_cut_end(terminal(c), w) for c, (_, w) in zip(row_cells(s), COLUMNS, strict=True)]
        cells = [*fixed, *(_cut_middle(v, w) for v, w in zip(values, widths, strict=True))]
        print(" ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, columns, strict=True)).rstrip(), file=out)


def cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.run import compare as runs_compare  # numpy: only for compare, not for every listing
    from core.views import compare_table

    if not runs_compare.MIN_RUNS <= len(args.run) <= runs_compare.MAX_RUNS:
        print(
            f"runs compare: name {runs_compare.MIN_RUNS} to {runs_compare.MAX_RUNS} runs, "
            f"e.g. `runs compare RUN_A RUN_B` (got {len(args.run)})",
            file=err,
        )
        return EXIT_USAGE
    paths = []
    for name in args.run:
        path = resolve_run(name, args.root, err)
        if path is None:
            return EXIT_USAGE
        paths.append(path)
    try:
        summaries = runs_compare.load_for_compare(paths)
    except ValueError as exc:
        print(terminal(f"runs compare: {exc}"), file=err)
        return EXIT_USAGE
    rows = compare_table.compare_rows(summaries)
    compare_table.print_table(rows, out)
    if args.csv is not None:
        try:
            with open(args.csv, "w", encoding="utf-8", newline="") as handle:
                compare_table.write_csv(rows, handle)
        except OSError as exc:
            print(terminal(f"--csv {args.csv}: {exc.strerror or exc}; give a writable file path"), file=err)
            return EXIT_USAGE
        print(terminal(f"wrote {args.csv}"), file=out)
    return EXIT_OK
