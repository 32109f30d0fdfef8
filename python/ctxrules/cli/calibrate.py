"""``ctxrules calibrate``: fit per-model estimator constants on recorded traffic."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..calibration import ModelFit, calibrate, read_observations, sources_of, to_toml
from ..errors import CtxrulesError
from ..outfiles import OutputFile
from ._common import print_json, subcommand

#: The first line of a profile ``ctxrules calibrate`` writes (how ``--out`` knows it).
MARK = "# ctxrules calibrate"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``calibrate`` subcommand."""
    p = subcommand(
        sub,
        "calibrate",
        run,
        description="Fit the estimator's per-model constants (calibrations, tool prompt, "
        "framing) on recorded calls whose responses carry usage (VCR cassettes, httprr "
        "traces), print the errors before and after on the fitted calls and on held-out "
        "ones, and write a profile to load (TOML: ctxrules.providers.load_profile or "
        "CTXRULES_MODEL_PROFILE).  Without --validate every fourth file is held out.",
        examples="""
ctxrules calibrate recordings/*.yaml --out my-models.toml
ctxrules calibrate fit/*.yaml --validate held-out/*.yaml --out my-models.toml
ctxrules calibrate recordings/*.yaml --min-requests 10 --json   # then CTXRULES_MODEL_PROFILE
""",
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="cassette or httprr file")
    p.add_argument(
        "--validate", nargs="+", default=None, metavar="SOURCE", help="held-out recordings"
    )
    p.add_argument("--out", metavar="FILE", help="write the fitted profile (TOML) here")
    p.add_argument("--force", action="store_true", help="replace --out even if not ours")
    p.add_argument(
        "--min-requests", type=int, default=3, help="fit models with at least this many calls"
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _pct(s: dict[str, float]) -> str:
    if not s.get("n"):
        return "—"
    return f"{s['median'] * 100:.1f} / {s['p90'] * 100:.1f} / {s['worst'] * 100:+.1f} %"


def _ours(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline().startswith(MARK)


def _fit_json(f: ModelFit) -> dict[str, object]:
    return {
        "wire": f.wire,
        "model": f.model,
        "pattern": f.pattern,
        "fit_requests": f.fit_requests,
        "validation_requests": f.validation_requests,
        "before": f.before,
        "after": f.after,
        "kept": f.kept,
        "fit_errors": {"before": f.fit_before, "after": f.fit_after},
        "validation_errors": {"before": f.validation_before, "after": f.validation_after},
    }


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules calibrate``; returns the exit code."""
    out = OutputFile(args.out, kind="a profile", ours=_ours, force=args.force) if args.out else None
    try:
        obs = read_observations(args.sources)
        held = read_observations(args.validate) if args.validate else None
        if not obs:
            raise CtxrulesError(
                "no recorded call with usage in the sources",
                where=" ".join(args.sources[:3]),
                hint="give VCR cassettes or httprr traces whose responses carry usage",
            )
        fits = calibrate(obs, held, min_requests=args.min_requests)
        if args.json:
            print_json({"models": [_fit_json(f) for f in fits], "requests": len(obs)})
        else:
            w = sys.stdout.write
            w(f"{len(obs)} recorded calls with usage in {len(sources_of(obs))} file(s)\n")
            w("errors (estimate / billed - 1): median / p90 / worst\n")
            for f in fits:
                w(
                    f"\n{f.wire}:{f.model}  ({f.fit_requests} fitted, "
                    f"{f.validation_requests} held out)\n"
                )
                for k, v in f.after.items():
                    w(f"  {k}: {f.before[k]:g} -> {v:g}\n")
                for k, n in f.kept.items():
                    w(f"  {k}: {f.before[k]:g} (kept: only {n} requests)\n")
                w(f"  fit:        {_pct(f.fit_before)}  ->  {_pct(f.fit_after)}\n")
                w(f"  validation: {_pct(f.validation_before)}  ->  {_pct(f.validation_after)}\n")
            if not fits:
                w(f"no model has {args.min_requests} or more calls: nothing fitted\n")
        if out is not None and fits:
            out.write(to_toml(fits, sources=sources_of(obs)).encode())
            out.commit()
            if not args.json:
                sys.stdout.write(f"\nwrote {args.out}\n")
    finally:
        if out is not None:
            out.close()
    return 0
