#!/usr/bin/env python3
"""Regenerates the README's generated sections from the commands that produce them.

A generated section is written between two markers:

    <!-- generated: COMMAND -->
    …the command's standard output, verbatim…
    <!-- end generated -->

Only standard output is kept (build messages and warnings go to standard error and can never end
up in the README). A marker `<!-- generated (not checked): COMMAND -->` marks output that changes
from run to run (timings): it is regenerated but not compared by `--check`.

    python3 tools/readme.py            # rewrite README.md in place
    python3 tools/readme.py --check    # exit 1, with a diff, if a checked section is out of date
    python3 tools/readme.py --checked-only   # rewrite the checked sections, keep the timings
    python3 tools/readme.py --only measure.mjs   # rewrite the sections whose command contains this
"""
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = re.compile(
    r"(<!-- generated(?P<unchecked> \(not checked\))?: (?P<cmd>.+?) -->\n)(?P<body>.*?)(<!-- end generated -->)",
    re.S,
)


def run(cmd: str) -> str:
    done = subprocess.run(["bash", "-c", cmd], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"readme: `{cmd}` failed ({done.returncode}):\n{done.stderr[-4000:]}")
    out = done.stdout
    return out if out.endswith("\n") else out + "\n"


def main() -> int:
    check = "--check" in sys.argv[1:]
    keep_timings = "--checked-only" in sys.argv[1:]
    # --only TEXT: regenerate only the sections whose command contains TEXT (one timing, say)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[1:-1] else None
    text = README.read_text()
    stale = []

    def regenerate(m: re.Match) -> str:
        if (check or keep_timings) and m["unchecked"]:
            return m.group(0)  # timings: regenerated on request, never compared
        if only is not None and only not in m["cmd"]:
            return m.group(0)
        body = run(m["cmd"])
        if check and not m["unchecked"] and body != m["body"]:
            diff = difflib.unified_diff(m["body"].splitlines(), body.splitlines(), "README.md", m["cmd"], lineterm="")
            stale.append("\n".join(diff))
        return f"{m.group(1)}{body}{m.group(5)}"

    new = SECTION.sub(regenerate, text)
    if check:
        for d in stale:
            print(d)
        if stale:
            print(f"readme: {len(stale)} generated section(s) out of date: run `python3 tools/readme.py`", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
