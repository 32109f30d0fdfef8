"""Runs in headroom-ai's own interpreter (benches/peers.py starts it): reads one JSON
request a line on stdin — ``{"messages": [...], "model": "..."}`` — and writes
``{"messages": [...]}``, the messages ``headroom.compress`` returns with its default
settings (``{"version": true}`` answers the package version)."""

from __future__ import annotations

import json
import sys


def main() -> None:
    # deferred: headroom lives only in the interpreter this script is run with
    import headroom
    from headroom import compress

    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request.get("version"):
                answer = {"version": headroom.__version__}
            else:
                result = compress(
                    request["messages"], model=request.get("model") or "claude-sonnet-4-5"
                )
                answer = {"messages": result.messages}
        except Exception as exc:  # reported to the caller, which stops the run
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
