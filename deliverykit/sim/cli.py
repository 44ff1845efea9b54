"""``deliverykit sim ...``: the simulator's command line (docs/sim.md).

    deliverykit sim validate [--quick] [--repeats N] [--only LIST] [--out CSV]
"""

from __future__ import annotations

import sys

from deliverykit.cliutil import cli_main

COMMANDS = {
    "validate": ("deliverykit.sim.validate",
                 ("the same small scenarios on the netns testbed and in the simulator, "
                  "per metric side by side (root)")),
}


def _usage() -> str:
    lines = ["usage: deliverykit sim {" + ",".join(COMMANDS) + "} [options]", ""]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


@cli_main("deliverykit sim")
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"deliverykit sim: unknown command {argv[0]!r}\n{_usage()}", file=sys.stderr)
        return 2
    import importlib

    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
