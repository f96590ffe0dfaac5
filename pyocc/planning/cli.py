"""``plan-json``: plan a problem file and print or write the solution JSON.

    plan-json problem.json [--algorithm NAME] [--time-budget-ms N] [-o out.json]
    plan-json problem.json --pools [--policy traffic|first-fit]   # several named pools
    plan-json symbolic.json        # "symbols": {"S": [1, 512]}, sizes like "48*S^2": one plan for every S

The formats are described in serialize.py. Bad input (missing file, invalid
JSON, a schema error, an unknown algorithm) prints one ``error: ...`` line on
stderr and returns 2; the output file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from .planner import ALGORITHMS
from .planner import plan_memory
from .problem import PlanningError
from .pools import plan_pools
from .serialize import (
    plan_to_json,
    pools_from_json,
    pools_plan_to_json,
    problem_from_json,
    symbolic_plan_to_json,
    symbolic_problem_from_json,
)
from .symbolic import plan_symbolic


class _UsageError(Exception):
    """A command-line mistake, reported as one line instead of argparse's usage dump."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Raise ``_UsageError`` so ``main`` prints a single line."""
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = _Parser(prog="plan-json", description="Plan buffer offsets in one memory pool.")
    parser.add_argument("problem", help="problem JSON file (format pyocc-plan-problem)")
    parser.add_argument(
        "--algorithm",
        default="auto",
        help=f"planning algorithm: auto (default), {', '.join(ALGORITHMS)}",
    )
    parser.add_argument(
        "--time-budget-ms", type=float, default=200.0, help="time for improving searches (default 200)"
    )
    parser.add_argument("--pools", action="store_true",
                        help="plan across the problem's named pools (plan_pools); writes a pyocc-pools-solution")
    parser.add_argument("--policy", default="traffic", help="with --pools: traffic (default) or first-fit")
    parser.add_argument("-o", "--output", help="write the solution here instead of stdout")
    return parser


def _write_whole(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file, then a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".plan-json-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: list[str] | None = None) -> int:
    """Run ``plan-json`` (a leading "plan-json" word in ``argv`` is skipped); 0 or 2."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["plan-json"]:
        args_list = args_list[1:]
    try:
        args = _parser().parse_args(args_list)
        if args.algorithm != "auto" and args.algorithm not in ALGORITHMS:
            known = ", ".join(["auto", *ALGORITHMS])
            raise _UsageError(f"unknown algorithm {args.algorithm!r} (known: {known})")
        if not args.time_budget_ms >= 0:
            raise _UsageError("--time-budget-ms must be a non-negative number")
        try:
            with open(args.problem) as stream:
                data = json.load(stream)
        except OSError as error:
            raise _UsageError(f"cannot read {args.problem!r}: {error.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise _UsageError(f"{args.problem}: invalid JSON: {error}") from None
        try:
            if isinstance(data, dict) and "symbols" in data:
                if args.pools:
                    raise PlanningError("--pools does not take a symbolic problem yet; plan it without --pools")
                solution = symbolic_plan_to_json(plan_symbolic(symbolic_problem_from_json(data)))
            elif args.pools:
                problem = problem_from_json(data)
                if not problem.pools:
                    raise PlanningError("--pools needs a top-level 'pools' list in the problem")
                result = plan_pools(problem, pools_from_json(problem), policy=args.policy,
                                    algorithm=args.algorithm, time_budget_ms=args.time_budget_ms)
                solution = pools_plan_to_json(problem, result)
            else:
                problem = problem_from_json(data)
                solution = plan_to_json(problem, plan_memory(problem, args.algorithm, time_budget_ms=args.time_budget_ms))
        except PlanningError as error:
            raise _UsageError(f"{args.problem}: {error}") from None
        text = json.dumps(solution, indent=2) + "\n"
        if args.output:
            try:
                _write_whole(args.output, text)
            except OSError as error:
                raise _UsageError(f"cannot write {args.output!r}: {error.strerror}") from None
        else:
            sys.stdout.write(text)
    except _UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
